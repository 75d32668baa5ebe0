package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestFrontPageBrowser opens the lookup listener's front page and a source
// page in headless Chromium, against the real binary serving the bundled
// sample, and checks what a person sees there. It runs when
// PATCHLINE_TEST_CHROMIUM names a Chromium binary.
func TestFrontPageBrowser(t *testing.T) {
	chromium := os.Getenv("PATCHLINE_TEST_CHROMIUM")
	if chromium == "" {
		t.Skip("PATCHLINE_TEST_CHROMIUM is unset: set it to a Chromium binary (such as /usr/bin/chromium) to test the front page in a real browser")
	}
	artifacts := os.Getenv("PATCHLINE_TEST_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	} else {
		artifacts = filepath.Join(artifacts, "front")
		if err := os.MkdirAll(artifacts, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	srv := startServe(t, t.TempDir(), []string{"PATCHLINE_CONTROL_DB=", "PATCHLINE_CATALOG_DB="})

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(desktopWidth, desktopHeight),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	tabCtx, cancelTab := chromedp.NewContext(allocCtx)
	defer cancelTab()
	b := &consoleBrowser{t: t, ctx: tabCtx, base: srv.LookupURL, artifacts: artifacts}
	b.do("start chromium", chromedp.EmulateViewport(desktopWidth, desktopHeight))

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
