// The lookup API's handlers, route by route, on catalogs in memory. This
// file is over 600 lines because it holds a test for each route and
// behaviour of the handler (records, lists, cursors, batches, streams,
// rate limits, CORS, health), each short; the OSV, package and source
// routes have files of their own.

package lookupapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/httpx"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/ratelimit"
)

func TestOpenAPIDocument(t *testing.T) {
	doc := loadOpenAPI(t)
	if !doc.IsOpenAPI31OrLater() {
		t.Errorf("openapi = %q, want 3.1", doc.OpenAPI)
	}
	if doc.Info.Version != "1.0.0" {
		t.Errorf("info.version = %q, want 1.0.0", doc.Info.Version)
	}
	// Every API route is described, and nothing else.
	want := []string{
		"GET /cve/{id}", "GET /cve/{id}/osv", "GET /cve", "POST /cve/batch", "POST /packages/query", "POST /sbom",
		"GET /cve/bulk.jsonl", "GET /cve/modified.csv", "GET /openapi.json", "GET /status",
		"GET /sources", "GET /sources/{name}",
	}
	var got []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			got = append(got, method+" "+path)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("operations (-want +got):\n%s", diff)
	}
	if !json.Valid(OpenAPI()) {
		t.Error("openapi.json is not valid JSON")
	}
}

