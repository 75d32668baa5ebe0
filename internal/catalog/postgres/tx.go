package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
)

// Begin implements catalog.Store. The transaction first takes the ingest
// lock of the database, waiting for a run of another process to end: two
// runs merging the same CVE at once would each miss the other's facts.
// Readers go on seeing the previous catalog until Commit.
func (d *DB) Begin(ctx context.Context) (catalog.Tx, error) {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin ingest: %w", err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, ingestLock); err != nil {
		tx.Rollback(context.Background())
		return nil, fmt.Errorf("begin ingest: wait for the ingest lock: %w", err)
	}
	return &writeTx{ctx: ctx, tx: tx}, nil
}

// writeTx is a catalog.Tx: a pgx transaction.
type writeTx struct {
	ctx context.Context // of Begin: Commit fails once it is done
	tx  pgx.Tx
}

// Commit implements catalog.Tx. It fails once the context of Begin is
// done.
func (t *writeTx) Commit() error {
	if err := t.tx.Commit(t.ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Rollback implements catalog.Tx: it ends the transaction, if Commit did
// not, even when the context of Begin is done.
func (t *writeTx) Rollback() error {
	err := t.tx.Rollback(context.Background())
	if errors.Is(err, pgx.ErrTxClosed) {
		return err
	}
	if err != nil {
		return fmt.Errorf("rollback: %w", err)
	}
	return nil
}

// putFacts stores a batch of facts rows in one round trip and returns,
// for each row that existed before the statement, its position (from 1)
// and whether it held the same body. An unchanged row is neither written
// nor locked.
const putFacts = `WITH input AS (
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bytea[]) WITH ORDINALITY AS i (key, feed, doc, body, n)
	), old AS (
		SELECT i.n, f.body = i.body AS same FROM input i JOIN facts f USING (key, feed, doc)
	), put AS (
		INSERT INTO facts (key, feed, doc, body)
		SELECT key, feed, doc, body FROM input i WHERE NOT EXISTS (SELECT 1 FROM old WHERE old.n = i.n AND old.same)
		ON CONFLICT (key, feed, doc) DO UPDATE SET body = excluded.body
	)
	SELECT n, same FROM old`

// PutFacts implements catalog.Tx.
func (t *writeTx) PutFacts(ctx context.Context, key int64, f *cve.Facts) (catalog.Change, error) {
	body, err := json.Marshal(f)
	if err != nil {
		return 0, err
	}
	changes, err := t.PutFactsJSON(ctx, []catalog.EncodedFacts{{Key: key, Feed: f.Feed, Doc: f.Doc, Body: body}})
	if err != nil {
		return 0, err
	}
	return changes[0], nil
}

// PutFactsJSON is PutFacts for a batch of facts already encoded, in one
// round trip.
func (t *writeTx) PutFactsJSON(ctx context.Context, facts []catalog.EncodedFacts) ([]catalog.Change, error) {
	keys := make([]int64, len(facts))
	feeds := make([]string, len(facts))
	docs := make([]string, len(facts))
	bodies := make([][]byte, len(facts))
	for i, f := range facts {
		keys[i], feeds[i], docs[i], bodies[i] = f.Key, pgText(f.Feed), pgText(f.Doc), f.Body
	}
	out := make([]catalog.Change, len(facts))
	for i := range out {
		out[i] = catalog.Added
	}
	rows, err := t.tx.Query(ctx, putFacts, keys, feeds, docs, bodies)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var n int64
		var same bool
		if err := rows.Scan(&n, &same); err != nil {
			return nil, err
		}
		out[n-1] = change(true, same)
	}
	return out, rows.Err()
}

// putLifecycle is putFacts for lifecycles.
const putLifecycle = `WITH old AS (
		SELECT body FROM lifecycles WHERE product = $1 AND cycle = $2
	), put AS (
		INSERT INTO lifecycles (product, cycle, body)
		SELECT $1::text, $2::text, $3::bytea WHERE NOT EXISTS (SELECT 1 FROM old WHERE body = $3)
		ON CONFLICT (product, cycle) DO UPDATE SET body = excluded.body
	)
	SELECT EXISTS (SELECT 1 FROM old), EXISTS (SELECT 1 FROM old WHERE body = $3)`

// PutLifecycle implements catalog.Tx.
func (t *writeTx) PutLifecycle(ctx context.Context, l *cve.Lifecycle) (catalog.Change, error) {
	body, err := json.Marshal(l)
	if err != nil {
		return 0, err
	}
	var existed, same bool
	if err := t.tx.QueryRow(ctx, putLifecycle, pgText(l.Product), pgText(l.Cycle), body).Scan(&existed, &same); err != nil {
		return 0, err
	}
	return change(existed, same), nil
}

func change(existed, same bool) catalog.Change {
	switch {
	case !existed:
		return catalog.Added
	case same:
		return catalog.Unchanged
	}
	return catalog.Changed
}

// Facts implements catalog.Tx.
func (t *writeTx) Facts(ctx context.Context, key int64) ([]cve.Facts, error) {
	rows, err := t.tx.Query(ctx, `SELECT body FROM facts WHERE key = $1 ORDER BY feed, doc`, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return catalog.ScanFacts(rows, key)
}

// Lifecycles implements catalog.Tx.
func (t *writeTx) Lifecycles(ctx context.Context) ([]cve.Lifecycle, error) {
	rows, err := t.tx.Query(ctx, `SELECT body FROM lifecycles ORDER BY product, cycle`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return catalog.ScanLifecycles(rows)
}

// RecordState implements catalog.Tx.
func (t *writeTx) RecordState(ctx context.Context, key int64) ([]byte, int64, bool, error) {
	st, err := t.RecordStates(ctx, []int64{key})
	if err != nil {
		return nil, 0, false, err
	}
	return st[0].Hash, st[0].Modified, st[0].Exists, nil
}

// RecordStates is RecordState for each of keys (ascending), in one round
// trip.
func (t *writeTx) RecordStates(ctx context.Context, keys []int64) ([]catalog.RecordState, error) {
	rows, err := t.tx.Query(ctx, `SELECT key, hash, modified FROM records WHERE key = ANY($1) ORDER BY key`, keys)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]catalog.RecordState, len(keys))
	i := 0
	for rows.Next() {
		var key int64
		var st catalog.RecordState
		if err := rows.Scan(&key, &st.Hash, &st.Modified); err != nil {
			return nil, err
		}
		for i < len(keys) && keys[i] < key {
			i++
		}
		if i < len(keys) && keys[i] == key {
			st.Exists = true
			out[i] = st
		}
	}
	return out, rows.Err()
}

// FactsJSON returns the stored facts of each of keys (ascending),
// undecoded, in one round trip: out[i] holds the JSON of the cve.Facts of
// keys[i], ordered by feed and doc as Facts orders them.
func (t *writeTx) FactsJSON(ctx context.Context, keys []int64) ([][][]byte, error) {
	rows, err := t.tx.Query(ctx, `SELECT key, body FROM facts WHERE key = ANY($1) ORDER BY key, feed, doc`, keys)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return catalog.ScanKeyedBodies(rows, keys)
}

// PutRecord implements catalog.Tx.
func (t *writeTx) PutRecord(ctx context.Context, r *catalog.Row) error {
	return t.PutRecords(ctx, []*catalog.Row{r})
}

// PutRecords is PutRecord for each of rows (of distinct keys), in one round
// trip.
func (t *writeTx) PutRecords(ctx context.Context, rows []*catalog.Row) error {
	if len(rows) == 0 {
		return nil
	}
	var c recordColumns
	for _, r := range rows {
		c.add(r)
	}
	_, err := t.tx.Exec(ctx, `INSERT INTO records
		(key, cve_id, year, rejected, severity, cvss, cvss_version, epss, is_kev, has_fix, published, modified, hash, body, search)
		SELECT key, cve_id, year, rejected, severity, cvss, cvss_version, epss, is_kev, has_fix, published, modified, hash, body, search::tsvector
		FROM unnest($1::bigint[], $2::text[], $3::integer[], $4::boolean[], $5::text[], $6::double precision[], $7::text[],
			$8::double precision[], $9::boolean[], $10::boolean[], $11::bigint[], $12::bigint[], $13::bytea[], $14::bytea[], $15::text[])
			AS r (key, cve_id, year, rejected, severity, cvss, cvss_version, epss, is_kev, has_fix, published, modified, hash, body, search)
		ON CONFLICT (key) DO UPDATE SET
		rejected = excluded.rejected, severity = excluded.severity, cvss = excluded.cvss,
		cvss_version = excluded.cvss_version, epss = excluded.epss, is_kev = excluded.is_kev,
		has_fix = excluded.has_fix, published = excluded.published, modified = excluded.modified,
		hash = excluded.hash, body = excluded.body, search = excluded.search`,
		c.key, c.id, c.year, c.rejected, c.severity, c.cvss, c.cvssVersion, c.epss,
		c.isKEV, c.hasFix, c.published, c.modified, c.hash, c.body, c.search)
	if err != nil {
		if len(rows) == 1 {
			return fmt.Errorf("put record %s: %w", rows[0].ID, err)
		}
		return fmt.Errorf("put records %s to %s: %w", rows[0].ID, rows[len(rows)-1].ID, err)
	}
	return nil
}

// recordColumns are the columns of records to be put, as arrays.
type recordColumns struct {
	key, published, modified []int64
	year                     []int32
	rejected, isKEV, hasFix  []bool
	severity, cvssVersion    []*string
	cvss, epss               []float64
	id, search               []string
	hash, body               [][]byte
}

func (c *recordColumns) add(r *catalog.Row) {
	c.key = append(c.key, r.Key)
	c.id = append(c.id, r.ID)
	c.year = append(c.year, int32(cve.YearOfKey(r.Key)))
	c.rejected = append(c.rejected, r.Rejected)
	c.severity = append(c.severity, r.Severity)
	c.cvss = append(c.cvss, r.CVSS)
	c.cvssVersion = append(c.cvssVersion, r.CVSSVersion)
	c.epss = append(c.epss, r.EPSS)
	c.isKEV = append(c.isKEV, r.IsKEV)
	c.hasFix = append(c.hasFix, r.HasFix)
	c.published = append(c.published, r.Published)
	c.modified = append(c.modified, r.Modified)
	c.hash = append(c.hash, r.Hash)
	c.body = append(c.body, r.Body)
	c.search = append(c.search, searchVector(r.ID, r.Description))
}

// DeleteRecord implements catalog.Tx.
func (t *writeTx) DeleteRecord(ctx context.Context, key int64) error {
	_, err := t.tx.Exec(ctx, `DELETE FROM records WHERE key = $1`, key)
	return err
}

// KeysWithAtoms implements catalog.Tx.
func (t *writeTx) KeysWithAtoms(ctx context.Context) ([]int64, error) {
	rows, err := t.tx.Query(ctx, `SELECT key FROM records WHERE has_fix ORDER BY key`)
	if err != nil {
		return nil, err
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	return keys, nil
}

// LogRun implements catalog.Tx.
func (t *writeTx) LogRun(ctx context.Context, run catalog.Run) error {
	sources, err := json.Marshal(run.Sources)
	if err != nil {
		return err
	}
	_, err = t.tx.Exec(ctx, `INSERT INTO ingest_runs (started, finished, sources, changed) VALUES ($1, $2, $3, $4)`,
		run.Started, run.Finished, string(sources), run.Changed)
	return err
}
