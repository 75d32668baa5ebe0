package pgdb

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Migrations are the schema migrations of one store. Each store records
// its migrations in a table of its own and serializes them with an
// advisory lock of its own, so that the catalog and the control store may
// share a database and replicas that start at once apply each migration
// once.
type Migrations struct {
	// Files holds the migrations, *.sql files applied in name order.
	Files fs.FS
	// Dir is the directory of Files that holds them ("migrations").
	Dir string
	// Table records the applied migrations by file name.
	Table string
	// Lock is the advisory lock key held by the transaction that applies a
	// migration.
	Lock int64
	// Applied returns the time recorded with a migration, in the unit of
	// the store's other times.
	Applied func() int64
}

// apply applies the migrations of s that the database lacks, in name order,
// each in a transaction of its own that first takes s.Lock: replicas that
// start at once apply each migration once, one after the other, and the
// others find it recorded.
func (s Migrations) apply(ctx context.Context, pool *pgxpool.Pool) error {
	names, err := fs.Glob(s.Files, path.Join(s.Dir, "*.sql"))
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		body, err := fs.ReadFile(s.Files, name)
		if err != nil {
			return err
		}
		base := path.Base(name)
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return s.applyOne(ctx, tx, base, string(body))
		}); err != nil {
			return fmt.Errorf("migration %s: %w", base, err)
		}
	}
	return nil
}

func (s Migrations) applyOne(ctx context.Context, tx pgx.Tx, name, body string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, s.Lock); err != nil {
		return err
	}
	table := pgx.Identifier{s.Table}.Sanitize()
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
		name    text   PRIMARY KEY,
		applied bigint NOT NULL)`); err != nil {
		return err
	}
	var done bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+` WHERE name = $1)`, name).Scan(&done); err != nil {
		return err
	}
	if done {
		return nil
	}
	if _, err := tx.Exec(ctx, body); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO `+table+` (name, applied) VALUES ($1, $2)`, name, s.Applied())
	return err
}
