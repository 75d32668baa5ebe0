package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

//go:embed migrations/sqlite/*.sql
var sqliteMigrations embed.FS

// sqliteDialect is SQLite's: one writer, so no locks.
var sqliteDialect = &dialect{
	rebind:     func(q string) string { return q },
	text:       func(s string) string { return s },
	ilike:      "LIKE", // ASCII case-insensitive
	queueOrder: "rowid",
	token:      "hex(randomblob(8))",
	greatest:   "max",
	jsonField:  func(col, key string) string { return `json_extract(` + col + `, '$.` + key + `')` },
	jsonLength: func(col string) string { return `json_array_length(` + col + `)` },
	readOpts:   &sql.TxOptions{ReadOnly: true},
	isUnique: func(err error) (string, bool) {
		var e *sqlite.Error
		if errors.As(err, &e) && (e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY) {
			return e.Error(), true
		}
		return "", false
	},
	retryable: func(error) bool { return false },
	unwatched: true,
}

// OpenSQLite opens (creating it and its directory when needed) the
// database file at path and brings its schema up to date.
//
// Writes go through a single connection whose transactions begin
// IMMEDIATE, so that writers queue on the database lock instead of failing
// to upgrade a read lock; reads use a pool of read-only connections that
// the write-ahead log keeps from blocking. Other processes (the command
// line) may write to the same file; busy_timeout makes them wait their
// turn.
func OpenSQLite(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("open control store: empty path")
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open control store %s: the path may not contain ? or #", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("open control store: %w", err)
	}
	_, statErr := os.Stat(path)
	pragmas := "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(ON)"
	wdb, err := sql.Open("sqlite", path+pragmas+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open control store %s: %w", path, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetConnMaxIdleTime(0)
	if err := migrateSQLite(ctx, wdb); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open control store %s: %w", path, err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		// The file holds digests of credentials and the audit log: keep it
		// to its owner.
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
				wdb.Close()
				return nil, fmt.Errorf("open control store: %w", err)
			}
		}
	}
	db, err := sql.Open("sqlite", path+pragmas+"&_pragma=query_only(1)")
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open control store %s: %w", path, err)
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	s := &Store{d: sqliteDialect, db: db, wdb: wdb, source: path, Now: time.Now,
		checkIns: make(chan *checkInRequest), quit: make(chan struct{})}
	// The most frequent statements, prepared once so that SQLite does not
	// parse them again for every check-in, audited request and finding.
	if s.prepared, err = prepare(ctx, wdb, s.d, sqlitePrepared(s.d)...); err != nil {
		s.Close()
		return nil, fmt.Errorf("open control store %s: %w", path, err)
	}
	if s.preparedRead, err = prepare(ctx, db, s.d, sqlAgentCredential, sqlCVEFixes); err != nil {
		s.Close()
		return nil, fmt.Errorf("open control store %s: %w", path, err)
	}
	s.loops.Add(1)
	go s.checkInLoop()
	return s, nil
}

// sqlitePrepared are the statements prepared on the write connection.
func sqlitePrepared(d *dialect) []string {
	return append([]string{
		sqlCheckIn, sqlCheckInSame, d.queuedCommands, sqlDeliver, sqlFindRings,
		sqlLastAudit, sqlInsertAudit,
	}, exposureQueries...)
}

// migrateSQLite applies the embedded migrations not yet recorded in
// schema_migrations, in order, each in its own transaction.
func migrateSQLite(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	names, err := fs.Glob(sqliteMigrations, "migrations/sqlite/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		base := filepath.Base(name)
		num, _, ok := strings.Cut(base, "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil {
			return fmt.Errorf("migration %s: name does not start with a number", base)
		}
		body, err := sqliteMigrations.ReadFile(name)
		if err != nil {
			return err
		}
		if err := applySQLiteMigration(ctx, db, version, base, string(body)); err != nil {
			return fmt.Errorf("migration %s: %w", base, err)
		}
	}
	return nil
}

func applySQLiteMigration(ctx context.Context, db *sql.DB, version int, name, body string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, body); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		version, name, time.Now().UnixMilli()); err != nil {
		return err
	}
	return tx.Commit()
}
