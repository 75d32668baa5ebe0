package lookupapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/cve"
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
