// The sync against the fake upstream of fake_test.go. This file is over
// 600 lines because each test is a scenario of several syncs (a first
// one, what changed, failures, stalls, resumes), written out step by step.

package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/catalog/sqlite"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/ingest"
)

// testClock is a settable clock.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *testClock { return &testClock{t: t} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func mustOpenStore(tb testing.TB) *sqlite.DB {
	tb.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "catalog.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// testConfig is a Config against the fake upstreams with fast retries and
// no rate limit worth the name.
func testConfig(f *fakeUpstream, db Store, clock *testClock, names ...string) Config {
	return Config{
		Store:         db,
		Sources:       f.sources(names...),
		Client:        f.srv.Client(),
		NVDLimiter:    NewTokenBucket(1000, time.Second, 1000),
		NVDPageSize:   5,
		OSVEcosystems: f.ecosystems(),
		// rocky-linux is not in the sample: the fake answers 404.
		EOLProducts: append(f.eolProducts(), "rocky-linux"),
		Retry:       Retry{Attempts: 3, Base: time.Millisecond, MaxWait: 20 * time.Millisecond},
		TempDir:     f.t.TempDir(),
		Now:         clock.Now,
	}
}

func mustNew(tb testing.TB, cfg Config) *Syncer {
	tb.Helper()
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// syncOK syncs every source and fails the test on any error.
func syncOK(tb testing.TB, s *Syncer, names ...string) map[string]Result {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	results, err := s.SyncOnce(ctx, names...)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]Result{}
	for _, r := range results {
		if r.Err != nil {
			tb.Errorf("sync %s: %v", r.Source, r.Err)
		}
		out[r.Source] = r
	}
	return out
}

// referenceIngest ingests the files behind what the fake upstreams served,
// in one run, as `patchline ingest` would read them.
func referenceIngest(tb testing.TB, f *fakeUpstream, feeds []string) *sqlite.DB {
	tb.Helper()
	db := mustOpenStore(tb)
	var sources []ingest.Source
	for _, feed := range feeds {
		name := strings.TrimRight(feed, "12")
		p, ok := parserFor(name)
		if !ok {
			tb.Fatalf("no parser for %s", name)
		}
		loc := name
		if name == "eol" {
			loc = "eol/products"
		}
		sources = append(sources, ingest.Source{Parser: p, Location: loc, FS: f.files[feed]})
	}
	if _, err := ingest.Run(context.Background(), db, sources, ingest.Options{}); err != nil {
		tb.Fatal(err)
	}
	return db
}

