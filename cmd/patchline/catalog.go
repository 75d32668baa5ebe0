package main

import (
	"context"
	"fmt"
	"time"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/catalog/postgres"
	"github.com/patchline/patchline/internal/catalog/sqlite"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/ingest"
	"github.com/patchline/patchline/internal/pgdb"
	"github.com/patchline/patchline/internal/sqlitedb"
)

// catalogStore is what the subcommands need of a catalog backend: the store
// of records and ingest runs, the state of the upstream syncs, and what it
// knows of its sources, a dump of every row, and the building of the
// summary index that answers its lists.
type catalogStore interface {
	catalog.Store
	catalog.SyncStates
	cve.SourceCatalog
	Dump(ctx context.Context, to catalog.DumpTarget) error
	Warm(ctx context.Context) error
}

var (
	_ catalogStore = (*sqlite.DB)(nil)
	_ catalogStore = (*postgres.DB)(nil)
)

// openCatalogDSN opens the catalog store a DSN names: PostgreSQL for a
// postgres:// or postgresql:// URL, SQLite for a path or sqlite:PATH.
func openCatalogDSN(ctx context.Context, dsn string) (catalogStore, error) {
	if pgdb.IsDSN(dsn) {
		return postgres.Open(ctx, dsn)
	}
	path, ok := sqlitedb.PathOf(dsn)
	if !ok {
		return nil, fmt.Errorf("catalog DSN %q: want a file path, sqlite:PATH or postgres://…", dsn)
	}
	return sqlite.Open(ctx, path)
}

// openCatalog opens the catalog of serve and loads the bundled sample into
// it when it is empty.
func (m *Main) openCatalog(ctx context.Context) (catalogStore, error) {
	db, err := openCatalogDSN(ctx, m.Config.CatalogDB)
	if err != nil {
		return nil, err
	}
	m.onClose(db.Close)
	stats, err := db.Stats(ctx)
	if err != nil {
		return nil, err
	}
	dsn := redactDSN(m.Config.CatalogDB)
	if stats.Records > 0 || stats.Facts > 0 {
		m.Logger.Info("catalog opened", "records", stats.Records, "dsn", dsn)
		return db, nil
	}
	m.Logger.Info("catalog is empty: loading the bundled sample catalog", "dsn", dsn)
	start := time.Now()
	res, err := ingest.Run(ctx, db, ingest.SampleSources(), ingest.Options{})
	if err != nil {
		return nil, fmt.Errorf("load sample catalog: %w", err)
	}
	m.Logger.Info("sample catalog loaded", "records", res.Merged, "seconds", time.Since(start).Seconds())
	return db, nil
}
