package sqlstore

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/sqlschema"
)

// schemaExceptions are the differences between the engines that mean the
// same, each with its reason, removed from the PostgreSQL side before the
// comparison.
var schemaExceptions = []struct {
	what  string
	apply func(s sqlschema.Schema)
}{
	{"commands.seq is SQLite's rowid: the order commands were queued in", func(s sqlschema.Schema) {
		delete(s["commands"].Columns, "seq")
		s["commands"].Unique = sqlschema.Without(s["commands"].Unique, "seq")
	}},
	{"commands_agent ends with seq on PostgreSQL, with the rowid implicitly on SQLite", func(s sqlschema.Schema) {
		s["commands"].Indexes["commands_agent"] = strings.TrimSuffix(s["commands"].Indexes["commands_agent"], ", seq")
	}},
	{"admins.email is UNIQUE COLLATE NOCASE on SQLite, the unique index admins_email on lower(email) on PostgreSQL", func(s sqlschema.Schema) {
		delete(s["admins"].Indexes, "admins_email")
		s["admins"].Unique = append(s["admins"].Unique, "email")
	}},
}

// TestSchemasMeanTheSame checks that the migrations of the two engines
// create the same tables, columns, keys and indexes.
func TestSchemasMeanTheSame(t *testing.T) {
	ctx := context.Background()
	lite, err := sqlschema.SQLite(ctx, mustOpenSQLite(t).db, "schema_migrations")
	if err != nil {
		t.Fatal(err)
	}
	pg, err := sqlschema.Postgres(ctx, mustOpenPostgres(t).db, postgresMigrations.Table)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range schemaExceptions {
		e.apply(pg)
	}
	if diff := cmp.Diff(lite, pg); diff != "" {
		t.Errorf("schemas differ (-sqlite +postgres):\n%s", diff)
	}
}
