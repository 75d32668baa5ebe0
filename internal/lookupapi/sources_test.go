package lookupapi

import (
	"context"
	"encoding/json"
	"html"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/catalog/sqlite"
	"github.com/patchline/patchline/internal/ingest"
	"github.com/patchline/patchline/internal/sources"
)

// sampleLoadedAt is when the tests of the sources load the sample, and
// sourcesNow the time of their requests.
var (
	sampleLoadedAt = time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)
	sourcesNow     = sampleLoadedAt.Add(90 * time.Minute)
)

// sampleCatalog returns a catalog of its own holding the bundled sample but
// for its MSRC documents, loaded at sampleLoadedAt.
func sampleCatalog(tb testing.TB) *sqlite.DB {
	tb.Helper()
	ctx := context.Background()
	path := filepath.Join(tb.TempDir(), "catalog.db")
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	var srcs []ingest.Source
	for _, s := range ingest.SampleSources() {
		if s.Parser.Name != "msrc" {
			srcs = append(srcs, s)
		}
	}
	if _, err := ingest.Run(ctx, db, srcs, ingest.Options{Now: func() time.Time { return sampleLoadedAt }}); err != nil {
		tb.Fatal(err)
	}
	return db
}

// newSourcesTest returns a test harness over a Server of the sample
// catalog with its sources reported, kev synced an hour ago and nvd
// failing with an error that holds markup.
func newSourcesTest(tb testing.TB) (*apiTest, *sources.Reporter) {
	tb.Helper()
	ctx := context.Background()
	db := sampleCatalog(tb)
	states := []catalog.SyncState{
		{Source: "kev", LastAttempt: sourcesNow.Add(-time.Hour), LastSuccess: sourcesNow.Add(-time.Hour),
			Cursor: "e3b0c442", LastModified: "Tue, 25 Nov 2026 04:00:00 GMT"},
		{Source: "nvd", LastAttempt: sourcesNow.Add(-time.Minute), Error: `sync nvd: GET <script>alert(1)</script>: HTTP 503`, Failures: 3},
	}
	for _, st := range states {
		if err := db.PutSyncState(ctx, st); err != nil {
			tb.Fatal(err)
		}
	}
	rep := sources.New(db, sources.Options{Feeds: []string{"cvelist", "nvd", "kev"}, Now: func() time.Time { return sourcesNow }})
	return newAPITest(tb, Config{Catalog: db, Sources: rep}), rep
}

// TestSources runs the tests of the sources on one catalog of the sample,
// whose loading is the slow part.
func TestSources(t *testing.T) {
	a, rep := newSourcesTest(t)
	t.Run("API", func(t *testing.T) { testSourcesAPI(t, a.with(t)) })
	t.Run("SourceAPI", func(t *testing.T) { testSourceAPI(t, a.with(t)) })
	t.Run("FrontPage", func(t *testing.T) { testFrontPage(t, a.with(t), rep) })
	t.Run("SourcePage", func(t *testing.T) { testSourcePage(t, a.with(t)) })
}

func testSourcesAPI(t *testing.T, a *apiTest) {
	rec := a.get("/api/v1/sources", validRequest)
	if rec.Code != 200 || rec.Header().Get("ETag") == "" || rec.Header().Get("Cache-Control") != cacheList {
		t.Fatalf("status %d, headers %v", rec.Code, rec.Header())
	}
	var doc SourcesDocument
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if !doc.AsOf.Equal(sourcesNow.Truncate(time.Minute)) || !doc.Stale {
		t.Errorf("asOf %v, stale %v; want %v, true", doc.AsOf, doc.Stale, sourcesNow.Truncate(time.Minute))
	}
	got := map[string]sources.Source{}
	for _, s := range doc.Sources {
		got[s.Name] = s
	}
	tests := []struct {
		name, origin string
		fresh        sources.Freshness
		bundledFrom  string
		staleSeconds int64
		withError    bool
	}{
		{"kev", "sync", sources.Fresh, "", 3600, false},
		{"nvd", "bundled", sources.Stale, "2026-08-21", int64(sourcesNow.Truncate(time.Minute).Sub(time.Date(2026, 8, 21, 0, 0, 0, 0, time.UTC)) / time.Second), true},
		{"cvelist", "bundled", sources.Stale, "2025-01-24", int64(sourcesNow.Truncate(time.Minute).Sub(time.Date(2025, 1, 24, 0, 0, 0, 0, time.UTC)) / time.Second), false},
		{"osv:GHSA", "bundled", sources.Stale, "2026-11-21", int64(sourcesNow.Truncate(time.Minute).Sub(time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)) / time.Second), false},
	}
	for _, tt := range tests {
		s, ok := got[tt.name]
		if !ok {
			t.Errorf("no source %s", tt.name)
			continue
		}
		bundled := ""
		if s.BundledFrom != nil {
			bundled = *s.BundledFrom
		}
		if s.Origin != tt.origin || s.Freshness != tt.fresh || bundled != tt.bundledFrom ||
			s.StaleSeconds == nil || *s.StaleSeconds != tt.staleSeconds || (s.Error != nil) != tt.withError {
			t.Errorf("%s = origin %s, %s, bundled %q, staleSeconds %v, error %v; want %s, %s, %q, %d, error %v",
				tt.name, s.Origin, s.Freshness, bundled, s.StaleSeconds, s.Error, tt.origin, tt.fresh, tt.bundledFrom, tt.staleSeconds, tt.withError)
		}
		if s.Records == nil || *s.Records == 0 {
			t.Errorf("%s: records %v, want a count", tt.name, s.Records)
		}
	}

	// A conditional request within the minute is answered 304.
	again := a.get("/api/v1/sources", validRequest, "If-None-Match", rec.Header().Get("ETag"))
	if again.Code != 304 {
		t.Errorf("conditional request: status %d, want 304", again.Code)
	}
}

