// Package sqlite is the catalog store on SQLite, the embedded default.
//
// What both catalog stores do alike is written once in package catalog,
// over database/sql (see package postgres for the layout); this package
// adds SQLite's dialect (FTS5 search) and its fast paths, each in its own
// file: the store of record bodies beside the catalog file (bodystore.go),
// the cache of those read from SQLite (cache.go) and the rebuild of an
// empty catalog beside the live file (rebuild.go). Lists and walks are
// answered by the catalog's summary index (catalog.Summaries), kept by the
// catalog's generation (DB.generation), with the full-text search of an
// FTS5 table (search.go).
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/sqlitedb"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// DB is the catalog on SQLite.
type DB struct {
	db *sqlitedb.DB
	// SQLSyncStates keeps the sync state of each source.
	*catalog.SQLSyncStates
	// SQLReads makes the reads both stores share.
	*catalog.SQLReads
	// bodies reads record bodies, the hot read of the lookup API.
	bodies *bodyPool
	// records holds the bodies RecordJSON and RecordsJSON read last, and
	// some of those AppendRecordJSON reads (admitOneIn).
	records *recordCache
	// files is the body store beside the catalog file.
	files *bodyFiles
	// Summaries answers lists and walks from memory.
	*catalog.Summaries
	// Records answers records from ReadBodies.
	catalog.Records
	// lastGen is the last answer of generation.
	lastGen atomic.Pointer[generationAnswer]
}

var (
	_ catalog.Store     = (*DB)(nil)
	_ cve.SourceCatalog = (*DB)(nil)
)

