package sqlite

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/catalog/catalogtest"
	"github.com/patchline/patchline/internal/cve"
)

// mustOpenListDB opens a fresh catalog in a temporary directory.
func mustOpenListDB(tb testing.TB) *DB {
	tb.Helper()
	db, err := Open(context.Background(), filepath.Join(tb.TempDir(), "catalog.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

func openStore(t *testing.T) catalog.Store { return mustOpenListDB(t) }

// TestCatalog runs the suite that every catalog store passes.
func TestCatalog(t *testing.T) { catalogtest.Run(t, openStore) }

// TestCatalogIndexScan runs the suite with every list of the summary index
// read by a scan of its rows (catalogtest.RunIndexScan).
func TestCatalogIndexScan(t *testing.T) { catalogtest.RunIndexScan(t, openStore) }

func ptr[T any](v T) *T { return &v }

// TestSummariesBuildOncePerVersion lists from many goroutines at once
// before the first build and after a commit: each version of the catalog
// is read once, every list waits for it, and every list after the commit
// sees the commit. A write that changes no record (the sync lease, an
// ingest run) builds no new index.
func TestSummariesBuildOncePerVersion(t *testing.T) {
	db := mustOpenListDB(t)
	rows := catalogtest.GenRows(rand.New(rand.NewPCG(1, 2)), 300)
	catalogtest.PutRows(t, db, rows[:200])
	var builds atomic.Int32
	s := catalog.NewSummaries(catalog.SummarySource{
		Version: db.generation, Search: ftsQuery, SearchKeys: db.searchKeys,
		Begin: func(ctx context.Context) (*sql.Tx, error) {
			builds.Add(1)
			return db.db.Read.BeginTx(ctx, nil)
		},
		Rows:   `SELECT key, severity, cvss, cvss_version, epss, is_kev, has_fix, published, modified FROM records ORDER BY key`,
		Listed: `SELECT key FROM records WHERE rejected = 0 ORDER BY key`,
	})
	t.Cleanup(s.Close)
	listAll := func() {
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				q := cve.ListQuery{Sort: cve.SortCVE, Limit: 1000}
				got, err := s.List(context.Background(), q)
				if err != nil {
					t.Error(err)
					return
				}
				if want, err := db.List(context.Background(), q); err != nil || len(got.Rows) != len(want.Rows) {
					t.Errorf("a list of %d records, the catalog's %d (%v)", len(got.Rows), len(want.Rows), err)
				}
			})
		}
		wg.Wait()
	}
	listAll()
	if n := builds.Load(); n != 1 {
		t.Errorf("%d builds for one version, want 1", n)
	}
	ctx := context.Background()
	if _, _, err := db.AcquireSyncLease(ctx, "replica-a", time.Now(), time.Minute); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.LogRun(ctx, catalog.Run{Started: 1, Finished: 2}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	listAll()
	if n := builds.Load(); n != 1 {
		t.Errorf("%d builds after writes that change no record, want 1", n)
	}
	catalogtest.PutRows(t, db, rows[200:])
	listAll()
	if n := builds.Load(); n != 2 {
		t.Errorf("%d builds for two versions, want 2", n)
	}
	// Closed, the index answers what it holds and builds no other.
	s.Close()
	changed := rows[0]
	changed.Modified++
	catalogtest.PutRows(t, db, []catalog.Row{changed})
	if _, err := s.List(ctx, cve.ListQuery{}); err == nil {
		t.Error("a list after Close and a change: no error")
	}
}

// BenchmarkList pages through lists of 50,000 records.
func BenchmarkList(b *testing.B) {
	db := mustOpenListDB(b)
	catalogtest.PutRows(b, db, catalogtest.GenRows(rand.New(rand.NewPCG(7, 8)), 50000))
	queries := []struct {
		name string
		q    cve.ListQuery
	}{
		{"published", cve.ListQuery{Sort: cve.SortPublished, Desc: true}},
		{"epss", cve.ListQuery{Sort: cve.SortEPSS, Desc: true}},
		{"cve", cve.ListQuery{Sort: cve.SortCVE, Desc: true}},
		{"search+kev", cve.ListQuery{Q: "denial", KEV: ptr(true), Sort: cve.SortCVSS, Desc: true}},
		{"rare filters", cve.ListQuery{Years: []int{2003}, Severities: []string{cve.SeverityCritical}, Fix: ptr(true), Sort: cve.SortEPSS}},
	}
	for _, tt := range queries {
		b.Run(tt.name, func(b *testing.B) {
			q := tt.q
			q.Limit = 50
			for b.Loop() {
				page, err := db.List(context.Background(), q)
				if err != nil {
					b.Fatal(err)
				}
				q.After = page.Next
			}
		})
	}
}

// BenchmarkSummaryIndexBuild builds the summary index of 30,000 records,
// as serve does after each change of the catalog.
func BenchmarkSummaryIndexBuild(b *testing.B) {
	db := mustOpenListDB(b)
	ctx := context.Background()
	catalogtest.PutRows(b, db, catalogtest.GenRows(rand.New(rand.NewPCG(1, 2)), 30000))
	for b.Loop() {
		if _, err := db.db.Write.ExecContext(ctx, `UPDATE catalog_generation SET n = random()`); err != nil {
			b.Fatal(err)
		}
		db.db.Changed()
		if err := db.Warm(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
