package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
)

// Begin implements catalog.Store. The transaction holds SQLite's write lock
// until Commit or Rollback; readers go on seeing the previous catalog. The
// write connection keeps its page cache of 64 MiB: dirty pages beyond it
// are spilled to the WAL, which bounds the memory of an ingest that
// rewrites every record (a cache holding the whole transaction took 1.2 GB
// for 30,000 records; bench/RESULTS.md, 2026-11-25).
func (d *DB) Begin(ctx context.Context) (catalog.Tx, error) {
	tx, err := d.db.Write.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin ingest: %w", err)
	}
	t := &tx_{SQLTx: &catalog.SQLTx{Tx: tx, SourcesJSON: sourcesJSON}, tx: tx, db: d.db.Write, stmts: map[string]*sql.Stmt{}, changed: func() { d.db.Changed() }, d: d}
	if err := tx.QueryRowContext(ctx, `SELECT n FROM catalog_generation`).Scan(&t.from); err != nil {
		tx.Rollback()
		return nil, fmt.Errorf("begin ingest: catalog generation: %w", err)
	}
	return t, nil
}

type tx_ struct {
	// SQLTx runs the statements both stores share.
	*catalog.SQLTx
	tx *sql.Tx
	db *sql.DB
	// stmts are the statements prepared within the transaction, by text:
	// an ingest runs each of them about a million times.
	stmts map[string]*sql.Stmt
	done  bool
	// changed tells the catalog's readers of a commit (nil when nothing
	// reads the catalog being written).
	changed func()
	// rebuild is set when the transaction writes a catalog apart from
	// the live one, which Commit installs.
	rebuild *rebuild
	// fresh is set when the catalog was empty at Begin: its only facts
	// and records are those the transaction wrote, in key order.
	fresh bool
	// known holds the answers of RecordState not yet used by PutRecord.
	known map[int64]recordState

	// d is the catalog, whose body store Commit brings up to date.
	d *DB
	// from is the catalog's generation at Begin.
	from int64
	// touched are the keys of the records written, up to maxTouched;
	// overflow is set past it.
	touched  []int64
	overflow bool
}

// touch remembers that the record of key was written.
func (t *tx_) touch(key int64) {
	if len(t.touched) >= maxTouched {
		t.overflow, t.touched = true, nil
	}
	if !t.overflow {
		t.touched = append(t.touched, key)
	}
}

// stmt returns the prepared statement of query.
func (t *tx_) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := t.stmts[query]; ok {
		return st, nil
	}
	st, err := t.tx.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	t.stmts[query] = st
	return st, nil
}

// end closes the prepared statements.
func (t *tx_) end() {
	if t.done {
		return
	}
	t.done = true
	for _, st := range t.stmts {
		st.Close()
	}
}

// Commit commits the transaction, then brings the body store up to date
// with it (bodystore.go).
func (t *tx_) Commit() error {
	if t.changed != nil {
		defer t.changed()
	}
	ctx := context.Background()
	done := t.done
	var to int64
	var genErr error
	if !done && t.rebuild == nil {
		genErr = t.tx.QueryRowContext(ctx, `SELECT n FROM catalog_generation`).Scan(&to)
	}
	err := t.tx.Commit()
	t.end()
	if t.rebuild == nil || done {
		if err == nil && !done && genErr == nil && t.d != nil {
			t.d.writeBodies(ctx, t.from, to, t.touched, t.overflow)
		}
		return err
	}
	if err != nil {
		t.rebuild.abort()
		return err
	}
	if err := t.rebuild.commit(ctx); err != nil {
		return err
	}
	t.d.writeBodies(ctx, 0, 0, nil, true)
	return nil
}

func (t *tx_) Rollback() error {
	err := t.tx.Rollback()
	t.end()
	if t.rebuild != nil {
		t.rebuild.abort()
	}
	return err
}

