package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"

	"github.com/patchline/patchline/internal/control"
)

// DumpTables implements control.Copier, in one read-only snapshot.
func (s *Store) DumpTables(ctx context.Context, fn func(t *control.Table, row []any) error) error {
	return s.read(ctx, func(tx querier) error {
		for _, t := range control.Tables {
			if err := s.dumpTable(ctx, tx, t, fn); err != nil {
				return fmt.Errorf("dump %s: %w", t.Name, err)
			}
		}
		return nil
	})
}

func (s *Store) dumpTable(ctx context.Context, tx querier, t *control.Table, fn func(*control.Table, []any) error) error {
	order := t.Order
	if t.Name == "commands" {
		order = s.d.queueOrder // the order they were queued in
	}
	// Each column scans into the sql.Null of its kind, whose Value is the
	// column's value, nil for NULL; bytes are scanned into a copy.
	dst := make([]any, len(t.Columns))
	for i, c := range t.Columns {
		switch c.Kind {
		case control.Text:
			dst[i] = new(sql.Null[string])
		case control.Int:
			dst[i] = new(sql.Null[int64])
		case control.Float:
			dst[i] = new(sql.Null[float64])
		case control.Bool:
			dst[i] = new(sql.Null[bool])
		case control.Bytes:
			dst[i] = new(sql.Null[[]byte])
		}
	}
	return eachRow(ctx, tx, func(r scanner) error {
		if err := r.Scan(dst...); err != nil {
			return err
		}
		row := make([]any, len(dst))
		for i, d := range dst {
			row[i], _ = d.(driver.Valuer).Value()
		}
		return fn(t, row)
	}, `SELECT `+t.ColumnNames()+` FROM `+t.Name+` ORDER BY `+order)
}

// LoadTables implements control.Copier, in one transaction.
func (s *Store) LoadTables(ctx context.Context, fill func(put func(t *control.Table, row []any) error) error) error {
	return s.writeOnce(ctx, func(q querier) error {
		tx := q.(*runner).tx
		stmts := map[string]*sql.Stmt{}
		defer func() {
			for _, st := range stmts {
				st.Close()
			}
		}()
		return fill(func(t *control.Table, row []any) error {
			if len(row) != len(t.Columns) {
				return control.ErrRowShape
			}
			st := stmts[t.Name]
			if st == nil {
				var err error
				st, err = tx.PrepareContext(ctx, s.d.rebind(insertOne(t.Name, t.ColumnNames(), len(t.Columns), "")))
				if err != nil {
					return err
				}
				stmts[t.Name] = st
			}
			if s.d.arg != nil {
				for i := range row {
					row[i] = s.d.arg(row[i])
				}
			}
			_, err := st.ExecContext(ctx, row...)
			return err
		})
	})
}

// CountRows implements control.Copier.
func (s *Store) CountRows(ctx context.Context) (map[string]int64, error) {
	names := append([]string{}, control.DerivedTables...)
	for _, t := range control.Tables {
		names = append(names, t.Name)
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = `(SELECT count(*) FROM ` + n + `)`
	}
	counts := make([]int64, len(names))
	dst := make([]any, len(names))
	for i := range counts {
		dst[i] = &counts[i]
	}
	if err := s.rq().QueryRow(ctx, `SELECT `+strings.Join(parts, ", ")).Scan(dst...); err != nil {
		return nil, fmt.Errorf("count rows: %w", err)
	}
	out := make(map[string]int64, len(names))
	for i, n := range names {
		out[n] = counts[i]
	}
	return out, nil
}
