package lookupapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ossf/osv-schema/bindings/go/osvschema"
	"google.golang.org/protobuf/encoding/protojson"
	"osv.dev/bindings/go/api"
	"osv.dev/bindings/go/osvdev"
	"osv.dev/bindings/go/osvdevexperimental"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/exposure"
	"github.com/patchline/patchline/internal/sbom"
)

// pkgRecord is a CVE of one package with a fix per source: each fix is
// "SOURCE FIXED [INTRODUCED]".
func pkgRecord(id, eco, name string, fixes ...string) *cve.Record {
	p := cve.Product{Ecosystem: eco, Product: name}
	for _, f := range fixes {
		parts := strings.Fields(f)
		rng := "< " + parts[1]
		if len(parts) > 2 {
			rng = ">= " + parts[2] + ", < " + parts[1]
		}
		p.Atoms = append(p.Atoms, cve.Atom{FixedVersion: parts[1], AffectedRange: ptr(rng),
			AdvisoryID: ptr(parts[0] + "-" + id), Source: parts[0], License: "CC-BY-4.0"})
	}
	return &cve.Record{CVEID: id, State: cve.StatePublished, Severity: ptr("HIGH"),
		ModifiedAt: date("2024-03-01T00:00:00Z"), PublishedAt: date("2024-02-01T00:00:00Z"),
		Remediation: cve.Remediation{Available: true, Products: []cve.Product{p}}}
}

// packageRecords are the catalog of the package tests: two sources that
// fix django on two branches, one of them later than the other.
func packageRecords() []*cve.Record {
	r := pkgRecord("CVE-2024-27351", "PyPI", "django",
		"PyPA 4.2.11 4.2", "PyPA 5.0.3 5.0", "GHSA 4.2.12 4.2", "GHSA 5.0.3 5.0")
	r.KEV = &cve.KEV{DateAdded: "2024-04-01"}
	r.EPSS = &cve.EPSS{Score: 0.5, Percentile: 0.9}
	return []*cve.Record{
		r,
		pkgRecord("CVE-2023-0001", "npm", "acme/component", "GHSA 1.0.1"),
		pkgRecord("CVE-2023-0002", "Maven", "org.apache.jena:apache-jena", "GHSA 3.17.0"),
	}
}

// newPackagesTest is an API test whose catalog is recs, with the package
// index built unless unbuilt.
func newPackagesTest(tb testing.TB, unbuilt bool, recs ...*cve.Record) *apiTest {
	tb.Helper()
	cat := memCatalog(recs...)
	idx := exposure.NewIndex()
	if !unbuilt {
		if _, err := idx.Refresh(context.Background(), cat); err != nil {
			tb.Fatal(err)
		}
	}
	return newAPITest(tb, Config{Catalog: cat, Packages: idx})
}

