package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/sqlitedb"
)

// A rebuild writes the catalog of an ingest run into an empty catalog
// apart from the live one, then installs it whole. An ingest into an empty
// catalog writes every page of it; in one WAL transaction larger than the
// page cache, SQLite appends the dirty pages it spills to the WAL, again
// each time they change, and the WAL grows to several times the catalog.
// The rebuild's file has no journal and no fsync until it is complete (a
// crash leaves the live catalog as it was, and a file that the next open
// of the catalog removes), its list indexes are built after the load, and
// it replaces the live file by a rename when no other connection has the
// live file open. When one has (a running serve, say), renaming would leave
// it reading the old file and sharing its -wal and -shm names with the new
// one, so the built catalog is copied into the live one in one WAL
// transaction instead.

// buildCacheKiB is the page cache of a rebuild's connection. The load
// appends to its tables in key order and the list indexes are sorted after
// it, so a larger cache buys no time: 16, 64 and 384 MiB built the 300,000
// CVEs of make bench in the same time (bench/RESULTS.md, 2026-11-24), and
// the cache counts whole in the run's peak memory.
const buildCacheKiB = 32 << 10

// rebuildSuffix and the process id name the file a rebuild writes, next
// to the live one.
const rebuildSuffix = ".rebuild-"

// errInUse reports that another connection has the live catalog open.
var errInUse = errors.New("the catalog is open elsewhere")

// rebuild is the state of a rebuild transaction.
type rebuild struct {
	d *DB
	// live holds the write lock of the live catalog from Begin to the
	// install, so that nothing writes to it meanwhile.
	live  *sql.Tx
	path  string // of the build file
	build *sqlitedb.DB
	// indexes are the CREATE INDEX statements of the indexes of records,
	// dropped from the build for the load and created again after it.
	indexes []string
}

// BeginRebuild starts an ingest transaction like Begin. When the catalog is
// empty (no facts, records, lifecycles, runs or sync states) and is a file,
// the transaction writes a new catalog apart from the live one and Commit
// installs it; otherwise it is Begin's. Readers go on seeing the previous
// catalog until Commit returns. While a rebuild transaction is open and
// while it commits, d must not be used for anything else: Commit closes and
// opens d's connections again.
func (d *DB) BeginRebuild(ctx context.Context) (catalog.Tx, error) {
	if !rebuilds || !isFile(d.db.Path) {
		return d.Begin(ctx)
	}
	live, err := d.db.Write.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin ingest: %w", err)
	}
	empty, err := isEmpty(ctx, live)
	if err != nil || !empty {
		live.Rollback()
		if err != nil {
			return nil, fmt.Errorf("begin ingest: %w", err)
		}
		return d.Begin(ctx)
	}
	rb := &rebuild{d: d, live: live}
	tx, err := rb.open(ctx)
	if err != nil {
		rb.abort()
		return nil, fmt.Errorf("begin ingest: %w", err)
	}
	return &tx_{SQLTx: &catalog.SQLTx{Tx: tx, SourcesJSON: sourcesJSON}, tx: tx, db: rb.build.Write, stmts: map[string]*sql.Stmt{}, rebuild: rb, fresh: true, changed: func() { d.db.Changed() }, d: d}, nil
}

// isFile reports whether path names a database file (not a memory database).
func isFile(path string) bool {
	return path != "" && !strings.HasPrefix(path, ":memory:") && !strings.Contains(path, "mode=memory") && !strings.Contains(path, "?")
}

