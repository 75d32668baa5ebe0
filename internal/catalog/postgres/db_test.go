package postgres

import (
	"context"
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
