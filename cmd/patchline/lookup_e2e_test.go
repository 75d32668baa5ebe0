// The lookup API end to end, as a client sees it, against serve on the
// bundled sample catalog. This file is over 600 lines because
// TestLookupEndToEnd walks every route in turn on one server, each step
// reading what the steps before it found, and is clearest as one test.

package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/patchline/patchline/internal/cve"
)

// lookupClient makes requests to a running lookup listener and checks every
// response against the OpenAPI document the server serves.
type lookupClient struct {
	t      *testing.T
	base   string // http://127.0.0.1:PORT
	router routers.Router
}

// lookupResponse is a response read whole.
type lookupResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// lookupDecoders registers the body decoder of the bulk stream's content
// type with the validator, once.
var lookupDecoders sync.Once

func newLookupClient(t *testing.T, s *server) *lookupClient {
	t.Helper()
	lookupDecoders.Do(func() {
		openapi3filter.RegisterBodyDecoder("application/x-ndjson", openapi3filter.FileBodyDecoder)
	})
	status, body, _ := get(t, s.LookupURL+"/api/v1/openapi.json")
	if status != 200 {
		t.Fatalf("GET /api/v1/openapi.json: %d", status)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(body)
	if err != nil {
		t.Fatalf("load the served OpenAPI document: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("validate the served OpenAPI document: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("served OpenAPI document is %s, want 3.1", doc.OpenAPI)
	}
	doc.Servers = openapi3.Servers{{URL: s.LookupURL + "/api/v1"}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &lookupClient{t: t, base: s.LookupURL, router: router}
}

// do sends a request and validates the response against the document
// when the path is one of the API's.
func (c *lookupClient) do(method, path string, body []byte, header ...string) lookupResponse {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	tr := &http.Transport{DisableCompression: true}
	resp, err := (&http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}).Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	out := lookupResponse{Status: resp.StatusCode, Header: resp.Header, Body: got}
	if strings.HasPrefix(path, "/api/v1/") && resp.Header.Get("Content-Encoding") == "" {
		c.validate(method, path, body, out)
	}
	return out
}

func (c *lookupClient) validate(method, path string, body []byte, resp lookupResponse) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return // a path the API does not have: 404 or 405, checked by the caller
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{SkipSettingDefaults: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.Status, Header: resp.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	out.SetBodyBytes(resp.Body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		c.t.Errorf("%s %s: response %d does not match the OpenAPI document: %v", method, path, resp.Status, err)
	}
}

func (c *lookupClient) get(path string, header ...string) lookupResponse {
	c.t.Helper()
	return c.do("GET", path, nil, header...)
}

// json decodes the body of a 200 response into v.
func (r lookupResponse) json(t *testing.T, v any) {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %.300s: %v", r.Body, err)
	}
}

// problem checks that r is a problem+json response with the status.
func (r lookupResponse) problem(t *testing.T, status int, what string) {
	t.Helper()
	if r.Status != status {
		t.Errorf("%s: status %d, want %d: %.300s", what, r.Status, status, r.Body)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("%s: Content-Type %q, want application/problem+json", what, ct)
	}
	var p struct {
		Type, Title, Detail string
		Status              int
	}
	if err := json.Unmarshal(r.Body, &p); err != nil || p.Status != status || p.Title == "" || p.Type == "" || p.Detail == "" {
		t.Errorf("%s: problem %s (%v)", what, r.Body, err)
	}
}

// lookupPage is a page of GET /cve.
type lookupPage struct {
	Results []struct {
		CVEID string `json:"cveId"`
		Links struct {
			Self string `json:"self"`
		} `json:"_links"`
	} `json:"results"`
	NextCursor *string `json:"nextCursor"`
}

// lookupPageAll follows the cursors of a list query to its end and returns
// every id in order.
func lookupPageAll(t *testing.T, c *lookupClient, query string, limit int) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5000 {
			t.Fatalf("%s: paging does not end", query)
		}
		q := query + "&limit=" + strconv.Itoa(limit)
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		var page lookupPage
		c.get("/api/v1/cve?"+q).json(t, &page)
		if len(page.Results) > limit {
			t.Fatalf("%s: %d rows on a page of %d", q, len(page.Results), limit)
		}
		for _, r := range page.Results {
			ids = append(ids, r.CVEID)
		}
		if page.NextCursor == nil {
			return ids
		}
		cursor = *page.NextCursor
	}
}

