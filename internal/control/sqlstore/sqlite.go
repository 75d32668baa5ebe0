package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/patchline/patchline/internal/sqlitedb"
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
	// The write transaction, which begins IMMEDIATE, is the lock of
	// appends.
	auditHead: `SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1`,
	readOpts:  &sql.TxOptions{ReadOnly: true},
	isUnique: func(err error) (string, bool) {
		var e *sqlite.Error
		if errors.As(err, &e) && (e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY) {
			return e.Error(), true
		}
		return "", false
	},
	retryable:   func(error) bool { return false },
	unwatched:   true,
	checkInSame: true,
}

// OpenSQLite opens (creating it and its directory when needed) the
// database file at path, as package sqlitedb opens the catalog's, and
// brings its schema up to date.
//
// Writes go through a single connection whose transactions begin
// IMMEDIATE, so that writers queue on the database lock instead of failing
// to upgrade a read lock; reads use a pool of read-only connections that
// the write-ahead log keeps from blocking. Other processes (the command
// line) may write to the same file; busy_timeout makes them wait their
// turn.
func OpenSQLite(ctx context.Context, path string) (*Store, error) {
	_, statErr := os.Stat(path)
	migrations, _ := fs.Sub(sqliteMigrations, "migrations/sqlite")
	sdb, err := sqlitedb.Open(ctx, path, migrations)
	if err != nil {
		return nil, fmt.Errorf("open control store: %w", err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		// The file holds digests of credentials and the audit log: keep it
		// to its owner.
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
				sdb.Close()
				return nil, fmt.Errorf("open control store: %w", err)
			}
		}
	}
	s := &Store{d: sqliteDialect, db: sdb.Read, wdb: sdb.Write, source: path, Now: time.Now,
		checkIns: make(chan *checkInRequest), quit: make(chan struct{}), closers: []func() error{sdb.Close}}
	// The most frequent statements, prepared once so that SQLite does not
	// parse them again for every check-in, audited request and finding.
	if s.prepared, err = prepare(ctx, s.wdb, s.d, sqlitePrepared(s.d)...); err != nil {
		s.Close()
		return nil, fmt.Errorf("open control store %s: %w", path, err)
	}
	if s.preparedRead, err = prepare(ctx, s.db, s.d, sqlAgentCredential, sqlCVEFixes); err != nil {
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
		d.auditHead, sqlInsertAudit,
	}, exposureQueries...)
}
