// Package sqlitedb opens SQLite databases the way both Patchline stores use
// them: the pure-Go modernc.org/sqlite driver (nothing to install), WAL
// journaling, one writer connection beside a pool of readers, and embedded
// migrations applied in order, each in its own transaction, recorded in a
// table.
package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// DB is a SQLite database with separate write and read handles.
type DB struct {
	// Write has a single connection whose transactions begin IMMEDIATE, so
	// writers queue instead of failing with SQLITE_BUSY.
	Write *sql.DB
	// Read is a pool of connections for concurrent readers.
	Read *sql.DB
	Path string

	// watch asks for the data version (nil for a database opened with
	// OpenBuild).
	watch *versionWatch
	// readDSN opens read-only connections (empty for a database opened
	// with OpenBuild).
	readDSN string
}

// PathOf returns the file path of a DSN that names a SQLite database (a
// path, or sqlite:PATH), and false for other DSNs.
func PathOf(dsn string) (string, bool) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return "", false
	}
	p := strings.TrimPrefix(dsn, "sqlite:")
	p = strings.TrimPrefix(p, "//")
	return p, p != ""
}

// Open opens (creating it if needed) the database file at path and applies
// the migrations in migrations (files *.sql, in name order) that have not
// been applied yet.
func Open(ctx context.Context, path string, migrations fs.FS) (*DB, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create database directory: %w", err)
		}
	}
	pragmas := url.Values{}
	for _, p := range []string{
		"journal_mode(WAL)",
		"busy_timeout(10000)",
		"synchronous(NORMAL)", // with WAL: durable at checkpoints, never corrupt
		"foreign_keys(1)",
		"temp_store(MEMORY)",
	} {
		pragmas.Add("_pragma", p)
	}
	base := "file:" + path + "?" + pragmas.Encode()
	// Page caches: 64 MiB for the one writer, whose transactions revisit
	// the pages they changed; 1 MiB for each of the readers, which the
	// operating system's page cache backs (enough for the inner pages of
	// the indexes they descend). A reader's cache costs about twice its
	// size: the driver's allocator gives each 4 KiB page with its header a
	// slot of 8 KiB, and keeps the regions it frees up to its high-water
	// mark. With 4 MiB each, the few readers that walk the catalog at
	// once when serve starts (the first bulk stream, the count of the
	// sources, the summary index) left it 120 to 140 MB at 300,000
	// records; with 1 MiB, 90 at first and 55 after (bench/RESULTS.md,
	// 2026-11-25).
	write, err := sql.Open("sqlite", base+"&_txlock=immediate&_pragma=cache_size(-65536)")
	if err != nil {
		return nil, err
	}
	write.SetMaxOpenConns(1)
	write.SetConnMaxIdleTime(0)
	read, err := sql.Open("sqlite", base+"&mode=ro&_pragma=cache_size(-1024)")
	if err != nil {
		write.Close()
		return nil, err
	}
	read.SetMaxOpenConns(8)
	read.SetMaxIdleConns(8)
	read.SetConnMaxIdleTime(5 * time.Minute)
	watch, err := sql.Open("sqlite", base+"&mode=ro&_pragma=cache_size(-64)")
	if err != nil {
		write.Close()
		read.Close()
		return nil, err
	}
	watch.SetMaxOpenConns(1)
	watch.SetMaxIdleConns(1)
	watch.SetConnMaxIdleTime(0)
	db := &DB{Write: write, Read: read, Path: path, watch: newVersionWatch(watch), readDSN: base + "&mode=ro"}
	if err := db.migrate(ctx, migrations); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	return db, nil
}

