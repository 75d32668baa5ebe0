package lookupapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/benchtest"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/exposure"
	"github.com/patchline/patchline/internal/ratelimit"
)

// benchRecord is the stored JSON of a record of typical size.
func benchRecord(b *testing.B) []byte {
	b.Helper()
	body, err := json.Marshal(testRecords()[0])
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// BenchmarkGetRecord measures GET /api/v1/cve/{id} without the store, with
// the rate limit, metrics and CORS of the real chain; compare it with
// BenchmarkBareHandler, a handler that writes the same bytes.
func BenchmarkGetRecord(b *testing.B) {
	body := benchRecord(b)
	cat := &fakeCatalog{RecordJSONFn: func(context.Context, string) ([]byte, error) { return body, nil }}
	srv, err := New(Config{
		Catalog:   cat,
		PublicURL: "https://cve.example.org/api/v1",
		Limiter:   ratelimit.NewLocal(ratelimit.Rate{N: 1 << 30, Period: time.Minute}),
	})
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/api/v1/cve/CVE-2021-44228", nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		w := &discardWriter{h: http.Header{}}
		for pb.Next() {
			clear(w.h)
			srv.ServeHTTP(w, req)
		}
	})
}

// BenchmarkBatch measures POST /api/v1/cve/batch of 100 ids without the
// store, with the real chain: the request's decoding, the records' _links
// and the encoding of the answer, about 100 records of typical size.
func BenchmarkBatch(b *testing.B) {
	body := benchRecord(b)
	var req struct {
		IDs []string `json:"ids"`
	}
	bodies := map[string][]byte{}
	for i := range MaxBatch {
		id := fmt.Sprintf("CVE-2024-%d", 10000+i)
		req.IDs = append(req.IDs, id)
		bodies[id] = body
	}
	payload, err := json.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	cat := &fakeCatalog{RecordsJSONFn: func(_ context.Context, ids []string) (map[string][]byte, error) {
		out := make(map[string][]byte, len(ids))
		for _, id := range ids {
			out[id] = bodies[id]
		}
		return out, nil
	}}
	srv, err := New(Config{
		Catalog:   cat,
		PublicURL: "https://cve.example.org/api/v1",
		Limiter:   ratelimit.NewLocal(ratelimit.Rate{N: 1 << 30, Period: time.Minute}),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		w := &discardWriter{h: http.Header{}}
		for pb.Next() {
			clear(w.h)
			w.status = 0
			r := httptest.NewRequest("POST", "/api/v1/cve/batch", bytes.NewReader(payload))
			srv.ServeHTTP(w, r)
			if w.status != http.StatusOK {
				b.Errorf("status %d", w.status)
				return
			}
		}
	})
}

func BenchmarkBareHandler(b *testing.B) {
	body := benchRecord(b)
	out := append(body[:len(body)-1:len(body)-1], `,"_links":{"self":"https://cve.example.org/api/v1/cve/CVE-2021-44228","html":"https://cve.example.org/cve/CVE-2021-44228"}}`...)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(out)))
		w.Write(out)
	})
	req := httptest.NewRequest("GET", "/api/v1/cve/CVE-2021-44228", nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		w := &discardWriter{h: http.Header{}}
		for pb.Next() {
			clear(w.h)
			h.ServeHTTP(w, req)
		}
	})
}

// BenchmarkList measures GET /api/v1/cve with a cursor, without the store.
func BenchmarkList(b *testing.B) {
	var rows []cve.Summary
	for _, r := range testRecords() {
		rows = append(rows, cve.Summarize(r))
	}
	for len(rows) < 50 {
		rows = append(rows, rows...)
	}
	rows = rows[:50]
	cat := &fakeCatalog{ListFn: func(context.Context, cve.ListQuery) (cve.Page, error) {
		return cve.Page{Rows: rows, Next: &cve.Position{Value: 0.5, Key: 1}}, nil
	}}
	srv, err := New(Config{Catalog: cat})
	if err != nil {
		b.Fatal(err)
	}
	q, _ := parseListQuery(mustParseQuery(b, "kev=true&sort=epss"))
	req := httptest.NewRequest("GET", "/api/v1/cve?kev=true&sort=epss&cursor="+encodeCursor(cve.Position{Value: 0.7, Key: 2}, q.digest), nil)
	b.ReportAllocs()
	for b.Loop() {
		w := &discardWriter{h: http.Header{}}
		srv.ServeHTTP(w, req)
		if w.status != 200 {
			b.Fatalf("status %d", w.status)
		}
	}
}

// BenchmarkBulk measures the bulk stream's encoding.
func BenchmarkBulk(b *testing.B) {
	s := cve.Summarize(testRecords()[0])
	const n = 10000
	cat := memCatalog()
	cat.WalkFn = func(ctx context.Context, after string, fn func(cve.Summary) error) error {
		for range n {
			if err := fn(s); err != nil {
				return err
			}
		}
		return nil
	}
	srv, err := New(Config{Catalog: cat})
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/api/v1/cve/bulk.jsonl", nil)
	w := &discardWriter{h: http.Header{}}
	srv.ServeHTTP(w, req)
	b.SetBytes(w.n)
	b.ReportAllocs()
	for b.Loop() {
		srv.ServeHTTP(&discardWriter{h: http.Header{}}, req)
	}
}

// discardWriter is a ResponseWriter that counts and forgets.
type discardWriter struct {
	h      http.Header
	status int
	n      int64
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *discardWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = 200
	}
	w.n += int64(len(b))
	return len(b), nil
}