func TestGetRecord(t *testing.T) {
	a := newAPITest(t, Config{})
	tests := []struct {
		name       string
		path       string
		valid      validity
		wantStatus int
		wantID     string
		wantDetail string
	}{
		{"canonical", "/api/v1/cve/CVE-2021-44228", validRequest, 200, "CVE-2021-44228", ""},
		{"lower case", "/api/v1/cve/cve-2021-44228", validRequest, 200, "CVE-2021-44228", ""},
		{"mixed case", "/api/v1/cve/Cve-2021-9999", validRequest, 200, "CVE-2021-9999", ""},
		{"rejected records are served", "/api/v1/cve/CVE-2021-10000", validRequest, 200, "CVE-2021-10000", ""},
		{"unknown", "/api/v1/cve/CVE-2020-0001", validRequest, 404, "", "CVE-2020-0001 is not in the catalog"},
		{"malformed", "/api/v1/cve/CVE-21-1", invalidRequest, 400, "", "malformed CVE id"},
		{"short sequence", "/api/v1/cve/CVE-2021-123", invalidRequest, 400, "", "malformed CVE id"},
		{"not an id", "/api/v1/cve/log4shell", invalidRequest, 400, "", "malformed CVE id"},
		{"trailing junk", "/api/v1/cve/CVE-2021-44228x", invalidRequest, 400, "", "malformed CVE id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := a.get(tt.path, tt.valid)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", rec.Code, tt.wantStatus, rec.Body)
			}
			h := rec.Header()
			if got := h.Get("Access-Control-Allow-Origin"); got != "*" {
				t.Errorf("Access-Control-Allow-Origin = %q", got)
			}
			if tt.wantStatus != 200 {
				p := problemOf(t, rec)
				if p.Status != tt.wantStatus || !strings.Contains(p.Detail, tt.wantDetail) {
					t.Errorf("problem = %+v, want status %d and detail with %q", p, tt.wantStatus, tt.wantDetail)
				}
				return
			}
			var got struct {
				CVEID string `json:"cveId"`
				Links struct {
					Self string `json:"self"`
					HTML string `json:"html"`
				} `json:"_links"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if got.CVEID != tt.wantID {
				t.Errorf("cveId = %q, want %q", got.CVEID, tt.wantID)
			}
			wantSelf := "http://" + testHost + "/api/v1/cve/" + tt.wantID
			wantHTML := "http://" + testHost + "/cve/" + tt.wantID
			if got.Links.Self != wantSelf || got.Links.HTML != wantHTML {
				t.Errorf("_links = %+v, want self %s html %s", got.Links, wantSelf, wantHTML)
			}
			if h.Get("ETag") == "" || h.Get("Cache-Control") != cacheRecord || h.Get("Content-Type") != "application/json" {
				t.Errorf("headers: %v", h)
			}
		})
	}
}

func TestGetRecordKeepsStoredBytes(t *testing.T) {
	stored := []byte(`{"cveId":"CVE-2021-44228","description":"x \u003c y","future":{"a":[1,2]}}` + "\n")
	cat := &fakeCatalog{RecordJSONFn: func(_ context.Context, id string) ([]byte, error) { return stored, nil }}
	a := newAPITest(t, Config{Catalog: cat, PublicURL: "https://cve.example.org/api/v1"})
	rec := a.serve(newRequest("GET", "/api/v1/cve/CVE-2021-44228", nil))
	want := `{"cveId":"CVE-2021-44228","description":"x \u003c y","future":{"a":[1,2]},"_links":{"self":"https://cve.example.org/api/v1/cve/CVE-2021-44228","html":"https://cve.example.org/cve/CVE-2021-44228"}}`
	if got := rec.Body.String(); got != want {
		t.Errorf("body\n got %s\nwant %s", got, want)
	}
}

func TestAppendLinks(t *testing.T) {
	tests := []struct {
		name, publicURL, body, want string
		wantErr                     bool
	}{
		{"object", "https://x.test/api/v1", `{"a":1}`, `{"a":1,"_links":{"self":"https://x.test/api/v1/cve/CVE-2024-0001","html":"https://x.test/cve/CVE-2024-0001"}}`, false},
		{"empty object", "https://x.test/api/v1/", `{ }`, `{ "_links":{"self":"https://x.test/api/v1/cve/CVE-2024-0001","html":"https://x.test/cve/CVE-2024-0001"}}`, false},
		{"trailing space", "https://x.test/api/v1", "{\"a\":1}\n\t ", `{"a":1,"_links":{"self":"https://x.test/api/v1/cve/CVE-2024-0001","html":"https://x.test/cve/CVE-2024-0001"}}`, false},
		{"public URL without the base path", "https://x.test/lookup", `{"a":1}`, `{"a":1,"_links":{"self":"https://x.test/lookup/cve/CVE-2024-0001","html":"https://x.test/cve/CVE-2024-0001"}}`, false},
		{"not an object", "https://x.test/api/v1", `[1]`, ``, true},
		{"empty", "https://x.test/api/v1", ``, ``, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := newLinker(strings.TrimRight(tt.publicURL, "/"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := l.appendLinks(nil, []byte(tt.body), "CVE-2024-0001", newRequest("GET", "/", nil))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			if !tt.wantErr {
				if string(got) != tt.want {
					t.Errorf("got  %s\nwant %s", got, tt.want)
				}
				if !json.Valid(got) {
					t.Errorf("not JSON: %s", got)
				}
			}
		})
	}
	if _, err := newLinker("ftp://x.test/api/v1"); err == nil {
		t.Error("newLinker accepted an ftp URL")
	}
}

func TestConditionalRequests(t *testing.T) {
	a := newAPITest(t, Config{})
	for _, path := range []string{
		"/api/v1/cve/CVE-2021-44228",
		"/api/v1/cve/CVE-2021-44228/osv",
		"/api/v1/cve?kev=true",
		"/api/v1/cve/bulk.jsonl",
		"/api/v1/cve/modified.csv",
		"/api/v1/openapi.json",
	} {
		t.Run(path, func(t *testing.T) {
			first := a.get(path, validRequest)
			etag := first.Header().Get("ETag")
			if first.Code != 200 || etag == "" || first.Header().Get("Cache-Control") == "" {
				t.Fatalf("status %d, ETag %q, Cache-Control %q", first.Code, etag, first.Header().Get("Cache-Control"))
			}
			again := a.get(path, validRequest, "If-None-Match", etag)
			if again.Code != http.StatusNotModified || again.Body.Len() != 0 {
				t.Errorf("If-None-Match %s: status %d, body %d bytes", etag, again.Code, again.Body.Len())
			}
			other := a.get(path, validRequest, "If-None-Match", `"other", W/"x"`)
			if other.Code != 200 {
				t.Errorf("other ETag: status %d", other.Code)
			}
			if again := a.get(path, validRequest); again.Header().Get("ETag") != etag {
				t.Errorf("ETag changed between two identical requests")
			}
		})
	}
}

func TestHead(t *testing.T) {
	a := newAPITest(t, Config{})
	for _, path := range []string{"/api/v1/cve/CVE-2021-44228", "/api/v1/cve/bulk.jsonl"} {
		rec := a.serve(newRequest("HEAD", path, nil))
		if rec.Code != 200 || rec.Body.Len() != 0 || rec.Header().Get("Content-Type") == "" {
			t.Errorf("HEAD %s: %d, %d bytes, %v", path, rec.Code, rec.Body.Len(), rec.Header())
		}
	}
}

func TestInternalErrorsRevealNothing(t *testing.T) {
	cat := &fakeCatalog{
		RecordJSONFn:  func(context.Context, string) ([]byte, error) { return nil, errBoom },
		RecordFn:      func(context.Context, string) (*cve.Record, error) { return nil, errBoom },
		ListFn:        func(context.Context, cve.ListQuery) (cve.Page, error) { return cve.Page{}, errBoom },
		RecordsJSONFn: func(context.Context, []string) (map[string][]byte, error) { return nil, errBoom },
		StatsFn:       func(context.Context) (cve.Stats, error) { return cve.Stats{}, errBoom },
	}
	a := newAPITest(t, Config{Catalog: cat})
	for _, req := range []*http.Request{
		newRequest("GET", "/api/v1/cve/CVE-2021-44228", nil),
		newRequest("GET", "/api/v1/cve/CVE-2021-44228/osv", nil),
		newRequest("GET", "/api/v1/cve", nil),
		newRequest("POST", "/api/v1/cve/batch", strings.NewReader(`{"ids":["CVE-2021-44228"]}`)),
		newRequest("GET", "/api/v1/cve/bulk.jsonl", nil),
	} {
		rec := a.do(req, validRequest)
		if rec.Code != 500 || strings.Contains(rec.Body.String(), "fire") {
			t.Errorf("%s %s: %d %s", req.Method, req.URL.Path, rec.Code, rec.Body)
		}
	}
}

func TestParseListQuery(t *testing.T) {
	tests := []struct {
		query string
		want  cve.ListQuery
	}{
		{"", cve.ListQuery{Sort: "published", Desc: true, Limit: 50}},
		{"q=+log4j++jndi+&limit=7", cve.ListQuery{Q: "log4j jndi", Sort: "published", Desc: true, Limit: 7}},
		{"severity=HIGH&severity=critical&severity=HIGH", cve.ListQuery{Severities: []string{"CRITICAL", "HIGH"}, Sort: "published", Desc: true, Limit: 50}},
		{"kev=true&fix=false", cve.ListQuery{KEV: ptr(true), Fix: ptr(false), Sort: "published", Desc: true, Limit: 50}},
		{"epss_min=0.5", cve.ListQuery{EPSSMin: ptr(0.5), Sort: "published", Desc: true, Limit: 50}},
		{"epss_min=0&limit=1", cve.ListQuery{EPSSMin: ptr(0.0), Sort: "published", Desc: true, Limit: 1}},
		{"epss_min=1&limit=100", cve.ListQuery{EPSSMin: ptr(1.0), Sort: "published", Desc: true, Limit: 100}},
		{"year=2024&year=1999&year=2024", cve.ListQuery{Years: []int{1999, 2024}, Sort: "published", Desc: true, Limit: 50}},
		{"sort=cve&dir=asc", cve.ListQuery{Sort: "cve", Limit: 50}},
		{"sort=epss&dir=desc", cve.ListQuery{Sort: "epss", Desc: true, Limit: 50}},
		{"sort=cvss", cve.ListQuery{Sort: "cvss", Desc: true, Limit: 50}},
		{"sort=fix", cve.ListQuery{Sort: "fix", Desc: true, Limit: 50}},
		{"sort=kev", cve.ListQuery{Sort: "kev", Desc: true, Limit: 50}},
		{"sort=published", cve.ListQuery{Sort: "published", Desc: true, Limit: 50}},
		{"kev=&fix=&q=&cursor=&limit=", cve.ListQuery{Sort: "published", Desc: true, Limit: 50}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			q, err := parseListQuery(mustParseQuery(t, tt.query))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, q.ListQuery); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseListQueryInvalid(t *testing.T) {
	tests := []struct{ query, wantDetail string }{
		{"limit=0", "limit"},
		{"limit=101", "limit"},
		{"limit=-1", "limit"},
		{"limit=ten", "limit"},
		{"limit=1.5", "limit"},
		{"epss_min=2", "epss_min"},
		{"epss_min=-0.1", "epss_min"},
		{"epss_min=NaN", "epss_min"},
		{"epss_min=high", "epss_min"},
		{"severity=SEVERE", "severity"},
		{"severity=NONE", "severity"},
		{"kev=yes", "kev"},
		{"fix=1", "fix"},
		{"year=99", "year"},
		{"year=1998", "year"},
		{"year=10000", "year"},
		{"year=20x4", "year"},
		{"sort=severity", "sort"},
		{"sort=PUBLISHED", "sort"},
		{"dir=up", "dir"},
		{"limit=5&limit=6", "more than once"},
		{"sort=cve&sort=epss", "more than once"},
		{"q=" + strings.Repeat("x", 201), "q is"},
		{"page=2", "unknown query parameter"},
		{"cursor=!!!", "cursor is not valid"},
		{"cursor=AAAA", "cursor is not valid"},
		{"cursor=" + strings.Repeat("A", 65), "cursor is not valid"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			_, err := parseListQuery(mustParseQuery(t, tt.query))
			if err == nil || errs.StatusOf(err) != 400 || !strings.Contains(errs.Message(err), tt.wantDetail) {
				t.Errorf("err = %v, want a 400 about %q", err, tt.wantDetail)
			}
		})
	}
}

func mustParseQuery(tb testing.TB, s string) map[string][]string {
	tb.Helper()
	r := httptest.NewRequest("GET", "/?"+s, nil)
	return r.URL.Query()
}

func TestCursor(t *testing.T) {
	parse := func(s string) *listQuery {
		q, err := parseListQuery(mustParseQuery(t, s))
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	base := parse("q=log4j&severity=HIGH&severity=CRITICAL&kev=true&year=2021&sort=epss&dir=desc")
	positions := []cve.Position{
		{Value: 0.97565, Key: 2021_000_000_044_228},
		{Value: -1, Key: 1999_000_000_000_001},
		{Value: 1.7e9, Key: 9999_999_999_999_999},
		{Value: 0, Key: 0},
	}
	for _, p := range positions {
		c := encodeCursor(p, base.digest)
		if !regexp.MustCompile(`^[A-Za-z0-9_-]+$`).MatchString(c) || len(c) > 64 {
			t.Errorf("cursor %q is not short base64url", c)
		}
		got, err := decodeCursor(c, base.digest)
		if err != nil {
			t.Fatal(err)
		}
		if *got != p {
			t.Errorf("round trip of %+v gave %+v", p, *got)
		}
	}
	c := encodeCursor(positions[0], base.digest)
	// The same query spelled differently, or with another limit, takes it.
	for _, same := range []string{
		"severity=CRITICAL&severity=high&q=log4j&kev=true&year=2021&sort=epss&limit=7",
		"q=+log4j+&severity=HIGH&severity=CRITICAL&severity=HIGH&kev=true&year=2021&year=2021&sort=epss&dir=desc&limit=100",
	} {
		if _, err := parseListQuery(mustParseQuery(t, same+"&cursor="+c)); err != nil {
			t.Errorf("%s: %v", same, err)
		}
	}
	// Another query refuses it.
	for _, other := range []string{
		"q=log4j2&severity=HIGH&severity=CRITICAL&kev=true&year=2021&sort=epss",
		"q=log4j&severity=HIGH&kev=true&year=2021&sort=epss",
		"q=log4j&severity=HIGH&severity=CRITICAL&kev=false&year=2021&sort=epss",
		"q=log4j&severity=HIGH&severity=CRITICAL&kev=true&fix=true&year=2021&sort=epss",
		"q=log4j&severity=HIGH&severity=CRITICAL&kev=true&year=2021&year=2022&sort=epss",
		"q=log4j&severity=HIGH&severity=CRITICAL&kev=true&year=2021&sort=epss&epss_min=0",
		"q=log4j&severity=HIGH&severity=CRITICAL&kev=true&year=2021&sort=cvss",
		"q=log4j&severity=HIGH&severity=CRITICAL&kev=true&year=2021&sort=epss&dir=asc",
		"",
	} {
		_, err := parseListQuery(mustParseQuery(t, other+"&cursor="+c))
		if err == nil || !strings.Contains(errs.Message(err), "another query") {
			t.Errorf("%q took the cursor of another query: %v", other, err)
		}
	}
	// A cursor that was tampered with is refused.
	b := []byte(c)
	for i := range b {
		tampered := slices.Clone(b)
		tampered[i] = "AB"[(strings.IndexByte("AB", b[i])+1)%2]
		if string(tampered) == c {
			continue
		}
		q, err := parseListQuery(mustParseQuery(t, "q=log4j&severity=HIGH&severity=CRITICAL&kev=true&year=2021&sort=epss&cursor="+string(tampered)))
		if err == nil && q.After.Key == positions[0].Key && q.After.Value == positions[0].Value {
			t.Errorf("tampered cursor %s decodes to the same position", tampered)
		}
	}
}

func TestListRecords(t *testing.T) {
	var got []cve.ListQuery
	cat := memCatalog(testRecords()...)
	list := cat.ListFn
	cat.ListFn = func(ctx context.Context, q cve.ListQuery) (cve.Page, error) {
		got = append(got, q)
		return list(ctx, q)
	}
	a := newAPITest(t, Config{Catalog: cat})
	rec := a.get("/api/v1/cve?limit=1&sort=cve&dir=desc&kev=true", validRequest)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var page struct {
		Results []map[string]any `json:"results"`
		Next    *string          `json:"nextCursor"`
	}
	json.Unmarshal(rec.Body.Bytes(), &page)
	if len(page.Results) != 1 || page.Results[0]["cveId"] != "CVE-2021-44228" || page.Next == nil {
		t.Fatalf("first page: %s", rec.Body)
	}
	wantKeys := []string{"_links", "cveId", "cvss", "cvssVersion", "epss", "hasRemediation", "isKev", "publishedAt", "severity"}
	if diff := cmp.Diff(wantKeys, sortedKeys(page.Results[0])); diff != "" {
		t.Errorf("summary fields (-want +got):\n%s", diff)
	}
	rec = a.get("/api/v1/cve?limit=1&sort=cve&dir=desc&kev=true&cursor="+*page.Next, validRequest)
	json.Unmarshal(rec.Body.Bytes(), &page)
	if len(page.Results) != 1 || page.Results[0]["cveId"] != "CVE-2021-9999" {
		t.Fatalf("second page: %s", rec.Body)
	}
	if page.Next != nil {
		rec = a.get("/api/v1/cve?limit=1&sort=cve&dir=desc&kev=true&cursor="+*page.Next, validRequest)
		json.Unmarshal(rec.Body.Bytes(), &page)
		if len(page.Results) != 0 || page.Next != nil {
			t.Fatalf("third page: %s", rec.Body)
		}
	}
	if got[1].After == nil || got[1].After.Key != 2021_000_000_044_228 {
		t.Errorf("second List call: %+v", got[1])
	}
	// A cursor of this query is refused by another.
	rec = a.get("/api/v1/cve?limit=1&sort=cve&dir=asc&kev=true&cursor="+nextCursorOf(t, a, "/api/v1/cve?limit=1&sort=cve&dir=desc&kev=true"), validRequest)
	if rec.Code != 400 || !strings.Contains(problemOf(t, rec).Detail, "another query") {
		t.Errorf("cursor of another query: %d %s", rec.Code, rec.Body)
	}
}

// nextCursorOf returns the nextCursor of a list request.
func nextCursorOf(tb testing.TB, a *apiTest, path string) string {
	tb.Helper()
	rec := a.get(path, validRequest)
	var page struct {
		Next *string `json:"nextCursor"`
	}
	json.Unmarshal(rec.Body.Bytes(), &page)
	if page.Next == nil {
		tb.Fatalf("%s: no nextCursor", path)
	}
	return *page.Next
}

func TestListRecordsInvalid(t *testing.T) {
	a := newAPITest(t, Config{})
	for _, q := range []string{
		"limit=0", "limit=101", "epss_min=2", "epss_min=-1", "sort=name", "dir=sideways",
		"severity=BAD", "kev=maybe", "fix=maybe", "year=12", "cursor=%21%21",
	} {
		rec := a.get("/api/v1/cve?"+q, invalidRequest)
		if rec.Code != 400 || problemOf(t, rec).Status != 400 {
			t.Errorf("%s: %d %s", q, rec.Code, rec.Body)
		}
	}
	// The document cannot say these are wrong, but they are.
	for _, q := range []string{"cursor=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "page=2", "limit=5&limit=6"} {
		rec := a.get("/api/v1/cve?"+q, validRequest)
		if rec.Code != 400 {
			t.Errorf("%s: %d %s", q, rec.Code, rec.Body)
		}
	}
}

func TestListSummaryEncoding(t *testing.T) {
	rows := []cve.Summary{
		{CVEID: "CVE-2024-0001", Severity: ptr("HIGH"), CVSS: ptr(7.5), CVSSVersion: ptr("3.x"), EPSS: ptr(0.00043), IsKEV: true, HasRemediation: true, PublishedAt: date("2024-01-02T15:04:05Z"), ModifiedAt: date("2024-02-02T00:00:00Z")},
		{CVEID: "CVE-2024-0002", EPSS: ptr(1e-7)},
	}
	cat := &fakeCatalog{ListFn: func(context.Context, cve.ListQuery) (cve.Page, error) { return cve.Page{Rows: rows}, nil }}
	a := newAPITest(t, Config{Catalog: cat})
	rec := a.get("/api/v1/cve", validRequest)
	// The hand-written encoding says what encoding/json would.
	type summary struct {
		cve.Summary
		ModifiedAt *time.Time `json:"modifiedAt,omitempty"`
		Links      cve.Links  `json:"_links"`
	}
	var want struct {
		Results    []summary `json:"results"`
		NextCursor *string   `json:"nextCursor"`
	}
	for _, r := range rows {
		want.Results = append(want.Results, summary{Summary: r, Links: cve.Links{Self: "http://" + testHost + "/api/v1/cve/" + r.CVEID}})
	}
	wantJSON, _ := json.Marshal(want)
	if diff := cmp.Diff(decodeJSON(t, wantJSON), decodeJSON(t, rec.Body.Bytes())); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestBatch(t *testing.T) {
	a := newAPITest(t, Config{})
	many := func(n int) string {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("CVE-2021-%04d", 1000+i)
		}
		b, _ := json.Marshal(map[string]any{"ids": ids})
		return string(b)
	}
	tests := []struct {
		name         string
		body         string
		valid        validity
		wantStatus   int
		wantResults  []string
		wantNotFound []string
		wantDetail   string
	}{
		{
			name:         "found, unknown, malformed and repeated",
			body:         `{"ids":["cve-2021-9999","CVE-2021-44228","CVE-2020-0001","nonsense","CVE-2021-9999","CVE-2021-44228","nonsense","CVE-2020-0001","CVE-2021-10000"]}`,
			valid:        validRequest,
			wantStatus:   200,
			wantResults:  []string{"CVE-2021-9999", "CVE-2021-44228", "CVE-2021-10000"},
			wantNotFound: []string{"CVE-2020-0001", "nonsense"},
		},
		{name: "empty list", body: `{"ids":[]}`, valid: validRequest, wantStatus: 200, wantResults: []string{}, wantNotFound: []string{}},
		{name: "100 ids", body: many(100), valid: validRequest, wantStatus: 200, wantResults: []string{}, wantNotFound: nil},
		{name: "101 ids", body: many(101), valid: invalidRequest, wantStatus: 400, wantDetail: "at most 100"},
		{name: "no ids", body: `{}`, valid: invalidRequest, wantStatus: 400, wantDetail: `"ids"`},
		{name: "null ids", body: `{"ids":null}`, valid: invalidRequest, wantStatus: 400, wantDetail: `"ids"`},
		{name: "ids not strings", body: `{"ids":[1,2]}`, valid: invalidRequest, wantStatus: 400, wantDetail: "not valid JSON"},
		{name: "unknown field", body: `{"ids":[],"more":1}`, valid: invalidRequest, wantStatus: 400, wantDetail: "unknown field"},
		{name: "not JSON", body: `ids=CVE-2021-44228`, valid: invalidRequest, wantStatus: 400, wantDetail: "not valid JSON"},
		{name: "empty body", body: ``, valid: invalidRequest, wantStatus: 400, wantDetail: "not valid JSON"},
		{name: "two values", body: `{"ids":[]}{"ids":[]}`, valid: validRequest, wantStatus: 400, wantDetail: "after the JSON value"},
		{name: "too large", body: `{"ids":["CVE-2021-44228"` + strings.Repeat(" ", 70<<10) + `]}`, valid: noRoute, wantStatus: 400, wantDetail: "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := newRequest("POST", "/api/v1/cve/batch", strings.NewReader(tt.body))
			var rec *httptest.ResponseRecorder
			if tt.valid == noRoute {
				rec = a.serve(req) // too large to be worth validating
			} else {
				rec = a.do(req, tt.valid)
			}
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d: %.300s", rec.Code, tt.wantStatus, rec.Body)
			}
			if tt.wantStatus != 200 {
				if p := problemOf(t, rec); !strings.Contains(p.Detail, tt.wantDetail) {
					t.Errorf("detail %q, want %q in it", p.Detail, tt.wantDetail)
				}
				return
			}
			var resp struct {
				Results []struct {
					CVEID string `json:"cveId"`
					Links struct {
						Self string `json:"self"`
					} `json:"_links"`
				} `json:"results"`
				NotFound []string `json:"notFound"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
				t.Fatal(err)
			}
			ids := []string{}
			for _, r := range resp.Results {
				ids = append(ids, r.CVEID)
				if r.Links.Self != "http://"+testHost+"/api/v1/cve/"+r.CVEID {
					t.Errorf("self link %q", r.Links.Self)
				}
			}
			if diff := cmp.Diff(tt.wantResults, ids); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
			if tt.wantNotFound != nil {
				if diff := cmp.Diff(tt.wantNotFound, resp.NotFound); diff != "" {
					t.Errorf("notFound (-want +got):\n%s", diff)
				}
			}
			if !strings.Contains(rec.Body.String(), `"notFound":[`) {
				t.Errorf("notFound is not an array: %s", rec.Body)
			}
		})
	}
}

