package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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

// migrate applies the embedded migrations that the database lacks, in name
// order, each in a transaction of its own that first takes migrationLock:
// replicas that start at once apply each migration once, one after the
// other, and the others find it recorded.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		body, err := fs.ReadFile(migrationFiles, name)
		if err != nil {
			return err
		}
		base := name[len("migrations/"):]
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return applyMigration(ctx, tx, base, string(body))
		}); err != nil {
			return fmt.Errorf("migration %s: %w", base, err)
		}
	}
	return nil
}

func applyMigration(ctx context.Context, tx pgx.Tx, name, body string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+migrationsTable+` (
		name    text   PRIMARY KEY,
		applied bigint NOT NULL)`); err != nil {
		return err
	}
	var done bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+migrationsTable+` WHERE name = $1)`, name).Scan(&done); err != nil {
		return err
	}
	if done {
		return nil
	}
	if _, err := tx.Exec(ctx, body); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO `+migrationsTable+` (name, applied) VALUES ($1, $2)`, name, time.Now().Unix())
	return err
}
