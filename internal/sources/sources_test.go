package sources

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/catalog/sqlite"
	"github.com/patchline/patchline/internal/ingest"
)

// loadedAt is when the tests load the sample.
var loadedAt = time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)

func mustOpenCatalog(tb testing.TB) *sqlite.DB {
	tb.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "catalog.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// mustLoadSample loads the bundled sample but for its MSRC documents, whose
// size only slows the tests, at loadedAt.
func mustLoadSample(tb testing.TB, db *sqlite.DB) {
	tb.Helper()
	var srcs []ingest.Source
	for _, s := range ingest.SampleSources() {
		if s.Parser.Name != "msrc" {
			srcs = append(srcs, s)
		}
	}
	if _, err := ingest.Run(context.Background(), db, srcs, ingest.Options{Now: func() time.Time { return loadedAt }}); err != nil {
		tb.Fatal(err)
	}
}

func at(t time.Time) func() time.Time { return func() time.Time { return t } }

func byName(list []Source) map[string]Source {
	out := map[string]Source{}
	for _, s := range list {
		out[s.Name] = s
	}
	return out
}

func TestEmptyCatalog(t *testing.T) {
	db := mustOpenCatalog(t)
	r := New(db, Options{Feeds: []string{"nvd", "kev"}, Now: at(loadedAt)})
	list, err := r.Sources(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	kevURL := "https://www.cisa.gov/sites/default/files/feeds/known_exploited_vulnerabilities.json"
	nvdURL := "https://services.nvd.nist.gov/rest/json/cves/2.0"
	want := []Source{
		{Name: "nvd", Feed: "nvd", Title: "NVD API 2.0", License: "public domain", URL: &nvdURL, Records: &zero, Origin: "none", Freshness: Stale},
		{Name: "kev", Feed: "kev", Title: "CISA KEV", License: "CC0-1.0", URL: &kevURL, Records: &zero, Origin: "none", Freshness: Stale},
	}
	if diff := gocmp.Diff(want, list); diff != "" {
		t.Errorf("sources of an empty catalog (-want +got):\n%s", diff)
	}
}

func TestBundledSample(t *testing.T) {
	ctx := context.Background()
	db := mustOpenCatalog(t)
	mustLoadSample(t, db)
	now := loadedAt.Add(time.Hour)
	r := New(db, Options{Now: at(now)})
	o, err := r.OverviewAt(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	got := byName(o.Sources)
	var names []string
	for _, s := range o.Sources {
		names = append(names, s.Name)
	}
	for _, n := range []string{"cvelist", "nvd", "kev", "epss", "osv:GHSA", "osv:Go", "debian", "eol"} {
		if !slices.Contains(names, n) {
			t.Errorf("sources %v lack %s", names, n)
		}
	}
	if i, j := slices.Index(names, "cvelist"), slices.Index(names, "eol"); i != 0 || j != len(names)-1 {
		t.Errorf("sources not in the catalog's order: %v", names)
	}
	kev := got["kev"]
	if kev.Origin != "bundled" || kev.BundledFrom == nil || *kev.BundledFrom != "2025-08-25" {
		t.Errorf("kev: origin %q, bundledFrom %v; want bundled from 2025-08-25", kev.Origin, kev.BundledFrom)
	}
	if kev.Records == nil || *kev.Records != o.KEV {
		t.Errorf("kev records = %v, want the catalog's KEV count %d", kev.Records, o.KEV)
	}
	wantAge := int64(now.Sub(time.Date(2025, 8, 25, 0, 0, 0, 0, time.UTC)) / time.Second)
	if kev.StaleSeconds == nil || *kev.StaleSeconds != wantAge || kev.Freshness != Stale {
		t.Errorf("kev staleSeconds %v, freshness %s; want %d, stale", kev.StaleSeconds, kev.Freshness, wantAge)
	}
	if kev.LastSuccessAt == nil || !kev.LastSuccessAt.Equal(loadedAt) {
		t.Errorf("kev lastSuccessAt = %v, want the load at %v", kev.LastSuccessAt, loadedAt)
	}
	if g := got["osv:GHSA"]; g.License != "CC-BY-4.0" || g.Feed != "osv" || g.Title != "GHSA (OSV databases)" {
		t.Errorf("osv:GHSA = %+v", g)
	}
	if e := got["eol"]; e.Records != nil || e.Origin != "bundled" {
		t.Errorf("eol records %v, origin %s: want no count, bundled", e.Records, e.Origin)
	}

	stats, err := db.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o.Records != stats.Records || o.Rejected != stats.Rejected || o.KEV == 0 || o.WithFix == 0 || o.WithFix > o.Records {
		t.Errorf("counts %d records, %d rejected, %d KEV, %d with a fix; stats %+v", o.Records, o.Rejected, o.KEV, o.WithFix, stats)
	}
	if len(o.LatestKEV) != LatestKEVShown {
		t.Fatalf("%d latest KEV additions, want %d", len(o.LatestKEV), LatestKEVShown)
	}
	for i, rec := range o.LatestKEV {
		if rec.KEV == nil {
			t.Fatalf("latest KEV %s has no KEV entry", rec.CVEID)
		}
		if i > 0 && o.LatestKEV[i-1].KEV.DateAdded < rec.KEV.DateAdded {
			t.Errorf("latest KEV not newest first: %s (%s) before %s (%s)", o.LatestKEV[i-1].CVEID,
				o.LatestKEV[i-1].KEV.DateAdded, rec.CVEID, rec.KEV.DateAdded)
		}
	}
	// Every record was modified by the load, an hour ago.
	if o.ModifiedToday != stats.Records || len(o.Modified) != ModifiedShown {
		t.Errorf("modified today %d (%d shown), want %d (%d shown)", o.ModifiedToday, len(o.Modified), stats.Records, ModifiedShown)
	}
	// A day later, none was.
	later, err := r.OverviewAt(ctx, loadedAt.Add(25*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if later.ModifiedToday != 0 || len(later.Modified) != 0 {
		t.Errorf("a day later: modified today %d (%d shown), want none", later.ModifiedToday, len(later.Modified))
	}
}

// TestFreshness follows the kev source of a catalog loaded from the sample
// through syncs that succeed and fail.
func TestFreshness(t *testing.T) {
	ctx := context.Background()
	db := mustOpenCatalog(t)
	mustLoadSample(t, db)
	now := loadedAt.Add(72 * time.Hour)
	r := New(db, Options{Now: at(now)})
	tests := []struct {
		name      string
		state     catalog.SyncState
		origin    string
		fresh     Freshness
		age       int64
		upstream  string // RFC 3339, "" for none
		withError bool
	}{
		{"synced an hour ago", catalog.SyncState{LastAttempt: now.Add(-time.Hour), LastSuccess: now.Add(-time.Hour),
			Cursor: "3f1a", LastModified: "Mon, 24 Nov 2026 18:02:11 GMT"},
			"sync", Fresh, 3600, "2026-11-24T18:02:11Z", false},
		{"synced a day ago", catalog.SyncState{LastAttempt: now.Add(-24 * time.Hour), LastSuccess: now.Add(-24 * time.Hour)},
			"sync", Aging, 86400, "", false},
		{"failing since an hour ago", catalog.SyncState{LastAttempt: now.Add(-time.Minute), LastSuccess: now.Add(-time.Hour),
			Error: "sync kev: HTTP 503", Failures: 2},
			"sync", Aging, 3600, "", true},
		{"synced before the load", catalog.SyncState{LastAttempt: loadedAt.Add(-time.Hour), LastSuccess: loadedAt.Add(-time.Hour)},
			"bundled", Stale, int64(now.Sub(time.Date(2025, 8, 25, 0, 0, 0, 0, time.UTC)) / time.Second), "2025-08-25T00:00:00Z", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := tt.state
			st.Source = "kev"
			if err := db.PutSyncState(ctx, st); err != nil {
				t.Fatal(err)
			}
			s, ok, err := r.SourceAt(ctx, "kev", now)
			if err != nil || !ok {
				t.Fatalf("SourceAt(kev) = %v, %v", ok, err)
			}
			if s.Origin != tt.origin || s.Freshness != tt.fresh || s.StaleSeconds == nil || *s.StaleSeconds != tt.age {
				t.Errorf("origin %s, freshness %s, staleSeconds %v; want %s, %s, %d", s.Origin, s.Freshness, s.StaleSeconds, tt.origin, tt.fresh, tt.age)
			}
			up := ""
			if s.UpstreamModifiedAt != nil {
				up = s.UpstreamModifiedAt.Format(time.RFC3339)
			}
			if up != tt.upstream {
				t.Errorf("upstreamModifiedAt = %q, want %q", up, tt.upstream)
			}
			if (s.Error != nil) != tt.withError || s.Failures != st.Failures {
				t.Errorf("error %v, failures %d; want an error: %v, %d failures", s.Error, s.Failures, tt.withError, st.Failures)
			}
		})
	}
}

func TestUpstreamModified(t *testing.T) {
	tests := []struct {
		name string
		st   catalog.SyncState
		want string
	}{
		{"a release time", catalog.SyncState{Cursor: "2026-11-24T23:00:00Z"}, "2026-11-24T23:00:00Z"},
		{"the NVD's timestamp", catalog.SyncState{Cursor: "2026-11-24T23:00:00.123456789Z"}, "2026-11-24T23:00:00Z"},
		{"OSV ecosystems", catalog.SyncState{Cursor: `{"PyPI":{"modified":"2026-11-24T10:00:00Z"},"Go":{"modified":"2026-11-24T12:30:00Z","etag":"x"}}`}, "2026-11-24T12:30:00Z"},
		{"endoflife.date products", catalog.SyncState{Cursor: `{"debian":{"lastModified":"Mon, 24 Nov 2026 08:00:00 GMT"}}`}, "2026-11-24T08:00:00Z"},
		{"a document's Last-Modified", catalog.SyncState{Cursor: "9b2c7e", LastModified: "Mon, 24 Nov 2026 18:02:11 GMT"}, "2026-11-24T18:02:11Z"},
		{"nothing", catalog.SyncState{Cursor: "9b2c7e"}, ""},
		{"go's zero time", catalog.SyncState{Cursor: `{"Go":{"modified":"0001-01-01T00:00:00Z"}}`}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if u := upstreamModified(tt.st); !u.IsZero() {
				got = u.Truncate(time.Second).Format(time.RFC3339)
			}
			if got != tt.want {
				t.Errorf("upstreamModified = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	ctx := context.Background()
	db := mustOpenCatalog(t)
	mustLoadSample(t, db)
	now := loadedAt.Add(2 * time.Hour)
	if err := db.PutSyncState(ctx, catalog.SyncState{Source: "kev", LastAttempt: now.Add(-20 * time.Minute),
		LastSuccess: now.Add(-20 * time.Minute), LastModified: "Tue, 25 Nov 2026 07:00:00 GMT"}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := RegisterMetrics(reg, New(db, Options{Now: at(now)})); err != nil {
		t.Fatal(err)
	}
	ages, upstream := gauges(t, reg, "patchline_source_sync_age_seconds"), gauges(t, reg, "patchline_source_upstream_age_seconds")
	if upstream["kev"] != 3600 {
		t.Errorf("upstream age of kev = %v, want 3600", upstream["kev"])
	}
	if ages["kev"] != 1200 {
		t.Errorf("sync age of kev = %v, want 1200", ages["kev"])
	}
	if want := now.Sub(time.Date(2025, 1, 24, 0, 0, 0, 0, time.UTC)).Seconds(); ages["cvelist"] != want {
		t.Errorf("sync age of the bundled cvelist = %v, want %v (since the sample's date)", ages["cvelist"], want)
	}
}

// gauges returns the values of a gauge by source.
func gauges(tb testing.TB, reg *prometheus.Registry, name string) map[string]float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "source" {
					out[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}

var _ Catalog = (*sqlite.DB)(nil)

// TestSyncRun checks that the ingest run of a sync leaves the source dated
// by its sync state, and that a later ingest by hand dates it after.
func TestSyncRun(t *testing.T) {
	ctx := context.Background()
	db := mustOpenCatalog(t)
	mustLoadSample(t, db)
	syncAt := loadedAt.Add(time.Hour)
	if err := db.PutSyncState(ctx, catalog.SyncState{Source: "kev", LastAttempt: syncAt, LastSuccess: syncAt}); err != nil {
		t.Fatal(err)
	}
	kevFile := filepath.Join("..", "sample", "data", "kev", "known_exploited_vulnerabilities.json")
	src, err := ingest.ParseSource("kev=" + kevFile)
	if err != nil {
		t.Fatal(err)
	}
	run := func(label string, at time.Time) {
		t.Helper()
		s := src
		s.Label = label
		if _, err := ingest.Run(ctx, db, []ingest.Source{s}, ingest.Options{Now: func() time.Time { return at }}); err != nil {
			t.Fatal(err)
		}
	}
	now := loadedAt.Add(3 * time.Hour)
	r := New(db, Options{Now: at(now)})
	tests := []struct {
		label    string
		runAt    time.Time
		origin   string
		success  time.Time
		location string
	}{
		{catalog.SyncLabel + "https://kev.example", syncAt.Add(2 * time.Minute), "sync", syncAt, catalog.SyncLabel + "https://kev.example"},
		{"", loadedAt.Add(2 * time.Hour), "ingest", loadedAt.Add(2 * time.Hour), kevFile},
	}
	for _, tt := range tests {
		run(tt.label, tt.runAt)
		if err := r.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		s, _, err := r.SourceAt(ctx, "kev", now)
		if err != nil {
			t.Fatal(err)
		}
		if s.Origin != tt.origin || s.LastSuccessAt == nil || !s.LastSuccessAt.Equal(tt.success) || s.Location == nil || *s.Location != tt.location {
			t.Errorf("after a run labelled %q: origin %s, lastSuccessAt %v, location %v; want %s, %v, %s",
				tt.label, s.Origin, s.LastSuccessAt, s.Location, tt.origin, tt.success, tt.location)
		}
	}
}

// TestCountsFollowTheCatalog checks that an ingest run is seen: the next
// call answers with the counts kept, and counts again in the background.
func TestCountsFollowTheCatalog(t *testing.T) {
	ctx := context.Background()
	db := mustOpenCatalog(t)
	mustLoadSample(t, db)
	now := loadedAt.Add(time.Hour)
	r := New(db, Options{Now: at(now)})
	before, err := r.OverviewAt(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	kev := filepath.Join(t.TempDir(), "kev.json")
	doc := `{"vulnerabilities":[{"cveID":"CVE-2026-99999","vendorProject":"Example","product":"Widget","vulnerabilityName":"Example Widget flaw","dateAdded":"2026-11-24","shortDescription":"A flaw.","requiredAction":"Apply the update.","dueDate":"2026-12-15"}]}`
	if err := os.WriteFile(kev, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := ingest.ParseSource("kev=" + kev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ingest.Run(ctx, db, []ingest.Source{src}, ingest.Options{Now: at(now)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		o, err := r.OverviewAt(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		if o.Records == before.Records+1 {
			if o.KEV != before.KEV+1 || o.LatestKEV[0].CVEID != "CVE-2026-99999" {
				t.Errorf("after the run: %d KEV, latest %s; want %d, CVE-2026-99999", o.KEV, o.LatestKEV[0].CVEID, before.KEV+1)
			}
			break
		}
		if o.Records != before.Records {
			t.Fatalf("records %d, want %d or %d", o.Records, before.Records, before.Records+1)
		}
		if time.Now().After(deadline) {
			t.Fatal("the counts did not follow the ingest run")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
