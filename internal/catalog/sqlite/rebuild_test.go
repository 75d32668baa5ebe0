//go:build unix

package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/catalog/catalogtest"
	"github.com/patchline/patchline/internal/cve"
)

// rebuildStore is a DB whose every write transaction is a rebuild's, for
// the suite every store passes.
type rebuildStore struct{ *DB }

func (s rebuildStore) Begin(ctx context.Context) (catalog.Tx, error) { return s.BeginRebuild(ctx) }

// TestCatalogRebuild runs the store suite with rebuild transactions: those
// into an empty catalog build it apart and install it.
func TestCatalogRebuild(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) catalog.Store { return rebuildStore{mustOpenListDB(t)} })
}

func inode(tb testing.TB, path string) uint64 {
	tb.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// checkCatalog checks the integrity of db's file, that the indexes of its
// records exist and that its full-text index finds what it should.
func checkCatalog(t *testing.T, db *DB, wantRecords int) {
	t.Helper()
	ctx := context.Background()
	var ok string
	if err := db.SQL().QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Errorf("integrity_check = %q, %v", ok, err)
	}
	var names string
	if err := db.SQL().QueryRowContext(ctx, `SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_schema
		WHERE type = 'index' AND tbl_name = 'records' AND sql IS NOT NULL ORDER BY name)`).Scan(&names); err != nil || names != "records_list_key records_summary" {
		t.Errorf("indexes of records = %q, %v; want records_list_key records_summary", names, err)
	}
	stats, err := db.Stats(ctx)
	if err != nil || stats.Records != wantRecords {
		t.Errorf("stats = %+v, %v; want %d records", stats, err, wantRecords)
	}
	page, err := db.List(ctx, cve.ListQuery{Q: "log4j", Limit: 50})
	if err != nil || len(page.Rows) == 0 {
		t.Errorf("search log4j: %d items, %v", len(page.Rows), err)
	}
	if _, err := db.Record(ctx, "CVE-2021-44228"); err != nil {
		t.Error(err)
	}
}

func TestRebuildRenamesWhenAlone(t *testing.T) {
	db := mustOpenListDB(t)
	path := db.db.Path
	before := inode(t, path)
	res := catalogtest.IngestSample(t, rebuildStore{db})
	if after := inode(t, path); after == before {
		t.Error("the catalog file was not replaced")
	}
	if m, _ := filepath.Glob(path + rebuildSuffix + "*"); len(m) > 0 {
		t.Errorf("the rebuild files are left: %v", m)
	}
	checkCatalog(t, db, res.Merged)

	// The next run is an ordinary transaction on the live file.
	before = inode(t, path)
	res2 := catalogtest.IngestSample(t, rebuildStore{db})
	if inode(t, path) != before {
		t.Error("a run into a catalog that is not empty replaced the file")
	}
	if res2.Changed != 0 {
		t.Errorf("second run changed %d records, want none", res2.Changed)
	}
	checkCatalog(t, db, res.Merged)
}

func TestRebuildCopiesWhenOpenElsewhere(t *testing.T) {
	ctx := context.Background()
	db := mustOpenListDB(t)
	path := db.db.Path
	// Another reader of the catalog, as a running serve is.
	other, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if s, err := other.Stats(ctx); err != nil || s.Records != 0 {
		t.Fatalf("stats = %+v, %v", s, err)
	}
	// A search that reads the empty full-text index first.
	if page, err := other.List(ctx, cve.ListQuery{Q: "log4j", Limit: 50}); err != nil || len(page.Rows) != 0 {
		t.Fatalf("search before the run: %d rows, %v", len(page.Rows), err)
	}
	before := inode(t, path)
	res := catalogtest.IngestSample(t, rebuildStore{db})
	if inode(t, path) != before {
		t.Error("the catalog file was replaced while another connection had it open")
	}
	if m, _ := filepath.Glob(path + rebuildSuffix + "*"); len(m) > 0 {
		t.Errorf("the rebuild files are left: %v", m)
	}
	// The other reader sees the new catalog, whole.
	checkCatalog(t, other, res.Merged)
	checkCatalog(t, db, res.Merged)
}

func TestRebuildRollbackAndLeftovers(t *testing.T) {
	ctx := context.Background()
	db := mustOpenListDB(t)
	path := db.db.Path
	// What a killed rebuild leaves: the file of a process that is gone,
	// and the file of this one's last run.
	for _, name := range []string{buildPath(path), path + rebuildSuffix + "999999999"} {
		if err := os.WriteFile(name, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := db.BeginRebuild(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := cve.Key("CVE-2024-3094")
	if _, err := tx.PutFacts(ctx, key, &cve.Facts{CVEID: "CVE-2024-3094", Feed: "kev"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(path + rebuildSuffix + "*"); len(m) > 0 {
		t.Errorf("the rebuild files are left after a rollback: %v", m)
	}
	if s, err := db.Stats(ctx); err != nil || s.Facts != 0 {
		t.Errorf("stats after a rollback = %+v, %v", s, err)
	}
	matches, _ := filepath.Glob(path + "*")
	for _, m := range matches {
		if m != path && m != path+"-wal" && m != path+"-shm" {
			t.Errorf("left over: %s", m)
		}
	}
	res := catalogtest.IngestSample(t, rebuildStore{db})
	checkCatalog(t, db, res.Merged)
}
