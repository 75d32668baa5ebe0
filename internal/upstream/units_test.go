package upstream

import (
	"context"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/catalog"
)

func TestTokenBucketRollingWindow(t *testing.T) {
	tests := []struct {
		name   string
		bucket func() *TokenBucket
		limit  int // requests allowed in any 30 s window
	}{
		{"without key", func() *TokenBucket { return NVDLimiter(false) }, 5},
		{"with key", func() *TokenBucket { return NVDLimiter(true) }, 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.bucket()
			now := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
			b.now = func() time.Time { return now }
			b.sleep = func(_ context.Context, d time.Duration) error {
				now = now.Add(d)
				return nil
			}
			var at []time.Time
			for range 4 * tt.limit {
				if err := b.Wait(context.Background()); err != nil {
					t.Fatal(err)
				}
				at = append(at, now)
			}
			for i := range at {
				n := 0
				for _, x := range at[i:] {
					if x.Sub(at[i]) < 30*time.Second {
						n++
					}
				}
				if n > tt.limit {
					t.Fatalf("%d requests in the 30 s from %s, limit %d", n, at[i].Format(time.TimeOnly), tt.limit)
				}
			}
			if total := at[len(at)-1].Sub(at[0]); total > time.Duration(4*tt.limit)*30*time.Second/time.Duration(tt.limit) {
				t.Errorf("%d requests took %s: slower than the limit", len(at), total)
			}
		})
	}
}

