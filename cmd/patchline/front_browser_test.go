package main

import (
	"strings"
	"testing"
	"time"
)

// TestFrontPageBrowser opens the lookup listener's front page and a source
// page in headless Chromium, against the real binary serving the bundled
// sample, and checks what a person sees there. It runs when
// PATCHLINE_TEST_CHROMIUM names a Chromium binary.
func TestFrontPageBrowser(t *testing.T) {
	e2e(t)
	chromium, artifacts := browserTest(t, "front page")
	srv := startServe(t, t.TempDir(), []string{"PATCHLINE_CONTROL_DB=", "PATCHLINE_CATALOG_DB="})
	b := startBrowser(t, chromium, artifacts, srv.LookupURL, 3*time.Minute)

	b.open("/", "/")
	main := b.mainText()
	// What the catalog holds, what was exploited last, what changed, and
	// where it all comes from: the sample, with the date of its data.
	for _, want := range []string{
		"The catalog", "CVE records", "with a known fix", "1404\nknown exploited",
		"Latest known-exploited additions", "CVE-2025-48384", "2025-08-25",
		"Modified in the last day",
		"Sources", "bundled, from 2025-08-25", "bundled, from 2025-01-24", "osv:GHSA",
	} {
		if !strings.Contains(main, want) {
			t.Errorf("the front page does not show %q:\n%s", want, main)
		}
	}
	// The sample's data is old: its sources show red.
	badge := eval[string](b, `getComputedStyle(document.querySelector('a[href="/sources/kev"]').closest('tr').querySelector('.badge')).backgroundColor`)
	if badge != "rgb(255, 235, 233)" {
		t.Errorf("the freshness badge of kev is %s, want red (rgb(255, 235, 233))", badge)
	}
	b.check("front")

	// The table leads to each source's page.
	b.submit(`a[href="/sources/kev"]`, "/sources/kev")
	if h1 := b.text("h1"); !strings.Contains(h1, "kev") || !strings.Contains(h1, "stale") {
		t.Errorf("the source page's heading is %q", h1)
	}
	main = b.mainText()
	for _, want := range []string{"CISA KEV", "bundled, from 2025-08-25", "1404 records with facts from this source", "CC0-1.0",
		"https://www.cisa.gov/sites/default/files/feeds/known_exploited_vulnerabilities.json", "sample:kev"} {
		if !strings.Contains(main, want) {
			t.Errorf("the kev page does not show %q:\n%s", want, main)
		}
	}
	b.check("source-kev")
}
