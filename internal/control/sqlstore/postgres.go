package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/patchline/patchline/internal/pgdb"
)

//go:embed migrations/postgres/*.sql
var postgresMigrationFiles embed.FS

// postgresMigrations are the control store's, recorded in a table named
// after the store (so that the catalog and the control store may share a
// database) with Unix milliseconds.
var postgresMigrations = pgdb.Migrations{
	Files: postgresMigrationFiles, Dir: "migrations/postgres", Table: "control_migrations", Lock: migrationLock,
	Applied: func() int64 { return time.Now().UnixMilli() },
}

// postgresDialect is PostgreSQL's: replicas share the database, so writes
// lock what they read.
var postgresDialect = &dialect{
	rebind:     rebindCached,
	arg:        pgArg,
	text:       pgdb.Text,
	lockRow:    "FOR NO KEY UPDATE",
	skipLocked: "FOR UPDATE SKIP LOCKED",
	ilike:      "ILIKE",
	queueOrder: "seq",
	token:      "exposure_token()",
	greatest:   "greatest",
	jsonField:  func(col, key string) string { return `((` + col + `::jsonb) ->> '` + key + `')` },
	jsonLength: func(col string) string { return `json_array_length(` + col + `::json)` },
	// The lock and the read in one round trip.
	auditHead: `SELECT id, hash FROM audit_head(` + strconv.FormatInt(auditLock, 10) + `)`,
	lock: func(ctx context.Context, q querier, key int64, sub string) error {
		if sub == "" {
			_, err := q.Exec(ctx, `SELECT pg_advisory_xact_lock(?)`, key)
			return err
		}
		_, err := q.Exec(ctx, `SELECT pg_advisory_xact_lock(?::integer, hashtext(?))`, int32(key), sub)
		return err
	},
	readOpts: &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true},
	isUnique: func(err error) (string, bool) {
		var e *pgconn.PgError
		if errors.As(err, &e) && e.Code == "23505" {
			return e.ConstraintName, true
		}
		return "", false
	},
	retryable: func(err error) bool {
		var e *pgconn.PgError
		return errors.As(err, &e) && (e.Code == "40P01" || e.Code == "40001")
	},
	multiRow: true,
}

// OpenPostgres connects to the database that dsn names and applies the
// migrations it lacks. The DSN takes libpq's parameters (sslmode,
// search_path ...) and pgxpool's (pool_max_conns ...).
//
// Migrations are applied in order, each in its own transaction under an
// advisory lock, so that replicas starting at once apply each migration
// once. Nothing is cached: revocation and expiry of keys, secrets and
// sessions are read from the database on every request, whichever replica
// serves it.
func OpenPostgres(ctx context.Context, dsn string) (*Store, error) {
	pool, err := pgdb.Open(ctx, dsn, postgresMigrations)
	if err != nil {
		return nil, fmt.Errorf("open control store: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	return &Store{d: postgresDialect, db: db, wdb: db, source: pool.Config().ConnString(), Now: time.Now,
		quit:    make(chan struct{}),
		closers: []func() error{db.Close, func() error { pool.Close(); return nil }},
	}, nil
}

// rebound holds the queries rebindCached rewrote, by their ? text, up to
// maxRebound of them: queries built from filters (lists of ids of any
// length) could otherwise fill it without end.
var (
	rebound      sync.Map
	reboundCount atomic.Int64
)

const maxRebound = 4096

// rebindCached returns query with its ? placeholders numbered $1, $2 …,
// rewriting each query text once. A ? within a string literal would be
// numbered too: the store's queries have none.
func rebindCached(query string) string {
	if v, ok := rebound.Load(query); ok {
		return v.(string)
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	out := b.String()
	if reboundCount.Add(1) <= maxRebound {
		rebound.Store(query, out)
	}
	return out
}

// pgArg makes the strings among arguments storable as text. A string
// that is already storable keeps its interface value: boxing it again
// would allocate for every argument of every statement.
func pgArg(v any) any {
	switch s := v.(type) {
	case string:
		if t := pgdb.Text(s); t != s {
			return t
		}
	case *string:
		if s != nil {
			if t := pgdb.Text(*s); t != *s {
				return &t
			}
		}
	}
	return v
}