// TestStreams asks the streams of a catalog without versions, encoded as
// they are sent, and of one with versions, rendered: the same bytes.
func TestStreams(t *testing.T) {
	t.Run("encoded", func(t *testing.T) { testStreams(t, newAPITest(t, Config{})) })
	t.Run("rendered", func(t *testing.T) {
		testStreams(t, newAPITest(t, Config{Catalog: &versionedCatalog{fakeCatalog: memCatalog(testRecords()...)}}))
	})
}

func testStreams(t *testing.T, a *apiTest) {
	tests := []struct {
		name, path, wantType string
		want                 []string
	}{
		{"bulk", "/api/v1/cve/bulk.jsonl", contentTypeNDJSON, []string{
			`{"cveId":"CVE-1999-0001","severity":null,"cvss":null,"epss":null,"isKev":false,"hasRemediation":false,"publishedAt":"1999-12-30T05:00:00Z","modifiedAt":"2020-01-01T00:00:00Z","rejected":false}`,
			`{"cveId":"CVE-2021-9999","severity":null,"cvss":null,"epss":null,"isKev":true,"hasRemediation":false,"publishedAt":null,"modifiedAt":"2024-01-01T00:00:00Z","rejected":false}`,
			`{"cveId":"CVE-2021-10000","severity":null,"cvss":null,"epss":null,"isKev":false,"hasRemediation":false,"publishedAt":null,"modifiedAt":"2024-02-02T00:00:00Z","rejected":true}`,
			`{"cveId":"CVE-2021-44228","severity":"CRITICAL","cvss":10,"epss":0.97565,"isKev":true,"hasRemediation":true,"publishedAt":"2021-12-10T10:15:09Z","modifiedAt":"2025-02-20T00:00:00Z","rejected":false}`,
		}},
		{"bulk after", "/api/v1/cve/bulk.jsonl?after=cve-2021-9999", contentTypeNDJSON, []string{
			`{"cveId":"CVE-2021-10000","severity":null,"cvss":null,"epss":null,"isKev":false,"hasRemediation":false,"publishedAt":null,"modifiedAt":"2024-02-02T00:00:00Z","rejected":true}`,
			`{"cveId":"CVE-2021-44228","severity":"CRITICAL","cvss":10,"epss":0.97565,"isKev":true,"hasRemediation":true,"publishedAt":"2021-12-10T10:15:09Z","modifiedAt":"2025-02-20T00:00:00Z","rejected":false}`,
		}},
		{"bulk after an id not in the catalog", "/api/v1/cve/bulk.jsonl?after=CVE-2021-20000", contentTypeNDJSON, []string{
			`{"cveId":"CVE-2021-44228","severity":"CRITICAL","cvss":10,"epss":0.97565,"isKev":true,"hasRemediation":true,"publishedAt":"2021-12-10T10:15:09Z","modifiedAt":"2025-02-20T00:00:00Z","rejected":false}`,
		}},
		{"bulk after the last", "/api/v1/cve/bulk.jsonl?after=CVE-2021-44228", contentTypeNDJSON, nil},
		{"modified", "/api/v1/cve/modified.csv", contentTypeCSV, []string{
			"cve_id,modified",
			"CVE-1999-0001,2020-01-01T00:00:00Z",
			"CVE-2021-9999,2024-01-01T00:00:00Z",
			"CVE-2021-10000,2024-02-02T00:00:00Z",
			"CVE-2021-44228,2025-02-20T00:00:00Z",
		}},
		{"modified after", "/api/v1/cve/modified.csv?after=CVE-2021-10000", contentTypeCSV, []string{
			"cve_id,modified",
			"CVE-2021-44228,2025-02-20T00:00:00Z",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := a.get(tt.path, validRequest)
			if rec.Code != 200 || rec.Header().Get("Content-Type") != tt.wantType {
				t.Fatalf("status %d, Content-Type %q", rec.Code, rec.Header().Get("Content-Type"))
			}
			if diff := cmp.Diff(tt.want, lines(rec.Body.Bytes())); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
			// Every bulk line matches the BulkLine schema.
			if tt.wantType == contentTypeNDJSON {
				doc := loadOpenAPI(t)
				schema := doc.Components.Schemas["BulkLine"].Value
				for _, l := range lines(rec.Body.Bytes()) {
					var v any
					json.Unmarshal([]byte(l), &v)
					if err := schema.VisitJSON(v); err != nil {
						t.Errorf("line %s: %v", l, err)
					}
				}
			}
			// Gzip when asked, the same lines.
			gz := a.get(tt.path, validRequest, "Accept-Encoding", "br, gzip;q=0.8")
			if gz.Header().Get("Content-Encoding") != "gzip" || !strings.Contains(gz.Header().Get("Vary"), "Accept-Encoding") {
				t.Fatalf("gzip: headers %v", gz.Header())
			}
			zr, err := gzip.NewReader(gz.Body)
			if err != nil {
				t.Fatal(err)
			}
			plain, err := io.ReadAll(zr)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(plain, rec.Body.Bytes()) {
				t.Errorf("gzip body differs")
			}
			if gz.Header().Get("ETag") == rec.Header().Get("ETag") {
				t.Errorf("gzip and identity share an ETag")
			}
			if no := a.get(tt.path, validRequest, "Accept-Encoding", "gzip;q=0"); no.Header().Get("Content-Encoding") != "" {
				t.Errorf("gzip;q=0 got gzip")
			}
		})
	}
	for _, bad := range []string{"after=CVE-21-1", "after=nonsense", "from=CVE-2021-1000", "after=CVE-2021-1000&after=CVE-2021-1001"} {
		for _, path := range []string{"/api/v1/cve/bulk.jsonl?", "/api/v1/cve/modified.csv?"} {
			want := invalidRequest
			if strings.HasPrefix(bad, "from") || strings.Count(bad, "after") > 1 {
				want = validRequest
			}
			rec := a.get(path+bad, want)
			if rec.Code != 400 {
				t.Errorf("%s%s: %d", path, bad, rec.Code)
			}
		}
	}
}

