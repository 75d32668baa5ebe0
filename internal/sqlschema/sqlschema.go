// Package sqlschema reads back the schema of a SQLite or PostgreSQL
// database in words that do not depend on the engine: per table, its
// columns and their kinds, its keys and its indexes. The stores keep one
// numbered history of migrations per engine; their tests compare what the
// two histories create with it.
package sqlschema

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Schema is what a database's tables mean, by table name.
type Schema map[string]*Table

// Table is one table of a Schema.
type Table struct {
	// Columns maps a column to its kind: "int" (booleans too), "text",
	// "bytes" or "float", else the engine's name of the type, "not null"
	// added when it is.
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

func newTable() *Table {
	return &Table{Columns: map[string]string{}, Indexes: map[string]string{}}
}

// Without returns list without the entries equal to v.
func Without(list []string, v string) []string {
	var out []string
	for _, x := range list {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

// SQLite reads the schema of a SQLite database, leaving out its own tables
// and those named in skip.
func SQLite(ctx context.Context, db *sql.DB, skip ...string) (Schema, error) {
	r := reader{ctx: ctx, db: db}
	tables := r.strings(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	kinds := map[string]string{"INTEGER": "int", "TEXT": "text", "BLOB": "bytes", "REAL": "float"}
	out := Schema{}
	for _, table := range tables {
		if slices.Contains(skip, table) {
			continue
		}
		ti := newTable()
		out[table] = ti
		pk := map[int]string{}
		r.rows(`SELECT name, type, "notnull", pk FROM pragma_table_info($1)`, []any{table}, func(scan func(...any)) {
			var name, typ string
			var notNull bool
			var pkPos int
			scan(&name, &typ, &notNull, &pkPos)
			if pkPos > 0 {
				pk[pkPos] = name
				notNull = true // SQLite lets a PRIMARY KEY column other than an INTEGER one be NULL; the stores never do
			}
			kind, ok := kinds[typ]
			if !ok {
				kind = typ
			}
			ti.Columns[name] = column(kind, notNull)
		})
		var out []string
		for i := 1; i <= len(pk); i++ {
			out = append(out, pk[i])
		}
		ti.PrimaryKey = strings.Join(out, ", ")
		type index struct {
			name, origin  string
			unique, parts bool
		}
		var indexes []index
		r.rows(`SELECT name, "unique", origin, partial FROM pragma_index_list($1)`, []any{table}, func(scan func(...any)) {
			var ix index
			scan(&ix.name, &ix.unique, &ix.origin, &ix.parts)
			indexes = append(indexes, ix)
		})
		for _, ix := range indexes {
			cols := strings.Join(r.strings(`SELECT coalesce(name, 'expr') FROM pragma_index_info($1) ORDER BY seqno`, ix.name), ", ")
			switch ix.origin {
			case "pk":
			case "u":
				ti.Unique = append(ti.Unique, cols)
			default:
				ti.Indexes[ix.name] = index1(cols, ix.unique, ix.parts)
			}
		}
		r.rows(`SELECT "from", "table", "to" FROM pragma_foreign_key_list($1)`, []any{table}, func(scan func(...any)) {
			var from, other, to string
			scan(&from, &other, &to)
			ti.ForeignKeys = append(ti.ForeignKeys, from+" -> "+other+"("+to+")")
		})
	}
	return out.sorted(), r.err
}

// Postgres reads the schema of the current schema of a PostgreSQL
// database, leaving out the tables named in skip.
func Postgres(ctx context.Context, db *sql.DB, skip ...string) (Schema, error) {
	r := reader{ctx: ctx, db: db}
	kinds := map[string]string{"bigint": "int", "integer": "int", "boolean": "int", "text": "text", "bytea": "bytes", "double precision": "float"}
	out := Schema{}
	r.rows(`SELECT table_name, column_name, data_type, is_nullable = 'NO' FROM information_schema.columns
		WHERE table_schema = current_schema()`, nil, func(scan func(...any)) {
		var table, name, typ string
		var notNull bool
		scan(&table, &name, &typ, &notNull)
		if slices.Contains(skip, table) {
			return
		}
		if out[table] == nil {
			out[table] = newTable()
		}
		kind, ok := kinds[typ]
		if !ok {
			kind = typ
		}
		out[table].Columns[name] = column(kind, notNull)
	})
	// Constraints: the primary key, UNIQUE and FOREIGN KEY.
	r.rows(`SELECT c.conrelid::regclass::text, c.contype::text, c.conname,
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
		if ti == nil { // a table skipped
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
	r.rows(`SELECT t.relname, i.relname, ix.indisunique, ix.indpred IS NOT NULL,
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
	return out.sorted(), r.err
}

func (s Schema) sorted() Schema {
	for _, ti := range s {
		sort.Strings(ti.Unique)
		sort.Strings(ti.ForeignKeys)
	}
	return s
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

// reader runs queries, keeping the first error; after one, it runs none.
type reader struct {
	ctx context.Context
	db  *sql.DB
	err error
}

// rows runs query and calls fn for each row with a function that scans
// it.
func (r *reader) rows(query string, args []any, fn func(scan func(...any))) {
	if r.err != nil {
		return
	}
	rows, err := r.db.QueryContext(r.ctx, query, args...)
	if err != nil {
		r.err = fmt.Errorf("read schema: %w", err)
		return
	}
	defer rows.Close()
	for rows.Next() && r.err == nil {
		fn(func(dst ...any) {
			if err := rows.Scan(dst...); err != nil && r.err == nil {
				r.err = fmt.Errorf("read schema: %w", err)
			}
		})
	}
	if err := rows.Err(); err != nil && r.err == nil {
		r.err = fmt.Errorf("read schema: %w", err)
	}
}

// strings returns the values of a query of one text column.
func (r *reader) strings(query string, args ...any) []string {
	var out []string
	r.rows(query, args, func(scan func(...any)) {
		var s string
		scan(&s)
		out = append(out, s)
	})
	return out
}
