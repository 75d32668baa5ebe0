package catalog_test

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/catalog/catalogtest"
	"github.com/patchline/patchline/internal/catalog/sqlite"
	"github.com/patchline/patchline/internal/cve"
)

// TestSummariesWatch checks that once an index is built, a change of the
// catalog is built before a list asks: the list that comes after the build
// starts none.
func TestSummariesWatch(t *testing.T) {
	old := *catalog.WatchEvery
	*catalog.WatchEvery = 10 * time.Millisecond
	t.Cleanup(func() { *catalog.WatchEvery = old })
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rows := catalogtest.GenRows(rand.New(rand.NewPCG(1, 2)), 100)
	catalogtest.PutRows(t, db, rows[:50])
	var builds atomic.Int32
	s := catalog.NewSummaries(catalog.SummarySource{
		Version: db.Version,
		Begin: func(ctx context.Context) (*sql.Tx, error) {
			builds.Add(1)
			return db.SQL().BeginTx(ctx, nil)
		},
		Rows:   `SELECT key, severity, cvss, cvss_version, epss, is_kev, has_fix, published, modified FROM records ORDER BY key`,
		Listed: `SELECT key FROM records WHERE rejected = 0 ORDER BY key`,
	})
	t.Cleanup(s.Close)
	count := func() int {
		return len(catalogtest.PageAll(t, s, cve.ListQuery{Sort: cve.SortCVE, Limit: 1000}, nil))
	}
	before := count()
	catalogtest.PutRows(t, db, rows[50:])
	deadline := time.Now().Add(5 * time.Second)
	for builds.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := builds.Load(); n != 2 {
		t.Fatalf("%d builds after a change and no list, want 2", n)
	}
	want, err := db.List(ctx, cve.ListQuery{Sort: cve.SortCVE, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if got := count(); got != len(want.Rows) || got <= before {
		t.Errorf("listed %d after the change (%d before), the catalog %d", got, before, len(want.Rows))
	}
	if n := builds.Load(); n != 2 {
		t.Errorf("the list after the watched build started another: %d builds", n)
	}
}