// exec runs a prepared statement of query.
func (t *tx_) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := t.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// queryRow runs a prepared statement of query for one row.
func (t *tx_) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := t.stmt(ctx, query)
	if err != nil {
		// Scan reports the error of a statement that failed to prepare.
		return t.tx.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

func (t *tx_) PutFacts(ctx context.Context, key int64, f *cve.Facts) (catalog.Change, error) {
	body, err := json.Marshal(f)
	if err != nil {
		return 0, err
	}
	return t.putFactsJSON(ctx, key, f.Feed, f.Doc, body)
}

// PutFactsJSON is PutFacts for facts already encoded, each in turn: on
// SQLite a statement costs no round trip. An ingest encodes them on every
// core.
func (t *tx_) PutFactsJSON(ctx context.Context, facts []catalog.EncodedFacts) ([]catalog.Change, error) {
	out := make([]catalog.Change, len(facts))
	for i, f := range facts {
		var err error
		if out[i], err = t.putFactsJSON(ctx, f.Key, f.Feed, f.Doc, f.Body); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// putFactsJSON is PutFacts for facts already encoded: body is the JSON of
// the cve.Facts of key, feed and doc.
func (t *tx_) putFactsJSON(ctx context.Context, key int64, feed, doc string, body []byte) (catalog.Change, error) {
	// Most facts of a run are new (a first ingest) or unchanged: try the
	// insert first, and compare with the stored body only when it exists.
	res, err := t.exec(ctx, `INSERT INTO facts (key, feed, doc, body) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`, key, feed, doc, body)
	if err != nil {
		return 0, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return 0, err
	} else if n == 1 {
		return catalog.Added, nil
	}
	var old []byte
	if err := t.queryRow(ctx, `SELECT body FROM facts WHERE key = ? AND feed = ? AND doc = ?`, key, feed, doc).Scan(&old); err != nil {
		return 0, err
	}
	if bytes.Equal(old, body) {
		return catalog.Unchanged, nil
	}
	_, err = t.exec(ctx, `UPDATE facts SET body = ? WHERE key = ? AND feed = ? AND doc = ?`, body, key, feed, doc)
	return catalog.Changed, err
}

// FactsJSON returns the stored facts of each of keys (in ascending order),
// undecoded: out[i] holds the JSON of the cve.Facts of keys[i], ordered by
// feed and doc as Facts orders them. An ingest decodes them on every core.
func (t *tx_) FactsJSON(ctx context.Context, keys []int64) ([][][]byte, error) {
	out := make([][][]byte, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	if !t.fresh {
		st, err := t.stmt(ctx, `SELECT body FROM facts WHERE key = ? ORDER BY feed, doc`)
		if err != nil {
			return nil, err
		}
		for i, key := range keys {
			if out[i], err = scanBodies(ctx, st, key); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	// A new catalog's facts are read in one pass over the key range: the
	// run touched nearly every key of it.
	st, err := t.stmt(ctx, `SELECT key, body FROM facts WHERE key BETWEEN ? AND ? ORDER BY key, feed, doc`)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, keys[0], keys[len(keys)-1])
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return catalog.ScanKeyedBodies(rows, keys)
}

// scanBodies returns the bodies the one-column query st gives for arg.
func scanBodies(ctx context.Context, st *sql.Stmt, arg any) ([][]byte, error) {
	rows, err := st.QueryContext(ctx, arg)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			return nil, err
		}
		out = append(out, body)
	}
	return out, rows.Err()
}

func (t *tx_) RecordState(ctx context.Context, key int64) ([]byte, int64, bool, error) {
	var st recordState
	err := t.queryRow(ctx, `SELECT hash, modified, epss FROM records WHERE key = ?`, key).Scan(&st.hash, &st.modified, &st.epss)
	if errors.Is(err, sql.ErrNoRows) {
		t.remember(key, recordState{})
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, err
	}
	st.exists = true
	t.remember(key, st)
	return st.hash, st.modified, true, nil
}

// RecordStates is RecordState for each of keys.
func (t *tx_) RecordStates(ctx context.Context, keys []int64) ([]catalog.RecordState, error) {
	out := make([]catalog.RecordState, len(keys))
	for i, key := range keys {
		st := &out[i]
		var err error
		if st.Hash, st.Modified, st.Exists, err = t.RecordState(ctx, key); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// recordState is what RecordState read of a stored record.
type recordState struct {
	exists   bool
	hash     []byte
	modified int64
	epss     float64
}

// maxKnown bounds the RecordState answers a transaction keeps.
const maxKnown = 1 << 14

// remember keeps the state of the record of key, for PutRecord.
func (t *tx_) remember(key int64, st recordState) {
	if t.known == nil || len(t.known) >= maxKnown {
		t.known = make(map[int64]recordState)
	}
	t.known[key] = st
}

// recordState returns the state of the record of key: the answer of
// RecordState when there was one, else whether it exists.
func (t *tx_) recordState(ctx context.Context, key int64) (recordState, bool, error) {
	if st, ok := t.known[key]; ok {
		delete(t.known, key)
		return st, true, nil
	}
	var n int
	err := t.queryRow(ctx, `SELECT count(*) FROM records WHERE key = ?`, key).Scan(&n)
	return recordState{exists: n > 0}, false, err
}

func (t *tx_) PutRecord(ctx context.Context, r *catalog.Row) error {
	// A new record has no full-text row to delete; deleting one anyway
	// leaves a tombstone in the contentless index.
	old, full, err := t.recordState(ctx, r.Key)
	if err != nil {
		return fmt.Errorf("put record %s: %w", r.ID, err)
	}
	exists := old.exists
	// The same content (hash), EPSS score and modification time make the
	// same row: nothing to write. The same content makes the same
	// full-text row: it stays.
	sameContent := full && exists && bytes.Equal(old.hash, r.Hash)
	if sameContent && old.epss == r.EPSS && old.modified == r.Modified {
		return nil
	}
	_, err = t.exec(ctx, `INSERT INTO records
		(key, cve_id, year, rejected, severity, cvss, cvss_version, epss, is_kev, has_fix, published, modified, hash, body)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET
		rejected = excluded.rejected, severity = excluded.severity, cvss = excluded.cvss,
		cvss_version = excluded.cvss_version, epss = excluded.epss, is_kev = excluded.is_kev,
		has_fix = excluded.has_fix, published = excluded.published, modified = excluded.modified,
		hash = excluded.hash, body = excluded.body`,
		r.Key, r.ID, cve.YearOfKey(r.Key), r.Rejected, r.Severity, r.CVSS, r.CVSSVersion, r.EPSS,
		r.IsKEV, r.HasFix, r.Published, r.Modified, r.Hash, r.Body)
	if err != nil {
		return fmt.Errorf("put record %s: %w", r.ID, err)
	}
	t.touch(r.Key)
	if sameContent {
		return nil
	}
	if exists {
		if _, err := t.exec(ctx, `DELETE FROM records_fts WHERE rowid = ?`, r.Key); err != nil {
			return err
		}
	}
	_, err = t.exec(ctx, `INSERT INTO records_fts (rowid, cve_id, description) VALUES (?, ?, ?)`, r.Key, r.ID, r.Description)
	return err
}

// PutRecords is PutRecord for each of rows.
func (t *tx_) PutRecords(ctx context.Context, rows []*catalog.Row) error {
	for _, r := range rows {
		if err := t.PutRecord(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

func (t *tx_) DeleteRecord(ctx context.Context, key int64) error {
	delete(t.known, key)
	if _, err := t.exec(ctx, `DELETE FROM records WHERE key = ?`, key); err != nil {
		return err
	}
	t.touch(key)
	_, err := t.exec(ctx, `DELETE FROM records_fts WHERE rowid = ?`, key)
	return err
}

// sourcesJSON is the text of the dataSources array of a record's body.
const sourcesJSON = `json_extract(body, '$.dataSources')`

// RecordSourcesJSON is catalog.SQLTx's, but for a new catalog, whose
// records are all this transaction's, written after their merge.
func (t *tx_) RecordSourcesJSON(ctx context.Context, keys []int64) (map[int64][]byte, error) {
	if t.fresh {
		return map[int64][]byte{}, nil
	}
	return t.SQLTx.RecordSourcesJSON(ctx, keys)
}
