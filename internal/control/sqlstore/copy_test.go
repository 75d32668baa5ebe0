package sqlstore

import (
	"context"
	"testing"

	"github.com/patchline/patchline/internal/catalog/postgres/pgtest"
	"github.com/patchline/patchline/internal/control"
	"github.com/patchline/patchline/internal/control/controltest"
)

// TestCopyBetweenBackends copies a control store from SQLite to PostgreSQL
// and from PostgreSQL to SQLite: each copy reads as its source does.
func TestCopyBetweenBackends(t *testing.T) {
	pgtest.URL(t)
	ctx := context.Background()
	tests := []struct {
		name     string
		src, dst func(t *testing.T) control.Store
	}{
		{"sqlite to postgres", func(t *testing.T) control.Store { return mustOpenSQLite(t) }, func(t *testing.T) control.Store { return mustOpenPostgres(t) }},
		{"postgres to sqlite", func(t *testing.T) control.Store { return mustOpenPostgres(t) }, func(t *testing.T) control.Store { return mustOpenSQLite(t) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.src(t)
			f := controltest.Fill(t, src)
			dst := tt.dst(t)
			if _, err := control.Copy(ctx, src, dst); err != nil {
				t.Fatal(err)
			}
			controltest.Compare(t, src, dst, f)
		})
	}
}
