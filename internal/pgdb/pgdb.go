// Package pgdb opens PostgreSQL databases the way both Patchline stores use
// them, as package sqlitedb opens SQLite ones: a pgxpool pool, checked with
// a ping, with the store's embedded schema migrations applied (migrate.go);
// and it makes strings storable as PostgreSQL's text.
package pgdb

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultMaxConns is the size of the connection pool of a DSN that does not
// set pool_max_conns. A bulk download of the catalog holds a connection for
// as long as it streams, so the pool is larger than pgxpool's default of
// the number of CPUs.
const DefaultMaxConns = 16

// IsDSN reports whether dsn names a PostgreSQL database: a postgres:// or
// postgresql:// URL.
func IsDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// Open connects to the database that dsn names and applies the migrations
// of m that it lacks. The DSN takes libpq's parameters (sslmode,
// search_path ...) and pgxpool's (pool_max_conns ...).
func Open(ctx context.Context, dsn string, m Migrations) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := m.apply(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// Text returns s as PostgreSQL's text takes it: valid UTF-8 without NUL
// bytes, each byte it cannot hold replaced by U+FFFD. SQLite stores any
// string; a store on PostgreSQL must not fail on a name or an error
// message that an upstream or a client made that way.
func Text(s string) string {
	if utf8.ValidString(s) && !strings.Contains(s, "\x00") {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