func TestStreamFailureCutsTheResponse(t *testing.T) {
	cat := memCatalog(testRecords()...)
	cat.WalkFn = func(ctx context.Context, after string, fn func(cve.Summary) error) error {
		for i := range 5000 {
			if err := fn(cve.Summary{CVEID: fmt.Sprintf("CVE-2024-%04d", 1000+i)}); err != nil {
				return err
			}
		}
		return errBoom
	}
	srv, err := New(Config{Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/api/v1/cve/modified.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("a stream that failed midway ended like a complete one")
	}
}

func TestOSVEndpoint(t *testing.T) {
	a := newAPITest(t, Config{})
	rec := a.get("/api/v1/cve/cve-2021-44228/osv", validRequest)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var v struct {
		ID               string `json:"id"`
		DatabaseSpecific struct {
			ExtensionEcosystems []string `json:"extension_ecosystems"`
		} `json:"database_specific"`
	}
	json.Unmarshal(rec.Body.Bytes(), &v)
	if v.ID != "CVE-2021-44228" || !slices.Equal(v.DatabaseSpecific.ExtensionEcosystems, []string{"Windows"}) {
		t.Errorf("osv: %s", rec.Body)
	}
	for path, want := range map[string]int{"/api/v1/cve/CVE-2020-0001/osv": 404, "/api/v1/cve/CVE-20-1/osv": 400} {
		valid := validRequest
		if want == 400 {
			valid = invalidRequest
		}
		if rec := a.get(path, valid); rec.Code != want {
			t.Errorf("%s: %d, want %d", path, rec.Code, want)
		}
	}
}

func TestRateLimit(t *testing.T) {
	reset := time.Unix(1_700_000_100, 500)
	lim := &fixedLimiter{results: []ratelimit.Result{
		{Limit: 2, Remaining: 1, Reset: reset, Allowed: true},
		{Limit: 2, Remaining: 0, Reset: reset, Allowed: true},
		{Limit: 2, Remaining: 0, Reset: reset, RetryAfter: 1500 * time.Millisecond, Allowed: false},
	}}
	proxies, _ := ratelimit.ParseProxies("192.0.2.0/24")
	a := newAPITest(t, Config{Limiter: lim, Proxies: proxies})
	var statuses []int
	for range 3 {
		req := newRequest("GET", "/api/v1/cve/CVE-2021-44228", nil)
		req.Header.Set("X-Forwarded-For", "203.0.113.9, 192.0.2.99")
		rec := a.do(req, validRequest)
		statuses = append(statuses, rec.Code)
		h := rec.Header()
		if h.Get("X-RateLimit-Limit") != "2" || h.Get("X-RateLimit-Reset") != "1700000101" || h.Get("X-RateLimit-Remaining") == "" {
			t.Errorf("rate-limit headers: %v", h)
		}
		if rec.Code == 429 {
			if h.Get("Retry-After") != "2" {
				t.Errorf("Retry-After = %q, want 2", h.Get("Retry-After"))
			}
			if p := problemOf(t, rec); p.Status != 429 || !strings.Contains(p.Detail, "rate limit") {
				t.Errorf("problem: %+v", p)
			}
			if h.Get("Access-Control-Allow-Origin") != "*" {
				t.Error("a 429 without CORS headers is unreadable to a browser")
			}
		}
	}
	if diff := cmp.Diff([]int{200, 200, 429}, statuses); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"203.0.113.9", "203.0.113.9", "203.0.113.9"}, lim.keys); diff != "" {
		t.Errorf("client keys (-want +got):\n%s", diff)
	}
	// Errors, human pages and streams count too; health checks and metrics do not.
	lim.keys = nil
	for _, path := range []string{"/api/v1/cve?limit=0", "/", "/cve/CVE-2021-44228", "/api/v1/cve/bulk.jsonl", "/healthz", "/metrics"} {
		a.serve(newRequest("GET", path, nil))
	}
	if len(lim.keys) != 4 {
		t.Errorf("limiter asked %d times, want 4", len(lim.keys))
	}
}

