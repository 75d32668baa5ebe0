package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/patchline/patchline/internal/catalog/postgres/pgtest"
	"github.com/patchline/patchline/internal/control"
	"github.com/patchline/patchline/internal/control/controltest"
)

// mustOpen opens the control store on a new database of its own.
func mustOpen(tb testing.TB) *Store {
	tb.Helper()
	return mustOpenDSN(tb, pgtest.NewDatabase(tb))
}

// mustOpenDSN opens a store, with a pool of its own, on the database of
// dsn: two of them on one database are two replicas.
func mustOpenDSN(tb testing.TB, dsn string) *Store {
	tb.Helper()
	s, err := Open(context.Background(), dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	s.Now = func() time.Time { return controltest.T0 }
	return s
}

// dsnOf returns the connection string of the pool of s.
func dsnOf(s *Store) string {
	return s.pool.Config().ConnString()
}

var backend = controltest.Backend{
	Open: func(t *testing.T) control.Store { return mustOpen(t) },
	OpenAgain: func(t *testing.T, s control.Store) control.Store {
		return mustOpenDSN(t, dsnOf(s.(*Store)))
	},
	Exec: func(t *testing.T, s control.Store, query string, args ...any) error {
		_, err := s.(*Store).pool.Exec(context.Background(), query, args...)
		return err
	},
	DropAuditGuard: func(t *testing.T, s control.Store) {
		if _, err := s.(*Store).pool.Exec(context.Background(), `DROP TRIGGER audit_log_no_update ON audit_log`); err != nil {
			t.Fatal(err)
		}
	},
}

// TestStore runs the suite that every control store passes.
func TestStore(t *testing.T) {
	pgtest.URL(t)
	controltest.Run(t, backend)
}

// TestOpenReplicas opens stores on one new database at once, as replicas
// starting together do: each migration is applied once.
func TestOpenReplicas(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	errc := make(chan error, 4)
	for range 4 {
		go func() {
			s, err := Open(context.Background(), dsn)
			if err == nil {
				s.Close()
			}
			errc <- err
		}()
	}
	for range 4 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM `+migrationsTable).Scan(&n); err != nil {
		t.Fatal(err)
	}
	names, _ := migrationFiles.ReadDir("migrations")
	if n != len(names) {
		t.Errorf("%d migrations recorded, want %d", n, len(names))
	}
}
