package sqlstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/catalog/postgres/pgtest"
	"github.com/patchline/patchline/internal/control"
	"github.com/patchline/patchline/internal/control/controltest"
	"github.com/patchline/patchline/internal/device"
)

var t0 = controltest.T0

// mustOpenSQLite opens a store on a new SQLite database file.
func mustOpenSQLite(tb testing.TB) *Store {
	tb.Helper()
	return mustOpenPath(tb, filepath.Join(tb.TempDir(), "sub", "control.db"))
}

func mustOpenPath(tb testing.TB, path string) *Store {
	tb.Helper()
	s, err := OpenSQLite(context.Background(), path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	s.Now = func() time.Time { return t0 }
	return s
}

// mustOpenPostgres opens a store on a new PostgreSQL database of its own;
// it skips the test when PATCHLINE_TEST_POSTGRES is not set.
func mustOpenPostgres(tb testing.TB) *Store {
	tb.Helper()
	return mustOpenDSN(tb, pgtest.NewDatabase(tb))
}

// mustOpenDSN opens a store, with a pool of its own, on the PostgreSQL
// database of dsn: two of them on one database are two replicas.
func mustOpenDSN(tb testing.TB, dsn string) *Store {
	tb.Helper()
	s, err := OpenPostgres(context.Background(), dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	s.Now = func() time.Time { return t0 }
	return s
}

// engines are the engines the store runs on, each with what the suite of
// every control store needs of it.
var engines = []struct {
	name    string
	backend controltest.Backend
}{
	{"sqlite", controltest.Backend{
		Open: func(t *testing.T) control.Store { return mustOpenSQLite(t) },
		OpenAgain: func(t *testing.T, s control.Store) control.Store {
			return mustOpenPath(t, s.(*Store).source)
		},
		Exec:           exec,
		DropAuditGuard: dropAuditGuard(`DROP TRIGGER audit_log_no_update`),
	}},
	{"postgres", controltest.Backend{
		Open: func(t *testing.T) control.Store { return mustOpenPostgres(t) },
		OpenAgain: func(t *testing.T, s control.Store) control.Store {
			return mustOpenDSN(t, s.(*Store).source)
		},
		Exec:           exec,
		DropAuditGuard: dropAuditGuard(`DROP TRIGGER audit_log_no_update ON audit_log`),
	}},
}

func exec(t *testing.T, s control.Store, query string, args ...any) error {
	_, err := s.(*Store).wq().Exec(context.Background(), query, args...)
	return err
}

func dropAuditGuard(query string) func(t *testing.T, s control.Store) {
	return func(t *testing.T, s control.Store) {
		if err := exec(t, s, query); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStore runs the suite that every control store passes, on each
// engine.
func TestStore(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			if e.name == "postgres" {
				pgtest.URL(t)
			}
			controltest.Run(t, e.backend)
		})
	}
}

// TestOpenSQLiteConvertsItsMigrations opens a file whose migrations are
// recorded as the control store recorded them before it opened SQLite
// through sqlitedb: (version, name, applied_at in ms).
func TestOpenSQLiteConvertsItsMigrations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "control.db")
	s := mustOpenPath(t, path)
	if err := s.CreateRing(ctx, &device.Ring{Name: "pilot", Position: 1, CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.wdb.ExecContext(ctx, `CREATE TABLE earlier (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL);
		INSERT INTO earlier SELECT CAST(substr(name, 1, 3) AS INTEGER), name, applied * 1000 FROM schema_migrations;
		DROP TABLE schema_migrations;
		ALTER TABLE earlier RENAME TO schema_migrations`); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = mustOpenPath(t, path)
	if _, err := s.FindRingByName(ctx, "pilot"); err != nil {
		t.Errorf("the ring made before: %v", err)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE applied > 0`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if names, _ := sqliteMigrations.ReadDir("migrations/sqlite"); n != len(names) {
		t.Errorf("%d migrations recorded, want %d", n, len(names))
	}
}

func TestOpenSQLiteIsIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "control.db")
	for i := 0; i < 2; i++ {
		s, err := OpenSQLite(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := s.db.QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		names, _ := sqliteMigrations.ReadDir("migrations/sqlite")
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

// TestOpenPostgresReplicas opens stores on one new database at once, as
// replicas starting together do: each migration is applied once.
func TestOpenPostgresReplicas(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	errc := make(chan error, 4)
	for range 4 {
		go func() {
			s, err := OpenPostgres(context.Background(), dsn)
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
	s := mustOpenDSN(t, dsn)
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM ` + postgresMigrations.Table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	names, _ := postgresMigrationFiles.ReadDir("migrations/postgres")
	if n != len(names) {
		t.Errorf("%d migrations recorded, want %d", n, len(names))
	}
}

func TestRebind(t *testing.T) {
	tests := []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`SELECT a FROM t WHERE b = ? AND c IN (?, ?)`, `SELECT a FROM t WHERE b = $1 AND c IN ($2, $3)`},
		{`INSERT INTO t (a, b) VALUES (?, ?) ON CONFLICT DO NOTHING`, `INSERT INTO t (a, b) VALUES ($1, $2) ON CONFLICT DO NOTHING`},
	}
	for _, tt := range tests {
		for range 2 { // the second from the cache
			if got := rebindCached(tt.in); got != tt.want {
				t.Errorf("rebind(%q) = %q, want %q", tt.in, got, tt.want)
			}
		}
	}
}

// TestPgArg checks that PostgreSQL's arguments are made storable as text,
// and that an argument already storable is passed on as it came, without
// an allocation.
func TestPgArg(t *testing.T) {
	bad, fixed := "a\xffb\x00c", "a\uFFFDb\uFFFDc"
	if got := pgArg(bad); got != fixed {
		t.Errorf("pgArg(%q) = %q, want %q", bad, got, fixed)
	}
	if got := pgArg(&bad).(*string); *got != fixed || got == &bad {
		t.Errorf("pgArg(&%q) = %q at %p, want %q in a new string", bad, *got, got, fixed)
	}
	good := "host-1"
	if got := pgArg(&good).(*string); got != &good {
		t.Errorf("pgArg(&%q) = %p, want %p", good, got, &good)
	}
	if got := pgArg((*string)(nil)).(*string); got != nil {
		t.Errorf("pgArg(nil) = %p", got)
	}
	if got := pgArg(int64(7)); got != int64(7) {
		t.Errorf("pgArg(7) = %v", got)
	}
	v := any(good)
	if n := testing.AllocsPerRun(100, func() { v = pgArg(v) }); n != 0 {
		t.Errorf("pgArg of a storable string allocates %v times", n)
	}
}

// A check-in the closed store cannot take is an error, not an empty
// answer.
func TestCheckInOnClosedStore(t *testing.T) {
	ctx := context.Background()
	s, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "control.db"))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if cmds, err := s.CheckIn(ctx, "agt_aaaaaaaaaaaaaaaaaaaaaaaa", device.CheckIn{Time: time.Now(), Hostname: "h"}); err == nil {
		t.Errorf("CheckIn on a closed store = %v, nil; want an error", cmds)
	}
}
