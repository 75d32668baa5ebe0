// Package lookup_test holds benchmarks of the lookup API's handler over a
// real catalog: the whole handler chain of serve (without the rate limit,
// as make bench serves it) on the catalog.db of PATCHLINE_BENCH_CATALOG,
// the requests of bench/load's mixes, in CPU time.
//
//	PATCHLINE_BENCH_CATALOG=/tmp/patchline-bench/data/catalog.db \
//	  go test ./bench/lookup -run '^$' -bench . -count 6 -cpuprofile cpu.out
package lookup_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/patchline/patchline/bench/mix"
	"github.com/patchline/patchline/internal/benchtest"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/lookupapi"

	catalogsqlite "github.com/patchline/patchline/internal/catalog/sqlite"
)

var (
	serverOnce sync.Once
	server     *lookupapi.Server
	records    int
	serverErr  error
)

// serverOf returns the lookup API over the catalog at
// PATCHLINE_BENCH_CATALOG, with its summary index built, and the number
// of its records, once for the benchmarks of this process.
func serverOf(b *testing.B) (*lookupapi.Server, int) {
	b.Helper()
	path := benchtest.CatalogPath(b, "the lookup API serves")
	serverOnce.Do(func() {
		ctx := context.Background()
		var db *catalogsqlite.DB
		if db, serverErr = catalogsqlite.Open(ctx, path); serverErr != nil {
			return
		}
		if err := db.Warm(ctx); err != nil {
			serverErr = err
			return
		}
		serverErr = db.Walk(ctx, "", func(cve.Summary) error {
			records++
			return nil
		})
		if serverErr == nil {
			server, serverErr = lookupapi.New(lookupapi.Config{Catalog: db})
		}
	})
	if serverErr != nil {
		b.Fatal(serverErr)
	}
	return server, records
}

// get serves a GET of path and returns the body, failing on any status
// but 200.
func get(b *testing.B, srv http.Handler, path string, w *discard) {
	b.Helper()
	w.reset()
	srv.ServeHTTP(w, httptest.NewRequest("GET", lookupapi.BasePath+path, nil))
	if w.status != http.StatusOK {
		b.Fatalf("GET %s: status %d", path, w.status)
	}
}

// BenchmarkCatalogLists asks the pages of bench/load's list mix (its
// queries, each then two pages further by its cursor) in turn; an op is
// one page, and it reports the CPU time of a page.
func BenchmarkCatalogLists(b *testing.B) {
	srv, n := serverOf(b)
	w := &discard{keep: true}
	var paths []string
	for _, q := range mix.LoadListQueries(1, n) {
		path := "/cve?" + q
		for page := 0; page < 3 && path != ""; page++ {
			get(b, srv, path, w)
			paths = append(paths, path)
			var p struct {
				Next *string `json:"nextCursor"`
			}
			if err := json.Unmarshal(w.body, &p); err != nil {
				b.Fatal(err)
			}
			path = ""
			if p.Next != nil {
				path = "/cve?" + q + "&cursor=" + url.QueryEscape(*p.Next)
			}
		}
	}
	w.keep = false
	cpu0 := benchtest.CPUTime(b)
	i := 0
	for b.Loop() {
		get(b, srv, paths[i%len(paths)], w)
		i++
	}
	b.ReportMetric(float64(benchtest.CPUTime(b)-cpu0)/1e3/float64(i), "cpu-µs/op")
}

// BenchmarkCatalogBulk streams bulk.jsonl of the whole catalog,
// uncompressed; it reports the CPU time of a stream.
func BenchmarkCatalogBulk(b *testing.B) {
	srv, _ := serverOf(b)
	w := &discard{}
	get(b, srv, "/cve/bulk.jsonl", w)
	b.SetBytes(w.n)
	cpu0 := benchtest.CPUTime(b)
	i := 0
	for b.Loop() {
		get(b, srv, "/cve/bulk.jsonl", w)
		i++
	}
	b.ReportMetric(float64(benchtest.CPUTime(b)-cpu0)/1e6/float64(i), "cpu-ms/op")
}

// discard is a ResponseWriter that counts the bytes, and keeps them when
// keep is set.
type discard struct {
	h      http.Header
	status int
	n      int64
	keep   bool
	body   []byte
}

func (w *discard) reset() {
	if w.h == nil {
		w.h = http.Header{}
	}
	clear(w.h)
	w.status, w.n, w.body = 0, 0, w.body[:0]
}

func (w *discard) Header() http.Header { return w.h }

func (w *discard) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *discard) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.n += int64(len(p))
	if w.keep {
		w.body = append(w.body, p...)
	}
	return len(p), nil
}
