package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
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

// withIndex runs the test with the summary index kept in mode.
func withIndex(t *testing.T, mode int) {
	old := summaryIndexMode
	summaryIndexMode = mode
	t.Cleanup(func() { summaryIndexMode = old })
}

// TestCatalog runs the suite that every catalog store passes, with every
// list and walk read from the database.
func TestCatalog(t *testing.T) {
	withIndex(t, indexOff)
	catalogtest.Run(t, openStore)
}

// TestCatalogIndexed runs the suite with every list and walk read from the
// summary index, brought up to date before each.
func TestCatalogIndexed(t *testing.T) {
	withIndex(t, indexInline)
	catalogtest.Run(t, openStore)
}

// TestCatalogIndexedScan runs the suite with every list of the summary
// index read by a scan of its rows rather than a walk of its orders.
func TestCatalogIndexedScan(t *testing.T) {
	withIndex(t, indexInline)
	defer func(b bool) { enumerateAlways = b }(enumerateAlways)
	enumerateAlways = true
	catalogtest.Run(t, openStore)
}

// TestListSearchDense runs the search tests with every search walking a
// sort index, as a search that matches many records does.
func TestListSearchDense(t *testing.T) {
	withIndex(t, indexOff)
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
	}{{"database", indexOff}, {"index", indexInline}} {
		for _, tt := range queries {
			b.Run(mode.name+"/"+tt.name, func(b *testing.B) {
				defer func(old int) { summaryIndexMode = old }(summaryIndexMode)
				summaryIndexMode = mode.mode
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

// TestListIndexMatchesDatabase asks random queries of every filter, sort,
// direction and page size of the summary index and of the database, page
// after page, and wants the same pages: the walks, their budgets and the
// drivers of the index against the SQL of the database.
func TestListIndexMatchesDatabase(t *testing.T) {
	db := mustOpenListDB(t)
	rows := catalogtest.GenRows(rand.New(rand.NewPCG(5, 6)), 3000)
	catalogtest.PutRows(t, db, rows)
	rng := rand.New(rand.NewPCG(7, 8))
	sorts := []string{cve.SortPublished, cve.SortEPSS, cve.SortCVSS, cve.SortCVE, cve.SortFix, cve.SortKEV}
	sevs := []string{cve.SeverityCritical, cve.SeverityHigh, cve.SeverityMedium, cve.SeverityLow, cve.SeverityNone}
	words := []string{"overflow", "kernel", "log4j", "denial service", "jndi"}
	pageAll := func(mode int, q cve.ListQuery) []string {
		old := summaryIndexMode
		summaryIndexMode = mode
		defer func() { summaryIndexMode = old }()
		return catalogtest.PageAll(t, db, q, nil)
	}
	for i := range 100 {
		q := cve.ListQuery{Sort: sorts[rng.IntN(len(sorts))], Desc: rng.IntN(2) == 0, Limit: 20 + rng.IntN(60)}
		if rng.IntN(3) == 0 {
			for range 1 + rng.IntN(2) {
				q.Severities = append(q.Severities, sevs[rng.IntN(len(sevs))])
			}
		}
		if rng.IntN(3) == 0 {
			q.KEV = ptr(rng.IntN(2) == 0)
		}
		if rng.IntN(3) == 0 {
			q.Fix = ptr(rng.IntN(2) == 0)
		}
		if rng.IntN(3) == 0 {
			q.EPSSMin = ptr(float64(rng.IntN(50)) / 49)
		}
		if rng.IntN(3) == 0 {
			for range 1 + rng.IntN(3) {
				q.Years = append(q.Years, 1998+rng.IntN(30))
			}
		}
		if rng.IntN(4) == 0 {
			q.Q = words[rng.IntN(len(words))]
		}
		want := pageAll(indexOff, q)
		got := pageAll(indexInline, q)
		if !slices.Equal(want, got) {
			t.Fatalf("query %d %+v: the index lists %d records, the database %d:\nindex    %v\ndatabase %v", i, q, len(got), len(want), got, want)
		}
	}
}
