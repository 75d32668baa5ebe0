package sqlitedb

import (
	"context"
	"path/filepath"
	"testing"
	"testing/fstest"
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
