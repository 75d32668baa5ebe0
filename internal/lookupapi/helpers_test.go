package lookupapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/ratelimit"
)

// fakeCatalog is a cve.Catalog whose methods are its function fields.
type fakeCatalog struct {
	RecordFn      func(ctx context.Context, id string) (*cve.Record, error)
	RecordJSONFn  func(ctx context.Context, id string) ([]byte, error)
	RecordsJSONFn func(ctx context.Context, ids []string) (map[string][]byte, error)
	ListFn        func(ctx context.Context, q cve.ListQuery) (cve.Page, error)
	WalkFn        func(ctx context.Context, after string, fn func(cve.Summary) error) error
	StatsFn       func(ctx context.Context) (cve.Stats, error)
}

var _ cve.Catalog = (*fakeCatalog)(nil)

func (f *fakeCatalog) Record(ctx context.Context, id string) (*cve.Record, error) {
	return f.RecordFn(ctx, id)
}

func (f *fakeCatalog) RecordJSON(ctx context.Context, id string) ([]byte, error) {
	return f.RecordJSONFn(ctx, id)
}

func (f *fakeCatalog) RecordsJSON(ctx context.Context, ids []string) (map[string][]byte, error) {
	return f.RecordsJSONFn(ctx, ids)
}

func (f *fakeCatalog) List(ctx context.Context, q cve.ListQuery) (cve.Page, error) {
	return f.ListFn(ctx, q)
}

func (f *fakeCatalog) Walk(ctx context.Context, after string, fn func(cve.Summary) error) error {
	return f.WalkFn(ctx, after, fn)
}

func (f *fakeCatalog) Stats(ctx context.Context) (cve.Stats, error) { return f.StatsFn(ctx) }

// versionedCatalog is a fake catalog with versions, whose streams the
// lookup API renders.
type versionedCatalog struct {
	*fakeCatalog
	version atomic.Int64
}

func (c *versionedCatalog) Version(context.Context) (int64, error) { return c.version.Load(), nil }

// memCatalog returns a fake catalog that serves recs from memory. Its List
// orders by key (descending unless q says ascending) and applies the KEV
// filter only; tests of the real ordering live with the store.
func memCatalog(recs ...*cve.Record) *fakeCatalog {
	byID := map[string]*cve.Record{}
	for _, r := range recs {
		byID[r.CVEID] = r
	}
	sorted := slices.Clone(recs)
	slices.SortFunc(sorted, func(a, b *cve.Record) int { return cve.Compare(a.CVEID, b.CVEID) })
	return &fakeCatalog{
		RecordFn: func(_ context.Context, id string) (*cve.Record, error) {
			if r, ok := byID[id]; ok {
				return r, nil
			}
			return nil, errs.NotFoundf("%s is not in the catalog", id)
		},
		RecordJSONFn: func(_ context.Context, id string) ([]byte, error) {
			r, ok := byID[id]
			if !ok {
				return nil, errs.NotFoundf("%s is not in the catalog", id)
			}
			return json.Marshal(r)
		},
		RecordsJSONFn: func(_ context.Context, ids []string) (map[string][]byte, error) {
			out := map[string][]byte{}
			for _, id := range ids {
				if r, ok := byID[id]; ok {
					out[id], _ = json.Marshal(r)
				}
			}
			return out, nil
		},
		ListFn: func(_ context.Context, q cve.ListQuery) (cve.Page, error) {
			rows := slices.Clone(sorted)
			if q.Desc {
				slices.Reverse(rows)
			}
			var page cve.Page
			for _, r := range rows {
				key, _ := cve.Key(r.CVEID)
				if r.State == cve.StateRejected || (q.KEV != nil && (r.KEV != nil) != *q.KEV) {
					continue
				}
				if q.After != nil && ((q.Desc && key >= q.After.Key) || (!q.Desc && key <= q.After.Key)) {
					continue
				}
				if len(page.Rows) == q.Limit {
					last, _ := cve.Key(page.Rows[len(page.Rows)-1].CVEID)
					page.Next = &cve.Position{Value: float64(last), Key: last}
					break
				}
				page.Rows = append(page.Rows, cve.Summarize(r))
			}
			return page, nil
		},
		WalkFn: func(ctx context.Context, after string, fn func(cve.Summary) error) error {
			for _, r := range sorted {
				if after != "" && cve.Compare(r.CVEID, after) <= 0 {
					continue
				}
				if err := fn(cve.Summarize(r)); err != nil {
					return err
				}
			}
			return nil
		},
		StatsFn: func(context.Context) (cve.Stats, error) {
			return cve.Stats{Records: len(recs), Updated: time.Unix(1_700_000_000, 0)}, nil
		},
	}
}