// catalogRecords returns every record of a catalog as decoded JSON, without
// its modifiedAt, which is the time of the run that last changed it.
func catalogRecords(tb testing.TB, c cve.Catalog) map[string]map[string]any {
	tb.Helper()
	ctx := context.Background()
	var ids []string
	if err := c.Walk(ctx, "", func(s cve.Summary) error {
		ids = append(ids, s.CVEID)
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, id := range ids {
		body, err := c.RecordJSON(ctx, id)
		if err != nil {
			tb.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			tb.Fatal(err)
		}
		delete(m, "modifiedAt")
		// So is the syncedAt of each source.
		for _, ds := range m["dataSources"].([]any) {
			delete(ds.(map[string]any), "syncedAt")
		}
		out[id] = m
	}
	return out
}

// TestSyncMatchesFullIngest syncs every source from the fake upstreams
// three times: a first sync, a sync after the upstreams changed, and one
// after nothing changed. The catalog must end up as an ingest of the same
// files, the second sync must fetch only what changed, and the third must
// transfer nothing.
func TestSyncMatchesFullIngest(t *testing.T) {
	f := newFakeUpstream(t)
	db := mustOpenStore(t)
	clock := newClock(time.Date(2026, 11, 20, 2, 30, 0, 0, time.UTC))
	s := mustNew(t, testConfig(f, db, clock))

	// Stage 1: the first sync of every source.
	res := syncOK(t, s)
	for _, name := range order {
		if res[name].Ingest == nil {
			t.Errorf("stage 1: %s ingested nothing (%s)", name, res[name].Summary)
		}
	}
	checkStage1(t, f)

	// Stage 2: the upstreams moved on.
	f.setStage(2)
	clock.Set(time.Date(2026, 11, 20, 3, 30, 0, 0, time.UTC))
	res = syncOK(t, s)
	for _, name := range []string{"cvelist", "nvd", "epss", "osv", "debian", "msrc"} {
		if res[name].Ingest == nil || res[name].RecordsChanged == 0 {
			t.Errorf("stage 2: %s changed nothing (%s)", name, res[name].Summary)
		}
	}
	for _, name := range []string{"kev", "eol"} {
		if res[name].Ingest != nil {
			t.Errorf("stage 2: %s ingested although it did not change (%s)", name, res[name].Summary)
		}
	}
	checkStage2(t, f)
	checkSyncedAt(t, db, time.Date(2026, 11, 20, 2, 30, 0, 0, time.UTC), time.Date(2026, 11, 20, 3, 30, 0, 0, time.UTC))

	ref := referenceIngest(t, f, []string{"cvelist", "nvd", "kev", "epss1", "epss2", "osv", "debian1", "debian2", "msrc", "eol"})
	want := catalogRecords(t, ref)
	got := catalogRecords(t, db)
	if len(want) < 1000 {
		t.Fatalf("reference catalog has %d records", len(want))
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("synced catalog differs from an ingest of the same files (-ingest +sync):\n%s", diff)
	}

	// Stage 3: nothing changed upstream.
	f.setStage(3)
	clock.Set(time.Date(2026, 11, 20, 4, 30, 0, 0, time.UTC))
	res = syncOK(t, s)
	for _, name := range order {
		if res[name].Ingest != nil {
			t.Errorf("stage 3: %s ran an ingest (%s)", name, res[name].Summary)
		}
	}
	for _, r := range f.requests(3) {
		switch {
		case r.Status == 304, r.Status == 404 && strings.HasSuffix(r.Path, "/rocky-linux.md"):
		case strings.HasPrefix(r.Path, "/nvd/") && r.Status == 200 && r.Records == 0:
		default:
			t.Errorf("stage 3: %s?%s answered %d with %d bytes, %d records: nothing should have been transferred",
				r.Path, r.Query, r.Status, r.Bytes, r.Records)
		}
	}

	states, err := db.ListSyncStates(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != len(order) {
		t.Errorf("%d sync states, want %d", len(states), len(order))
	}
	for _, st := range states {
		if st.Error != "" || st.Failures != 0 || !st.LastSuccess.Equal(clock.Now()) {
			t.Errorf("state of %s: %+v", st.Source, st)
		}
	}
}

// downloads returns the paths a stage fetched with a 200 under prefix.
func downloads(f *fakeUpstream, stage int, prefix string) []string {
	var out []string
	for _, r := range f.requests(stage) {
		if r.Status == 200 && strings.HasPrefix(r.Path, prefix) {
			out = append(out, r.Path)
		}
	}
	return out
}

func checkStage1(t *testing.T, f *fakeUpstream) {
	t.Helper()
	// The CVE List: the newest baseline and its day's newest delta.
	wantAssets := []string{
		"/github/download/cve_2026-11-20_0200Z/2026-11-20_all_CVEs_at_midnight.zip.zip",
		"/github/download/cve_2026-11-20_0200Z/2026-11-20_delta_CVEs_at_0200Z.zip",
	}
	if diff := gocmp.Diff(wantAssets, downloads(f, 1, "/github/download/")); diff != "" {
		t.Errorf("stage 1: CVE List assets (-want +got):\n%s", diff)
	}
	// The NVD: the whole listing, page by page, no window.
	var nvdRecords, nvdPages int
	for _, r := range f.requests(1) {
		if !strings.HasPrefix(r.Path, "/nvd/") {
			continue
		}
		q, _ := url.ParseQuery(r.Query)
		if q.Has("lastModStartDate") {
			t.Errorf("stage 1: NVD window on the first sync: %s", r.Query)
		}
		nvdPages++
		nvdRecords += r.Records
	}
	if nvdRecords == 0 || nvdPages != (nvdRecords+4)/5 {
		t.Errorf("stage 1: NVD %d records in %d pages of 5", nvdRecords, nvdPages)
	}
	// OSV: every ecosystem's all.zip, no single record.
	for _, p := range downloads(f, 1, "/osv/") {
		if !strings.HasSuffix(p, "/all.zip") && !strings.HasSuffix(p, "/modified_id.csv") {
			t.Errorf("stage 1: OSV fetched %s", p)
		}
	}
}

func checkStage2(t *testing.T, f *fakeUpstream) {
	t.Helper()
	// The CVE List: the one new delta, no baseline.
	wantAssets := []string{"/github/download/cve_2026-11-20_0300Z/2026-11-20_delta_CVEs_at_0300Z.zip"}
	if diff := gocmp.Diff(wantAssets, downloads(f, 2, "/github/download/")); diff != "" {
		t.Errorf("stage 2: CVE List assets (-want +got):\n%s", diff)
	}
	// The NVD: contiguous windows of at most 120 days from the NVD's own
	// time of the first sync, each paged.
	var prevEnd time.Time
	records := 0
	for _, r := range f.requests(2) {
		if !strings.HasPrefix(r.Path, "/nvd/") {
			continue
		}
		q, _ := url.ParseQuery(r.Query)
		from, err1 := time.Parse(nvdTimeLayout, q.Get("lastModStartDate"))
		to, err2 := time.Parse(nvdTimeLayout, q.Get("lastModEndDate"))
		if err1 != nil || err2 != nil || r.Status != 200 {
			t.Errorf("stage 2: NVD request %s: %d", r.Query, r.Status)
			continue
		}
		if to.Sub(from) > nvdMaxWindow {
			t.Errorf("stage 2: NVD window %s..%s longer than 120 days", from, to)
		}
		switch {
		case prevEnd.IsZero() && !from.Equal(nvdStage1):
			t.Errorf("stage 2: first NVD window starts at %s, want the first sync's NVD time %s", from, nvdStage1)
		case !prevEnd.IsZero() && !from.Equal(prevEnd) && q.Get("startIndex") == "0":
			t.Errorf("stage 2: NVD window starts at %s, previous ended at %s", from, prevEnd)
		}
		prevEnd = to
		records += r.Records
	}
	if records == 0 {
		t.Error("stage 2: no NVD record fetched")
	}
	// OSV: single records only for ecosystems that had some in stage 1.
	for _, p := range downloads(f, 2, "/osv/") {
		eco := strings.Split(p, "/")[2]
		if strings.HasSuffix(p, "/all.zip") && len(f.osvRecords(eco, 1)) > 0 {
			t.Errorf("stage 2: OSV fetched %s although %s had a cursor", p, eco)
		}
		if name := strings.TrimSuffix(p[strings.LastIndex(p, "/")+1:], ".json"); strings.HasSuffix(p, ".json") {
			for _, r := range f.osvRecords(eco, 1) {
				if r.id == name {
					t.Errorf("stage 2: OSV fetched %s again", name)
				}
			}
		}
	}
	// MSRC: only the months updated since the first sync.
	for _, p := range downloads(f, 2, "/msrc/cvrf/v3.0/cvrf/") {
		id := p[strings.LastIndex(p, "/")+1:]
		for _, e := range f.msrcListed(1) {
			if e.id == id {
				t.Errorf("stage 2: MSRC fetched %s again", id)
			}
		}
	}
}

// TestSyncFailures checks that a source that fails keeps its data, shows as
// stale and backs off, that the others go on, and that retryable answers
// are retried.
func TestSyncFailures(t *testing.T) {
	f := newFakeUpstream(t)
	db := mustOpenStore(t)
	ctx := context.Background()
	clock := newClock(time.Date(2026, 11, 20, 2, 30, 0, 0, time.UTC))
	cfg := testConfig(f, db, clock, "nvd", "epss", "debian")
	s := mustNew(t, cfg)

	// A 503 then success; the NVD's 403 of a client over its limit.
	f.addFault("/debian/tracker/data/json", fault{status: 503, retryAfter: "1"})
	f.addFault("/nvd/rest/json/cves/2.0", fault{status: 403, retryAfter: "1"})
	syncOK(t, s)
	for _, p := range []string{"/debian/tracker/data/json", "/nvd/rest/json/cves/2.0"} {
		var codes []int
		for _, r := range f.requests(1) {
			if r.Path == p {
				codes = append(codes, r.Status)
			}
		}
		if len(codes) < 2 || codes[0] < 400 || codes[1] != 200 {
			t.Errorf("%s answered %v, want an error then 200", p, codes)
		}
	}
	before := catalogRecords(t, db)
	epssBefore, err := db.SyncState(ctx, "epss")
	if err != nil {
		t.Fatal(err)
	}

	// Stage 2: EPSS changed, and its body is cut short every time.
	f.setStage(2)
	clock.Set(clock.Now().Add(time.Hour))
	f.addFault("/epss/epss_scores-current.csv.gz", fault{truncate: true, sticky: true})
	results, err := s.SyncOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		switch {
		case r.Source == "epss" && r.Err == nil:
			t.Error("epss: synced from a truncated body")
		case r.Source == "epss" && !strings.Contains(r.Err.Error(), "cut short"):
			t.Errorf("epss: error %v, want a body cut short", r.Err)
		case r.Source != "epss" && r.Err != nil:
			t.Errorf("%s failed with epss: %v", r.Source, r.Err)
		case r.Source == "debian" && r.RecordsChanged == 0:
			t.Error("debian: the tracker changed but nothing was ingested")
		}
	}
	st, err := db.SyncState(ctx, "epss")
	if err != nil {
		t.Fatal(err)
	}
	if st.Failures != 1 || st.Error == "" || !st.NextAttempt.After(st.LastAttempt) ||
		st.Cursor != epssBefore.Cursor || st.ETag != epssBefore.ETag || !st.LastSuccess.Equal(epssBefore.LastSuccess) {
		t.Errorf("epss state after a failure: %+v (before: %+v)", st, epssBefore)
	}
	after := catalogRecords(t, db)
	for id, rec := range before {
		if diff := gocmp.Diff(rec["epss"], after[id]["epss"]); diff != "" {
			t.Errorf("%s: EPSS changed although its sync failed (-before +after):\n%s", id, diff)
		}
	}
	status, err := s.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ss := range status {
		if ss.Stale != (ss.Source == "epss") {
			t.Errorf("status of %s: stale = %v", ss.Source, ss.Stale)
		}
	}

	// The next attempt, once the upstream is sound again, succeeds.
	f.clearFaults()
	clock.Set(clock.Now().Add(time.Hour))
	res := syncOK(t, s, "epss")
	if res["epss"].Ingest == nil {
		t.Error("epss: nothing ingested after recovery")
	}
	if st, _ := db.SyncState(ctx, "epss"); st.Failures != 0 || st.Error != "" || !st.NextAttempt.IsZero() {
		t.Errorf("epss state after recovery: %+v", st)
	}
}

// TestStalledTransfer checks that a transfer that stops sending is cut and
// tried again rather than waited on forever.
func TestStalledTransfer(t *testing.T) {
	f := newFakeUpstream(t)
	db := mustOpenStore(t)
	cfg := testConfig(f, db, newClock(time.Date(2026, 11, 20, 2, 30, 0, 0, time.UTC)), "epss")
	cfg.IdleTimeout = 100 * time.Millisecond
	s := mustNew(t, cfg)
	f.addFault("/epss/epss_scores-current.csv.gz", fault{stall: true})
	res := syncOK(t, s)
	if res["epss"].Requests != 2 || res["epss"].Ingest == nil {
		t.Errorf("epss after a stalled transfer: %d requests, %s", res["epss"].Requests, res["epss"].Summary)
	}
	f.addFault("/epss/epss_scores-current.csv.gz", fault{stall: true, sticky: true})
	f.setStage(2)
	results, err := s.SyncOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := results[0].Err; err == nil || !strings.Contains(err.Error(), "no data for 100ms") {
		t.Errorf("epss stalling every time: err = %v", err)
	}
}

// TestCVEListResumes checks the paging of the releases list back to the
// cursor, and the baseline for a cursor too old.
func TestCVEListResumes(t *testing.T) {
	tests := []struct {
		name       string
		cursor     string
		wantAssets []string
		wantCursor string
	}{
		{
			name:   "deltas since a cursor on the previous day",
			cursor: "2026-11-19T23:30:00Z",
			wantAssets: []string{
				"/github/download/cve_2026-11-19_at_end_of_day/2026-11-19_delta_CVEs_at_end_of_day.zip",
				"/github/download/cve_2026-11-20_0300Z/2026-11-20_delta_CVEs_at_0300Z.zip",
			},
			wantCursor: "2026-11-20T03:00:00Z",
		},
		{
			name:   "baseline for a cursor older than the deltas listed",
			cursor: "2026-11-01T00:00:00Z",
			wantAssets: []string{
				"/github/download/cve_2026-11-20_0300Z/2026-11-20_all_CVEs_at_midnight.zip.zip",
				"/github/download/cve_2026-11-20_0300Z/2026-11-20_delta_CVEs_at_0300Z.zip",
			},
			wantCursor: "2026-11-20T03:00:00Z",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeUpstream(t)
			f.setStage(2)
			db := mustOpenStore(t)
			ctx := context.Background()
			if err := db.PutSyncState(ctx, catalog.SyncState{Source: "cvelist", Cursor: tt.cursor}); err != nil {
				t.Fatal(err)
			}
			clock := newClock(time.Date(2026, 11, 20, 3, 30, 0, 0, time.UTC))
			s := mustNew(t, testConfig(f, db, clock, "cvelist"))
			syncOK(t, s)
			if diff := gocmp.Diff(tt.wantAssets, downloads(f, 2, "/github/download/")); diff != "" {
				t.Errorf("assets (-want +got):\n%s", diff)
			}
			st, err := db.SyncState(ctx, "cvelist")
			if err != nil {
				t.Fatal(err)
			}
			if st.Cursor != tt.wantCursor {
				t.Errorf("cursor = %s, want %s", st.Cursor, tt.wantCursor)
			}
		})
	}
}

// TestSyncLeaseHeld checks that a replica does not sync while another
// holds the lease.
func TestSyncLeaseHeld(t *testing.T) {
	f := newFakeUpstream(t)
	db := mustOpenStore(t)
	ctx := context.Background()
	clock := newClock(time.Date(2026, 11, 20, 2, 30, 0, 0, time.UTC))
	if ok, _, err := db.AcquireSyncLease(ctx, "other-replica", clock.Now(), time.Hour); err != nil || !ok {
		t.Fatalf("AcquireSyncLease = %v, %v", ok, err)
	}
	cfg := testConfig(f, db, clock, "debian")
	cfg.Holder = "this-replica"
	s := mustNew(t, cfg)
	if _, err := s.SyncOnce(ctx); !errors.Is(err, ErrLeaseHeld) || !strings.Contains(err.Error(), "other-replica") {
		t.Errorf("SyncOnce with the lease held elsewhere: err = %v", err)
	}
	if n := len(f.requests(1)); n != 0 {
		t.Errorf("%d requests made without the lease", n)
	}
	// Once it expires, this replica takes over.
	clock.Set(clock.Now().Add(2 * time.Hour))
	syncOK(t, s)
}

// TestMirrorDirectory checks a source synced from a local directory.
func TestMirrorDirectory(t *testing.T) {
	dir := t.TempDir()
	for _, name := range sampleFiles(t, "debian", ".json") {
		if err := os.WriteFile(filepath.Join(dir, name), readSample(t, "debian/"+name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	db := mustOpenStore(t)
	s := mustNew(t, Config{Store: db, Sources: []Source{{Name: "debian", URL: dir}}, TempDir: t.TempDir()})
	if r := syncOK(t, s)["debian"]; r.Ingest == nil || r.RecordsChanged == 0 {
		t.Errorf("first sync of the mirror: %+v", r)
	}
	if r := syncOK(t, s)["debian"]; r.Ingest != nil {
		t.Errorf("unchanged mirror ingested again: %s", r.Summary)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(filepath.Join(dir, sampleFiles(t, "debian", ".json")[0]), later, later); err != nil {
		t.Fatal(err)
	}
	if r := syncOK(t, s)["debian"]; r.Ingest == nil {
		t.Errorf("touched mirror not ingested: %s", r.Summary)
	}
}

// TestConditionalLastModified checks a document served with Last-Modified
// and no ETag: the second sync asks If-Modified-Since and gets a 304.
func TestConditionalLastModified(t *testing.T) {
	body := readSample(t, "debian/anchore-vunnel_debian.json")
	modified := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	var (
		mu  sync.Mutex
		got []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ims := r.Header.Get("If-Modified-Since")
		mu.Lock()
		got = append(got, ims)
		mu.Unlock()
		if t, err := http.ParseTime(ims); err == nil && !modified.After(t) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Last-Modified", modified.Format(http.TimeFormat))
		w.Write(body)
	}))
	defer srv.Close()
	db := mustOpenStore(t)
	s := mustNew(t, Config{Store: db, Sources: []Source{{Name: "debian", URL: srv.URL + "/tracker/data/json"}}, TempDir: t.TempDir()})
	if r := syncOK(t, s)["debian"]; r.Ingest == nil {
		t.Errorf("first sync: %s", r.Summary)
	}
	if r := syncOK(t, s)["debian"]; r.Ingest != nil || r.Summary != "not modified" {
		t.Errorf("second sync: %s", r.Summary)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"", modified.Format(http.TimeFormat)}; !slices.Equal(got, want) {
		t.Errorf("If-Modified-Since sent: %q, want %q", got, want)
	}
}

// checkSyncedAt checks that every data source of every record carries the
// start of the sync that fetched its data: the first or the second, and
// the first for kev, which did not change since.
func checkSyncedAt(t *testing.T, c cve.Catalog, first, second time.Time) {
	t.Helper()
	seen := map[string]int{}
	for id, rec := range catalogRecordsWithTimes(t, c) {
		for _, ds := range rec.DataSources {
			switch {
			case ds.SyncedAt == nil:
				t.Fatalf("%s: %s has no syncedAt", id, ds.Name)
			case ds.SyncedAt.Equal(first):
				seen["first"]++
			case ds.SyncedAt.Equal(second):
				seen["second"]++
				if ds.Name == "kev" {
					t.Errorf("%s: kev syncedAt %v, the second sync, which did not change kev", id, ds.SyncedAt)
				}
			default:
				t.Fatalf("%s: %s syncedAt %v, the start of neither sync", id, ds.Name, ds.SyncedAt)
			}
		}
	}
	if seen["first"] == 0 || seen["second"] == 0 {
		t.Errorf("data sources by sync: %v, want some of each", seen)
	}
}

func catalogRecordsWithTimes(tb testing.TB, c cve.Catalog) map[string]*cve.Record {
	tb.Helper()
	ctx := context.Background()
	out := map[string]*cve.Record{}
	if err := c.Walk(ctx, "", func(s cve.Summary) error {
		rec, err := c.Record(ctx, s.CVEID)
		out[s.CVEID] = rec
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	return out
}
