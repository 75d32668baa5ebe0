package lookupapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/exposure"
)

// querySeeds are query strings of GET /cve: the examples of the
// documentation, and the hostile ones the end-to-end tests send.
var querySeeds = []string{
	"",
	"q=log4j&limit=5",
	"kev=true&fix=false&sort=epss",
	"severity=CRITICAL&severity=HIGH&year=2024&epss_min=0.5&sort=published&dir=desc",
	"kev=true&sort=cve&limit=100",
	"q=CVE-2021-44228",
	"q=&severity=&kev=&fix=&epss_min=&year=&sort=&dir=&limit=&cursor=",
	"year=2021&year=2021&year=1999&year=9999",
	"limit=-1",
	"limit=0",
	"limit=99999999999999999999",
	"epss_min=1e309",
	"epss_min=NaN",
	"epss_min=-0",
	"epss_min=0x1p-2",
	"q=%ff%fe",
	"q=a;b",
	"q=%",
	"%ff=1",
	"cursor=%0d%0aX-Injected:%201",
	"cursor=AQAAAAAAAAAAAAAAAAAAAAAA",
	"sort=cve&sort=epss",
	"dir=ASC",
	"q=" + strings.Repeat("x", 201),
	"q=" + strings.Repeat("é", 200),
}

// fuzzServer returns a server over the test records.
func fuzzServer(tb testing.TB) *Server {
	tb.Helper()
	cat := memCatalog(testRecords()...)
	idx := exposure.NewIndex()
	if _, err := idx.Refresh(context.Background(), cat); err != nil {
		tb.Fatal(err)
	}
	srv, err := New(Config{Catalog: cat, Packages: idx})
	if err != nil {
		tb.Fatal(err)
	}
	return srv
}

// checkProblem fails unless rec is a problem+json document with the
// response's status and a detail that is valid UTF-8.
func checkProblem(t *testing.T, what string, rec *httptest.ResponseRecorder) {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("%s: status %d with Content-Type %q, want application/problem+json", what, rec.Code, ct)
	}
	var p problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Status != rec.Code || p.Detail == "" {
		t.Fatalf("%s: problem %s (%v)", what, rec.Body, err)
	}
	if !utf8.ValidString(p.Detail) {
		t.Fatalf("%s: detail %q is not valid UTF-8", what, p.Detail)
	}
}

