package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/patchline/patchline/internal/control"
)

var _ control.Copier = (*Store)(nil)

// DumpTables implements control.Copier, in one read transaction.
func (s *Store) DumpTables(ctx context.Context, fn func(t *control.Table, row []any) error) error {
	return s.read(ctx, func(tx *sql.Tx) error {
		for _, t := range control.Tables {
			if err := dumpTable(ctx, tx, t, fn); err != nil {
				return fmt.Errorf("dump %s: %w", t.Name, err)
			}
		}
		return nil
	})
}

func dumpTable(ctx context.Context, tx *sql.Tx, t *control.Table, fn func(*control.Table, []any) error) error {
	order := t.Order
	if t.Name == "commands" {
		order = "rowid" // the order they were queued in
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+t.ColumnNames()+` FROM `+t.Name+` ORDER BY `+order)
	if err != nil {
		return err
	}
	defer rows.Close()
	dst := make([]any, len(t.Columns))
	for i, c := range t.Columns {
		switch c.Kind {
		case control.Text:
			dst[i] = new(sql.NullString)
		case control.Int:
			dst[i] = new(sql.NullInt64)
		case control.Float:
			dst[i] = new(sql.NullFloat64)
		case control.Bool:
			dst[i] = new(sql.NullBool)
		case control.Bytes:
			dst[i] = new([]byte)
		}
	}
	for rows.Next() {
		if err := rows.Scan(dst...); err != nil {
			return err
		}
		row := make([]any, len(dst))
		for i, d := range dst {
			switch v := d.(type) {
			case *sql.NullString:
				if v.Valid {
					row[i] = v.String
				}
			case *sql.NullInt64:
				if v.Valid {
					row[i] = v.Int64
				}
			case *sql.NullFloat64:
				if v.Valid {
					row[i] = v.Float64
				}
			case *sql.NullBool:
				if v.Valid {
					row[i] = v.Bool
				}
			case *[]byte:
				if *v != nil {
					row[i] = append([]byte{}, *v...)
				}
			}
		}
		if err := fn(t, row); err != nil {
			return err
		}
	}
	return rows.Err()
}

// LoadTables implements control.Copier, in one write transaction.
func (s *Store) LoadTables(ctx context.Context, fill func(put func(t *control.Table, row []any) error) error) error {
	return s.write(ctx, func(tx *sql.Tx) error {
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
				st, err = tx.PrepareContext(ctx, `INSERT INTO `+t.Name+` (`+t.ColumnNames()+`) VALUES (`+placeholders(len(t.Columns))+`)`)
				if err != nil {
					return err
				}
				stmts[t.Name] = st
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
	dst := make([]any, len(names))
	counts := make([]int64, len(names))
	for i := range counts {
		dst[i] = &counts[i]
	}
	if err := s.db.QueryRowContext(ctx, `SELECT `+strings.Join(parts, ", ")).Scan(dst...); err != nil {
		return nil, fmt.Errorf("count rows: %w", err)
	}
	out := make(map[string]int64, len(names))
	for i, n := range names {
		out[n] = counts[i]
	}
	return out, nil
}
