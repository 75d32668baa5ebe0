package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/pgdb"
)

// Begin implements catalog.Store. The transaction first takes the ingest
// lock of the database, waiting for a run of another process to end: two
// runs merging the same CVE at once would each miss the other's facts.
// Readers go on seeing the previous catalog until Commit.
func (d *DB) Begin(ctx context.Context) (catalog.Tx, error) {
	tx, err := d.SQLReads.DB.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin ingest: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, ingestLock); err != nil {
		tx.Rollback()
		return nil, fmt.Errorf("begin ingest: wait for the ingest lock: %w", err)
	}
	return &writeTx{SQLTx: &catalog.SQLTx{Tx: tx, Text: pgdb.Text, SourcesJSON: sourcesJSON}, tx: tx, d: d}, nil
}

// sourcesJSON is the text of the dataSources array of a record's body.
const sourcesJSON = `(convert_from(body, 'UTF8')::jsonb -> 'dataSources')::text`

// writeTx is a catalog.Tx: a database/sql transaction, which database/sql
// rolls back once the context of Begin is done.
type writeTx struct {
	// SQLTx runs the statements both stores share.
	*catalog.SQLTx
	tx *sql.Tx
	d  *DB
}

// Commit implements catalog.Tx. It fails once the context of Begin is
// done.
func (t *writeTx) Commit() error {
	err := t.tx.Commit()
	t.d.forgetVersion()
	return errs.Wrapf(err, "commit")
}

// Rollback implements catalog.Tx: it ends the transaction, if Commit did
// not.
func (t *writeTx) Rollback() error {
	err := t.tx.Rollback()
	if err != nil && !errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("rollback: %w", err)
	}
	return err
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
		keys[i], feeds[i], docs[i], bodies[i] = f.Key, pgdb.Text(f.Feed), pgdb.Text(f.Doc), f.Body
	}
	out := make([]catalog.Change, len(facts))
	for i := range out {
		out[i] = catalog.Added
	}
	err := catalog.EachRow(ctx, t.tx, putFacts, func(rows *sql.Rows) error {
		var n int64
		var same bool
		if err := rows.Scan(&n, &same); err != nil {
			return err
		}
		out[n-1] = catalog.Changed
		if same {
			out[n-1] = catalog.Unchanged
		}
		return nil
	}, keys, feeds, docs, bodies)
	return out, err
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
	out := make([]catalog.RecordState, len(keys))
	i := 0
	err := catalog.EachRow(ctx, t.tx, `SELECT key, hash, modified FROM records WHERE key = ANY($1) ORDER BY key`, func(rows *sql.Rows) error {
		var key int64
		var st catalog.RecordState
		if err := rows.Scan(&key, &st.Hash, &st.Modified); err != nil {
			return err
		}
		for i < len(keys) && keys[i] < key {
			i++
		}
		if i < len(keys) && keys[i] == key {
			st.Exists = true
			out[i] = st
		}
		return nil
	}, keys)
	return out, err
}

// FactsJSON returns the stored facts of each of keys (ascending),
// undecoded, in one round trip: out[i] holds the JSON of the cve.Facts of
// keys[i], ordered by feed and doc as Facts orders them.
func (t *writeTx) FactsJSON(ctx context.Context, keys []int64) ([][][]byte, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT key, body FROM facts WHERE key = ANY($1) ORDER BY key, feed, doc`, keys)
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
	_, err := t.tx.ExecContext(ctx, `INSERT INTO records
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
	_, err := t.tx.ExecContext(ctx, `DELETE FROM records WHERE key = $1`, key)
	return err
}