// BenchmarkOSVQueryBatch measures POST /osv/v1/querybatch with 1,000
// packages, through the whole handler chain, against an index of 30,000
// synthetic CVEs, each with a fix on two branches of one to three PyPI
// packages:
//
//   - distinct-fixes: 5,000 packages, every CVE with fixes of its own
//     (about 12 CVEs a package);
//   - shared-fixes: 100 packages, the fixes of each drawn from 20 sets
//     (about 600 CVEs a package), as the CVEs of one erratum, of one
//     Patch Tuesday or of bench/gen's records made from a few templates
//     share them.
//
// A query costs a map lookup and the CVEs of its package, whatever the
// size of the catalog: distinct-fixes-300k asks the same queries of the
// same 30,000 CVEs as distinct-fixes, in an index that also holds 270,000
// CVEs of 50,000 packages nobody asks about. It reports the CPU time and
// the p50 and p99 latency of a request.
func BenchmarkOSVQueryBatch(b *testing.B) {
	for _, bc := range []struct {
		name           string
		packages, sets int // sets: 0 for fixes of each CVE's own
		others         int // CVEs of packages not asked about
	}{
		{"distinct-fixes", 5000, 0, 0},
		{"distinct-fixes-300k", 5000, 0, 270000},
		{"shared-fixes", 100, 20, 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			benchQueryBatch(b, 30000, bc.others, bc.packages, bc.sets)
		})
	}
}

func benchQueryBatch(b *testing.B, cves, others, packages, sets int) {
	rng := rand.New(rand.NewPCG(1, 2))
	fixesOf := func(pkg int) []cve.Atom {
		r := rng
		if sets > 0 {
			r = rand.New(rand.NewPCG(uint64(pkg), uint64(rng.IntN(sets))))
		}
		major := 1 + r.IntN(5)
		var atoms []cve.Atom
		for _, minor := range []int{r.IntN(5), 5 + r.IntN(5)} {
			fixed := fmt.Sprintf("%d.%d.%d", major, minor, 1+r.IntN(9))
			atoms = append(atoms, cve.Atom{FixedVersion: fixed,
				AffectedRange: ptr(fmt.Sprintf(">= %d.%d, < %s", major, minor, fixed)), Source: "GHSA", License: "CC-BY-4.0"})
		}
		return atoms
	}
	recs := make([]*cve.Record, cves)
	for i := range recs {
		r := &cve.Record{CVEID: fmt.Sprintf("CVE-2024-%d", 10000+i), State: cve.StatePublished,
			ModifiedAt: date("2024-03-01T00:00:00Z"), Remediation: cve.Remediation{Available: true}}
		for range 1 + rng.IntN(3) {
			pkg := rng.IntN(packages)
			r.Remediation.Products = append(r.Remediation.Products,
				cve.Product{Ecosystem: "PyPI", Product: fmt.Sprintf("package-%d", pkg), Atoms: fixesOf(pkg)})
		}
		recs[i] = r
	}
	// The CVEs of other packages, drawn from a source of their own so
	// that the asked CVEs and queries are the same with and without them.
	orng := rand.New(rand.NewPCG(3, 4))
	for i := range others {
		major := 1 + orng.IntN(5)
		fixed := fmt.Sprintf("%d.%d.%d", major, orng.IntN(10), 1+orng.IntN(9))
		recs = append(recs, &cve.Record{CVEID: fmt.Sprintf("CVE-2025-%d", 10000+i), State: cve.StatePublished,
			ModifiedAt: date("2025-03-01T00:00:00Z"), Remediation: cve.Remediation{Available: true, Products: []cve.Product{
				{Ecosystem: "PyPI", Product: fmt.Sprintf("other-%d", orng.IntN(50000)), Atoms: []cve.Atom{
					{FixedVersion: fixed, AffectedRange: ptr("< " + fixed), Source: "GHSA", License: "CC-BY-4.0"}}},
			}}})
	}
	cat := memCatalog(recs...)
	idx := exposure.NewIndex()
	if _, err := idx.Refresh(context.Background(), cat); err != nil {
		b.Fatal(err)
	}
	if idx.Len() != cves+others {
		b.Fatalf("index holds %d CVEs, want %d", idx.Len(), cves+others)
	}
	srv, err := New(Config{Catalog: cat, Packages: idx})
	if err != nil {
		b.Fatal(err)
	}
	var body struct {
		Queries []map[string]any `json:"queries"`
	}
	for range MaxOSVBatch {
		body.Queries = append(body.Queries, map[string]any{
			"package": map[string]string{"ecosystem": "PyPI", "name": fmt.Sprintf("package-%d", rng.IntN(packages))},
			"version": fmt.Sprintf("%d.%d.%d", 1+rng.IntN(5), rng.IntN(10), rng.IntN(10)),
		})
	}
	payload, _ := json.Marshal(body)
	var lat []time.Duration
	cpu0 := benchtest.CPUTime(b)
	b.ResetTimer()
	for b.Loop() {
		req := httptest.NewRequest("POST", OSVBasePath+"/v1/querybatch", bytes.NewReader(payload))
		w := httptest.NewRecorder()
		start := time.Now()
		srv.ServeHTTP(w, req)
		lat = append(lat, time.Since(start))
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
	cpu := benchtest.CPUTime(b) - cpu0
	// The CPU time of a request does not depend on what else the machine
	// runs, as latencies do.
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(len(lat)), "cpu-ms/op")
	benchtest.ReportLatencies(b, lat)
}
