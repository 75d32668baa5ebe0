package postgres

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/catalog/catalogtest"
	"github.com/patchline/patchline/internal/catalog/postgres/pgtest"
)

// mustOpen opens the catalog on a new database of its own.
func mustOpen(tb testing.TB) *DB {
	tb.Helper()
	return mustOpenDSN(tb, pgtest.NewDatabase(tb))
}

func mustOpenDSN(tb testing.TB, dsn string) *DB {
	tb.Helper()
	db, err := Open(context.Background(), dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

func openStore(t *testing.T) catalog.Store { return mustOpen(t) }

// TestCatalog runs the suite that every catalog store passes.
func TestCatalog(t *testing.T) {
	pgtest.URL(t)
	catalogtest.Run(t, openStore)
}

// BenchmarkSummaryIndexBuild builds the summary index of 30,000 records,
// as a replica does after each change of the catalog.
func BenchmarkSummaryIndexBuild(b *testing.B) {
	db := mustOpen(b)
	ctx := context.Background()
	catalogtest.PutRows(b, db, catalogtest.GenRows(rand.New(rand.NewPCG(1, 2)), 30000))
	for b.Loop() {
		if _, err := db.pool.Exec(ctx, `UPDATE catalog_generation SET n = n + 1`); err != nil {
			b.Fatal(err)
		}
		if err := db.Warm(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
