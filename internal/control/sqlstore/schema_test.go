package sqlstore

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// schemaInfo is what a schema means for the store, read back from the
// database: per table, its columns, keys and indexes, in words that do not
// depend on the engine.
type schemaInfo map[string]*tableInfo

type tableInfo struct {
	// Columns maps a column to its kind: "int", "text", "bytes" or
	// "float", "not null" added when it is.
	Columns map[string]string
	// PrimaryKey is the columns of the primary key, in order.
	PrimaryKey string
	// Unique are the column lists of the UNIQUE constraints, sorted.
	Unique []string
	// ForeignKeys are "column -> table(column)", sorted.
	ForeignKeys []string
	// Indexes maps each named index to its columns (expressions as
	// "expr"), "unique" and "partial" added when it is.
	Indexes map[string]string
}

// schemaExceptions are the differences between the engines that mean the
// same, each with its reason, removed from the PostgreSQL side before the
// comparison.
var schemaExceptions = []struct {
	what  string
	apply func(s schemaInfo)
}{
	{"commands.seq is SQLite's rowid: the order commands were queued in", func(s schemaInfo) {
		delete(s["commands"].Columns, "seq")
		s["commands"].Unique = without(s["commands"].Unique, "seq")
	}},
	{"commands_agent ends with seq on PostgreSQL, with the rowid implicitly on SQLite", func(s schemaInfo) {
		s["commands"].Indexes["commands_agent"] = strings.TrimSuffix(s["commands"].Indexes["commands_agent"], ", seq")
	}},
	{"admins.email is UNIQUE COLLATE NOCASE on SQLite, the unique index admins_email on lower(email) on PostgreSQL", func(s schemaInfo) {
		delete(s["admins"].Indexes, "admins_email")
		s["admins"].Unique = append(s["admins"].Unique, "email")
	}},
}

