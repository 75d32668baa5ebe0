package postgres

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/catalog/sqlite"
	"github.com/patchline/patchline/internal/sqlschema"
)

// schemaExceptions are the differences between the engines that mean the
// same, each with its reason, removed before the comparison.
var schemaExceptions = []struct {
	what     string
	lite, pg func(s sqlschema.Schema)
}{
	{"full-text search: FTS5's contentless table records_fts on SQLite, the tsvector column records.search and its index on PostgreSQL",
		func(s sqlschema.Schema) {
			for _, t := range []string{"records_fts", "records_fts_config", "records_fts_data", "records_fts_docsize", "records_fts_idx"} {
				delete(s, t)
			}
		},
		func(s sqlschema.Schema) {
			delete(s["records"].Columns, "search")
			delete(s["records"].Indexes, "records_search")
		}},
	{"records_summary covers the columns that SQLite's summary index of the catalog reads in memory",
		func(s sqlschema.Schema) { delete(s["records"].Indexes, "records_summary") },
		func(sqlschema.Schema) {}},
	{"catalog_version tells the replicas sharing a PostgreSQL catalog that its records, facts, lifecycles or runs changed; SQLite's PRAGMA data_version says it of a file",
		func(sqlschema.Schema) {},
		func(s sqlschema.Schema) { delete(s, "catalog_version") }},
}

// TestSchemasMeanTheSame checks that the migrations of the two engines
// create the same tables, columns, keys and indexes.
func TestSchemasMeanTheSame(t *testing.T) {
	ctx := context.Background()
	pgdb := mustOpen(t)
	litedb, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer litedb.Close()
	lite, err := sqlschema.SQLite(ctx, litedb.SQL(), "schema_migrations")
	if err != nil {
		t.Fatal(err)
	}
	pg, err := sqlschema.Postgres(ctx, pgdb.SQLReads.DB, migrations.Table)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range schemaExceptions {
		e.lite(lite)
		e.pg(pg)
	}
	if diff := cmp.Diff(lite, pg); diff != "" {
		t.Errorf("schemas differ (-sqlite +postgres):\n%s", diff)
	}
}
