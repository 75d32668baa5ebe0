// Package postgres is the catalog store on PostgreSQL, for deployments of
// many serve replicas that share one catalog.
//
// The catalog is written once for both engines where their code does the
// same: the package catalog holds it over database/sql (catalog.SQLReads:
// data sources, walk, counts, dump; catalog.SQLSyncStates; catalog.SQLTx:
// the statements of an ingest transaction both run alike), with $1, $2 …
// placeholders that SQLite reads too. This package and package sqlite are
// the dialects: what truly differs, and the fast paths of each engine. It
// is two packages over a shared one, rather than one package as the
// control store is, because the fast paths are most of each: SQLite's
// body store, record cache and rebuild beside the live file; here the
// facts and records of an ingest written a batch per statement (unnest
// arrays, one round trip per 1,024 facts or 512 records), full-text
// search on a tsvector column built by the store, and the ingest's
// advisory lock. Lists and walks are answered by the catalog's summary
// index (catalog.Summaries), kept by the catalog's generation, which
// triggers change with every change of its records
// (migrations/006_catalog_generation.sql); the counts and the lookup API's
// streams are kept by its version, which changes with its records, facts,
// lifecycles and ingest runs (migrations/004_catalog_version.sql).
//
// The write transaction and the shared reads run through pgx's
// database/sql adapter; the hot reads of the lookup API (a record, a
// batch) speak to the pgxpool pool beneath it, which prepares
// and caches each statement per connection (the record read is one round
// trip).
//
// Schema migrations are embedded and applied at Open, in order, each in its
// own transaction under an advisory lock, so that replicas starting at once
// apply each migration once. Ingest transactions take another advisory lock:
// runs on one catalog follow each other, as they do on SQLite.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/pgdb"
)

// DB is the catalog on PostgreSQL.
type DB struct {
	pool *pgxpool.Pool
	// SQLSyncStates keeps the sync state of each source, through pgx's
	// database/sql adapter on pool.
	*catalog.SQLSyncStates
	// SQLReads makes the reads both stores share, on the same adapter.
	*catalog.SQLReads
	// Summaries answers lists and walks from memory.
	*catalog.Summaries
	// Records answers records from ReadBodies.
	catalog.Records
	// version is the last answer of Version.
	version atomic.Pointer[versionAnswer]
}

var (
	_ catalog.Store     = (*DB)(nil)
	_ cve.SourceCatalog = (*DB)(nil)
)

// Open connects to the database that dsn names and applies the migrations
// it lacks (pgdb.Open).
func Open(ctx context.Context, dsn string) (*DB, error) {
	pool, err := pgdb.Open(ctx, dsn, migrations)
	if err != nil {
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	sqldb := stdlib.OpenDBFromPool(pool)
	snapshot := &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
	d := &DB{pool: pool, SQLSyncStates: &catalog.SQLSyncStates{Read: sqldb, Write: sqldb, Text: pgdb.Text},
		SQLReads: &catalog.SQLReads{DB: sqldb, Snapshot: snapshot}}
	d.SQLReads.Version = d.Version
	d.Records = catalog.Records{Bodies: d}
	d.Summaries = catalog.NewSummaries(catalog.SummarySource{
		Version: d.generation, Search: searchQuery, SearchKeys: d.searchKeys,
		Begin:  func(ctx context.Context) (*sql.Tx, error) { return sqldb.BeginTx(ctx, snapshot) },
		Rows:   `SELECT key, severity, cvss, cvss_version, epss, is_kev, has_fix, published, modified FROM records ORDER BY key`,
		Listed: `SELECT key FROM records WHERE NOT rejected ORDER BY key`,
	})
	return d, nil
}

// Version returns the catalog's version (migrations/004_catalog_version.sql):
// a number that every change of its records, facts, lifecycles or ingest
// runs replaces, whichever replica or command makes it. The counts and the
// lookup API's streams are kept for as long as it stays the same.
//
// A call takes the last answer when its question was asked less than
// versionWindow before the call came, as the SQLite catalog's data version
// does: a commit of another process is seen by the calls that come
// versionWindow after it, one of this process at once (writeTx.Commit
// forgets the answer), and a replica answering thousands of lists a
// second asks the server about once a millisecond rather than once a list.
func (d *DB) Version(ctx context.Context) (int64, error) {
	n, _, err := d.versions(ctx)
	return n, err
}

// generation returns the catalog's generation
// (migrations/006_catalog_generation.sql), which changes with its records
// alone, asked with the version and kept as it is: the summary index is
// kept by it.
func (d *DB) generation(ctx context.Context) (int64, error) {
	_, gen, err := d.versions(ctx)
	return gen, err
}

// versions returns the last answer of the catalog's version and
// generation, or asks the server.
func (d *DB) versions(ctx context.Context) (n, gen int64, err error) {
	came := time.Now()
	if a := d.version.Load(); a != nil && !a.forgotten && came.Sub(a.asked) < versionWindow {
		return a.n, a.gen, nil
	}
	a := &versionAnswer{asked: came}
	if err := d.pool.QueryRow(ctx, `SELECT v.n, g.n FROM catalog_version v, catalog_generation g`).Scan(&a.n, &a.gen); err != nil {
		return 0, 0, err
	}
	d.keepVersion(a)
	return a.n, a.gen, nil
}

// versionWindow is how long an answer of Version serves the calls that
// come after its question was asked. Tests change it.
var versionWindow = time.Millisecond

// versionAnswer is an answer of versions (the version n, the generation
// gen) and when its question was asked; a forgotten one answers nothing.
type versionAnswer struct {
	asked     time.Time
	n, gen    int64
	forgotten bool
}

// keepVersion keeps a as the last answer unless a question asked after
// its own has been answered or forgotten since.
func (d *DB) keepVersion(a *versionAnswer) {
	for {
		old := d.version.Load()
		if old != nil && old.asked.After(a.asked) || d.version.CompareAndSwap(old, a) {
			return
		}
	}
}

// forgetVersion makes the calls of Version that come after it ask the
// server, and keeps the answers of questions asked before it from
// serving them: this process has just committed.
func (d *DB) forgetVersion() {
	d.keepVersion(&versionAnswer{asked: time.Now(), forgotten: true})
}

// Close closes the connection pool.
func (d *DB) Close() error {
	d.Summaries.Close()
	d.SQLSyncStates.Read.Close()
	d.pool.Close()
	return nil
}

// ReadBodies implements catalog.BodyReader: one key in one round trip,
// several in one statement, which sees one snapshot.
func (d *DB) ReadBodies(ctx context.Context, keys []int64, fn func(key int64, body []byte)) error {
	if len(keys) == 1 {
		var body []byte
		err := d.pool.QueryRow(ctx, `SELECT body FROM records WHERE key = $1`, keys[0]).Scan(&body)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err == nil {
			fn(keys[0], body)
		}
		return err
	}
	rows, err := d.pool.Query(ctx, `SELECT key, body FROM records WHERE key = ANY($1)`, keys)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var key int64
		var body []byte
		if err := rows.Scan(&key, &body); err != nil {
			return err
		}
		fn(key, body)
	}
	return rows.Err()
}