// lookupStream reads a whole stream.
func lookupStream(t *testing.T, c *lookupClient, path string) []string {
	t.Helper()
	r := c.get(path)
	if r.Status != 200 {
		t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	s := strings.TrimSuffix(string(r.Body), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func TestLookupEndToEnd(t *testing.T) {
	e2e(t)
	s := startServeFresh(t, "", nil, "--rate-limit", "1000000/1m")
	if !strings.Contains(s.Log(), "bundled sample catalog") {
		t.Errorf("serve did not say it loaded the sample catalog:\n%s", s.Log())
	}
	c := newLookupClient(t, s)

	// The catalog in CVE id order, from the bulk stream.
	var bulk []map[string]any
	for _, l := range lookupStream(t, c, "/api/v1/cve/bulk.jsonl") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("bulk line %q: %v", l, err)
		}
		bulk = append(bulk, m)
	}
	if len(bulk) < 1000 {
		t.Fatalf("bulk stream has %d records, want the sample catalog (over 1,000)", len(bulk))
	}
	ids := make([]string, len(bulk))
	for i, m := range bulk {
		ids[i] = m["cveId"].(string)
	}
	known := ids[len(ids)/2]

	t.Run("health and metrics", func(t *testing.T) {
		if status, body, _ := get(t, s.LookupURL+"/healthz"); status != 200 || string(body) != "ok\n" {
			t.Errorf("healthz: %d %q", status, body)
		}
		c.get("/api/v1/cve/" + known)
		status, body, _ := get(t, s.LookupURL+"/metrics")
		for _, want := range []string{`patchline_lookup_requests_total{code="200",route="GET /api/v1/cve/{id}"}`, "go_goroutines"} {
			if status != 200 || !bytes.Contains(body, []byte(want)) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})

	t.Run("record", func(t *testing.T) {
		r := c.get("/api/v1/cve/" + strings.ToLower(known))
		var rec struct {
			CVEID       string `json:"cveId"`
			Remediation struct {
				Available bool `json:"available"`
			} `json:"remediation"`
			DataSources []struct {
				Name, License string
			} `json:"dataSources"`
			Links struct{ Self, HTML string } `json:"_links"`
		}
		r.json(t, &rec)
		if rec.CVEID != known || rec.Links.Self != s.LookupURL+"/api/v1/cve/"+known || rec.Links.HTML != s.LookupURL+"/cve/"+known {
			t.Errorf("record %s: cveId %s, _links %+v", known, rec.CVEID, rec.Links)
		}
		if len(rec.DataSources) == 0 {
			t.Errorf("record %s names no data source", known)
		}
		if r.Header.Get("Content-Type") != "application/json" || r.Header.Get("ETag") == "" || !strings.Contains(r.Header.Get("Cache-Control"), "max-age") {
			t.Errorf("headers: %v", r.Header)
		}
		if again := c.get("/api/v1/cve/"+known, "If-None-Match", r.Header.Get("ETag")); again.Status != 304 {
			t.Errorf("If-None-Match: %d", again.Status)
		}
		// The html link is the human page.
		status, page, _ := get(t, rec.Links.HTML)
		for _, want := range []string{known, `id="remediation"`, `id="provenance"`, "This product uses data from the NVD API but is not endorsed or certified by the NVD."} {
			if status != 200 || !bytes.Contains(page, []byte(want)) {
				t.Errorf("human page %s: %d, lacks %q", rec.Links.HTML, status, want)
			}
		}
		c.get("/api/v1/cve/CVE-1999-99999999").problem(t, 404, "unknown id")
		c.get("/api/v1/cve/CVE-99-1").problem(t, 400, "malformed id")
		c.get("/api/v1/cve/not-a-cve").problem(t, 400, "malformed id")
	})

	t.Run("osv", func(t *testing.T) {
		var v struct {
			ID               string         `json:"id"`
			Modified         string         `json:"modified"`
			DatabaseSpecific map[string]any `json:"database_specific"`
		}
		c.get("/api/v1/cve/"+strings.ToLower(known)+"/osv").json(t, &v)
		if v.ID != known || v.Modified == "" || v.DatabaseSpecific["data_sources"] == nil {
			t.Errorf("osv of %s: %+v", known, v)
		}
		c.get("/api/v1/cve/CVE-1999-99999999/osv").problem(t, 404, "osv of an unknown id")
		c.get("/api/v1/cve/CVE-1-1/osv").problem(t, 400, "osv of a malformed id")
	})

	t.Run("list parameters", func(t *testing.T) {
		word := lookupSearchWord(t, c, ids)
		valid := []string{
			"", "q=" + url.QueryEscape(word), "q=" + url.QueryEscape(known), "q=" + url.QueryEscape(`"AND (NOT* ^col:umn NEAR(`),
			"severity=CRITICAL", "severity=HIGH&severity=MEDIUM&severity=LOW", "severity=critical",
			"kev=true", "kev=false", "fix=true", "fix=false",
			"epss_min=0", "epss_min=0.5", "epss_min=1", "year=2021", "year=2021&year=2024", "year=1999",
			"sort=published", "sort=epss", "sort=cvss", "sort=cve", "sort=fix", "sort=kev",
			"dir=asc", "dir=desc", "limit=1", "limit=100",
		}
		for _, q := range valid {
			r := c.get("/api/v1/cve?" + q)
			var page lookupPage
			r.json(t, &page)
			if r.Header.Get("ETag") == "" || r.Header.Get("Cache-Control") == "" {
				t.Errorf("%s: no ETag or Cache-Control", q)
			}
		}
		invalid := []string{
			"limit=0", "limit=101", "limit=-5", "limit=x", "epss_min=2", "epss_min=-0.1", "epss_min=x",
			"severity=SEVERE", "severity=NONE", "kev=yes", "fix=1", "year=99", "year=abc",
			"sort=severity", "sort=random", "dir=sideways", "cursor=not-ours", "cursor=%25%25",
			"limit=1&limit=2", "pge=2", "q=" + strings.Repeat("a", 201),
		}
		for _, q := range invalid {
			c.get("/api/v1/cve?"+q).problem(t, 400, q)
		}
	})

	t.Run("paging returns every row once", func(t *testing.T) {
		word := lookupSearchWord(t, c, ids)
		for _, q := range []string{
			// Every sort key, on filtered queries of a few hundred rows so
			// that paging them seven at a time stays quick; paging over the
			// whole catalog is the store suite's work.
			"kev=true&sort=published", "kev=true&sort=cve&dir=asc", "kev=true&sort=epss", "year=2023&sort=kev&dir=asc",
			"year=2023&sort=fix", "kev=true&sort=cvss&dir=asc", "epss_min=0.5&sort=published&dir=asc", "year=2021&year=2022&sort=cve",
			"q=" + url.QueryEscape(word) + "&sort=kev",
		} {
			small := lookupPageAll(t, c, q, 7)
			big := lookupPageAll(t, c, q, 100)
			if diff := cmpIDs(big, small); diff != "" {
				t.Errorf("%s: limit=7 and limit=100 differ: %s", q, diff)
			}
			seen := map[string]bool{}
			for _, id := range small {
				if seen[id] {
					t.Errorf("%s: %s comes twice", q, id)
				}
				seen[id] = true
			}
		}
		// The unfiltered list holds every record that is not rejected, in
		// numeric id order for sort=cve.
		all := lookupPageAll(t, c, "sort=cve&dir=asc", 100)
		if !slices.IsSortedFunc(all, cve.Compare) {
			t.Error("sort=cve&dir=asc is not in numeric id order")
		}
		if len(all) == 0 || len(all) > len(ids) {
			t.Errorf("list of %d rows, catalog of %d", len(all), len(ids))
		}
		for _, id := range all {
			if !slices.Contains(ids, id) {
				t.Errorf("listed %s is not in the bulk stream", id)
				break
			}
		}
	})

	t.Run("cursor is bound to its query", func(t *testing.T) {
		var page lookupPage
		c.get("/api/v1/cve?sort=cve&dir=asc&limit=2").json(t, &page)
		if page.NextCursor == nil {
			t.Fatal("no nextCursor")
		}
		cur := url.QueryEscape(*page.NextCursor)
		var next lookupPage
		c.get("/api/v1/cve?sort=cve&dir=asc&limit=5&cursor="+cur).json(t, &next)
		if len(next.Results) == 0 || next.Results[0].CVEID == page.Results[1].CVEID {
			t.Errorf("the cursor did not continue the query")
		}
		for _, other := range []string{"sort=cve&dir=desc", "sort=epss&dir=asc", "sort=cve&dir=asc&kev=true", "sort=cve&dir=asc&q=remote", "sort=cve&dir=asc&year=2021"} {
			c.get("/api/v1/cve?"+other+"&cursor="+cur).problem(t, 400, "cursor of another query with "+other)
		}
	})

	t.Run("batch", func(t *testing.T) {
		body := fmt.Sprintf(`{"ids":[%q,%q,"CVE-1999-99999999","garbage",%q,%q]}`, ids[3], strings.ToLower(ids[1]), ids[3], ids[1])
		var resp struct {
			Results []struct {
				CVEID string `json:"cveId"`
			} `json:"results"`
			NotFound []string `json:"notFound"`
		}
		c.do("POST", "/api/v1/cve/batch", []byte(body)).json(t, &resp)
		var got []string
		for _, r := range resp.Results {
			got = append(got, r.CVEID)
		}
		if diff := cmpIDs([]string{ids[3], ids[1]}, got); diff != "" {
			t.Errorf("results: %s", diff)
		}
		if diff := cmpIDs([]string{"CVE-1999-99999999", "garbage"}, resp.NotFound); diff != "" {
			t.Errorf("notFound: %s", diff)
		}
		hundred, _ := json.Marshal(map[string]any{"ids": ids[:100]})
		var full struct {
			Results []any `json:"results"`
		}
		c.do("POST", "/api/v1/cve/batch", hundred).json(t, &full)
		if len(full.Results) != 100 {
			t.Errorf("100 ids: %d results", len(full.Results))
		}
		tooMany, _ := json.Marshal(map[string]any{"ids": ids[:101]})
		c.do("POST", "/api/v1/cve/batch", tooMany).problem(t, 400, "101 ids")
		c.do("POST", "/api/v1/cve/batch", []byte(`{}`)).problem(t, 400, "missing ids")
		c.do("POST", "/api/v1/cve/batch", []byte(`{"ids":`)).problem(t, 400, "not JSON")
		c.do("POST", "/api/v1/cve/batch", []byte(`CVE-2021-44228`)).problem(t, 400, "not JSON")
		c.do("POST", "/api/v1/cve/batch", []byte(`{"ids":[`+strings.Repeat(`"CVE-2021-44228",`, 10000)+`"x"]}`)).problem(t, 400, "oversized body")
	})

	t.Run("streams", func(t *testing.T) {
		r := c.get("/api/v1/cve/bulk.jsonl")
		if ct := r.Header.Get("Content-Type"); ct != "application/x-ndjson" {
			t.Errorf("bulk Content-Type %q", ct)
		}
		if !slices.IsSortedFunc(ids, cve.Compare) {
			t.Error("bulk is not in numeric CVE id order")
		}
		for _, m := range bulk[:5] {
			var keys []string
			for k := range m {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if want := []string{"cveId", "cvss", "epss", "hasRemediation", "isKev", "modifiedAt", "publishedAt", "rejected", "severity"}; !slices.Equal(keys, want) {
				t.Errorf("bulk line fields %v, want %v", keys, want)
			}
		}
		csvLines := lookupStream(t, c, "/api/v1/cve/modified.csv")
		if r := c.get("/api/v1/cve/modified.csv"); r.Header.Get("Content-Type") != "text/csv" {
			t.Errorf("modified Content-Type %q", r.Header.Get("Content-Type"))
		}
		if csvLines[0] != "cve_id,modified" {
			t.Errorf("csv header %q", csvLines[0])
		}
		var csvIDs []string
		stamp := regexp.MustCompile(`^CVE-\d{4}-\d{4,},\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)
		for _, l := range csvLines[1:] {
			if !stamp.MatchString(l) {
				t.Errorf("csv line %q", l)
				break
			}
			csvIDs = append(csvIDs, l[:strings.IndexByte(l, ',')])
		}
		if diff := cmpIDs(ids, csvIDs); diff != "" {
			t.Errorf("modified.csv ids differ from bulk.jsonl ids: %s", diff)
		}
		// after resumes exactly after the given id, in both streams.
		for _, k := range []int{0, 7, len(ids) / 3, len(ids) - 2, len(ids) - 1} {
			after := ids[k]
			var got []string
			for _, l := range lookupStream(t, c, "/api/v1/cve/bulk.jsonl?after="+strings.ToLower(after)) {
				var m map[string]any
				json.Unmarshal([]byte(l), &m)
				got = append(got, m["cveId"].(string))
			}
			if diff := cmpIDs(ids[k+1:], got); diff != "" {
				t.Errorf("bulk after %s: %s", after, diff)
			}
			lines := lookupStream(t, c, "/api/v1/cve/modified.csv?after="+after)
			if lines[0] != "cve_id,modified" {
				t.Errorf("modified after %s: header %q", after, lines[0])
			}
			if diff := cmpIDs(csvIDs[k+1:], idsOfCSV(lines[1:])); diff != "" {
				t.Errorf("modified after %s: %s", after, diff)
			}
		}
		c.get("/api/v1/cve/bulk.jsonl?after=junk").problem(t, 400, "bulk after junk")
		c.get("/api/v1/cve/modified.csv?after=CVE-1").problem(t, 400, "modified after junk")
		// gzip when accepted.
		for _, path := range []string{"/api/v1/cve/bulk.jsonl", "/api/v1/cve/modified.csv"} {
			plain := c.get(path)
			gz := c.get(path, "Accept-Encoding", "gzip")
			if gz.Header.Get("Content-Encoding") != "gzip" {
				t.Errorf("%s: not gzip-compressed: %v", path, gz.Header)
				continue
			}
			zr, err := gzip.NewReader(bytes.NewReader(gz.Body))
			if err != nil {
				t.Fatal(err)
			}
			unz, err := io.ReadAll(zr)
			if err != nil || !bytes.Equal(unz, plain.Body) {
				t.Errorf("%s: gzip body differs (%v)", path, err)
			}
			if len(gz.Body) >= len(plain.Body) {
				t.Errorf("%s: gzip %d bytes, plain %d", path, len(gz.Body), len(plain.Body))
			}
		}
	})

	t.Run("headers on every response", func(t *testing.T) {
		for _, r := range []lookupResponse{
			c.get("/api/v1/cve/" + known),
			c.get("/api/v1/cve/CVE-1999-99999999"),
			c.get("/api/v1/cve?limit=0"),
			c.get("/api/v1/cve?limit=3"),
			c.do("POST", "/api/v1/cve/batch", []byte(`{"ids":[]}`)),
			c.get("/api/v1/cve/modified.csv?after=" + ids[len(ids)-3]),
			c.get("/api/v1/openapi.json"),
			c.get("/api/v1/nothing"),
			c.get("/"),
		} {
			for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
				if r.Header.Get(h) == "" {
					t.Errorf("response %d lacks %s", r.Status, h)
				}
			}
			if reset, _ := strconv.ParseInt(r.Header.Get("X-RateLimit-Reset"), 10, 64); reset < time.Now().Unix()-1 || reset > time.Now().Add(2*time.Minute).Unix() {
				t.Errorf("X-RateLimit-Reset %s is not an epoch second within the minute", r.Header.Get("X-RateLimit-Reset"))
			}
		}
		c.get("/api/v1/nothing").problem(t, 404, "unknown path")
		r := c.do("DELETE", "/api/v1/cve/"+known, nil)
		r.problem(t, 405, "DELETE")
		if r.Header.Get("Allow") == "" {
			t.Error("405 without Allow")
		}
		// CORS.
		r = c.get("/api/v1/cve/"+known, "Origin", "https://app.example")
		if r.Header.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(r.Header.Get("Access-Control-Expose-Headers"), "X-RateLimit-Remaining") {
			t.Errorf("CORS headers: %v", r.Header)
		}
		r = c.do("OPTIONS", "/api/v1/cve/batch", nil, "Origin", "https://app.example", "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type")
		if r.Status != 204 || !strings.Contains(r.Header.Get("Access-Control-Allow-Methods"), "POST") {
			t.Errorf("preflight: %d %v", r.Status, r.Header)
		}
	})

	t.Run("search page", func(t *testing.T) {
		r := c.get("/")
		if r.Status != 200 || !bytes.Contains(r.Body, []byte(`name="q"`)) || !bytes.Contains(r.Body, []byte("not endorsed or certified by the NVD")) {
			t.Errorf("home page: %d", r.Status)
		}
		word := lookupSearchWord(t, c, ids)
		r = c.get("/?q=" + url.QueryEscape(word) + "&kev=&fix=&sort=published&dir=desc")
		if r.Status != 200 || !bytes.Contains(r.Body, []byte(`href="/cve/CVE-`)) {
			t.Errorf("search for %q: %d", word, r.Status)
		}
		r = c.get("/?q=" + strings.ToLower(known))
		if r.Status != 303 || r.Header.Get("Location") != "/cve/"+known {
			t.Errorf("id search: %d %v", r.Status, r.Header.Get("Location"))
		}
	})
}

// lookupSearchWord returns a word of the description of a record that the
// search finds.
func lookupSearchWord(t *testing.T, c *lookupClient, ids []string) string {
	t.Helper()
	for _, id := range ids[len(ids)/2:] {
		var rec struct {
			Description *string `json:"description"`
		}
		c.get("/api/v1/cve/"+id).json(t, &rec)
		if rec.Description == nil {
			continue
		}
		for _, w := range strings.Fields(*rec.Description) {
			if len(w) >= 6 && regexp.MustCompile(`^[a-z]+$`).MatchString(w) {
				return w
			}
		}
	}
	t.Fatal("no record has a description with a plain word")
	return ""
}

func idsOfCSV(lines []string) []string {
	var out []string
	for _, l := range lines {
		id, _, _ := strings.Cut(l, ",")
		out = append(out, id)
	}
	return out
}

// cmpIDs describes how got differs from want, or returns "".
func cmpIDs(want, got []string) string {
	if slices.Equal(want, got) {
		return ""
	}
	for i := range min(len(want), len(got)) {
		if want[i] != got[i] {
			return fmt.Sprintf("%d ids, want %d; first difference at %d: %s, want %s", len(got), len(want), i, got[i], want[i])
		}
	}
	return fmt.Sprintf("%d ids, want %d", len(got), len(want))
}

func TestLookupEndToEndRateLimit(t *testing.T) {
	e2e(t)
	s := startServe(t, "", nil, "--rate-limit", "3/1m", "--trusted-proxies", "127.0.0.0/8",
		"--public-url", "https://cve.example.org/api/v1")
	c := newLookupClient(t, s)
	path := "/api/v1/cve/bulk.jsonl?after=CVE-2999-0001"
	var statuses []int
	for range 4 {
		r := c.get(path, "X-Forwarded-For", "203.0.113.1")
		statuses = append(statuses, r.Status)
		if r.Header.Get("X-RateLimit-Limit") != "3" {
			t.Errorf("X-RateLimit-Limit %q", r.Header.Get("X-RateLimit-Limit"))
		}
		if r.Status == 429 {
			r.problem(t, 429, "over the limit")
			retry, err := strconv.Atoi(r.Header.Get("Retry-After"))
			if err != nil || retry < 1 || retry > 20 {
				t.Errorf("Retry-After %q, want about 20 seconds", r.Header.Get("Retry-After"))
			}
			if r.Header.Get("X-RateLimit-Remaining") != "0" {
				t.Errorf("X-RateLimit-Remaining %q on a 429", r.Header.Get("X-RateLimit-Remaining"))
			}
		}
	}
	if !slices.Equal(statuses, []int{200, 200, 200, 429}) {
		t.Errorf("statuses %v, want three 200 and a 429", statuses)
	}
	// Another client behind the same trusted proxy has its own quota.
	if r := c.get(path, "X-Forwarded-For", "203.0.113.2"); r.Status != 200 || r.Header.Get("X-RateLimit-Remaining") != "2" {
		t.Errorf("other client: %d, remaining %q", r.Status, r.Header.Get("X-RateLimit-Remaining"))
	}
	// A forged left-most entry does not make a new client.
	if r := c.get(path, "X-Forwarded-For", "198.51.100.77, 203.0.113.1"); r.Status != 429 {
		t.Errorf("forged X-Forwarded-For: %d, want 429", r.Status)
	}
	// --public-url makes the links.
	var page lookupPage
	c.get("/api/v1/cve?limit=1", "X-Forwarded-For", "203.0.113.3").json(t, &page)
	if len(page.Results) != 1 || !strings.HasPrefix(page.Results[0].Links.Self, "https://cve.example.org/api/v1/cve/CVE-") {
		t.Errorf("links: %+v", page.Results)
	}
}
