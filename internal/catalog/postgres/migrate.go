package postgres

import (
	"context"
	"embed"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/patchline/patchline/internal/pgmigrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Advisory lock keys of the catalog, per database. Their high bytes spell
// "patchln", so that they stay clear of other applications' keys.
const (
	// migrationLock is held by the transaction that applies a migration.
	migrationLock int64 = 0x70617463686c6e01
	// ingestLock is held by an ingest transaction from Begin to its end.
	ingestLock int64 = 0x70617463686c6e02
)

// migrationsTable records the applied migrations. It is named after the
// store, so that the catalog and the control store may share a database.
const migrationsTable = "catalog_migrations"

// migrate applies the embedded migrations that the database lacks
// (pgmigrate.Apply), recording them with Unix seconds.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgmigrate.Apply(ctx, pool, pgmigrate.Set{
		Files: migrationFiles, Dir: "migrations", Table: migrationsTable, Lock: migrationLock,
		Applied: func() int64 { return time.Now().Unix() },
	})
}
