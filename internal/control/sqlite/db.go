// Package sqlite implements the control store on SQLite: agents, commands,
// rings, rollouts, policies, enrollment secrets, API keys, administrators
// and the audit log of the control service, in one database file.
//
// Writes go through a single connection whose transactions begin
// IMMEDIATE, so that writers queue on the database lock instead of failing
// to upgrade a read lock; reads use a pool of read-only connections that the
// write-ahead log keeps from blocking. Other processes (the command line)
// may write to the same file; busy_timeout makes them wait their turn.
package sqlite

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
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/patchline/patchline/internal/admin"
	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/control"
	"github.com/patchline/patchline/internal/device"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is the control store on one SQLite database.
type Store struct {
	db    *sql.DB // reads
	wdb   *sql.DB // writes, one connection
	stmts stmts   // prepared on wdb

	checkIns  chan *checkInRequest // to checkInLoop
	quit      chan struct{}        // closed by Close
	loops     sync.WaitGroup
	closeOnce sync.Once

	// Now returns the current time; tests replace it.
	Now func() time.Time
}

var (
	_ device.AgentStore        = (*Store)(nil)
	_ device.CommandStore      = (*Store)(nil)
	_ device.RingStore         = (*Store)(nil)
	_ device.RolloutStore      = (*Store)(nil)
	_ device.PolicyStore       = (*Store)(nil)
	_ device.EnrollSecretStore = (*Store)(nil)
	_ apikey.KeyStore          = (*Store)(nil)
	_ admin.Store              = (*Store)(nil)
	_ audit.Log                = (*Store)(nil)
	_ control.Store            = (*Store)(nil)
)

// Open opens (creating it and its directory when needed) the database file
// at path and brings its schema up to date.
func Open(ctx context.Context, path string) (*Store, error) {
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
	if err := migrate(ctx, wdb); err != nil {
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
	s := &Store{db: db, wdb: wdb, Now: time.Now, checkIns: make(chan *checkInRequest), quit: make(chan struct{})}
	if err := s.stmts.prepare(ctx, wdb, db); err != nil {
		s.Close()
		return nil, fmt.Errorf("open control store %s: %w", path, err)
	}
	s.loops.Add(1)
	go s.checkInLoop()
	return s, nil
}

// stmts are the statements of the most frequent writes, prepared once on
// the write connection so that SQLite does not parse them again for every
// check-in and every audited request, and the credential lookup of every
// agent request, prepared on the read connections.
type stmts struct {
	checkIn, checkInSame, queuedCommands, deliver, rings *sql.Stmt
	lastAudit, insertAudit                               *sql.Stmt
	credential                                           *sql.Stmt // on the read connections
	// byQuery are statements that preparedTx runs by their text.
	byQuery map[string]*sql.Stmt
}

func (st *stmts) prepare(ctx context.Context, wdb, db *sql.DB) error {
	for _, p := range []struct {
		dst   **sql.Stmt
		db    *sql.DB
		query string
	}{
		{&st.checkIn, wdb, sqlCheckIn},
		{&st.checkInSame, wdb, sqlCheckInSame},
		{&st.queuedCommands, wdb, sqlQueuedCommands},
		{&st.deliver, wdb, sqlDeliver},
		{&st.rings, wdb, sqlFindRings},
		{&st.lastAudit, wdb, sqlLastAudit},
		{&st.insertAudit, wdb, sqlInsertAudit},
		{&st.credential, db, sqlAgentCredential},
	} {
		stmt, err := p.db.PrepareContext(ctx, p.query)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.query, err)
		}
		*p.dst = stmt
	}
	st.byQuery = make(map[string]*sql.Stmt, len(exposureQueries))
	for _, query := range exposureQueries {
		stmt, err := wdb.PrepareContext(ctx, query)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", query, err)
		}
		st.byQuery[query] = stmt
	}
	return nil
}

func (st *stmts) close() error {
	var errList []error
	for _, s := range []*sql.Stmt{st.checkIn, st.checkInSame, st.queuedCommands, st.deliver, st.rings, st.lastAudit, st.insertAudit, st.credential} {
		if s != nil {
			errList = append(errList, s.Close())
		}
	}
	for _, s := range st.byQuery {
		errList = append(errList, s.Close())
	}
	return errors.Join(errList...)
}

// Close closes the database.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.quit) })
	s.loops.Wait()
	return errors.Join(s.stmts.close(), s.db.Close(), s.wdb.Close())
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	return s.db.PingContext(ctx)
}

// migrate applies the embedded migrations not yet recorded in
// schema_migrations, in order, each in its own transaction.
func migrate(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
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
		body, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		if err := applyMigration(ctx, db, version, base, string(body)); err != nil {
			return fmt.Errorf("migration %s: %w", base, err)
		}
	}
	return nil
}

func applyMigration(ctx context.Context, db *sql.DB, version int, name, body string) error {
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

// write runs fn in a write transaction and commits it when fn returns nil.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// read runs fn in a read transaction, one consistent snapshot.
func (s *Store) read(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(tx)
}

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// preparedTx is a write transaction that runs the statements prepared at
// Open (stmts.byQuery) as prepared statements, so that SQLite does not
// parse them at each call, and any other query as tx would.
type preparedTx struct {
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
	inTx  map[string]*sql.Stmt // of stmts, bound to tx
}

var _ querier = (*preparedTx)(nil)

// prepared returns tx as a preparedTx. tx is a transaction of the write
// connection.
func (s *Store) prepared(tx *sql.Tx) *preparedTx {
	return &preparedTx{tx: tx, stmts: s.stmts.byQuery}
}

// stmt returns the prepared statement of query bound to the transaction,
// nil when query was not prepared at Open.
func (p *preparedTx) stmt(ctx context.Context, query string) *sql.Stmt {
	if st, ok := p.inTx[query]; ok {
		return st
	}
	st, ok := p.stmts[query]
	if !ok {
		return nil
	}
	if p.inTx == nil {
		p.inTx = map[string]*sql.Stmt{}
	}
	st = p.tx.StmtContext(ctx, st)
	p.inTx[query] = st
	return st
}

// ExecContext implements querier.
func (p *preparedTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := p.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return p.tx.ExecContext(ctx, query, args...)
}

// QueryContext implements querier.
func (p *preparedTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := p.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return p.tx.QueryContext(ctx, query, args...)
}

// QueryRowContext implements querier.
func (p *preparedTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := p.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return p.tx.QueryRowContext(ctx, query, args...)
}

// isUnique reports whether err is a violated UNIQUE or PRIMARY KEY
// constraint.
func isUnique(err error) bool {
	var e *sqlite.Error
	if errors.As(err, &e) {
		return e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}

// ms converts a time to the stored Unix milliseconds.
func ms(t time.Time) int64 { return t.UnixMilli() }

// msPtr converts an optional time to a nullable column value.
func msPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMilli()
}

// fromMS converts stored Unix milliseconds to a UTC time.
func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// fromNullMS converts a nullable column to an optional time.
func fromNullMS(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMS(v.Int64)
	return &t
}

// nullString turns "" into NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullBytes turns an empty JSON value into NULL.
func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// placeholders returns "?, ?, ?" for n values.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