// Open opens (creating it if needed) the catalog at path.
func Open(ctx context.Context, path string) (*DB, error) {
	migs, _ := fs.Sub(migrationFiles, "migrations")
	db, err := sqlitedb.Open(ctx, path, migs)
	if err != nil {
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	if isFile(path) {
		removeLeftovers(path)
	}
	bodies, err := newBodyPool(db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	d := &DB{db: db, bodies: bodies, records: newRecordCache(RecordCacheBytes), files: newBodyFiles(path),
		SQLSyncStates: &catalog.SQLSyncStates{Read: db.Read, Write: db.Write, Changed: db.Changed},
		SQLReads:      &catalog.SQLReads{DB: db.Read}}
	d.SQLReads.Version = d.Version
	d.Records = catalog.Records{Bodies: d}
	d.Summaries = catalog.NewSummaries(catalog.SummarySource{
		Version: d.generation, Search: ftsQuery, SearchKeys: d.searchKeys,
		Begin: func(ctx context.Context) (*sql.Tx, error) { return d.db.Read.BeginTx(ctx, nil) },
		// Two walks of covering indexes: of every record, and of the
		// partial index of the records listed.
		Rows:   `SELECT key, severity, cvss, cvss_version, epss, is_kev, has_fix, published, modified FROM records INDEXED BY records_summary ORDER BY key`,
		Listed: `SELECT key FROM records INDEXED BY records_list_key WHERE rejected = 0 ORDER BY key`,
	})
	return d, nil
}

// Close closes the database.
func (d *DB) Close() error {
	d.Summaries.Close()
	d.records.empty()
	d.files.close()
	d.bodies.close()
	return d.db.Close()
}

// SQL returns the handle for reads.
func (d *DB) SQL() *sql.DB { return d.db.Read }

// AppendRecordJSON is RecordJSON appending the body to dst: from the
// record cache, else read from the body store into dst, with no
// allocation of its own unless the cache takes a copy (admitOneIn).
func (d *DB) AppendRecordJSON(ctx context.Context, dst []byte, id string) ([]byte, error) {
	key, err := catalog.RecordKey(id)
	if err != nil {
		return dst, err
	}
	version, err := d.db.DataVersion(ctx)
	if err != nil {
		return dst, fmt.Errorf("read record %s: %w", id, err)
	}
	if out, ok := d.records.appendTo(dst, key, version); ok {
		return out, nil
	}
	if st := d.files.at(ctx, version, d.generation); st != nil {
		out, found, err := st.Read(key, dst)
		switch {
		case err == nil && found:
			if rand.N(admitOneIn) == 0 {
				d.records.put(key, version, out[len(dst):])
			}
			return out, nil
		case err == nil:
			return dst, errs.NotFoundf("%s is not in the catalog", id)
		}
		d.files.damaged(st, err)
	}
	body, err := d.RecordJSON(ctx, id)
	return append(dst, body...), err
}

// admitOneIn is the share of the bodies AppendRecordJSON reads from the
// body store that the record cache takes: one in admitOneIn, drawn at
// random. A record asked for again and again gets in after a few reads,
// and is then read from memory, without a pread and its checksum; the
// many records asked for once or seldom cost no copy and no garbage
// (bench/RESULTS.md, 2026-11-25).
const admitOneIn = 8

// EachRecordJSON calls fn with the body of each of ids that the catalog
// holds, in the order of ids, all read from one commit; body is valid
// during the call only. The bodies the record cache holds come from it;
// the others of the body store are read in turn into one buffer, with no
// allocation of their own, and are not offered to the cache: the ids of
// batches are many, and seldom asked for twice. An error of fn ends the
// walk and is returned.
func (d *DB) EachRecordJSON(ctx context.Context, ids []string, fn func(id string, body []byte) error) error {
	version, err := d.db.DataVersion(ctx)
	if err != nil {
		return fmt.Errorf("read records: %w", err)
	}
	if st := d.files.at(ctx, version, d.generation); st != nil {
		buf := getBody()
		defer putBody(buf)
		for i, id := range ids {
			k, ok := cve.Key(id)
			if !ok {
				continue
			}
			if b, ok := d.records.appendTo((*buf)[:0], k, version); ok {
				*buf = b
				if err := fn(id, b); err != nil {
					return err
				}
				continue
			}
			b, found, err := st.Read(k, (*buf)[:0])
			if err != nil {
				// The rest from SQLite: a damaged store is never read.
				d.files.damaged(st, err)
				return catalog.EachRecordJSON(ctx, d, ids[i:], fn)
			}
			*buf = b
			if found {
				if err := fn(id, b); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return catalog.EachRecordJSON(ctx, d, ids, fn)
}

// bodyBufs holds the buffers EachRecordJSON reads into.
var bodyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

func getBody() *[]byte { return bodyBufs.Get().(*[]byte) }

func putBody(b *[]byte) {
	if cap(*b) <= 1<<20 { // keep no outsized buffer
		bodyBufs.Put(b)
	}
}

// ReadBodies implements catalog.BodyReader: from the record cache, then
// from the body store when it holds the catalog as it is, else from SQLite.
// Each body is one fn may keep. The cache keeps the body of a record read
// alone (the OSV export of a record, its page); not those of reads of
// many (an ingest's merge, the count of the sources' KEV records), which
// would push out the records asked for one at a time.
func (d *DB) ReadBodies(ctx context.Context, keys []int64, fn func(key int64, body []byte)) error {
	version, err := d.db.DataVersion(ctx)
	if err != nil {
		return err
	}
	missed := make([]int64, 0, len(keys))
	for _, k := range keys {
		if body, ok := d.records.appendTo([]byte{}, k, version); ok {
			fn(k, body)
			continue
		}
		missed = append(missed, k)
	}
	found := fn
	if len(keys) == 1 {
		found = func(key int64, body []byte) {
			fn(key, body)
			d.records.put(key, version, body)
		}
	}
	if st := d.files.at(ctx, version, d.generation); st != nil {
		err := readStore(st, missed, found)
		if err == nil {
			return nil
		}
		d.files.damaged(st, err)
	}
	return d.readBodies(ctx, missed, func(key int64, _ string, body []byte) { found(key, body) })
}

// readBodies reads the records of keys on one body reader and hands each
// found to fn, with its stored id. Several keys are read in one read
// transaction, so that they all come from the same commit.
func (d *DB) readBodies(ctx context.Context, keys []int64, fn func(key int64, id string, body []byte)) error {
	if len(keys) == 0 {
		return nil
	}
	r, err := d.bodies.get(ctx)
	if err != nil {
		return err
	}
	err = r.readAll(ctx, keys, fn)
	d.bodies.put(r, err != nil)
	return err
}

// Version returns the catalog's data version: a number that changes with
// every commit to the catalog, of this process or another, seen by the
// reads that come a millisecond after it (sqlitedb.DB.DataVersion). The
// lookup API renders its streams once a version.
func (d *DB) Version(ctx context.Context) (int64, error) {
	return d.db.DataVersion(ctx)
}

// generationAnswer is the catalog's generation as read at a data version.
type generationAnswer struct{ dataVersion, generation int64 }

// generation returns the catalog's generation
// (migrations/005_catalog_generation.sql), which changes with its records
// alone, read again only when the data version has changed since the last
// answer. The body store names the generation it holds; the summary index
// is kept by it, so that the other writes to the catalog file (the sync's
// lease and states, ingest runs that change no record) do not make lists
// wait for a new index.
func (d *DB) generation(ctx context.Context) (int64, error) {
	dv, err := d.db.DataVersion(ctx)
	if err != nil {
		return 0, err
	}
	if a := d.lastGen.Load(); a != nil && a.dataVersion == dv {
		return a.generation, nil
	}
	// Read after the data version: never older than it.
	var g int64
	if err := d.db.Read.QueryRowContext(ctx, `SELECT n FROM catalog_generation`).Scan(&g); err != nil {
		return 0, err
	}
	d.lastGen.Store(&generationAnswer{dv, g})
	return g, nil
}
