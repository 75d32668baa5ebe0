package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

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

// TestCatalog runs the suite that every catalog store passes, in each way
// of reading lists and walks (catalogtest.RunIndexed).
func TestCatalog(t *testing.T) { catalogtest.RunIndexed(t, openStore) }

// TestCatalogIndexScan runs the suite with every list of the summary index
// read by a scan of its rows (catalogtest.RunIndexScan).
func TestCatalogIndexScan(t *testing.T) { catalogtest.RunIndexScan(t, openStore) }

// TestListSearchDense runs the search tests with every search walking a
// sort index, as a search that matches many records does.
func TestListSearchDense(t *testing.T) {
	catalogtest.WithSummaryIndex(t, catalog.IndexOff)
	defer func(n int) { sparseSearch = n }(sparseSearch)
	sparseSearch = 0
	catalogtest.ListSearch(t, openStore)
}

func ptr[T any](v T) *T { return &v }

// TestListPlans checks that every step of every page in every sort order is
// an index seek that needs no sort, so that a page deep in the list costs
// what the first one does.
func TestListPlans(t *testing.T) {
	db := mustOpenListDB(t)
	for _, s := range []string{cve.SortPublished, cve.SortEPSS, cve.SortCVSS, cve.SortCVE, cve.SortFix, cve.SortKEV} {
		for _, desc := range []bool{true, false} {
			q := cve.ListQuery{Sort: s, Desc: desc, Limit: 50, After: &cve.Position{Value: 1, Key: 2}, KEV: ptr(true), Years: []int{2024}}
			p, err := catalog.NewListPlan(q, &dialect)
			if err != nil {
				t.Fatal(err)
			}
			for _, step := range []catalog.ListStep{catalog.StepAll, catalog.StepTies, catalog.StepBeyond} {
				if step == catalog.StepTies && s == cve.SortCVE {
					continue
				}
				query, args := p.SQL(step, 51)
				plan := explain(t, db, query, args)
				wantSeek := "SEARCH records USING INDEX " + listIndex(p.Col) + " ("
				if step == catalog.StepAll {
					wantSeek = "USING INDEX " + listIndex(p.Col)
				}
				if step == catalog.StepTies {
					wantSeek += p.Col + "=? AND key"
				}
				if strings.Contains(plan, "TEMP B-TREE") || !strings.Contains(plan, wantSeek) {
					t.Errorf("sort %s desc=%v step %d: want %q in plan\n%s", s, desc, step, wantSeek, plan)
				}
			}
		}
	}
}

func explain(tb testing.TB, db *DB, query string, args []any) string {
	tb.Helper()
	rows, err := db.SQL().Query("EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			tb.Fatal(err)
		}
		fmt.Fprintln(&b, detail)
	}
	return b.String()
}

// BenchmarkList pages through lists of 50,000 records, read from the
// database and from the summary index.
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
	for _, mode := range []struct {
		name string
		mode int
	}{{"database", catalog.IndexOff}, {"index", catalog.IndexInline}} {
		for _, tt := range queries {
			b.Run(mode.name+"/"+tt.name, func(b *testing.B) {
				defer func(old int) { catalog.SummaryIndexMode = old }(catalog.SummaryIndexMode)
				catalog.SummaryIndexMode = mode.mode
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
		if err := db.WarmSummaries(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
