package sqlitedb

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"
	"testing/fstest"
	"time"
)

func TestOpenAppliesMigrationsOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "t.db")
	migs := fstest.MapFS{
		"001_a.sql": {Data: []byte(`CREATE TABLE a (x INTEGER);`)},
		"002_b.sql": {Data: []byte(`CREATE TABLE b (y INTEGER); INSERT INTO a VALUES (1);`)},
	}
	for i := 0; i < 2; i++ {
		db, err := Open(ctx, path, migs)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.Read.QueryRowContext(ctx, `SELECT count(*) FROM a`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("open %d: rows in a = %d, want 1 (migration applied once)", i, n)
		}
		var mode string
		if err := db.Write.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
			t.Fatalf("journal_mode = %q, %v", mode, err)
		}
		db.Close()
	}
}

func TestFailedMigrationLeavesNothing(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	migs := fstest.MapFS{"001_bad.sql": {Data: []byte(`CREATE TABLE a (x INTEGER); THIS IS NOT SQL;`)}}
	if _, err := Open(ctx, path, migs); err == nil {
		t.Fatal("Open with a broken migration succeeded")
	}
	db, err := Open(ctx, path, fstest.MapFS{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	db.Read.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name = 'a'`).Scan(&n)
	if n != 0 {
		t.Fatal("table of the failed migration exists")
	}
}

func TestOpenConvertsMillisecondMigrations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	// The table as control stores kept it: 001 applied at 1,700,000,000.5 s.
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL);
		INSERT INTO schema_migrations VALUES (1, '001_a.sql', 1700000000500);
		CREATE TABLE a (x INTEGER)`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	migs := fstest.MapFS{
		"001_a.sql": {Data: []byte(`CREATE TABLE a (x INTEGER);`)}, // fails if applied again
		"002_b.sql": {Data: []byte(`INSERT INTO a VALUES (2);`)},
	}
	for i := 0; i < 2; i++ {
		db, err := Open(ctx, path, migs)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		got := map[string]int64{}
		rows, err := db.Read.QueryContext(ctx, `SELECT name, applied FROM schema_migrations`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var name string
			var applied int64
			if err := rows.Scan(&name, &applied); err != nil {
				t.Fatal(err)
			}
			got[name] = applied
		}
		rows.Close()
		if len(got) != 2 || got["001_a.sql"] != 1700000000 || got["002_b.sql"] == 0 {
			t.Errorf("open %d: schema_migrations = %v, want 001_a.sql at 1700000000 and 002_b.sql", i, got)
		}
		var n int
		db.Read.QueryRowContext(ctx, `SELECT count(*) FROM a`).Scan(&n)
		if n != 1 {
			t.Errorf("open %d: rows in a = %d, want 1", i, n)
		}
		db.Close()
	}
}

func TestOpenRefusesPathsAURICannotHold(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"", filepath.Join(dir, "a?b.db"), filepath.Join(dir, "a#b.db")} {
		if db, err := Open(context.Background(), p, fstest.MapFS{}); err == nil {
			db.Close()
			t.Errorf("Open(%q) succeeded", p)
		}
	}
}

func TestPathOf(t *testing.T) {
	for in, want := range map[string]string{"sqlite:/x/c.db": "/x/c.db", "c.db": "c.db", "sqlite:rel/c.db": "rel/c.db"} {
		if got, ok := PathOf(in); !ok || got != want {
			t.Errorf("PathOf(%q) = %q, %v", in, got, ok)
		}
	}
	if _, ok := PathOf("postgres://u@h/db"); ok {
		t.Error("PathOf accepted a postgres DSN")
	}
}

// strictVersions makes DataVersion ask for every caller during the test.
func strictVersions(t *testing.T) {
	old := versionWindow
	versionWindow = 0
	t.Cleanup(func() { versionWindow = old })
}

func TestDataVersionChangesWithEveryCommit(t *testing.T) {
	strictVersions(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	migs := fstest.MapFS{"001_a.sql": {Data: []byte(`CREATE TABLE a (x INTEGER);`)}}
	db, err := Open(ctx, path, migs)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	other, err := Open(ctx, path, migs) // another process's handle, as far as SQLite can tell
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	version := func() int64 {
		t.Helper()
		v, err := db.DataVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v0 := version()
	if v := version(); v != v0 {
		t.Fatalf("data version moved from %d to %d with no commit", v0, v)
	}
	for i, w := range []*DB{db, other} {
		before := version()
		if _, err := w.Write.ExecContext(ctx, `INSERT INTO a VALUES (?)`, i); err != nil {
			t.Fatal(err)
		}
		if after := version(); after == before {
			t.Errorf("writer %d: data version stayed %d after a commit", i, after)
		}
		// A read is no change.
		var n int
		if err := w.Read.QueryRowContext(ctx, `SELECT count(*) FROM a`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		v := version()
		if v2 := version(); v2 != v {
			t.Errorf("writer %d: data version moved from %d to %d after a read", i, v, v2)
		}
	}
	build, err := OpenBuild(ctx, filepath.Join(t.TempDir(), "b.db"), migs, 1024)
	if err != nil {
		t.Fatal(err)
	}
	defer build.Close()
	if _, err := build.DataVersion(ctx); err == nil {
		t.Error("DataVersion of a database being built: no error")
	}
}

// TestDataVersionShared asks for the data version from many goroutines at
// once around commits: every caller that arrives after a commit sees it,
// however the answers are shared.
func TestDataVersionShared(t *testing.T) {
	strictVersions(t)
	ctx := context.Background()
	migs := fstest.MapFS{"001_a.sql": {Data: []byte(`CREATE TABLE a (x INTEGER);`)}}
	db, err := Open(ctx, filepath.Join(t.TempDir(), "t.db"), migs)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 50 {
		before, err := db.DataVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Callers that may share the question asked before the commit.
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { db.DataVersion(ctx) })
		}
		if _, err := db.Write.ExecContext(ctx, `INSERT INTO a VALUES (?)`, i); err != nil {
			t.Fatal(err)
		}
		for range 8 {
			wg.Go(func() {
				if v, err := db.DataVersion(ctx); err != nil || v == before {
					t.Errorf("round %d: data version %d, %v after a commit; it was %d before", i, v, err, before)
				}
			})
		}
		wg.Wait()
	}
}

// TestDataVersionWindow: a commit of another process may go unseen for
// versionWindow; one of this process, told with Changed, is seen at once.
func TestDataVersionWindow(t *testing.T) {
	ctx := context.Background()
	migs := fstest.MapFS{"001_a.sql": {Data: []byte(`CREATE TABLE a (x INTEGER);`)}}
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := Open(ctx, path, migs)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	other, err := Open(ctx, path, migs)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	old := versionWindow
	versionWindow = time.Hour
	defer func() { versionWindow = old }()
	v0, _ := db.DataVersion(ctx)
	if _, err := other.Write.ExecContext(ctx, `INSERT INTO a VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	if v, _ := db.DataVersion(ctx); v != v0 {
		t.Errorf("data version asked again within the window: %d, then %d", v0, v)
	}
	if _, err := db.Write.ExecContext(ctx, `INSERT INTO a VALUES (2)`); err != nil {
		t.Fatal(err)
	}
	db.Changed()
	if v, _ := db.DataVersion(ctx); v == v0 {
		t.Errorf("data version after Changed is still %d", v)
	}
}

func BenchmarkDataVersion(b *testing.B) {
	ctx := context.Background()
	migs := fstest.MapFS{"001_a.sql": {Data: []byte(`CREATE TABLE a (x INTEGER);`)}}
	db, err := Open(ctx, filepath.Join(b.TempDir(), "t.db"), migs)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := db.DataVersion(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
