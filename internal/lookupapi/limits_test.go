package lookupapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/cve"
)

func TestStreamsAreBounded(t *testing.T) {
	cat := memCatalog(testRecords()...)
	walk := cat.WalkFn
	entered, release := make(chan struct{}), make(chan struct{})
	cat.WalkFn = func(ctx context.Context, after string, fn func(cve.Summary) error) error {
		entered <- struct{}{}
		<-release
		return walk(ctx, after, fn)
	}
	a := newAPITest(t, Config{Catalog: cat, MaxStreams: 2})

	// Two streams hold both slots.
	done := make(chan *httptest.ResponseRecorder, 2)
	for _, path := range []string{"/cve/bulk.jsonl", "/cve/modified.csv"} {
		go func() { done <- a.serve(newRequest("GET", BasePath+path, nil)) }()
		<-entered
	}
	// A third is refused at once, a HEAD (which streams nothing) is not.
	rec := a.get(BasePath+"/cve/bulk.jsonl?after=CVE-2021-9999", validRequest)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "5" {
		t.Fatalf("third stream: %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	if p := problemOf(t, rec); !strings.Contains(p.Detail, "2 bulk streams") {
		t.Errorf("detail = %q", p.Detail)
	}
	if rec.Header().Get("Content-Encoding") != "" {
		t.Errorf("a refused stream says Content-Encoding %q", rec.Header().Get("Content-Encoding"))
	}
	if rec := a.serve(newRequest("HEAD", BasePath+"/cve/modified.csv", nil)); rec.Code != http.StatusOK {
		t.Errorf("HEAD while the slots are taken: %d", rec.Code)
	}
	// Records are served meanwhile.
	if rec := a.get(BasePath+"/cve/CVE-2021-44228", validRequest); rec.Code != http.StatusOK {
		t.Errorf("a record while the slots are taken: %d", rec.Code)
	}
	close(release)
	for range 2 {
		if rec := <-done; rec.Code != http.StatusOK {
			t.Errorf("a held stream ended %d", rec.Code)
		}
	}
	// The slots are free again.
	go func() { <-entered }()
	if rec := a.get(BasePath+"/cve/bulk.jsonl", validRequest); rec.Code != http.StatusOK {
		t.Errorf("a stream after the others ended: %d", rec.Code)
	}
	if _, err := New(Config{Catalog: cat, MaxStreams: -1}); err == nil {
		t.Error("a negative MaxStreams was accepted")
	}
}

func TestHostileQueriesAndPaths(t *testing.T) {
	a := newAPITest(t, Config{})
	tests := []struct {
		name, target string
		want         int
		api          bool
	}{
		{"malformed escape", BasePath + "/cve?q=%", http.StatusBadRequest, true},
		{"semicolon separator", BasePath + "/cve?q=log4j;kev=true", http.StatusBadRequest, true},
		{"q not UTF-8", BasePath + "/cve?q=%ff%fe", http.StatusBadRequest, true},
		{"cursor not UTF-8", BasePath + "/cve?cursor=%ff", http.StatusBadRequest, true},
		{"stream query malformed", BasePath + "/cve/bulk.jsonl?after=%zz", http.StatusBadRequest, true},
		{"stream query not UTF-8", BasePath + "/cve/bulk.jsonl?after=%ff%fe", http.StatusBadRequest, true},
		{"stream parameter name not UTF-8", BasePath + "/cve/modified.csv?%ff=1", http.StatusBadRequest, true},
		{"dot segments", BasePath + "/cve/../../etc/passwd", http.StatusBadRequest, true},
		{"double slash", BasePath + "//cve", http.StatusBadRequest, true},
		{"trailing dot", BasePath + "/cve/.", http.StatusBadRequest, true},
		{"page with dot segments", "/cve/../x", http.StatusBadRequest, false},
		{"search page query not UTF-8", "/?q=%ff", http.StatusBadRequest, false},
		{"search page malformed query", "/?q=%", http.StatusBadRequest, false},
		{"clean path", BasePath + "/cve/CVE-2021-44228", http.StatusOK, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := newRequest("GET", "/", nil)
			path, query, _ := strings.Cut(tt.target, "?")
			req.URL.Path, req.URL.RawPath, req.URL.RawQuery = path, "", query
			rec := a.serve(req)
			if rec.Code != tt.want {
				t.Fatalf("GET %s: %d, want %d: %s", tt.target, rec.Code, tt.want, rec.Body)
			}
			if tt.api && tt.want >= 400 {
				problemOf(t, rec)
			}
		})
	}
}

// TestStalledStreamGivesBackItsSlot opens a stream and never reads it: the
// server cuts it after the write timeout, and the slot serves the next
// client.
func TestStalledStreamGivesBackItsSlot(t *testing.T) {
	defer func(d time.Duration) { streamWriteTimeout = d }(streamWriteTimeout)
	streamWriteTimeout = 300 * time.Millisecond
	cat := memCatalog(testRecords()...)
	// walking is closed when the first stream, holding the slot, starts
	// its walk: the second is asked for only then.
	walking := make(chan struct{})
	var once sync.Once
	cat.WalkFn = func(ctx context.Context, after string, fn func(cve.Summary) error) error {
		once.Do(func() { close(walking) })
		// An endless catalog: far more than the socket buffers hold.
		for i := int64(1); ctx.Err() == nil; i++ {
			if err := fn(cve.Summary{CVEID: cve.IDOfKey(2021*1_000_000_000_000 + i)}); err != nil {
				return err
			}
		}
		return ctx.Err()
	}
	srv, err := New(Config{Catalog: cat, MaxStreams: 1})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	stalled, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	fmt.Fprintf(stalled, "GET %s/cve/bulk.jsonl HTTP/1.1\r\nHost: lookup.test\r\n\r\n", BasePath)
	select {
	case <-walking:
	case <-time.After(10 * time.Second):
		t.Fatal("the first stream did not start in 10 seconds")
	}

	refused := false
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(ts.URL + BasePath + "/cve/modified.csv")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusServiceUnavailable:
			refused = true
			time.Sleep(50 * time.Millisecond)
			continue
		case http.StatusOK:
			if !refused {
				t.Fatal("the second stream was served while the first held the only slot")
			}
			return
		default:
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	t.Fatal("the stalled stream still holds its slot after 10 seconds")
}
