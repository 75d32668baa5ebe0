package exposure_test

import (
	"context"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/benchtest"
	catalogsqlite "github.com/patchline/patchline/internal/catalog/sqlite"
	"github.com/patchline/patchline/internal/exposure"
)

// BenchmarkIndexRefresh builds the exposure index of the catalog at
// PATCHLINE_BENCH_CATALOG (a catalog.db, such as the one make bench
// ingests: 300,000 CVEs) and reports the heap it keeps, the memory serve
// holds for it once the control store has agents or a package query asked
// for it (with the catalog's own caches, which the same process holds:
// the bodies read last and the summary index). With
// PATCHLINE_BENCH_HEAPPROFILE set, the profile of the heap with the index
// built is written there.
//
//	PATCHLINE_BENCH_CATALOG=/tmp/patchline-bench/data/catalog.db \
//	  go test ./bench/exposure -run '^$' -bench IndexRefresh -benchtime 1x
func BenchmarkIndexRefresh(b *testing.B) {
	path := benchtest.CatalogPath(b, "whose index is measured")
	ctx := context.Background()
	cat, err := catalogsqlite.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer cat.Close()
	for range b.N {
		base := liveHeap()
		start := time.Now()
		x := exposure.NewIndex()
		// The risks go on as the Service stores them, a batch at a time:
		// what stays is the index.
		risks := 0
		up, err := x.RefreshTo(ctx, cat, func(batch []exposure.Risk, _ bool) error {
			risks += len(batch)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		// The keys of the products changed go to the agents' evaluation,
		// which drops them: they are not the index's.
		up.Keys = nil
		heap := liveHeap() - base
		b.ReportMetric(float64(x.Len()), "cves")
		b.ReportMetric(float64(up.Records), "records-read")
		b.ReportMetric(float64(risks), "risks")
		b.ReportMetric(float64(heap)/(1<<20), "index-MiB")
		b.ReportMetric(took.Seconds(), "build-s")
		if out := os.Getenv("PATCHLINE_BENCH_HEAPPROFILE"); out != "" {
			writeHeapProfile(b, out)
		}
		runtime.KeepAlive(x)
	}
}

// writeHeapProfile writes the profile of the live heap to path.
func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

// liveHeap returns the bytes of the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