func TestQueryPackages(t *testing.T) {
	a := newPackagesTest(t, false, packageRecords()...)
	type vuln struct {
		CVEID, Status, FixedVersion string
		Fixes                       map[string]string // source: fixed version
		KEV                         bool
	}
	tests := []struct {
		name string
		body string
		want [][]vuln
	}{
		{"purl below both fixes", `{"packages":[{"purl":"pkg:pypi/django@4.2.0"}]}`,
			[][]vuln{{{"CVE-2024-27351", "affected", "4.2.11", map[string]string{"PyPA": "4.2.11", "GHSA": "4.2.12"}, true}}}},
		{"between the fixes of two sources", `{"packages":[{"ecosystem":"PyPI","name":"Django","version":"4.2.11"}]}`,
			[][]vuln{{{"CVE-2024-27351", "affected", "4.2.12", map[string]string{"GHSA": "4.2.12"}, true}}}},
		{"fixed", `{"packages":[{"ecosystem":"PyPI","name":"django","version":"4.2.12"}]}`, [][]vuln{{}}},
		{"other branch", `{"packages":[{"purl":"pkg:pypi/django","version":"5.0.1"}]}`,
			[][]vuln{{{"CVE-2024-27351", "affected", "5.0.3", map[string]string{"PyPA": "5.0.3", "GHSA": "5.0.3"}, true}}}},
		{"no version: every CVE, unknown", `{"packages":[{"purl":"pkg:pypi/django"}]}`,
			[][]vuln{{{"CVE-2024-27351", "unknown", "", map[string]string{"PyPA": "4.2.11", "GHSA": "4.2.12"}, true}}}},
		{"several, in order", `{"packages":[{"purl":"pkg:npm/acme/component@1.0.0"},{"purl":"pkg:pypi/requests@2.0.0"},{"ecosystem":"Maven","name":"org.apache.jena:apache-jena","version":"3.12.0"}]}`,
			[][]vuln{
				{{"CVE-2023-0001", "affected", "1.0.1", map[string]string{"GHSA": "1.0.1"}, false}},
				{},
				{{"CVE-2023-0002", "affected", "3.17.0", map[string]string{"GHSA": "3.17.0"}, false}},
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := a.do(newRequest("POST", BasePath+"/packages/query", strings.NewReader(tc.body)), validRequest)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			var resp packagesResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
				t.Fatal(err)
			}
			var got [][]vuln
			for _, res := range resp.Results {
				vs := []vuln{}
				for _, v := range res.Vulnerabilities {
					fixes := map[string]string{}
					for _, f := range v.Fixes {
						fixes[f.Source] = f.FixedVersion
					}
					vs = append(vs, vuln{v.CVEID, string(v.Status), v.FixedVersion, fixes, v.KEV != nil})
				}
				got = append(got, vs)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestQueryPackagesRefuses(t *testing.T) {
	a := newPackagesTest(t, false, packageRecords()...)
	var many []string
	for i := 0; i <= MaxPackages; i++ {
		many = append(many, `{"purl":"pkg:pypi/p@1.0"}`)
	}
	tests := []struct {
		name, body, want string
		valid            validity
	}{
		{"malformed purl", `{"packages":[{"purl":"pkg:pypi/django@4.2.0"},{"purl":"pkg:"}]}`, "packages[1]: purl", validRequest},
		{"unknown ecosystem", `{"packages":[{"ecosystem":"Nope","name":"x","version":"1"}]}`, `unknown ecosystem "Nope"`, validRequest},
		{"version that does not parse", `{"packages":[{"ecosystem":"PyPI","name":"django","version":"four"}]}`, "does not parse under the PyPI rules", validRequest},
		{"purl and name", `{"packages":[{"purl":"pkg:pypi/django@4.2.0","name":"django"}]}`, "beside a purl", validRequest},
		{"two versions", `{"packages":[{"purl":"pkg:pypi/django@4.2.0","version":"4.2.1"}]}`, "beside the purl's", validRequest},
		{"name without ecosystem", `{"packages":[{"name":"django","version":"1"}]}`, `"ecosystem" and "name"`, validRequest},
		{"distribution without release", `{"packages":[{"purl":"pkg:deb/debian/openssl@3.0.11-1"}]}`, "ecosystem Debian needs its release, such as Debian:12", validRequest},
		{"too many", `{"packages":[` + strings.Join(many, ",") + `]}`, "want 1 to 100", invalidRequest},
		{"none", `{"packages":[]}`, "want 1 to 100", invalidRequest},
		{"no packages", `{}`, `no "packages"`, invalidRequest},
		{"unknown field", `{"packages":[{"purl":"pkg:pypi/django@4.2.0","extra":1}]}`, "unknown field", invalidRequest},
		{"too large", `{"packages":[{"purl":"pkg:pypi/django@4.2.0","name":"` + strings.Repeat("x", maxPackagesBody) + `"}]}`, "larger than", validRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := a.do(newRequest("POST", BasePath+"/packages/query", strings.NewReader(tc.body)), tc.valid)
			p := problemOf(t, rec)
			if rec.Code != http.StatusBadRequest || !strings.Contains(p.Detail, tc.want) {
				t.Errorf("status %d detail %q, want 400 saying %q", rec.Code, p.Detail, tc.want)
			}
		})
	}
}

func TestPackagesWhileIndexBuilds(t *testing.T) {
	a := newPackagesTest(t, true, packageRecords()...)
	for _, path := range []string{BasePath + "/packages/query", BasePath + "/sbom"} {
		body := `{"packages":[{"purl":"pkg:pypi/django@4.2.0"}]}`
		if strings.HasSuffix(path, "sbom") {
			body = string(mustReadFile(t, "../sbom/testdata/cyclonedx-valid-bom-1.6.json"))
		}
		rec := a.do(newRequest("POST", path, strings.NewReader(body)), validRequest)
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
			t.Errorf("POST %s before the index is built: %d, Retry-After %q; want 503 with Retry-After", path, rec.Code, rec.Header().Get("Retry-After"))
		}
	}
	rec := httpServe(a.srv, "POST", OSVBasePath+"/v1/query", `{"package":{"purl":"pkg:pypi/django@4.2.0"}}`)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("OSV query before the index is built: %d, want 503 with Retry-After", rec.Code)
	}
}

func mustReadFile(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestScanSBOM scans the example documents of CycloneDX's and SPDX's own
// libraries against a catalog that knows a CVE of one of their packages.
func TestScanSBOM(t *testing.T) {
	a := newPackagesTest(t, false, packageRecords()...)
	tests := []struct {
		file         string
		format       string
		cves         []string
		skipped      int
		summaryVulns int
	}{
		{"cyclonedx-valid-bom-1.6.json", "CycloneDX", []string{"CVE-2023-0001"}, 1, 1},
		{"cyclonedx-bom-1.4.json", "CycloneDX", []string{"CVE-2023-0001"}, 1, 1},
		{"SPDXJSONExample-v2.3.spdx.json", "SPDX", []string{"CVE-2023-0002"}, 4, 1},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			body := mustReadFile(t, "../sbom/testdata/"+tc.file)
			rec := a.do(newRequest("POST", BasePath+"/sbom", strings.NewReader(string(body))), validRequest)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			var rep SBOMReport
			if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
				t.Fatal(err)
			}
			var cves []string
			for _, r := range rep.Results {
				for _, v := range r.Vulnerabilities {
					cves = append(cves, v.CVEID)
				}
			}
			if rep.Format != tc.format || !cmp.Equal(cves, tc.cves) || len(rep.Skipped) != tc.skipped ||
				rep.Summary.Vulnerabilities != tc.summaryVulns || rep.Summary.High != tc.summaryVulns || rep.Summary.FixAvailable != tc.summaryVulns {
				t.Errorf("format %s, CVEs %v, %d skipped, summary %+v; want %s, %v, %d skipped, %d vulnerabilities",
					rep.Format, cves, len(rep.Skipped), rep.Summary, tc.format, tc.cves, tc.skipped, tc.summaryVulns)
			}
		})
	}
	for _, tc := range []struct{ name, body, want string }{
		{"not an SBOM", `{"hello":"world"}`, "neither CycloneDX"},
		{"bad purl", `{"bomFormat":"CycloneDX","specVersion":"1.6","components":[{"type":"library","name":"x","bom-ref":"r1","purl":"pkg:"}]}`, `component "r1"`},
		{"too large", `{"bomFormat":"CycloneDX","specVersion":"1.6","x":"` + strings.Repeat("x", MaxSBOMBody) + `"}`, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := a.do(newRequest("POST", BasePath+"/sbom", strings.NewReader(tc.body)), validRequest)
			if p := problemOf(t, rec); rec.Code != http.StatusBadRequest || !strings.Contains(p.Detail, tc.want) {
				t.Errorf("status %d detail %q, want 400 saying %q", rec.Code, p.Detail, tc.want)
			}
		})
	}
}

