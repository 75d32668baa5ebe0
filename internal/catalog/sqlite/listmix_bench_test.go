package sqlite

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/patchline/patchline/internal/benchtest"
	"github.com/patchline/patchline/internal/cve"
)

// benchCatalog opens the catalog of PATCHLINE_BENCH_CATALOG (a catalog.db
// made by bench/gen and patchline ingest, such as bench/run.sh's), with
// its summary index built, or skips the benchmark. It only reads it.
func benchCatalog(b *testing.B) *DB {
	b.Helper()
	path := benchtest.CatalogPath(b, "whose lists are walked")
	db, err := Open(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	if err := db.Warm(context.Background()); err != nil {
		b.Fatal(err)
	}
	return db
}

// listMix returns the list queries of bench/load's list mix: n queries
// of limit 50 over every filter and sort, drawn as it draws them.
func listMix(rng *rand.Rand, n int) []cve.ListQuery {
	sorts := []string{"", "published", "epss", "cvss", "fix", "kev", "cve"}
	severities := [][]string{{"CRITICAL"}, {"HIGH"}, {"MEDIUM"}, {"LOW"}, {"CRITICAL", "HIGH"}}
	words := []string{"remote", "overflow", "linux", "apache", "injection", "windows", "denial", "log4j", "kernel", "memory"}
	var out []cve.ListQuery
	for range n {
		q := cve.ListQuery{Limit: 50, Sort: sorts[rng.IntN(len(sorts))], Desc: true}
		if rng.IntN(2) == 0 {
			q.Desc = false
		}
		if rng.IntN(3) == 0 {
			q.Severities = severities[rng.IntN(len(severities))]
		}
		if rng.IntN(4) == 0 {
			q.KEV = ptr(rng.IntN(2) == 0)
		}
		if rng.IntN(4) == 0 {
			q.Fix = ptr(rng.IntN(2) == 0)
		}
		if rng.IntN(4) == 0 {
			e, _ := strconv.ParseFloat([]string{"0.1", "0.5", "0.9"}[rng.IntN(3)], 64)
			q.EPSSMin = &e
		}
		if rng.IntN(4) == 0 {
			q.Years = []int{2005 + rng.IntN(21)}
		}
		if rng.IntN(6) == 0 {
			q.Q = words[rng.IntN(len(words))]
		}
		out = append(out, q)
	}
	return out
}

// BenchmarkListMix asks the queries of bench/load's list mix of the
// catalog of PATCHLINE_BENCH_CATALOG, each then two pages further by its
// cursor, from the summary index (searches once read, as a server that
// has answered them keeps them). An op is one page; it reports the CPU
// time of a page.
func BenchmarkListMix(b *testing.B) {
	db := benchCatalog(b)
	ctx := context.Background()
	var pages []cve.ListQuery
	for _, q := range listMix(rand.New(rand.NewPCG(1, 7)), 150) {
		for range 3 {
			page, err := db.List(ctx, q)
			if err != nil {
				b.Fatal(err)
			}
			pages = append(pages, q)
			if page.Next == nil {
				break
			}
			q.After = page.Next
		}
	}
	cpu0 := benchtest.CPUTime(b)
	n := 0
	for b.Loop() {
		if _, err := db.List(ctx, pages[n%len(pages)]); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(benchtest.CPUTime(b)-cpu0)/1e3/float64(n), "cpu-µs/op")
}

// BenchmarkWalkCatalog walks every record of the catalog of
// PATCHLINE_BENCH_CATALOG, as bulk.jsonl does; it reports the CPU time of
// a record.
func BenchmarkWalkCatalog(b *testing.B) {
	db := benchCatalog(b)
	ctx := context.Background()
	cpu0 := benchtest.CPUTime(b)
	n := 0
	for b.Loop() {
		err := db.Walk(ctx, "", func(cve.Summary) error {
			n++
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(benchtest.CPUTime(b)-cpu0)/float64(n), "cpu-ns/record")
}