func TestRateLimitLocal(t *testing.T) {
	a := newAPITest(t, Config{Limiter: ratelimit.NewLocal(ratelimit.Rate{N: 3, Period: time.Minute})})
	var got []string
	for range 4 {
		rec := a.get("/api/v1/cve/CVE-2021-44228", validRequest)
		got = append(got, fmt.Sprintf("%d %s", rec.Code, rec.Header().Get("X-RateLimit-Remaining")))
		if rec.Code == 429 && rec.Header().Get("Retry-After") != "20" {
			t.Errorf("Retry-After = %q, want 20", rec.Header().Get("Retry-After"))
		}
	}
	if diff := cmp.Diff([]string{"200 2", "200 1", "200 0", "429 0"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// Another client is not affected.
	req := newRequest("GET", "/api/v1/cve/CVE-2021-44228", nil)
	req.RemoteAddr = "198.51.100.1:1"
	if rec := a.do(req, validRequest); rec.Code != 200 {
		t.Errorf("other client: %d", rec.Code)
	}
}

func TestRateLimiterDown(t *testing.T) {
	a := newAPITest(t, Config{Limiter: &fixedLimiter{err: errBoom}})
	if rec := a.get("/api/v1/cve/CVE-2021-44228", validRequest); rec.Code != 200 {
		t.Errorf("status %d with the limiter down, want 200", rec.Code)
	}
}

func TestCORS(t *testing.T) {
	a := newAPITest(t, Config{})
	req := newRequest("OPTIONS", "/api/v1/cve/batch", nil)
	req.Header.Set("Origin", "https://app.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type")
	rec := a.serve(req)
	h := rec.Header()
	if rec.Code != 204 || h.Get("Access-Control-Allow-Origin") != "*" ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Content-Type") {
		t.Errorf("preflight: %d %v", rec.Code, h)
	}
	rec = a.get("/api/v1/cve/CVE-2021-44228", validRequest, "Origin", "https://app.example")
	if !strings.Contains(rec.Header().Get("Access-Control-Expose-Headers"), "X-RateLimit-Remaining") {
		t.Errorf("exposed headers: %v", rec.Header())
	}
}

func TestUnknownAPIPaths(t *testing.T) {
	a := newAPITest(t, Config{})
	tests := []struct {
		method, path string
		wantStatus   int
		wantAllow    string
	}{
		{"GET", "/api/v1/nothing", 404, ""},
		{"GET", "/api/v1/cve/CVE-2021-44228/nvd", 404, ""},
		{"DELETE", "/api/v1/cve/CVE-2021-44228", 405, "GET, HEAD, OPTIONS"},
		{"PUT", "/api/v1/cve/batch", 405, "GET, HEAD, POST, OPTIONS"},
		{"POST", "/api/v1/cve", 405, "GET, HEAD, OPTIONS"},
		// Under the API once decoded only: no route matches the path as
		// sent, and the answer is still the API's.
		{"GET", "/api/v1%2F", 404, ""},
		{"POST", "/api/v1%2Fcve%2Fbatch", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			rec := a.serve(newRequest(tt.method, tt.path, nil))
			if rec.Code != tt.wantStatus || rec.Header().Get("Allow") != tt.wantAllow {
				t.Errorf("%d Allow %q, want %d %q", rec.Code, rec.Header().Get("Allow"), tt.wantStatus, tt.wantAllow)
			}
			if p := problemOf(t, rec); p.Status != tt.wantStatus {
				t.Errorf("problem %+v", p)
			}
		})
	}
}

