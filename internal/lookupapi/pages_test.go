package lookupapi

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/patchline/patchline/internal/cve"
)

const nvdNotice = "This product uses data from the NVD API but is not endorsed or certified by the NVD."

func TestRecordPage(t *testing.T) {
	a := newAPITest(t, Config{})
	rec := a.serve(newRequest("GET", "/cve/CVE-2021-44228", nil))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("status %d, %v", rec.Code, rec.Header())
	}
	body := rec.Body.String()
	// Remediation first, then scores, references and provenance.
	order := []string{
		`id="remediation"`, "2.15.0-1~deb10u1", "end of life since 2022-09-10", "KB5008218",
		`id="scores"`, "CVSS:3.1/AV:N", "0.97565", "added to CISA KEV on 2021-12-10", "CWE-917",
		`id="references"`, "https://logging.apache.org/log4j/2.x/security.html",
		`id="provenance"`, "GitHub Advisory Database", "CC-BY-4.0",
		nvdNotice,
	}
	at := 0
	for _, s := range order {
		i := strings.Index(body[at:], s)
		if i < 0 {
			t.Fatalf("%q missing or out of order in the record page", s)
		}
		at += i
	}
	h := rec.Header()
	if !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") || h.Get("ETag") == "" || h.Get("Cache-Control") != cachePage {
		t.Errorf("headers: %v", h)
	}
	if strings.Contains(body, "<script") {
		t.Error("the page has a script")
	}
}

func TestRecordPageEscapes(t *testing.T) {
	a := newAPITest(t, Config{})
	body := a.serve(newRequest("GET", "/cve/CVE-2021-9999", nil)).Body.String()
	if strings.Contains(body, "<script>alert") || !strings.Contains(body, "&lt;script&gt;") {
		t.Error("the description is not escaped")
	}
	if !strings.Contains(body, "No source names a fixed version") {
		t.Error("a record without remediation does not say so")
	}
}

func TestRecordPageStatuses(t *testing.T) {
	a := newAPITest(t, Config{})
	tests := []struct {
		path         string
		wantStatus   int
		wantLocation string
		wantText     string
	}{
		{"/cve/cve-2021-44228", http.StatusMovedPermanently, "/cve/CVE-2021-44228", ""},
		{"/cve/CVE-2020-0001", http.StatusNotFound, "", "CVE-2020-0001 is not in the catalog"},
		{"/cve/nonsense", http.StatusBadRequest, "", "malformed CVE id"},
		{"/nothing/here", http.StatusNotFound, "", "There is no page at /nothing/here."},
		{"/cve/CVE-2021-10000", http.StatusOK, "", "This CVE id was rejected: Duplicate of CVE-2021-44228."},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rec := a.serve(newRequest("GET", tt.path, nil))
			if rec.Code != tt.wantStatus || rec.Header().Get("Location") != tt.wantLocation {
				t.Errorf("%d Location %q, want %d %q", rec.Code, rec.Header().Get("Location"), tt.wantStatus, tt.wantLocation)
			}
			if !strings.Contains(rec.Body.String(), tt.wantText) {
				t.Errorf("body lacks %q:\n%.2000s", tt.wantText, rec.Body)
			}
			if tt.wantStatus >= 400 && !strings.Contains(rec.Body.String(), nvdNotice) {
				t.Error("error page without the NVD notice")
			}
		})
	}
}

func TestSearchPage(t *testing.T) {
	var queries []cve.ListQuery
	cat := memCatalog(testRecords()...)
	list := cat.ListFn
	cat.ListFn = func(ctx context.Context, q cve.ListQuery) (cve.Page, error) {
		queries = append(queries, q)
		q.Limit = 1
		return list(ctx, q)
	}
	a := newAPITest(t, Config{Catalog: cat})

	home := a.serve(newRequest("GET", "/", nil))
	if home.Code != 200 || !strings.Contains(home.Body.String(), `<input type="search" name="q"`) || !strings.Contains(home.Body.String(), nvdNotice) {
		t.Fatalf("home: %d\n%s", home.Code, home.Body)
	}
	if len(queries) != 0 {
		t.Errorf("the home page listed the catalog")
	}

	// The form sends its empty controls too.
	rec := a.serve(newRequest("GET", "/?q=&kev=true&fix=&epss_min=&year=&sort=cve&dir=desc", nil))
	body := rec.Body.String()
	if rec.Code != 200 || !strings.Contains(body, `href="/cve/CVE-2021-44228"`) || !strings.Contains(body, `rel="next"`) {
		t.Fatalf("results: %d\n%s", rec.Code, body)
	}
	if q := queries[0]; q.KEV == nil || !*q.KEV || q.Sort != "cve" || !q.Desc {
		t.Errorf("query: %+v", q)
	}
	if !strings.Contains(body, `<option value="true" selected>yes</option>`) {
		t.Error("the form does not keep its values")
	}

	// Bad values are shown, not thrown.
	rec = a.serve(newRequest("GET", "/?epss_min=7", nil))
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), "epss_min") || !strings.Contains(rec.Body.String(), `name="q"`) {
		t.Errorf("bad value: %d\n%.2000s", rec.Code, rec.Body)
	}

	// An id goes straight to its page.
	rec = a.serve(newRequest("GET", "/?q=cve-2021-44228", nil))
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/cve/CVE-2021-44228" {
		t.Errorf("id search: %d %v", rec.Code, rec.Header())
	}
}
