package postgres

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/catalog/postgres/pgtest"
	"github.com/patchline/patchline/internal/control"
	"github.com/patchline/patchline/internal/control/controltest"
	"github.com/patchline/patchline/internal/control/sqlite"
)

func mustOpenSQLite(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "control.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.Now = func() time.Time { return controltest.T0 }
	return s
}

// TestCopyBetweenBackends copies a control store from SQLite to PostgreSQL
// and from PostgreSQL to SQLite: each copy reads as its source does.
func TestCopyBetweenBackends(t *testing.T) {
	pgtest.URL(t)
	ctx := context.Background()
	tests := []struct {
		name     string
		src, dst func(t *testing.T) control.Store
	}{
		{"sqlite to postgres", func(t *testing.T) control.Store { return mustOpenSQLite(t) }, func(t *testing.T) control.Store { return mustOpen(t) }},
		{"postgres to sqlite", func(t *testing.T) control.Store { return mustOpen(t) }, func(t *testing.T) control.Store { return mustOpenSQLite(t) }},
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
