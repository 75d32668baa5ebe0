package sqlstore

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/catalog/postgres/pgtest"
	"github.com/patchline/patchline/internal/control/controltest"
	"github.com/patchline/patchline/internal/errs"
)

// TestCopy copies a control store within each engine and between them:
// each copy reads as its source does through the store's methods, holds
// the same rows in every column of every table, and a second copy into it
// is refused.
func TestCopy(t *testing.T) {
	ctx := context.Background()
	type opener func(testing.TB) *Store
	engines := map[string]opener{"sqlite": mustOpenSQLite}
	if os.Getenv(pgtest.EnvVar) != "" {
		engines["postgres"] = mustOpenPostgres
	} else {
		t.Logf("copies to and from PostgreSQL skipped: set %s", pgtest.EnvVar)
	}
	for from, openSrc := range engines {
		for to, openDst := range engines {
			t.Run(from+" to "+to, func(t *testing.T) {
				src := openSrc(t)
				f := controltest.Fill(t, src)
				dst := openDst(t)
				copied, err := Copy(ctx, src, dst)
				if err != nil {
					t.Fatal(err)
				}
				if len(copied) != len(copyTables) || copied[0] != (Copied{"rings", 2}) {
					t.Errorf("copied %v", copied)
				}
				for _, tb := range copyTables {
					if diff := cmp.Diff(tableRows(t, src, tb.name), tableRows(t, dst, tb.name)); diff != "" {
						t.Errorf("%s (-source +copy):\n%s", tb.name, diff)
					}
				}
				// Compare checks in and appends to the copy's audit log.
				controltest.Compare(t, src, dst, f)
				if _, err := Copy(ctx, src, dst); !errors.Is(err, errs.ErrConflict) {
					t.Errorf("a copy into a store that is not empty: %v", err)
				}
			})
		}
	}
}

// tableRows returns every row of table, by the columns both engines have,
// with booleans as integers and bytes as text, as SQLite reads them.
func tableRows(t *testing.T, s *Store, table string) []map[string]any {
	t.Helper()
	ctx := context.Background()
	order := table + "." + s.d.queueOrder
	for _, tb := range copyTables {
		if tb.name == table && tb.order != "" {
			order = tb.order
		}
	}
	rows, err := s.rq().Query(ctx, `SELECT * FROM `+table+` ORDER BY `+order)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := map[string]any{}
		for i, c := range cols {
			if c == s.d.queueOrder {
				continue
			}
			switch v := vals[i].(type) {
			case bool:
				row[c] = map[bool]int64{false: 0, true: 1}[v]
			case []byte:
				row[c] = string(v)
			default:
				row[c] = v
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
