package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/patchline/patchline/internal/catalog"
)

func TestStatusHandler(t *testing.T) {
	db := mustOpenStore(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 21, 5, 0, 0, 0, time.UTC)
	for _, st := range []catalog.SyncState{
		{Source: "kev", LastAttempt: now.Add(-time.Hour), LastSuccess: now.Add(-time.Hour), RecordsChanged: 3},
		{Source: "nvd", LastAttempt: now.Add(-time.Hour), LastSuccess: now.Add(-72 * time.Hour)},
		{Source: "epss", LastAttempt: now.Add(-time.Hour), LastSuccess: now.Add(-25 * time.Hour),
			Error: "sync epss: GET https://epss.example/x: HTTP 503", Failures: 2, NextAttempt: now.Add(time.Minute)},
	} {
		if err := db.PutSyncState(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	h := StatusHandler(db, db, StatusOptions{Sources: []string{"kev", "nvd", "epss", "osv"}, StaleAfter: 48 * time.Hour, Now: func() time.Time { return now }})

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/status", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" || !strings.Contains(rec.Header().Get("Cache-Control"), "public") {
		t.Fatalf("GET: %d %v\n%s", rec.Code, rec.Header(), rec.Body)
	}
	var doc StatusDocument
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if !doc.Stale || doc.Catalog.Records != 0 {
		t.Errorf("document: stale %v, records %d", doc.Stale, doc.Catalog.Records)
	}
	want := map[string]bool{"nvd": true, "kev": false, "epss": true, "osv": true}
	var names []string
	for _, s := range doc.Sources {
		names = append(names, s.Source)
		if s.Stale != want[s.Source] {
			t.Errorf("%s: stale = %v, want %v", s.Source, s.Stale, want[s.Source])
		}
	}
	if got := strings.Join(names, " "); got != "nvd kev epss osv" {
		t.Errorf("sources in order %q, want sync order", got)
	}
	// The raw document: field names and nulls as clients read them.
	var raw struct {
		Sources []map[string]any `json:"sources"`
	}
	json.Unmarshal(rec.Body.Bytes(), &raw)
	for _, s := range raw.Sources {
		switch s["source"] {
		case "kev":
			if s["lastSuccessAt"] != "2026-11-21T04:00:00Z" || s["error"] != nil || s["recordsChanged"] != 3.0 {
				t.Errorf("kev: %v", s)
			}
		case "epss":
			if s["error"] == nil || s["failures"] != 2.0 || s["nextAttemptAt"] != "2026-11-21T05:01:00Z" {
				t.Errorf("epss: %v", s)
			}
		case "osv":
			if s["lastSuccessAt"] != nil || s["lastAttemptAt"] != nil {
				t.Errorf("osv, never synced: %v", s)
			}
		}
	}

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/status", nil))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Content-Type") != "application/problem+json" {
		t.Errorf("POST: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
}

func TestMetrics(t *testing.T) {
	f := newFakeUpstream(t)
	db := mustOpenStore(t)
	clock := newClock(time.Date(2026, 11, 20, 2, 30, 0, 0, time.UTC))
	reg := prometheus.NewPedanticRegistry()
	cfg := testConfig(f, db, clock, "epss", "debian")
	m, err := RegisterMetrics(reg, db, StatusOptions{Sources: []string{"epss", "debian"}, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Metrics = m
	s := mustNew(t, cfg)
	syncOK(t, s)
	syncOK(t, s)
	f.addFault("/epss/epss_scores-current.csv.gz", fault{status: 500, sticky: true})
	if _, err := s.SyncOnce(context.Background(), "epss"); err != nil {
		t.Fatal(err)
	}

	checks := []struct {
		metric string
		labels map[string]string
		want   float64
	}{
		{"patchline_sync_runs_total", map[string]string{"source": "debian", "result": "changed"}, 1},
		{"patchline_sync_runs_total", map[string]string{"source": "debian", "result": "unchanged"}, 1},
		{"patchline_sync_runs_total", map[string]string{"source": "epss", "result": "error"}, 1},
		{"patchline_sync_requests_total", map[string]string{"source": "debian", "code": "304"}, 1},
		{"patchline_sync_requests_total", map[string]string{"source": "epss", "code": "500"}, 3},
		{"patchline_sync_stale", map[string]string{"source": "debian"}, 0},
		{"patchline_sync_stale", map[string]string{"source": "epss"}, 1},
		{"patchline_sync_consecutive_failures", map[string]string{"source": "epss"}, 1},
		{"patchline_sync_last_success_timestamp_seconds", map[string]string{"source": "debian"}, float64(clock.Now().Unix())},
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		got, ok := metricValue(families, c.metric, c.labels)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.metric, c.labels, got, ok, c.want)
		}
	}
	if _, ok := metricValue(families, "patchline_sync_bytes_total", map[string]string{"source": "debian"}); !ok {
		t.Error("no patchline_sync_bytes_total for debian")
	}
}

// metricValue finds the value of the series of a gathered family with
// exactly the given labels.
func metricValue(families []*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue(), true
			case m.Gauge != nil:
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

func TestLoop(t *testing.T) {
	f := newFakeUpstream(t)
	db := mustOpenStore(t)
	cfg := testConfig(f, db, newClock(time.Time{}), "debian")
	cfg.Now = time.Now
	s := mustNew(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if err := s.Loop(ctx, 200*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Loop returned %v, want the context's error", err)
	}
	var codes []int
	for _, r := range f.requests(1) {
		codes = append(codes, r.Status)
	}
	if len(codes) < 2 || codes[0] != 200 || codes[1] != 304 {
		t.Errorf("answers to the loop: %v, want 200 then 304s", codes)
	}
	// The loop gave the lease back.
	if ok, _, err := db.AcquireSyncLease(context.Background(), "another", time.Now(), time.Minute); err != nil || !ok {
		t.Errorf("lease after the loop: %v, %v", ok, err)
	}
}