func ptr[T any](v T) *T { return &v }

func date(s string) *time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return &t
}

// testRecords are records shaped like the catalog's: a fixed CVE with
// remediation in several ecosystems, a KEV one without a fix, a rejected
// one, and a bare one.
func testRecords() []*cve.Record {
	log4shell := &cve.Record{
		CVEID:       "CVE-2021-44228",
		State:       cve.StatePublished,
		Description: ptr("Apache Log4j2 2.0-beta9 through 2.15.0 JNDI features do not protect against attacker controlled LDAP and other JNDI related endpoints. An attacker can execute arbitrary code."),
		Severity:    ptr("CRITICAL"),
		CVSS: &cve.CVSS{
			Metric: cve.Metric{Version: "3.1", Vector: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:C/C:H/I:H/A:H", Score: 10, Severity: "CRITICAL", Source: "nvd@nist.gov", Type: cve.MetricPrimary},
			Metrics: []cve.Metric{
				{Version: "3.1", Vector: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:C/C:H/I:H/A:H", Score: 10, Severity: "CRITICAL", Source: "nvd@nist.gov", Type: cve.MetricPrimary},
				{Version: "2.0", Vector: "AV:N/AC:M/Au:N/C:C/I:C/A:C", Score: 9.3, Severity: "HIGH", Source: "nvd@nist.gov", Type: cve.MetricPrimary},
			},
		},
		EPSS: &cve.EPSS{Score: 0.97565, Percentile: 0.99999, Date: "2025-02-20", Model: "v2023.03.01"},
		KEV:  &cve.KEV{DateAdded: "2021-12-10", DueDate: "2021-12-24", RequiredAction: "Apply updates.", KnownRansomwareCampaignUse: "Known"},
		CWEs: []string{"CWE-502", "CWE-917"},
		Remediation: cve.Remediation{Available: true, Products: []cve.Product{
			{Ecosystem: "Maven", Product: "org.apache.logging.log4j:log4j-core", Atoms: []cve.Atom{
				{FixedVersion: "2.15.0", AffectedRange: ptr(">= 2.13.0, < 2.15.0"), AdvisoryID: ptr("GHSA-jfh8-c2jp-5v3q"), SourceURL: ptr("https://github.com/advisories/GHSA-jfh8-c2jp-5v3q"), Source: "GitHub Advisory Database", License: "CC-BY-4.0"},
				{FixedVersion: "2.12.2", AffectedRange: ptr("< 2.12.2"), AdvisoryID: ptr("GHSA-jfh8-c2jp-5v3q"), SourceURL: ptr("https://github.com/advisories/GHSA-jfh8-c2jp-5v3q"), Source: "GitHub Advisory Database", License: "CC-BY-4.0"},
			}},
			{Ecosystem: "Debian:10", Product: "apache-log4j2", Atoms: []cve.Atom{
				{FixedVersion: "2.15.0-1~deb10u1", AdvisoryID: ptr("DSA-5020-1"), Source: "Debian Security Tracker", License: "Debian", EOL: &cve.EOL{EOLFrom: ptr("2022-09-10"), EOESFrom: ptr("2024-06-30")}},
			}},
			{Ecosystem: "Go", Product: "example.com/log4go", Atoms: []cve.Atom{
				{FixedVersion: "v1.2.3", AffectedRange: ptr("< v1.2.3"), Source: "Go Vulnerability Database", License: "CC-BY-4.0"},
			}},
			{Ecosystem: "Windows", Product: "Windows Server 2019", Atoms: []cve.Atom{
				{FixedVersion: "10.0.17763.2366", KB: "KB5008218", Source: "Microsoft MSRC", License: "Microsoft terms"},
				{FixedVersion: "see advisory", Source: "Microsoft MSRC", License: "Microsoft terms", Unparsed: true},
			}},
		}},
		References: []cve.Reference{
			{URL: "https://logging.apache.org/log4j/2.x/security.html", Tags: []string{"Vendor Advisory"}},
			{URL: "https://github.com/apache/logging-log4j2/pull/608", Tags: []string{"Patch", "Third Party Advisory"}},
			{URL: "http://packetstormsecurity.com/files/165225", Tags: []string{"Exploit"}},
		},
		PublishedAt: date("2021-12-10T10:15:09Z"),
		ModifiedAt:  date("2025-02-20T00:00:00Z"),
		DataSources: []cve.DataSource{
			{Name: "NVD", Use: "CVSS, CWEs, reference tags", License: "public domain", URL: ptr("https://nvd.nist.gov/")},
			{Name: "CISA KEV", Use: "known exploited", License: "CC0-1.0", URL: ptr("https://www.cisa.gov/known-exploited-vulnerabilities-catalog")},
			{Name: "GitHub Advisory Database", Use: "fixed versions", License: "CC-BY-4.0", URL: nil},
		},
	}
	kevOnly := &cve.Record{
		CVEID: "CVE-2021-9999", State: cve.StatePublished, Description: ptr("A <script>alert(1)</script> flaw."),
		KEV:         &cve.KEV{DateAdded: "2022-01-01"},
		CWEs:        []string{},
		Remediation: cve.Remediation{Products: []cve.Product{}},
		References:  []cve.Reference{},
		ModifiedAt:  date("2024-01-01T00:00:00Z"),
		DataSources: []cve.DataSource{{Name: "CISA KEV", Use: "known exploited", License: "CC0-1.0"}},
	}
	rejected := &cve.Record{
		CVEID: "CVE-2021-10000", State: cve.StateRejected, RejectedReason: ptr("Duplicate of CVE-2021-44228."),
		CWEs: []string{}, Remediation: cve.Remediation{Products: []cve.Product{}}, References: []cve.Reference{},
		ModifiedAt:  date("2024-02-02T00:00:00Z"),
		DataSources: []cve.DataSource{{Name: "CVE List", Use: "state", License: "CVE Terms of Use"}},
	}
	bare := &cve.Record{
		CVEID: "CVE-1999-0001", State: cve.StatePublished, Description: ptr("Old."),
		CWEs: []string{}, Remediation: cve.Remediation{Products: []cve.Product{}}, References: []cve.Reference{},
		PublishedAt: date("1999-12-30T05:00:00Z"), ModifiedAt: date("2020-01-01T00:00:00Z"),
		DataSources: []cve.DataSource{},
	}
	return []*cve.Record{log4shell, kevOnly, rejected, bare}
}

// apiTest runs requests through a Server and validates each request and
// response against the OpenAPI document.
type apiTest struct {
	t      testing.TB
	srv    *Server
	router routers.Router
}

// testHost is the host of the requests of the tests.
const testHost = "lookup.test"

func init() {
	openapi3filter.RegisterBodyDecoder(contentTypeNDJSON, openapi3filter.FileBodyDecoder)
}

// loadOpenAPI parses and validates the served OpenAPI document.
func loadOpenAPI(tb testing.TB) *openapi3.T {
	tb.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(OpenAPI())
	if err != nil {
		tb.Fatalf("load openapi.json: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		tb.Fatalf("validate openapi.json: %v", err)
	}
	return doc
}

// newAPITest returns a test harness over a Server of c, with the catalog
// of testRecords when c has none.
func newAPITest(tb testing.TB, c Config) *apiTest {
	tb.Helper()
	if c.Catalog == nil {
		c.Catalog = memCatalog(testRecords()...)
	}
	srv, err := New(c)
	if err != nil {
		tb.Fatal(err)
	}
	doc := loadOpenAPI(tb)
	doc.Servers = openapi3.Servers{{URL: "http://" + testHost + BasePath}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		tb.Fatal(err)
	}
	return &apiTest{t: tb, srv: srv, router: router}
}

// validity says what the OpenAPI document must think of a request.
type validity int

const (
	validRequest   validity = iota // the document allows the request
	invalidRequest                 // the document refuses the request too
	noRoute                        // the document has no such operation
)

// do serves req and checks it and its response against the OpenAPI
// document: the request must be as valid as want says, the response must
// match the document in status, headers and body whatever the request.
func (a *apiTest) do(req *http.Request, want validity) *httptest.ResponseRecorder {
	a.t.Helper()
	ctx := context.Background()
	route, params, err := a.router.FindRoute(req)
	if want == noRoute {
		if err == nil {
			a.t.Errorf("%s %s: the OpenAPI document has an operation for it", req.Method, req.URL)
		}
		return a.serve(req)
	}
	if err != nil {
		a.t.Fatalf("%s %s: no operation in the OpenAPI document: %v", req.Method, req.URL, err)
	}
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, SkipSettingDefaults: true},
	}
	reqErr := openapi3filter.ValidateRequest(ctx, in)
	switch {
	case want == validRequest && reqErr != nil:
		a.t.Errorf("%s %s: the OpenAPI document refuses the request: %v", req.Method, req.URL, reqErr)
	case want == invalidRequest && reqErr == nil:
		a.t.Errorf("%s %s: the OpenAPI document allows the request", req.Method, req.URL)
	}
	rec := a.serve(req)
	body := rec.Body.Bytes()
	if rec.Header().Get("Content-Encoding") == "gzip" {
		return rec // the document describes the decoded body
	}
	resp := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 rec.Code,
		Header:                 rec.Header(),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	resp.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, resp); err != nil {
		a.t.Errorf("%s %s: response %d does not match the OpenAPI document: %v\nbody: %.2000s", req.Method, req.URL, rec.Code, err, body)
	}
	return rec
}

