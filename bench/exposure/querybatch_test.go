package exposure_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/benchtest"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/exposure"
	"github.com/patchline/patchline/internal/lookupapi"

	catalogsqlite "github.com/patchline/patchline/internal/catalog/sqlite"
)

// osvEcosystems are the ecosystems whose packages the batches ask about,
// by the part of the name before any ':', as bench/load asks.
var osvEcosystems = map[string]bool{"PyPI": true, "npm": true, "Go": true, "Maven": true, "crates.io": true,
	"RubyGems": true, "NuGet": true, "Packagist": true, "AlmaLinux": true, "Debian": true, "Alpine": true, "Ubuntu": true}

var (
	catalogOnce  sync.Once
	catalogIndex *exposure.Index
	catalogDB    *catalogsqlite.DB
	catalogErr   error
)

// catalogOf opens the catalog at PATCHLINE_BENCH_CATALOG and builds its
// index once for the benchmarks of this process.
func catalogOf(b *testing.B) (*catalogsqlite.DB, *exposure.Index) {
	path := benchtest.CatalogPath(b, "whose index is asked")
	catalogOnce.Do(func() {
		ctx := context.Background()
		if catalogDB, catalogErr = catalogsqlite.Open(ctx, path); catalogErr != nil {
			return
		}
		catalogIndex = exposure.NewIndex()
		_, catalogErr = catalogIndex.Refresh(ctx, catalogDB)
	})
	if catalogErr != nil {
		b.Fatal(catalogErr)
	}
	return catalogDB, catalogIndex
}

// BenchmarkCatalogQueryBatch sends POST /osv/v1/querybatch of 1,000
// packages to the lookup API's handler over the catalog at
// PATCHLINE_BENCH_CATALOG (the 300,000 CVEs of make bench), as bench/load's
// querybatch mix asks them: packages of the fixes of 2,000 records drawn
// at random, each as likely as any other, each at one of its fixed
// versions. It reports the CPU time of a batch, the latencies of one batch
// at a time, and the heap kept once the batches are done (the index with
// the catalog's caches).
//
//	PATCHLINE_BENCH_CATALOG=/tmp/patchline-bench/data/catalog.db \
//	  go test ./bench/exposure -run '^$' -bench CatalogQueryBatch -benchtime 50x
func BenchmarkCatalogQueryBatch(b *testing.B) {
	cat, idx := catalogOf(b)
	ctx := context.Background()
	srv, err := lookupapi.New(lookupapi.Config{Catalog: cat, Packages: idx})
	if err != nil {
		b.Fatal(err)
	}
	bodies := queryBatches(ctx, b, cat, 20)
	var lat []time.Duration
	cpu0 := benchtest.CPUTime(b)
	b.ResetTimer()
	i := 0
	for b.Loop() {
		req := httptest.NewRequest("POST", lookupapi.OSVBasePath+"/v1/querybatch", bytes.NewReader(bodies[i%len(bodies)]))
		w := httptest.NewRecorder()
		start := time.Now()
		srv.ServeHTTP(w, req)
		lat = append(lat, time.Since(start))
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
		i++
	}
	cpu := benchtest.CPUTime(b) - cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(len(lat)), "cpu-ms/op")
	benchtest.ReportLatencies(b, lat)
	b.ReportMetric(float64(liveHeap())/(1<<20), "heap-MiB")
	if out := os.Getenv("PATCHLINE_BENCH_HEAPPROFILE"); out != "" {
		writeHeapProfile(b, out)
	}
	runtime.KeepAlive(idx)
}

// queryBatches returns n querybatch bodies of 1,000 packages of the
// catalog's fixes.
func queryBatches(ctx context.Context, b *testing.B, cat cve.Catalog, n int) [][]byte {
	rng := rand.New(rand.NewPCG(1, 7))
	var ids []string
	if err := cat.Walk(ctx, "", func(s cve.Summary) error {
		if s.HasRemediation {
			ids = append(ids, s.CVEID)
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	versions := map[[2]string][]string{}
	var names [][2]string
	for range 2000 {
		r, err := cat.Record(ctx, ids[rng.IntN(len(ids))])
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range r.Remediation.Products {
			base, _, _ := strings.Cut(p.Ecosystem, ":")
			for _, a := range p.Atoms {
				if osvEcosystems[base] && !a.Unparsed && a.FixedVersion != "" {
					k := [2]string{p.Ecosystem, p.Product}
					if _, ok := versions[k]; !ok {
						names = append(names, k)
					}
					versions[k] = append(versions[k], a.FixedVersion)
				}
			}
		}
	}
	if len(names) == 0 {
		b.Fatal("no package of an OSV ecosystem in 2,000 records of the catalog")
	}
	out := make([][]byte, n)
	for i := range out {
		var body struct {
			Queries []map[string]any `json:"queries"`
		}
		for range lookupapi.MaxOSVBatch {
			k := names[rng.IntN(len(names))]
			vs := versions[k]
			body.Queries = append(body.Queries, map[string]any{"package": map[string]string{"ecosystem": k[0], "name": k[1]},
				"version": vs[rng.IntN(len(vs))]})
		}
		out[i], _ = json.Marshal(body)
	}
	return out
}