// FuzzListQuery checks the query strings of GET /cve: the parser and the
// handler answer 200 or a 400 problem, never anything else; what the
// parser accepts is within the documented bounds, spelled any other way
// it selects the same rows (the same digest), and its cursors come back
// to the position they were made from.
func FuzzListQuery(f *testing.F) {
	for _, s := range querySeeds {
		f.Add(s)
	}
	srv := fuzzServer(f)
	f.Fuzz(func(t *testing.T, raw string) {
		req := httptest.NewRequest("GET", "http://"+testHost+BasePath+"/cve", nil)
		req.URL.RawQuery = raw
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK:
			var page struct {
				Results    []json.RawMessage `json:"results"`
				NextCursor *string           `json:"nextCursor"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil || page.Results == nil {
				t.Fatalf("?%s: 200 with body %s (%v)", raw, rec.Body, err)
			}
		case http.StatusBadRequest:
			checkProblem(t, "?"+raw, rec)
		default:
			t.Fatalf("?%s: status %d: %s", raw, rec.Code, rec.Body)
		}

		v, err := url.ParseQuery(raw)
		if err != nil {
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("?%s: a malformed query string was answered %d", raw, rec.Code)
			}
			return
		}
		q, err := parseListQuery(v)
		if err != nil {
			if !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("parseListQuery(%q) error = %v, want ErrInvalid", raw, err)
			}
			return
		}
		if q.Limit < 1 || q.Limit > MaxLimit || utf8.RuneCountInString(q.Q) > maxQ || !utf8.ValidString(q.Q) {
			t.Fatalf("parseListQuery(%q) = %+v: out of bounds", raw, q.ListQuery)
		}
		if q.EPSSMin != nil && !(*q.EPSSMin >= 0 && *q.EPSSMin <= 1) {
			t.Fatalf("parseListQuery(%q): epss_min %v", raw, *q.EPSSMin)
		}
		for _, y := range q.Years {
			if y < minYear || y > maxYear {
				t.Fatalf("parseListQuery(%q): year %d", raw, y)
			}
		}
		if len(q.Years) > maxYears {
			t.Fatalf("parseListQuery(%q): %d years", raw, len(q.Years))
		}
		// The same query spelled canonically selects the same rows.
		again, err := parseListQuery(mustParseQuery(t, v.Encode()))
		if err != nil || again.digest != q.digest {
			t.Fatalf("parseListQuery(%q) re-encoded as %q: %v, digest %x vs %x", raw, v.Encode(), err, again.digest, q.digest)
		}
		pos := cve.Position{Value: 0.5, Key: 2021*1_000_000_000_000 + 44228}
		back, err := decodeCursor(encodeCursor(pos, q.digest), q.digest)
		if err != nil || *back != pos {
			t.Fatalf("cursor of %q: %+v, %v", raw, back, err)
		}
	})
}

// FuzzCursor feeds cursor parameters to decodeCursor: a cursor that is not
// ours is an ErrInvalid, never a panic or a position that is not finite,
// and every position comes back from its own cursor.
func FuzzCursor(f *testing.F) {
	digest := (&listQuery{ListQuery: cve.ListQuery{Sort: cve.SortPublished, Desc: true}}).normalisedDigest()
	real := encodeCursor(cve.Position{Value: 1639131309, Key: 2021*1_000_000_000_000 + 44228}, digest)
	for _, s := range []string{real, real[:len(real)-1], real + "A", strings.ToUpper(real), "", "%0d%0a", "AQ", strings.Repeat("A", 65)} {
		f.Add(s, 0.97565, int64(2021*1_000_000_000_000+44228))
	}
	f.Add("", math.Inf(1), int64(-1))
	f.Add("", math.NaN(), int64(math.MinInt64))
	f.Fuzz(func(t *testing.T, s string, value float64, key int64) {
		pos, err := decodeCursor(s, digest)
		switch {
		case err != nil && !errors.Is(err, errs.ErrInvalid):
			t.Fatalf("decodeCursor(%q) error = %v, want ErrInvalid", s, err)
		case err == nil && (math.IsNaN(pos.Value) || math.IsInf(pos.Value, 0)):
			t.Fatalf("decodeCursor(%q) = %+v", s, pos)
		}
		if math.IsNaN(value) || math.IsInf(value, 0) {
			return
		}
		want := cve.Position{Value: value, Key: key}
		got, err := decodeCursor(encodeCursor(want, digest), digest)
		if err != nil || *got != want {
			t.Fatalf("cursor of %+v decodes to %+v, %v", want, got, err)
		}
		if _, err := decodeCursor(encodeCursor(want, [8]byte{1}), digest); err == nil {
			t.Fatalf("a cursor of another query was accepted")
		}
	})
}

// FuzzBatch posts bodies to POST /cve/batch: the answer is 200 with at
// most 100 distinct ids between results and notFound, or a 400 problem.
func FuzzBatch(f *testing.F) {
	for _, s := range []string{
		`{"ids": ["CVE-2021-44228", "cve-2014-0160", "CVE-2099-0001", "not-an-id"]}`,
		`{"ids": ["CVE-2021-44228", "CVE-2021-44228", "cve-2021-44228"]}`,
		`{"ids": []}`,
		`{"ids": null}`,
		`{}`,
		`{"ids": ["CVE-2021-44228"]} {}`,
		`{"ids": ["CVE-2021-44228"], "extra": 1}`,
		`{"ids": [1e309]}`,
		"{\"ids\": [\"\xff\xfe\"]}",
		`{"ids": ["\u0000", "\ud800"]}`,
		`{"ids": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
		`{"ids": [` + strings.TrimSuffix(strings.Repeat(`"CVE-2021-44228",`, 101), ",") + `]}`,
		`[`,
		``,
	} {
		f.Add([]byte(s))
	}
	srv := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		req := newRequest("POST", BasePath+"/cve/batch", bytes.NewReader(body))
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK:
			var resp struct {
				Results []struct {
					CVEID string `json:"cveId"`
				} `json:"results"`
				NotFound []string `json:"notFound"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
				t.Fatalf("200 with body %s: %v", rec.Body, err)
			}
			seen := map[string]bool{}
			for _, r := range resp.Results {
				if seen[r.CVEID] {
					t.Fatalf("%s comes twice in %s", r.CVEID, rec.Body)
				}
				seen[r.CVEID] = true
			}
			if n := len(resp.Results) + len(resp.NotFound); n > MaxBatch {
				t.Fatalf("%d ids answered for one batch", n)
			}
			if !utf8.Valid(body) {
				t.Fatalf("a body that is not UTF-8 was answered 200")
			}
		case http.StatusBadRequest:
			checkProblem(t, "batch", rec)
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	})
}

// FuzzRequest sends any request to the whole listener: no request is a
// server error, and every error of an API route is a problem document.
func FuzzRequest(f *testing.F) {
	for _, s := range []struct {
		method, target, header string
		body                   []byte
	}{
		{"GET", "/api/v1/cve/CVE-2021-44228", "", nil},
		{"GET", "/api/v1/cve/cve-2021-44228/osv", `"x", W/"y"`, nil},
		{"GET", "/api/v1/cve/bulk.jsonl?after=CVE-2021-9999", "gzip;q=0, br", nil},
		{"HEAD", "/api/v1/cve/modified.csv", "*", nil},
		{"POST", "/api/v1/cve/batch", "", []byte(`{"ids":["CVE-2021-44228"]}`)},
		{"GET", "/api/v1/cve/..%2F..%2Fetc%2Fpasswd", "", nil},
		{"GET", "/api/v1/cve/../../etc/passwd", "", nil},
		{"GET", "/api/v1//cve", "", nil},
		{"DELETE", "/api/v1/cve/CVE-2021-44228", "", nil},
		{"OPTIONS", "/api/v1/cve", "", nil},
		{"GET", "/api/v1/openapi.json", "", nil},
		{"GET", "/api/v1/nothing", "", nil},
		{"GET", "/?q=log4j&kev=true", "", nil},
		{"GET", "/?q=cve-2021-44228", "", nil},
		{"GET", "/cve/cve-2021-44228", "", nil},
		{"GET", "/cve/%ff", "", nil},
		{"GET", "/healthz", "", nil},
		{"POST", "/osv/v1/query", "", []byte(`{"package":{"purl":"pkg:maven/org.apache.logging.log4j/log4j-core@2.14.1"}}`)},
		{"POST", "/osv/v1/querybatch", "", []byte(`{"queries":[{"package":{"name":"log4j","ecosystem":"Debian:10"},"version":"2.11.1-2"}]}`)},
		{"GET", "/osv/v1/vulns/GHSA-jfh8-c2jp-5v3q", "", nil},
		{"GET", "/osv/v1/vulns/CVE-2021-44228", "", nil},
		{"GET", "/api/v1%2F", "", nil},
		{"POST", "/osv/v1%2Fquery", "", []byte(`{}`)},
		{"POST", "/api/v1/packages/query", "", []byte(`{"packages":[{"purl":"pkg:deb/debian/apache-log4j2@2.11.1-2?distro=buster"}]}`)},
		{"POST", "/api/v1/sbom", "", []byte(`{"bomFormat":"CycloneDX","specVersion":"1.5","components":[{"type":"library","name":"x","purl":"pkg:pypi/x@1.0"}]}`)},
		{"GET", "/packages?purl=pkg%3Apypi%2Fdjango%404.2.0", "", nil},
		{"POST", "/packages", "", []byte("--b\r\nContent-Disposition: form-data; name=\"sbom\"; filename=\"a.json\"\r\n\r\n{}\r\n--b--\r\n")},
	} {
		f.Add(s.method, s.target, s.header, s.body)
	}
	srv := fuzzServer(f)
	f.Fuzz(func(t *testing.T, method, target, header string, body []byte) {
		if !strings.HasPrefix(target, "/") || method == "CONNECT" {
			return
		}
		req, err := http.NewRequest(method, "http://"+testHost+target, bytes.NewReader(body))
		if err != nil {
			return
		}
		req.RemoteAddr = "192.0.2.10:50000"
		req.Header.Set("If-None-Match", header)
		req.Header.Set("Accept-Encoding", header)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		what := method + " " + target
		if rec.Code >= 500 || rec.Code < 100 {
			t.Fatalf("%s: status %d: %s", what, rec.Code, rec.Body)
		}
		if rec.Code >= 400 && strings.HasPrefix(req.URL.Path, BasePath+"/") {
			checkProblem(t, what, rec)
		}
	})
}

// FuzzOSVQuery posts bodies to the OSV API's query and querybatch: the
// answer is 200 with OSV.dev's list shape, or a 400 problem with OSV.dev's
// code, never a server error.
func FuzzOSVQuery(f *testing.F) {
	for _, s := range []string{
		`{"package":{"name":"django","ecosystem":"PyPI"},"version":"4.2.0"}`,
		`{"package":{"purl":"pkg:pypi/django@4.2.0"}}`,
		`{"package":{"purl":"pkg:pypi/django"},"version":"4.2.0","page_token":"AAAAAAAAAAAAAABk"}`,
		`{"package":{"purl":"pkg:deb/debian/openssl@3.0.11-1~deb12u2?distro=bookworm"}}`,
		`{"package":{"name":"left-pad","ecosystem":"npm"},"version":"1.0.0","pageToken":"x"}`,
		`{"commit":"6879efc2c1596d11a6a6ad296f80063b558d5e0f"}`,
		`{"package":{"name":"x","ecosystem":"Windows"},"version":"10.0.22631.1"}`,
		`{"package":{"purl":"pkg:"}}`,
		`{"queries":[{"package":{"purl":"pkg:pypi/django@4.2.0"}},{"package":{"name":"django","ecosystem":"PyPI"},"version":"5.0.1"}]}`,
		`{"queries":[null]}`,
		`{"queries":[]}`,
		`{}`,
		``,
	} {
		f.Add([]byte(s))
	}
	recs := packageRecords()
	for i := range osvPageSize + 5 {
		recs = append(recs, pkgRecord(fmt.Sprintf("CVE-2024-%d", 10000+i), "npm", "left-pad", "GHSA 2.0.0"))
	}
	a := newPackagesTest(f, false, recs...)
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{"/v1/query", "/v1/querybatch"} {
			rec := httptest.NewRecorder()
			a.srv.ServeHTTP(rec, newRequest("POST", OSVBasePath+path, bytes.NewReader(body)))
			switch rec.Code {
			case http.StatusOK:
				var resp struct {
					Vulns   []json.RawMessage `json:"vulns"`
					Results []struct {
						Vulns []struct {
							ID       string `json:"id"`
							Modified string `json:"modified"`
						} `json:"vulns"`
					} `json:"results"`
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
					t.Fatalf("%s: 200 with body %s: %v", path, rec.Body, err)
				}
				if len(resp.Vulns) > osvPageSize {
					t.Fatalf("%s: %d documents on one page", path, len(resp.Vulns))
				}
				for _, r := range resp.Results {
					for _, v := range r.Vulns {
						if v.ID == "" || v.Modified == "" {
							t.Fatalf("%s: a result without id or modified: %s", path, rec.Body)
						}
					}
				}
			case http.StatusBadRequest:
				var p osvProblem
				if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Code != 3 || p.Message == "" || p.Status != 400 {
					t.Fatalf("%s: 400 body %s: %v", path, rec.Body, err)
				}
			default:
				t.Fatalf("%s: status %d: %s", path, rec.Code, rec.Body)
			}
		}
	})
}