func without(list []string, v string) []string {
	var out []string
	for _, x := range list {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

// TestSchemasMeanTheSame checks that the migrations of the two engines
// create the same tables, columns, keys and indexes.
func TestSchemasMeanTheSame(t *testing.T) {
	ctx := context.Background()
	lite := sqliteSchema(ctx, t, mustOpenSQLite(t))
	pg := postgresSchema(ctx, t, mustOpenPostgres(t))
	for _, e := range schemaExceptions {
		e.apply(pg)
	}
	if diff := cmp.Diff(lite, pg); diff != "" {
		t.Errorf("schemas differ (-sqlite +postgres):\n%s", diff)
	}
}

func sqliteSchema(ctx context.Context, t *testing.T, s *Store) schemaInfo {
	t.Helper()
	q := s.rq()
	tables := queryStrings(ctx, t, q, `SELECT name FROM sqlite_master
		WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'schema_migrations' ORDER BY name`)
	kinds := map[string]string{"INTEGER": "int", "TEXT": "text", "BLOB": "bytes", "REAL": "float"}
	out := schemaInfo{}
	for _, table := range tables {
		ti := &tableInfo{Columns: map[string]string{}, Indexes: map[string]string{}}
		out[table] = ti
		pk := map[int]string{}
		forRows(ctx, t, q, `SELECT name, type, "notnull", pk FROM pragma_table_info(?)`, []any{table}, func(scan func(...any)) {
			var name, typ string
			var notNull bool
			var pkPos int
			scan(&name, &typ, &notNull, &pkPos)
			if pkPos > 0 {
				pk[pkPos] = name
				notNull = true // SQLite lets a PRIMARY KEY column other than an INTEGER one be NULL; the store never does
			}
			ti.Columns[name] = column(kinds[typ], notNull)
		})
		ti.PrimaryKey = joinInOrder(pk)
		type index struct {
			name, origin  string
			unique, parts bool
		}
		var indexes []index
		forRows(ctx, t, q, `SELECT name, "unique", origin, partial FROM pragma_index_list(?)`, []any{table}, func(scan func(...any)) {
			var ix index
			scan(&ix.name, &ix.unique, &ix.origin, &ix.parts)
			indexes = append(indexes, ix)
		})
		for _, ix := range indexes {
			cols := strings.Join(queryStrings(ctx, t, q, `SELECT coalesce(name, 'expr') FROM pragma_index_info(?) ORDER BY seqno`, ix.name), ", ")
			switch ix.origin {
			case "pk":
			case "u":
				ti.Unique = append(ti.Unique, cols)
			default:
				ti.Indexes[ix.name] = index1(cols, ix.unique, ix.parts)
			}
		}
		forRows(ctx, t, q, `SELECT "from", "table", "to" FROM pragma_foreign_key_list(?)`, []any{table}, func(scan func(...any)) {
			var from, other, to string
			scan(&from, &other, &to)
			ti.ForeignKeys = append(ti.ForeignKeys, from+" -> "+other+"("+to+")")
		})
		sort.Strings(ti.Unique)
		sort.Strings(ti.ForeignKeys)
	}
	return out
}

func postgresSchema(ctx context.Context, t *testing.T, s *Store) schemaInfo {
	t.Helper()
	q := s.rq()
	kinds := map[string]string{"bigint": "int", "integer": "int", "boolean": "int", "text": "text", "bytea": "bytes", "double precision": "float"}
	out := schemaInfo{}
	forRows(ctx, t, q, `SELECT table_name, column_name, data_type, is_nullable = 'NO' FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name <> ?`, []any{postgresMigrationsTable}, func(scan func(...any)) {
		var table, name, typ string
		var notNull bool
		scan(&table, &name, &typ, &notNull)
		if out[table] == nil {
			out[table] = &tableInfo{Columns: map[string]string{}, Indexes: map[string]string{}}
		}
		kind, ok := kinds[typ]
		if !ok {
			kind = typ
		}
		out[table].Columns[name] = column(kind, notNull)
	})
	// Constraints: the primary key, UNIQUE and FOREIGN KEY.
	forRows(ctx, t, q, `SELECT c.conrelid::regclass::text, c.contype::text, c.conname,
			array_to_string(array(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(n, i)
				JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.i), ', '),
			coalesce(c.confrelid::regclass::text, ''),
			array_to_string(array(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY k(n, i)
				JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.i), ', ')
		FROM pg_constraint c JOIN pg_namespace ns ON ns.oid = c.connamespace
		WHERE ns.nspname = current_schema() AND c.contype IN ('p', 'u', 'f')`, nil, func(scan func(...any)) {
		var table, typ, name, cols, other, otherCols string
		scan(&table, &typ, &name, &cols, &other, &otherCols)
		ti := out[table]
		if ti == nil { // the table of migrations
			return
		}
		switch typ {
		case "p":
			ti.PrimaryKey = cols
		case "u":
			ti.Unique = append(ti.Unique, cols)
		case "f":
			ti.ForeignKeys = append(ti.ForeignKeys, cols+" -> "+other+"("+otherCols+")")
		}
	})
	// Indexes that back no constraint.
	forRows(ctx, t, q, `SELECT t.relname, i.relname, ix.indisunique, ix.indpred IS NOT NULL,
			array_to_string(array(SELECT coalesce(a.attname, 'expr') FROM unnest(ix.indkey::int2[]) WITH ORDINALITY k(n, o)
				LEFT JOIN pg_attribute a ON a.attrelid = ix.indrelid AND a.attnum = k.n ORDER BY k.o), ', ')
		FROM pg_index ix
		JOIN pg_class i ON i.oid = ix.indexrelid
		JOIN pg_class t ON t.oid = ix.indrelid
		JOIN pg_namespace ns ON ns.oid = t.relnamespace
		WHERE ns.nspname = current_schema()
			AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = ix.indexrelid)`, nil, func(scan func(...any)) {
		var table, name, cols string
		var unique, partial bool
		scan(&table, &name, &unique, &partial, &cols)
		if ti := out[table]; ti != nil {
			ti.Indexes[name] = index1(cols, unique, partial)
		}
	})
	for _, ti := range out {
		sort.Strings(ti.Unique)
		sort.Strings(ti.ForeignKeys)
	}
	return out
}

func column(kind string, notNull bool) string {
	if notNull {
		return kind + " not null"
	}
	return kind
}

func index1(cols string, unique, partial bool) string {
	if unique {
		cols += " unique"
	}
	if partial {
		cols += " partial"
	}
	return cols
}

func joinInOrder(m map[int]string) string {
	var out []string
	for i := 1; i <= len(m); i++ {
		out = append(out, m[i])
	}
	return strings.Join(out, ", ")
}

// forRows runs query and calls fn for each row with a function that scans
// it, ending the test on an error.
func forRows(ctx context.Context, t *testing.T, q querier, query string, args []any, fn func(scan func(...any))) {
	t.Helper()
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	for rows.Next() {
		fn(func(dst ...any) {
			if err := rows.Scan(dst...); err != nil {
				t.Fatalf("%s: %v", query, err)
			}
		})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(fmt.Errorf("%s: %w", query, err))
	}
}

func queryStrings(ctx context.Context, t *testing.T, q querier, query string, args ...any) []string {
	t.Helper()
	var out []string
	forRows(ctx, t, q, query, args, func(scan func(...any)) {
		var s string
		scan(&s)
		out = append(out, s)
	})
	return out
}