func TestTokenBucketCanceled(t *testing.T) {
	b := NewTokenBucket(1, time.Hour, 1)
	if err := b.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Wait(ctx); err == nil {
		t.Error("Wait on an empty bucket with a canceled context: no error")
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 21, 5, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"30", 30 * time.Second, true},
		{"0", 0, true},
		{"-1", 0, false},
		{"Sat, 21 Nov 2026 05:01:00 GMT", time.Minute, true},
		{"Sat, 21 Nov 2026 04:00:00 GMT", 0, true},
		{"soon", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseRetryAfter(tt.in, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestNextLink(t *testing.T) {
	tests := []struct{ in, want string }{
		{`<https://api.github.com/repositories/1/releases?page=2>; rel="next", <https://api.github.com/repositories/1/releases?page=9>; rel="last"`,
			"https://api.github.com/repositories/1/releases?page=2"},
		{`<https://x/releases?page=1>; rel="prev", <https://x/releases?page=1>; rel="first"`, ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := nextLink(tt.in); got != tt.want {
			t.Errorf("nextLink(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestLocalName(t *testing.T) {
	tests := []struct {
		url, source string
		exts        []string
		want        string
	}{
		{defaultURLs["kev"], "kev", []string{".json"}, "known_exploited_vulnerabilities.json"},
		{defaultURLs["epss"], "epss", []string{".csv"}, "epss_scores-current.csv.gz"},
		{defaultURLs["debian"], "debian", []string{".json"}, "debian.json"},
		{"https://mirror.example/feeds/", "kev", []string{".json"}, "kev.json"},
	}
	for _, tt := range tests {
		if got := localName(tt.url, tt.source, tt.exts); got != tt.want {
			t.Errorf("localName(%q) = %q, want %q", tt.url, got, tt.want)
		}
	}
}

func TestNVDWindows(t *testing.T) {
	day := 24 * time.Hour
	start := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	got := nvdWindows(start, start.Add(300*day))
	want := []window{
		{start, start.Add(120 * day)},
		{start.Add(120 * day), start.Add(240 * day)},
		{start.Add(240 * day), start.Add(300 * day)},
	}
	if diff := gocmp.Diff(want, got, gocmp.AllowUnexported(window{})); diff != "" {
		t.Errorf("nvdWindows (-want +got):\n%s", diff)
	}
	if got := nvdWindows(start, start); len(got) != 0 {
		t.Errorf("nvdWindows of an empty range = %v", got)
	}
}

func TestPlanCVEList(t *testing.T) {
	asset := func(name string) cveAsset {
		a, ok := parseCVEAsset(ghAsset{Name: name, URL: "https://x/" + name})
		if !ok {
			t.Fatalf("parseCVEAsset(%q) failed", name)
		}
		return a
	}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	listed := []cveAsset{
		asset("2026-11-21_all_CVEs_at_midnight.zip.zip"),
		asset("2026-11-21_delta_CVEs_at_0500Z.zip"),
		asset("2026-11-21_delta_CVEs_at_0400Z.zip"),
		asset("2026-11-20_delta_CVEs_at_end_of_day.zip"),
		asset("2026-11-20_delta_CVEs_at_2300Z.zip"),
		asset("2026-11-20_all_CVEs_at_midnight.zip.zip"),
		asset("2026-11-19_delta_CVEs_at_2200Z.zip"),
	}
	now := at("2026-11-21T05:30:00Z")
	tests := []struct {
		name        string
		assets      []cveAsset
		cursor      string
		reached     bool
		want        []string
		wantCursor  string
		wantBaseErr bool
	}{
		{
			name:       "first sync",
			assets:     listed,
			want:       []string{"2026-11-21_all_CVEs_at_midnight.zip.zip", "2026-11-21_delta_CVEs_at_0500Z.zip"},
			wantCursor: "2026-11-21T05:00:00Z",
		},
		{
			name: "same day", assets: listed, cursor: "2026-11-21T04:00:00Z", reached: true,
			want:       []string{"2026-11-21_delta_CVEs_at_0500Z.zip"},
			wantCursor: "2026-11-21T05:00:00Z",
		},
		{
			name: "up to date", assets: listed, cursor: "2026-11-21T05:00:00Z", reached: true,
			wantCursor: "2026-11-21T05:00:00Z",
		},
		{
			name: "previous day, end of day published", assets: listed, cursor: "2026-11-20T23:00:00Z", reached: true,
			want:       []string{"2026-11-20_delta_CVEs_at_end_of_day.zip", "2026-11-21_delta_CVEs_at_0500Z.zip"},
			wantCursor: "2026-11-21T05:00:00Z",
		},
		{
			name: "previous day, end of day not yet published",
			assets: []cveAsset{
				asset("2026-11-21_delta_CVEs_at_0100Z.zip"),
				asset("2026-11-20_delta_CVEs_at_2300Z.zip"),
				asset("2026-11-20_delta_CVEs_at_2200Z.zip"),
			},
			cursor: "2026-11-20T22:00:00Z", reached: true,
			want: []string{"2026-11-20_delta_CVEs_at_2300Z.zip", "2026-11-21_delta_CVEs_at_0100Z.zip"},
			// The cursor stays on the unfinished day, to come back for its
			// end-of-day delta.
			wantCursor: "2026-11-20T23:00:00Z",
		},
		{
			name: "a day without delta", cursor: "2026-11-19T22:00:00Z", reached: true,
			assets: []cveAsset{
				asset("2026-11-21_all_CVEs_at_midnight.zip.zip"),
				asset("2026-11-21_delta_CVEs_at_0500Z.zip"),
				asset("2026-11-19_delta_CVEs_at_2200Z.zip"),
			},
			want:       []string{"2026-11-21_all_CVEs_at_midnight.zip.zip", "2026-11-21_delta_CVEs_at_0500Z.zip"},
			wantCursor: "2026-11-21T05:00:00Z",
		},
		{
			name: "listing does not reach the cursor", assets: listed, cursor: "2026-11-18T10:00:00Z",
			want:       []string{"2026-11-21_all_CVEs_at_midnight.zip.zip", "2026-11-21_delta_CVEs_at_0500Z.zip"},
			wantCursor: "2026-11-21T05:00:00Z",
		},
		{
			name: "cursor too old", assets: listed, cursor: "2026-10-01T00:00:00Z", reached: true,
			want:       []string{"2026-11-21_all_CVEs_at_midnight.zip.zip", "2026-11-21_delta_CVEs_at_0500Z.zip"},
			wantCursor: "2026-11-21T05:00:00Z",
		},
		{
			name: "baseline needed, none listed", cursor: "2026-10-01T00:00:00Z", reached: true,
			assets:      []cveAsset{asset("2026-11-21_delta_CVEs_at_0500Z.zip")},
			wantBaseErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cursor time.Time
			if tt.cursor != "" {
				cursor = at(tt.cursor)
			}
			plan, err := planCVEList(tt.assets, cursor, now, 14*24*time.Hour, tt.reached)
			if tt.wantBaseErr {
				if err == nil {
					t.Errorf("no error, plan %+v", plan)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range plan.assets {
				got = append(got, a.name)
			}
			if diff := gocmp.Diff(tt.want, got); diff != "" {
				t.Errorf("assets (-want +got):\n%s", diff)
			}
			if c := plan.cursor.Format(time.RFC3339); c != tt.wantCursor {
				t.Errorf("cursor = %s, want %s", c, tt.wantCursor)
			}
		})
	}
}

func TestDueAt(t *testing.T) {
	at := time.Date(2026, 11, 21, 5, 0, 0, 0, time.UTC)
	every := time.Hour
	tests := []struct {
		name string
		st   catalog.SyncState
		want time.Time
	}{
		{"never synced", catalog.SyncState{}, time.Time{}},
		{"synced", catalog.SyncState{LastAttempt: at, LastSuccess: at}, at.Add(every)},
		{"failed, backing off", catalog.SyncState{LastAttempt: at, Failures: 2, NextAttempt: at.Add(2 * time.Minute)}, at.Add(2 * time.Minute)},
		{"failed, backoff beyond the interval", catalog.SyncState{LastAttempt: at, Failures: 9, NextAttempt: at.Add(6 * time.Hour)}, at.Add(every)},
	}
	for _, tt := range tests {
		if got := dueAt(tt.st, every); !got.Equal(tt.want) {
			t.Errorf("%s: dueAt = %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	s := &Syncer{cfg: Config{Backoff: Backoff{Base: time.Minute, Max: 10 * time.Minute}}}
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute}
	for i, w := range want {
		if got := s.backoff(i + 1); got != w {
			t.Errorf("backoff(%d) = %s, want %s", i+1, got, w)
		}
	}
}

func TestParseSource(t *testing.T) {
	tests := []struct {
		arg     string
		want    Source
		wantErr bool
	}{
		{"kev", Source{Name: "kev", URL: defaultURLs["kev"]}, false},
		{"nvd=https://mirror.example/nvd", Source{Name: "nvd", URL: "https://mirror.example/nvd"}, false},
		{"osv=/srv/osv", Source{Name: "osv", URL: "/srv/osv"}, false},
		{"csaf=/srv/csaf", Source{Name: "csaf", URL: "/srv/csaf"}, false},
		{"csaf", Source{}, true},
		{"csaf=https://vendor.example/.well-known/csaf", Source{}, true},
		{"nope", Source{}, true},
		{"kev=", Source{}, true},
	}
	for _, tt := range tests {
		got, err := ParseSource(tt.arg)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseSource(%q) = %+v, %v; want %+v, error %v", tt.arg, got, err, tt.want, tt.wantErr)
		}
	}
	if len(Defaults()) != len(order) {
		t.Errorf("Defaults() has %d sources, want %d: every parser is in this build", len(Defaults()), len(order))
	}
}