func (a *apiTest) serve(req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	a.srv.ServeHTTP(rec, req)
	return rec
}

// get is do for a GET of path.
func (a *apiTest) get(path string, want validity, header ...string) *httptest.ResponseRecorder {
	a.t.Helper()
	req := newRequest("GET", path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return a.do(req, want)
}

func newRequest(method, path string, body io.Reader) *http.Request {
	req := httptest.NewRequest(method, "http://"+testHost+path, body)
	req.RemoteAddr = "192.0.2.10:50000"
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// problemOf decodes a problem+json response.
func problemOf(tb testing.TB, rec *httptest.ResponseRecorder) problem {
	tb.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		tb.Fatalf("Content-Type = %q, want application/problem+json; body %s", ct, rec.Body)
	}
	var p problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		tb.Fatal(err)
	}
	return p
}

type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// decodeJSON decodes a JSON body into a generic value.
func decodeJSON(tb testing.TB, b []byte) any {
	tb.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		tb.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// fixedLimiter answers every Allow with its results in turn, then the last.
type fixedLimiter struct {
	results []ratelimit.Result
	err     error
	keys    []string
}

func (f *fixedLimiter) Allow(_ context.Context, key string) (ratelimit.Result, error) {
	f.keys = append(f.keys, key)
	if f.err != nil {
		return ratelimit.Result{}, f.err
	}
	r := f.results[0]
	if len(f.results) > 1 {
		f.results = f.results[1:]
	}
	return r, nil
}

var errBoom = errors.New("disk on fire")

// lines splits a body into its lines.
func lines(b []byte) []string {
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// sortedKeys returns the keys of a map in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(a, b) })
	return keys
}