func testSourceAPI(t *testing.T, a *apiTest) {
	tests := []struct {
		path   string
		status int
		name   string
	}{
		{"/api/v1/sources/kev", 200, "kev"},
		{"/api/v1/sources/" + url.PathEscape("osv:GHSA"), 200, "osv:GHSA"},
		{"/api/v1/sources/osv%3APyPA", 200, "osv:PyPA"},
		{"/api/v1/sources/nope", 404, ""},
		{"/api/v1/sources/" + url.PathEscape("<b>x</b>"), 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rec := a.get(tt.path, validRequest)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if tt.status != 200 {
				if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
					t.Errorf("Content-Type %q, want problem+json", ct)
				}
				return
			}
			var s sources.Source
			if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil || s.Name != tt.name {
				t.Errorf("source %q, %v; want %q", s.Name, err, tt.name)
			}
		})
	}
}

// text returns what a person reads of an HTML page: its text without
// tags, spaces collapsed.
func text(page string) string {
	page = regexp.MustCompile(`(?s)<style>.*?</style>`).ReplaceAllString(page, " ")
	page = regexp.MustCompile(`<[^>]*>`).ReplaceAllString(page, " ")
	return strings.Join(strings.Fields(html.UnescapeString(page)), " ")
}

func testFrontPage(t *testing.T, a *apiTest, rep *sources.Reporter) {
	o, err := rep.OverviewAt(context.Background(), sourcesNow)
	if err != nil {
		t.Fatal(err)
	}
	rec := a.serve(newRequest("GET", "/", nil))
	if rec.Code != 200 {
		t.Fatalf("status %d", rec.Code)
	}
	body := rec.Body.String()
	if strings.Contains(body, "<script>alert") {
		t.Error("the front page does not escape a source's error")
	}
	got := text(body)
	newest := o.LatestKEV[0]
	// In this order: the counts, the latest KEV additions with their
	// fixes, the records modified today, the sources.
	order := []string{
		itoa(o.Records) + " CVE records", itoa(o.WithFix) + " with a known fix", itoa(o.KEV) + " known exploited",
		"Latest known-exploited additions", newest.CVEID, newest.KEV.DateAdded,
		"Modified in the last day", itoa(o.ModifiedToday) + " records changed",
		"Sources", "cvelist", "bundled, from 2025-01-24", "stale",
		"nvd", "bundled, from 2026-08-21", "last attempt failed", "stale",
		"kev", "synced 1 hour ago", "fresh",
		nvdNotice,
	}
	at := 0
	for _, s := range order {
		i := strings.Index(got[at:], s)
		if i < 0 {
			t.Fatalf("%q missing or out of order on the front page:\n%s", s, got)
		}
		at += i
	}
	for _, class := range []string{"fresh-green", "fresh-red"} {
		if !strings.Contains(body, class) {
			t.Errorf("no %s badge on the front page", class)
		}
	}
	// A KEV addition with a fix shows it.
	for _, k := range o.LatestKEV {
		if len(k.Remediation.Products) > 0 {
			fix := k.Remediation.Products[0].Atoms[0].FixedVersion
			if !strings.Contains(got, fix) {
				t.Errorf("the fix %s of %s is not on the front page", fix, k.CVEID)
			}
			break
		}
	}
	// A search shows results, not the overview.
	if s := a.serve(newRequest("GET", "/?q=log4j", nil)).Body.String(); strings.Contains(s, "Latest known-exploited additions") {
		t.Error("a search page shows the overview")
	}
}

func testSourcePage(t *testing.T, a *apiTest) {
	tests := []struct {
		path   string
		status int
		want   []string
	}{
		{"/sources/kev", 200, []string{"kev", "fresh", "CISA KEV", "synced 1 hour ago", "CC0-1.0",
			"https://www.cisa.gov/sites/default/files/feeds/known_exploited_vulnerabilities.json", "changed 3 hours ago"}},
		{"/sources/nvd", 200, []string{"nvd", "stale", "bundled, from 2026-08-21", "public domain",
			"sync nvd: GET <script>alert(1)</script>: HTTP 503", "3 failed attempts in a row", "sample:nvd"}},
		{"/sources/osv:GHSA", 200, []string{"osv:GHSA", "GHSA (OSV databases)", "CC-BY-4.0", "bundled, from 2026-11-21"}},
		{"/sources/nope", 404, []string{`the catalog has no source named "nope"`}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rec := a.serve(newRequest("GET", tt.path, nil))
			body := rec.Body.String()
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d", rec.Code, tt.status)
			}
			if strings.Contains(body, "<script>alert") {
				t.Error("the page does not escape the source's error")
			}
			got := text(body)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q missing from the page:\n%s", w, got)
				}
			}
		})
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// with returns the harness reporting to t.
func (a *apiTest) with(t testing.TB) *apiTest {
	c := *a
	c.t = t
	return &c
}