// OpenBuild opens (creating it if needed) a database file that nothing else
// reads while it is written, such as a catalog built apart from the live one
// before it replaces it: no rollback journal, no fsync, an exclusive lock and
// a page cache of cacheKiB KiB on its one connection, which is both Write and
// Read. Its temporary files (the sorts of CREATE INDEX) are files, so that
// the memory of a build stays within its page cache whatever the size of
// the catalog. A crash leaves the file unusable; the caller removes it and
// starts again. The migrations are applied as Open applies them.
func OpenBuild(ctx context.Context, path string, migrations fs.FS, cacheKiB int) (*DB, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	pragmas := url.Values{}
	for _, p := range []string{
		"locking_mode(EXCLUSIVE)",
		"journal_mode(OFF)",
		"synchronous(OFF)",
		"foreign_keys(1)",
		"temp_store(FILE)",
		fmt.Sprintf("cache_size(-%d)", cacheKiB),
	} {
		pragmas.Add("_pragma", p)
	}
	conn, err := sql.Open("sqlite", "file:"+path+"?"+pragmas.Encode())
	if err != nil {
		return nil, err
	}
	conn.SetMaxOpenConns(1)
	conn.SetMaxIdleConns(1)
	conn.SetConnMaxIdleTime(0)
	db := &DB{Write: conn, Read: conn, Path: path}
	if err := db.migrate(ctx, migrations); err != nil {
		conn.Close()
		return nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	return db, nil
}

// checkPath returns an error for a path that a file: URI would not hold
// as it is: empty, or with ? or #, which would start its query or
// fragment.
func checkPath(path string) error {
	if path == "" {
		return errors.New("empty path")
	}
	if strings.ContainsAny(path, "?#") {
		return fmt.Errorf("%s: the path may not contain ? or #", path)
	}
	return nil
}

// OpenReaders opens a pool of n read-only connections beside Read, each
// with a page cache of cacheKiB KiB, for a caller that keeps statements of
// its own prepared on them. The caller closes it.
func (db *DB) OpenReaders(n, cacheKiB int) (*sql.DB, error) {
	if db.readDSN == "" {
		return nil, fmt.Errorf("%s has no readers: it is being built", db.Path)
	}
	r, err := sql.Open("sqlite", fmt.Sprintf("%s&_pragma=cache_size(-%d)", db.readDSN, cacheKiB))
	if err != nil {
		return nil, err
	}
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	r.SetConnMaxIdleTime(0)
	return r, nil
}

// DataVersion returns a number that changes whenever a transaction of any
// connection, of this process or another, commits to the database: what
// PRAGMA data_version answers on a connection kept for asking it. What was
// read from the database while DataVersion kept one value is still true for
// as long as it keeps it. The answer may be up to a millisecond old for
// the commits of other processes; those of this process are seen at once
// when it calls Changed after them. A database opened with OpenBuild has
// no such connection and always answers an error.
func (db *DB) DataVersion(ctx context.Context) (int64, error) {
	if db.watch == nil {
		return 0, fmt.Errorf("%s has no data version: it is being built", db.Path)
	}
	return db.watch.get(ctx)
}

// Changed tells DataVersion that this process has just committed through
// Write: the next caller asks again rather than taking an answer of the
// last versionWindow, so that the process sees its own writes at once.
func (db *DB) Changed() {
	if db.watch != nil {
		db.watch.forget()
	}
}

// Close closes the handles.
func (db *DB) Close() error {
	if db.Read == db.Write {
		return db.Write.Close()
	}
	db.watch.close()
	err1 := db.Read.Close()
	err2 := db.Write.Close()
	if err1 != nil {
		return err1
	}
	return err2
}

func (db *DB) migrate(ctx context.Context, migrations fs.FS) error {
	if _, err := db.Write.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		name TEXT PRIMARY KEY, applied INTEGER NOT NULL)`); err != nil {
		return err
	}
	if err := db.convertMigrations(ctx); err != nil {
		return fmt.Errorf("convert schema_migrations: %w", err)
	}
	names, err := fs.Glob(migrations, "*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		if err := db.apply(ctx, migrations, name); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func (db *DB) apply(ctx context.Context, migrations fs.FS, name string) error {
	tx, err := db.Write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE name = ?`, name).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	body, err := fs.ReadFile(migrations, name)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, string(body)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (name, applied) VALUES (?, ?)`, name, time.Now().Unix()); err != nil {
		return err
	}
	return tx.Commit()
}

// convertMigrations rewrites a schema_migrations table of the layout that
// control stores opened their SQLite file with until they opened it here,
// (version, name, applied_at in milliseconds), as the table of this
// package, keeping the names of the migrations applied.
func (db *DB) convertMigrations(ctx context.Context) error {
	var old bool
	if err := db.Write.QueryRowContext(ctx,
		`SELECT EXISTS (SELECT 1 FROM pragma_table_info('schema_migrations') WHERE name = 'applied_at')`).Scan(&old); err != nil || !old {
		return err
	}
	tx, err := db.Write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `ALTER TABLE schema_migrations RENAME TO schema_migrations_ms;
		CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied INTEGER NOT NULL);
		INSERT INTO schema_migrations (name, applied) SELECT name, applied_at / 1000 FROM schema_migrations_ms;
		DROP TABLE schema_migrations_ms`); err != nil {
		return err
	}
	return tx.Commit()
}