func TestHealthAndMetrics(t *testing.T) {
	a := newAPITest(t, Config{})
	a.get("/api/v1/cve/CVE-2021-44228", validRequest)
	if rec := a.serve(newRequest("GET", "/healthz", nil)); rec.Code != 200 || rec.Body.String() != "ok\n" {
		t.Errorf("healthz: %d %q", rec.Code, rec.Body)
	}
	rec := a.serve(newRequest("GET", "/metrics", nil))
	want := `patchline_lookup_requests_total{code="200",route="GET /api/v1/cve/{id}"} 1`
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), want) {
		t.Errorf("metrics lack %s:\n%.3000s", want, rec.Body)
	}
}

func TestStatusRoute(t *testing.T) {
	status := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, map[string]any{
			"stale":   true,
			"catalog": map[string]any{"records": 2, "rejected": 0, "updatedAt": nil},
			"sources": []map[string]any{{
				"source": "kev", "lastSuccessAt": nil, "lastAttemptAt": nil, "stale": true,
				"error": nil, "failures": 0, "nextAttemptAt": nil, "recordsChanged": 0,
			}},
		})
	})
	a := newAPITest(t, Config{Status: status})
	rec := a.get(BasePath+"/status", validRequest)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /status = %d: %s", rec.Code, rec.Body)
	}
	// Without a status handler the route does not exist.
	b := newAPITest(t, Config{})
	if rec := b.serve(newRequest("GET", BasePath+"/status", nil)); rec.Code != http.StatusNotFound {
		t.Errorf("GET /status without a handler = %d, want 404", rec.Code)
	}
}