// isEmpty reports whether the catalog of q holds nothing an ingest or a
// sync wrote.
func isEmpty(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (bool, error) {
	var any_ bool
	err := q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM facts) OR EXISTS (SELECT 1 FROM records)
		OR EXISTS (SELECT 1 FROM lifecycles) OR EXISTS (SELECT 1 FROM ingest_runs) OR EXISTS (SELECT 1 FROM sync_state)`).Scan(&any_)
	return !any_, err
}

// buildPath is the file of this process's rebuild of the catalog at live.
func buildPath(live string) string { return live + rebuildSuffix + strconv.Itoa(os.Getpid()) }

// removeLeftovers removes the files of the rebuilds of the catalog at live
// whose process is gone: killed, they left them.
func removeLeftovers(live string) {
	matches, _ := filepath.Glob(live + rebuildSuffix + "*")
	for _, m := range matches {
		pid, err := strconv.Atoi(strings.TrimPrefix(m, live+rebuildSuffix))
		if err != nil || pid <= 0 {
			continue // a journal of one, or not a rebuild's
		}
		if pid == os.Getpid() || processAlive(pid) {
			continue
		}
		removeBuild(m)
	}
}

// removeBuild removes the file of a rebuild and its journals.
func removeBuild(path string) {
	for _, suffix := range []string{"", "-journal", "-wal", "-shm"} {
		os.Remove(path + suffix)
	}
}

// open creates the build file, left over from a killed run or not, and
// starts its transaction.
func (rb *rebuild) open(ctx context.Context) (*sql.Tx, error) {
	rb.path = buildPath(rb.d.db.Path)
	removeLeftovers(rb.d.db.Path)
	removeBuild(rb.path)
	path := rb.path
	migs, _ := fs.Sub(migrationFiles, "migrations")
	build, err := sqlitedb.OpenBuild(ctx, path, migs, buildCacheKiB)
	if err != nil {
		return nil, err
	}
	rb.build = build
	var names []string
	err = catalog.EachRow(ctx, build.Write, `SELECT name, sql FROM sqlite_schema
		WHERE type = 'index' AND tbl_name = 'records' AND sql IS NOT NULL ORDER BY name`, func(rows *sql.Rows) error {
		var name, stmt string
		if err := rows.Scan(&name, &stmt); err != nil {
			return err
		}
		names = append(names, name)
		rb.indexes = append(rb.indexes, stmt)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if _, err := build.Write.ExecContext(ctx, `DROP INDEX "`+name+`"`); err != nil {
			return nil, err
		}
	}
	return build.Write.BeginTx(ctx, nil)
}

// abort gives the rebuild up: the live catalog stays as it was.
func (rb *rebuild) abort() {
	if rb.build != nil {
		rb.build.Close()
		rb.build = nil
	}
	if rb.path != "" {
		removeBuild(rb.path)
	}
	if rb.live != nil {
		rb.live.Rollback()
		rb.live = nil
	}
}

// commit completes the build file and installs it.
func (rb *rebuild) commit(ctx context.Context) error {
	if err := rb.finish(ctx); err != nil {
		rb.abort()
		return err
	}
	return rb.install(ctx)
}

// finish creates the list indexes, puts the build file in WAL mode, as
// the live catalog is, and writes it to disk.
func (rb *rebuild) finish(ctx context.Context) error {
	w := rb.build.Write
	for _, stmt := range rb.indexes {
		if _, err := w.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("build list index: %w", err)
		}
	}
	if _, err := w.ExecContext(ctx, `PRAGMA journal_mode = WAL`); err != nil {
		return err
	}
	path := rb.build.Path
	err := rb.build.Close()
	rb.build = nil
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// install replaces the live catalog with the build file: by a rename when
// nothing else has the live file open, by a copy in one transaction
// otherwise. d's connections are closed for it and opened again after.
func (rb *rebuild) install(ctx context.Context) error {
	d := rb.d
	live := d.db.Path
	build := rb.path
	defer func() {
		removeBuild(build)
		rb.path = ""
	}()
	rb.live.Rollback()
	rb.live = nil
	d.bodies.close()
	d.db.Close()
	err := swap(ctx, live, build)
	inUse := errors.Is(err, errInUse)
	if inUse {
		err = nil
	}
	db, oerr := Open(ctx, live)
	if oerr != nil {
		// d is left unusable: its handles are closed.
		return errors.Join(err, oerr)
	}
	d.db, d.bodies, d.SQLSyncStates, d.SQLReads = db.db, db.bodies, db.SQLSyncStates, db.SQLReads
	if err != nil || !inUse {
		return err
	}
	return copyInto(ctx, d.db.Write, build)
}

// swap renames build over live if no other connection has live open. It
// returns errInUse, leaving live as it was, when one has.
func swap(ctx context.Context, live, build string) error {
	// An exclusive lock on the live file, which a WAL connection's shared
	// lock prevents for as long as it is open: switching the file out of
	// WAL mode needs it, and locking_mode EXCLUSIVE keeps it.
	conn, err := sql.Open("sqlite", "file:"+live+"?_pragma=busy_timeout(0)&_pragma=locking_mode(EXCLUSIVE)")
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	c, err := conn.Conn(ctx)
	if err != nil {
		return fmt.Errorf("%w: %v", errInUse, err)
	}
	defer c.Close()
	var mode string
	if err := c.QueryRowContext(ctx, `PRAGMA journal_mode = DELETE`).Scan(&mode); err != nil || mode != "delete" {
		return fmt.Errorf("%w: journal mode %q: %v", errInUse, mode, err)
	}
	if _, err := c.ExecContext(ctx, `BEGIN EXCLUSIVE`); err != nil {
		return fmt.Errorf("%w: %v", errInUse, err)
	}
	defer c.ExecContext(context.Background(), `ROLLBACK`)
	empty, err := isEmpty(ctx, c)
	if err != nil {
		return err
	}
	if !empty {
		return errors.New("install rebuilt catalog: the catalog was written to meanwhile")
	}
	old, err := os.OpenFile(live, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if err := os.Rename(build, live); err != nil {
		old.Close()
		return err
	}
	syncDir(filepath.Dir(live))
	// A connection that opened the old file just before the rename and
	// takes its lock just after finds it is no database, rather than an
	// empty one whose journals would share names with the new file's.
	_, err = old.WriteAt(make([]byte, 16), 0)
	// Closing a descriptor of the file drops this process's locks on it.
	if cerr := old.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir writes a directory's entries to disk.
func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		f.Sync()
		f.Close()
	}
}

// copyInto copies the tables of the build file into the live catalog on
// w, in one transaction, if the live catalog is still empty.
func copyInto(ctx context.Context, w *sql.DB, build string) (err error) {
	c, err := w.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, `ATTACH DATABASE ? AS build`, "file:"+build+"?mode=ro"); err != nil {
		return fmt.Errorf("attach rebuilt catalog: %w", err)
	}
	defer c.ExecContext(context.Background(), `DETACH DATABASE build`)
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	empty, err := isEmpty(ctx, tx)
	if err != nil {
		return err
	}
	if !empty {
		return errors.New("install rebuilt catalog: the catalog was written to meanwhile")
	}
	// Every table but the full-text index itself, whose tables (its
	// shadow tables) are copied as they are; schema_migrations is the same.
	var tables []string
	err = catalog.EachRow(ctx, tx, `SELECT name FROM build.sqlite_schema
		WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\' AND name <> 'schema_migrations'
		AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name`, func(rows *sql.Rows) error {
		var name string
		if err := rows.Scan(&name); err != nil {
			return err
		}
		tables = append(tables, name)
		return nil
	})
	if err != nil {
		return err
	}
	if !slices.Contains(tables, "records") {
		return errors.New("install rebuilt catalog: the rebuilt catalog is missing")
	}
	for _, t := range tables {
		if _, err := tx.ExecContext(ctx, `DELETE FROM main."`+t+`"`); err != nil {
			return fmt.Errorf("copy %s: %w", t, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO main."`+t+`" SELECT * FROM build."`+t+`"`); err != nil {
			return fmt.Errorf("copy %s: %w", t, err)
		}
	}
	return tx.Commit()
}