// TestOSVQueryPages asks about a package with more CVEs than a page holds:
// the pages follow one another through next_page_token, and a token is
// good for its own query only.
func TestOSVQueryPages(t *testing.T) {
	var recs []*cve.Record
	for i := range osvPageSize + 30 {
		recs = append(recs, pkgRecord(fmt.Sprintf("CVE-2024-%d", 10000+i), "npm", "left-pad", "GHSA 2.0.0"))
	}
	a := newPackagesTest(t, false, recs...)
	type page struct {
		Vulns []struct {
			ID string `json:"id"`
		} `json:"vulns"`
		Next string `json:"next_page_token"`
	}
	query := func(body string) (int, page, string) {
		rec := httpServe(a.srv, "POST", OSVBasePath+"/v1/query", body)
		var p page
		json.Unmarshal(rec.Body.Bytes(), &p)
		return rec.Code, p, rec.Body.String()
	}
	code, first, _ := query(`{"package":{"ecosystem":"npm","name":"left-pad"},"version":"1.0.0"}`)
	if code != 200 || len(first.Vulns) != osvPageSize || first.Next == "" {
		t.Fatalf("first page: %d, %d vulns, token %q; want %d and a token", code, len(first.Vulns), first.Next, osvPageSize)
	}
	code, second, _ := query(`{"package":{"ecosystem":"npm","name":"left-pad"},"version":"1.0.0","page_token":"` + first.Next + `"}`)
	if code != 200 || len(second.Vulns) != 30 || second.Next != "" {
		t.Fatalf("second page: %d, %d vulns, token %q; want 30 and none", code, len(second.Vulns), second.Next)
	}
	seen := map[string]bool{}
	for _, v := range append(first.Vulns, second.Vulns...) {
		if seen[v.ID] {
			t.Errorf("%s on both pages", v.ID)
		}
		seen[v.ID] = true
	}
	code, _, body := query(`{"package":{"ecosystem":"npm","name":"left-pad"},"version":"1.0.1","pageToken":"` + first.Next + `"}`)
	if code != 400 || !strings.Contains(body, `"code":3`) {
		t.Errorf("a token of another query: %d %s, want 400 with code 3", code, body)
	}
	code, _, body = query(`{"package":{"ecosystem":"npm","name":"left-pad"},"version":"2.0.0"}`)
	if code != 200 || strings.TrimSpace(body) != "{}" {
		t.Errorf("a fixed version: %d %s, want 200 {}", code, body)
	}
}

