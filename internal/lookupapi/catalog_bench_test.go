package lookupapi

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/patchline/patchline/internal/benchtest"
	"github.com/patchline/patchline/internal/catalog/sqlite"
)

// BenchmarkCatalogRecords drives the lookup API's handler over the catalog
// at PATCHLINE_BENCH_CATALOG (a catalog.db with its body store, such as
// the 300,000 CVEs of make bench), with the requests of bench/load's
// mixes: "hot" is GET /cve/{id} over 2,000 ids drawn from the catalog,
// "all" over every id, "batch" POST /cve/batch of 100 ids drawn from
// the catalog. Each reports the CPU time of a request, which depends less
// on what else the machine runs than its wall time does.
//
//	PATCHLINE_BENCH_CATALOG=/tmp/patchline-bench/data/catalog.db \
//	  go test ./internal/lookupapi -run '^$' -bench CatalogRecords -benchmem
func BenchmarkCatalogRecords(b *testing.B) {
	path := benchtest.CatalogPath(b, "whose records are read")
	ctx := context.Background()
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	srv, err := New(Config{Catalog: db, PublicURL: "http://127.0.0.1:8080/api/v1"})
	if err != nil {
		b.Fatal(err)
	}
	// The ids from SQL: a walk of the catalog would build the summary
	// index in the background, while the benchmark runs.
	ids, err := catalogIDs(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 7))
	hot := make([]string, 2000)
	for i := range hot {
		hot[i] = ids[rng.IntN(len(ids))]
	}
	batches := make([][]byte, 100)
	for i := range batches {
		var req struct {
			IDs []string `json:"ids"`
		}
		for range MaxBatch {
			req.IDs = append(req.IDs, ids[rng.IntN(len(ids))])
		}
		if batches[i], err = json.Marshal(req); err != nil {
			b.Fatal(err)
		}
	}
	get := func(ids []string) func(rng *rand.Rand) *http.Request {
		return func(rng *rand.Rand) *http.Request {
			return httptest.NewRequest("GET", "/api/v1/cve/"+ids[rng.IntN(len(ids))], nil)
		}
	}
	for _, bb := range []struct {
		name string
		req  func(rng *rand.Rand) *http.Request
	}{
		{"hot", get(hot)},
		{"all", get(ids)},
		{"batch", func(rng *rand.Rand) *http.Request {
			return httptest.NewRequest("POST", "/api/v1/cve/batch", bytes.NewReader(batches[rng.IntN(len(batches))]))
		}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := benchtest.CPUTime(b)
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
				w := &discardWriter{h: http.Header{}}
				for pb.Next() {
					clear(w.h)
					w.status = 0
					srv.ServeHTTP(w, bb.req(rng))
					if w.status != http.StatusOK {
						b.Errorf("status %d", w.status)
						return
					}
				}
			})
			b.ReportMetric(float64((benchtest.CPUTime(b)-cpu).Nanoseconds())/1000/float64(b.N), "cpu-µs/op")
		})
	}
}

// catalogIDs returns the id of every record of db.
func catalogIDs(ctx context.Context, db *sqlite.DB) ([]string, error) {
	rows, err := db.SQL().QueryContext(ctx, `SELECT cve_id FROM records`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
