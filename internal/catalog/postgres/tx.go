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

// putFacts stores a facts row in one round trip and says, from the row as
// it was before the statement, whether that added or changed it. An
// unchanged row is neither written nor locked.
const putFacts = `WITH old AS (
		SELECT body FROM facts WHERE key = $1 AND feed = $2 AND doc = $3
	), put AS (
		INSERT INTO facts (key, feed, doc, body)
		SELECT $1::bigint, $2::text, $3::text, $4::bytea WHERE NOT EXISTS (SELECT 1 FROM old WHERE body = $4)
		ON CONFLICT (key, feed, doc) DO UPDATE SET body = excluded.body
	)
	SELECT EXISTS (SELECT 1 FROM old), EXISTS (SELECT 1 FROM old WHERE body = $4)`

// PutFacts implements catalog.Tx.
func (t *writeTx) PutFacts(ctx context.Context, key int64, f *cve.Facts) (catalog.Change, error) {
	body, err := json.Marshal(f)
	if err != nil {
		return 0, err
	}
	var existed, same bool
	if err := t.tx.QueryRow(ctx, putFacts, key, pgText(f.Feed), pgText(f.Doc), body).Scan(&existed, &same); err != nil {
		return 0, err
	}
	return change(existed, same), nil
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
	var hash []byte
	var modified int64
	err := t.tx.QueryRow(ctx, `SELECT hash, modified FROM records WHERE key = $1`, key).Scan(&hash, &modified)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, false, nil
	}
	return hash, modified, err == nil, err
}

// PutRecord implements catalog.Tx.
func (t *writeTx) PutRecord(ctx context.Context, r *catalog.Row) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO records
		(key, cve_id, year, rejected, severity, cvss, cvss_version, epss, is_kev, has_fix, published, modified, hash, body, search)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15::tsvector)
		ON CONFLICT (key) DO UPDATE SET
		rejected = excluded.rejected, severity = excluded.severity, cvss = excluded.cvss,
		cvss_version = excluded.cvss_version, epss = excluded.epss, is_kev = excluded.is_kev,
		has_fix = excluded.has_fix, published = excluded.published, modified = excluded.modified,
		hash = excluded.hash, body = excluded.body, search = excluded.search`,
		r.Key, r.ID, cve.YearOfKey(r.Key), r.Rejected, r.Severity, r.CVSS, r.CVSSVersion, r.EPSS,
		r.IsKEV, r.HasFix, r.Published, r.Modified, r.Hash, r.Body, searchVector(r.ID, r.Description))
	if err != nil {
		return fmt.Errorf("put record %s: %w", r.ID, err)
	}
	return nil
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