// TestOSVQueryBatchPages asks a batch about ten packages of 700 CVEs each:
// the first queries answer 1,000 ids a page until the batch has answered
// 3,000, then 5, each with the token of the rest, as OSV.dev pages; OSV.dev's
// Go client follows the tokens to every id of every query.
func TestOSVQueryBatchPages(t *testing.T) {
	const packages, perPackage = 10, 700
	var recs []*cve.Record
	var queries []*api.Query
	for p := range packages {
		name := fmt.Sprintf("package-%d", p)
		for i := range perPackage {
			recs = append(recs, pkgRecord(fmt.Sprintf("CVE-2024-%d", 10000+p*perPackage+i), "npm", name, "GHSA 2.0.0"))
		}
		queries = append(queries, &api.Query{Package: &osvschema.Package{Ecosystem: "npm", Name: name},
			Param: &api.Query_Version{Version: "1.0.0"}})
	}
	a := newPackagesTest(t, false, recs...)
	body, _ := protojson.Marshal(&api.BatchQuery{Queries: queries})
	rec := httpServe(a.srv, "POST", OSVBasePath+"/v1/querybatch", string(body))
	var first api.BatchVulnerabilityList
	if err := protojson.Unmarshal(rec.Body.Bytes(), &first); rec.Code != 200 || err != nil {
		t.Fatalf("querybatch: %d %v", rec.Code, err)
	}
	// 700, 700, 700, 700, then 201 (the batch passes 3,000), then 5.
	want := []int{700, 700, 700, 700, 201, 5, 5, 5, 5, 5}
	for i, r := range first.GetResults() {
		if n, tok := len(r.GetVulns()), r.GetNextPageToken(); n != want[i] || (tok != "") != (n < perPackage) {
			t.Errorf("result %d: %d ids, token %q; want %d ids and a token when fewer than %d", i, n, tok, want[i], perPackage)
		}
	}

	// A token past the last page answers nothing more.
	past := pageToken(querySum(sbom.Package{Ecosystem: "npm", Name: "package-0", Version: "1.0.0"}), 5000)
	rec = httpServe(a.srv, "POST", OSVBasePath+"/v1/querybatch",
		`{"queries":[{"package":{"ecosystem":"npm","name":"package-0"},"version":"1.0.0","page_token":"`+past+`"}]}`)
	if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"results":[{}]}` {
		t.Errorf("a token past the end: %d %s", rec.Code, rec.Body)
	}

	hs := httptest.NewServer(a.srv)
	defer hs.Close()
	c := osvdev.DefaultClient()
	c.BaseHostURL = hs.URL + OSVBasePath
	all, err := osvdevexperimental.BatchQueryPaging(context.Background(), c, queries)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range all.GetResults() {
		seen := map[string]bool{}
		for _, v := range r.GetVulns() {
			seen[v.GetId()] = true
		}
		if len(seen) != perPackage || len(r.GetVulns()) != perPackage || r.GetNextPageToken() != "" {
			t.Errorf("query %d after paging: %d ids (%d distinct), token %q; want %d", i, len(r.GetVulns()), len(seen), r.GetNextPageToken(), perPackage)
		}
	}
}

// TestOSVErrors checks the error bodies of the OSV API: problem+json with
// OSV.dev's code and message.
func TestOSVErrors(t *testing.T) {
	a := newPackagesTest(t, false, packageRecords()...)
	many := strings.Repeat(`{"package":{"purl":"pkg:pypi/p@1.0"}},`, MaxOSVBatch)
	tests := []struct {
		name, method, path, body string
		status, code             int
		want                     string
	}{
		{"commit", "POST", "/v1/query", `{"commit":"6879efc2c1596d11a6a6ad296f80063b558d5e0f"}`, 400, 3, "commit queries are not supported"},
		{"no package", "POST", "/v1/query", `{"version":"1.0"}`, 400, 3, `no "package"`},
		{"unknown field", "POST", "/v1/query", `{"package":{"purl":"pkg:pypi/django"},"versions":"1"}`, 400, 3, "unknown field"},
		{"purl and version", "POST", "/v1/query", `{"package":{"purl":"pkg:pypi/django@1.0"},"version":"1.0"}`, 400, 3, "both in the purl and in the query"},
		{"bad batch item", "POST", "/v1/querybatch", `{"queries":[{"package":{"purl":"pkg:pypi/django@1.0"}},{"package":{"ecosystem":"Nope","name":"x"}}]}`, 400, 3, "queries[1]: "},
		{"batch too large", "POST", "/v1/querybatch", `{"queries":[` + many + `{"package":{"purl":"pkg:pypi/p@1.0"}}]}`, 400, 3, "at most 1000"},
		{"unknown vuln", "GET", "/v1/vulns/GHSA-aaaa-bbbb-cccc", "", 404, 5, "GHSA-aaaa-bbbb-cccc"},
		{"unknown CVE", "GET", "/v1/vulns/CVE-1999-0001", "", 404, 5, "CVE-1999-0001"},
		{"no such route", "GET", "/v1/nothing", "", 404, 5, "no such resource"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httpServe(a.srv, tc.method, OSVBasePath+tc.path, tc.body)
			var p osvProblem
			json.Unmarshal(rec.Body.Bytes(), &p)
			if rec.Code != tc.status || p.Status != tc.status || p.Code != tc.code || !strings.Contains(p.Message, tc.want) ||
				p.Message != p.Detail || rec.Header().Get("Content-Type") != "application/problem+json" {
				t.Errorf("%d %s, want %d with code %d saying %q", rec.Code, rec.Body, tc.status, tc.code, tc.want)
			}
		})
	}
}

// TestOSVVulnByAdvisory asks for a CVE by the id of the advisory that
// fixes it.
func TestOSVVulnByAdvisory(t *testing.T) {
	recs := packageRecords()
	// An erratum that fixes two CVEs, one of them in two packages, one
	// of which the other CVE shares with the same fix.
	for _, id := range []string{"CVE-2023-0001", "CVE-2023-0002"} {
		for _, r := range recs {
			if r.CVEID == id {
				r.Remediation.Products[0].Atoms[0].AdvisoryID = ptr("ALSA-2023:5455")
			}
		}
	}
	for _, r := range recs {
		if r.CVEID == "CVE-2023-0002" {
			shared := recs[1].Remediation.Products[0]
			r.Remediation.Products = append(r.Remediation.Products, shared)
		}
	}
	a := newPackagesTest(t, false, recs...)
	tests := []struct {
		id, wantID       string
		aliases, related []string
		packages         []string
	}{
		{"PyPA-CVE-2024-27351", "PyPA-CVE-2024-27351", []string{"CVE-2024-27351"}, nil, []string{"PyPI/django"}},
		{"alsa-2023:5455", "ALSA-2023:5455", nil, []string{"CVE-2023-0001", "CVE-2023-0002"}, []string{"npm/acme/component", "Maven/org.apache.jena:apache-jena"}},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			rec := httpServe(a.srv, "GET", OSVBasePath+"/v1/vulns/"+tc.id, "")
			if rec.Code != 200 {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			var doc struct {
				ID       string   `json:"id"`
				Aliases  []string `json:"aliases"`
				Related  []string `json:"related"`
				Affected []struct {
					Package struct{ Ecosystem, Name string }
				} `json:"affected"`
			}
			json.Unmarshal(rec.Body.Bytes(), &doc)
			var pkgs []string
			for _, af := range doc.Affected {
				pkgs = append(pkgs, af.Package.Ecosystem+"/"+af.Package.Name)
			}
			if doc.ID != tc.wantID || !cmp.Equal(doc.Aliases, tc.aliases) || !cmp.Equal(doc.Related, tc.related) || !cmp.Equal(pkgs, tc.packages) {
				t.Errorf("id %s aliases %v related %v packages %v; want %s %v %v %v", doc.ID, doc.Aliases, doc.Related, pkgs, tc.wantID, tc.aliases, tc.related, tc.packages)
			}
		})
	}
}

// multipartSBOM returns a multipart/form-data request body uploading doc
// as the sbom field, and its content type.
func multipartSBOM(tb testing.TB, doc []byte) (*bytes.Buffer, string) {
	tb.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if doc != nil {
		fw, err := mw.CreateFormFile("sbom", "bom.json")
		if err != nil {
			tb.Fatal(err)
		}
		fw.Write(doc)
	}
	mw.Close()
	return &buf, mw.FormDataContentType()
}

func TestPackagesPage(t *testing.T) {
	a := newPackagesTest(t, false, packageRecords()...)
	if body := a.serve(newRequest("GET", "/", nil)).Body.String(); !strings.Contains(body, `action="/packages"`) || !strings.Contains(body, `name="sbom"`) {
		t.Error("the search page has no package form or SBOM upload")
	}
	tests := []struct {
		name   string
		method string
		path   string
		doc    []byte // uploaded with POST
		status int
		want   []string // in order
	}{
		{"empty form", "GET", "/packages", nil, 200, []string{`name="purl"`, `name="sbom"`}},
		{"purl", "GET", "/packages?purl=pkg%3Apypi%2Fdjango%404.2.0", nil, 200,
			[]string{"<h2>PyPI django 4.2.0</h2>", "1 vulnerable", "CVE-2024-27351", "badge kev", "4.2.11", "4.2.11", "PyPA", "4.2.12", "GHSA"}},
		{"ecosystem and name", "GET", "/packages?ecosystem=PyPI&name=django&version=4.2.12", nil, 200,
			[]string{"PyPI django 4.2.12", "No CVE of the catalog affects this package."}},
		{"malformed purl", "GET", "/packages?purl=pkg%3A", nil, 400, []string{`class="error"`, "purl &#34;pkg:&#34;"}},
		{"unknown ecosystem", "GET", "/packages?ecosystem=Nope&name=x&version=1", nil, 400, []string{`unknown ecosystem &#34;Nope&#34;`}},
		{"SBOM", "POST", "/packages", mustReadFile(t, "../sbom/testdata/SPDXJSONExample-v2.3.spdx.json"), 200,
			[]string{"SPDX SPDX-2.3", "4 components skipped", "CVE-2023-0002", "3.17.0", "Skipped components", "glibc"}},
		{"no file", "POST", "/packages", nil, 400, []string{"Choose an SBOM file"}},
		{"not an SBOM", "POST", "/packages", []byte(`<html>`), 400, []string{"not JSON"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var req *http.Request
			if tc.method == "POST" {
				body, ct := multipartSBOM(t, tc.doc)
				req = newRequest("POST", tc.path, body)
				req.Header.Set("Content-Type", ct)
			} else {
				req = newRequest("GET", tc.path, nil)
			}
			rec := a.serve(req)
			body := rec.Body.String()
			if rec.Code != tc.status || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
				t.Fatalf("status %d %s, want %d:\n%.3000s", rec.Code, rec.Header().Get("Content-Type"), tc.status, body)
			}
			at := 0
			for _, s := range tc.want {
				i := strings.Index(body[at:], s)
				if i < 0 {
					t.Fatalf("%q missing or out of order:\n%.4000s", s, body)
				}
				at += i
			}
			if strings.Contains(body, "<script") || !strings.Contains(rec.Header().Get("Content-Security-Policy"), "default-src 'none'") {
				t.Error("the page has a script or no CSP")
			}
		})
	}
}
