package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/control"
	"github.com/patchline/patchline/internal/control/controltest"
)

var t0 = controltest.T0

// mustOpenStore opens a store on a new database file.
func mustOpenStore(tb testing.TB) *Store {
	tb.Helper()
	return mustOpenPath(tb, filepath.Join(tb.TempDir(), "sub", "control.db"))
}

func mustOpenPath(tb testing.TB, path string) *Store {
	tb.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	s.Now = func() time.Time { return t0 }
	return s
}

// backend is the SQLite store for the suite of every control store.
var backend = controltest.Backend{
	Open: func(t *testing.T) control.Store { return mustOpenStore(t) },
	OpenAgain: func(t *testing.T, s control.Store) control.Store {
		return mustOpenPath(t, dbPath(t, s.(*Store)))
	},
	Exec: func(t *testing.T, s control.Store, query string, args ...any) error {
		_, err := s.(*Store).wdb.Exec(query, args...)
		return err
	},
	DropAuditGuard: func(t *testing.T, s control.Store) {
		if _, err := s.(*Store).wdb.Exec(`DROP TRIGGER audit_log_no_update`); err != nil {
			t.Fatal(err)
		}
	},
}

// TestStore runs the suite that every control store passes.
func TestStore(t *testing.T) {
	controltest.Run(t, backend)
}

func TestOpenIsIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "control.db")
	for i := 0; i < 2; i++ {
		s, err := Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := s.db.QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		names, _ := migrations.ReadDir("migrations")
		if n != len(names) {
			t.Errorf("open %d: %d migrations recorded, want %d", i, n, len(names))
		}
		s.Close()
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("database file mode = %v, want 0600", fi.Mode().Perm())
	}
}

// dbPath returns the file of the database of s.
func dbPath(t *testing.T, s *Store) string {
	t.Helper()
	var seq int
	var name, file string
	if err := s.db.QueryRow(`PRAGMA database_list`).Scan(&seq, &name, &file); err != nil {
		t.Fatal(err)
	}
	return file
}
