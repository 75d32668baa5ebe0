// Package postgres implements the control store on PostgreSQL, for
// deployments of several serve replicas on one database: agents, commands,
// rings, rollouts, policies, enrollment secrets, API keys, administrators,
// console sessions, the audit log and the exposure of the fleet.
//
// It speaks to the server with pgx through a pgxpool pool. The SQL is the
// SQLite store's in PostgreSQL's dialect, over the same tables and columns
// (times in Unix milliseconds, JSON as text written byte for byte), so that
// both behave alike and a copy between them is exact.
//
// Where SQLite relies on its single writer, this store locks: a check-in
// locks its agent's row and takes its queued commands FOR UPDATE SKIP
// LOCKED, so that two replicas serving check-ins of one agent deliver each
// command once; an audit append holds an advisory lock while it reads the
// head of the chain and appends to it, so that the chain never forks; the
// writes that read before they write lock the rows they read. Nothing is
// cached: revocation and expiry of keys, secrets and sessions are read from
// the database on every request, whichever replica serves it.
//
// Schema migrations are embedded and applied at Open, in order, each in its
// own transaction under an advisory lock, so that replicas starting at once
// apply each migration once.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/patchline/patchline/internal/admin"
	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/control"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/exposure"
	"github.com/patchline/patchline/internal/pgmigrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Advisory lock keys of the control store, per database. Their high bytes
// spell "patchln" like the catalog's, whose keys end in 01 and 02.
const (
	// migrationLock is held by the transaction that applies a migration.
	migrationLock int64 = 0x70617463686c6e11
	// auditLock is held by an audit append from reading the head of the
	// chain to its commit.
	auditLock int64 = 0x70617463686c6e12
	// firstAdminLock is held by the creation of the first administrator.
	firstAdminLock int64 = 0x70617463686c6e13
	// exposureLock is the first half of the lock of one agent's exposure,
	// held by PutExposure.
	exposureLock int32 = 0x70636c12
)

// migrationsTable records the applied migrations, named after the store so
// that the catalog and the control store may share a database.
const migrationsTable = "control_migrations"

// DefaultMaxConns is the size of the connection pool of a DSN that does not
// set pool_max_conns.
const DefaultMaxConns = 16

// Store is the control store on one PostgreSQL database.
type Store struct {
	pool *pgxpool.Pool

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
	_ admin.SessionStore       = (*Store)(nil)
	_ admin.TOTPStore          = (*Store)(nil)
	_ admin.FirstAdminCreator  = (*Store)(nil)
	_ audit.Log                = (*Store)(nil)
	_ exposure.Store           = (*Store)(nil)
	_ control.Store            = (*Store)(nil)
	_ control.Copier           = (*Store)(nil)
)

// IsDSN reports whether dsn names a PostgreSQL database: a postgres:// or
// postgresql:// URL.
func IsDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// Open connects to the database that dsn names and applies the migrations
// it lacks. The DSN takes libpq's parameters (sslmode, search_path ...) and
// pgxpool's (pool_max_conns ...).
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open control store: %w", err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open control store: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open control store: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open control store: %w", err)
	}
	return &Store{pool: pool, Now: time.Now}, nil
}

// Close closes the connection pool.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	return s.pool.Ping(ctx)
}

// migrate applies the embedded migrations that the database lacks
// (pgmigrate.Apply), recording them with Unix milliseconds like the
// store's other times.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgmigrate.Apply(ctx, pool, pgmigrate.Set{
		Files: migrationFiles, Dir: "migrations", Table: migrationsTable, Lock: migrationLock,
		Applied: func() int64 { return time.Now().UnixMilli() },
	})
}

// maxAttempts bounds the runs of a write transaction that the server ended
// for a deadlock or a serialization failure.
const maxAttempts = 4

// write runs fn in a transaction and commits it when fn returns nil. A
// transaction the server aborts to break a deadlock is run again: fn must
// set its results anew on every run.
func (s *Store) write(ctx context.Context, fn func(tx pgx.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := pgx.BeginFunc(ctx, s.pool, fn)
		if attempt < maxAttempts && retryable(err) && ctx.Err() == nil {
			time.Sleep(time.Duration(attempt) * 5 * time.Millisecond)
			continue
		}
		return err
	}
}

// read runs fn in a read-only transaction that sees one snapshot.
func (s *Store) read(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

// retryable reports whether err ends a transaction that may succeed when
// run again.
func retryable(err error) bool {
	var e *pgconn.PgError
	return errors.As(err, &e) && (e.Code == "40P01" || e.Code == "40001")
}

// querier is what *pgxpool.Pool and pgx.Tx have in common.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

type scanner interface {
	Scan(dest ...any) error
}

// isUnique reports whether err is a violated UNIQUE or PRIMARY KEY
// constraint, and names it.
func isUnique(err error) (string, bool) {
	var e *pgconn.PgError
	if errors.As(err, &e) && e.Code == "23505" {
		return e.ConstraintName, true
	}
	return "", false
}

// args numbers the parameters of a query built from a filter.
type args []any

// add appends v and returns its placeholder.
func (a *args) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// ms converts a time to the stored Unix milliseconds.
func ms(t time.Time) int64 { return t.UnixMilli() }

// msPtr converts an optional time to a nullable column value.
func msPtr(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	v := t.UnixMilli()
	return &v
}

// fromMS converts stored Unix milliseconds to a UTC time.
func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// fromNullMS converts a nullable column to an optional time.
func fromNullMS(v *int64) *time.Time {
	if v == nil {
		return nil
	}
	t := fromMS(*v)
	return &t
}

// nullString turns "" into NULL.
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nullBytes turns an empty JSON value into NULL.
func nullBytes(b []byte) *string {
	if len(b) == 0 {
		return nil
	}
	v := pgText(string(b))
	return &v
}

// str returns the string of a nullable column, "" for NULL.
func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// pgText returns s as PostgreSQL's text takes it: valid UTF-8 without NUL
// bytes, each byte it cannot hold replaced by U+FFFD.
func pgText(s string) string {
	if utf8.ValidString(s) && !strings.Contains(s, "\x00") {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
