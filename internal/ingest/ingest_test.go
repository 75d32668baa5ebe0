package ingest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/catalog/sqlite"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/feed"
)

func mustOpenCatalog(tb testing.TB) *sqlite.DB {
	tb.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "catalog.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

func mustSource(tb testing.TB, arg string) Source {
	tb.Helper()
	s, err := ParseSource(arg)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

const kevFile = "../sample/data/kev/known_exploited_vulnerabilities.json"

func writeFile(tb testing.TB, name, body string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

func clock(s string) func() time.Time {
	t, _ := time.Parse(time.RFC3339, s)
	return func() time.Time { return t }
}

func TestUnreadableLocationLeavesCatalogIntact(t *testing.T) {
	ctx := context.Background()
	db := mustOpenCatalog(t)
	if _, err := Run(ctx, db, []Source{mustSource(t, "kev="+kevFile)}, Options{}); err != nil {
		t.Fatal(err)
	}
	before, _ := db.Stats(ctx)

	epss := writeFile(t, "e.csv", "CVE-2021-44228;0.9;0.99\n")
	_, err := Run(ctx, db, []Source{
		mustSource(t, "epss="+epss),
		mustSource(t, "kev=/nonexistent/kev.json"),
	}, Options{})
	if !errors.Is(err, feed.ErrUnreadable) {
		t.Fatalf("Run error = %v, want ErrUnreadable", err)
	}
	after, _ := db.Stats(ctx)
	if after != before {
		t.Errorf("stats after a failed run = %+v, want %+v", after, before)
	}
	rec, err := db.Record(ctx, "CVE-2021-44228")
	if err != nil {
		t.Fatal(err)
	}
	if rec.EPSS != nil {
		t.Error("EPSS of the failed run was kept")
	}
}

func TestModifiedAtIgnoresEPSSMovement(t *testing.T) {
	ctx := context.Background()
	db := mustOpenCatalog(t)
	run := func(now string, args ...string) {
		t.Helper()
		var srcs []Source
		for _, a := range args {
			srcs = append(srcs, mustSource(t, a))
		}
		if _, err := Run(ctx, db, srcs, Options{Now: clock(now)}); err != nil {
			t.Fatal(err)
		}
	}
	modified := func() time.Time {
		t.Helper()
		rec, err := db.Record(ctx, "CVE-2021-44228")
		if err != nil {
			t.Fatal(err)
		}
		return *rec.ModifiedAt
	}
	run("2026-01-01T00:00:00Z", "kev="+kevFile, "epss="+writeFile(t, "a.csv", "CVE-2021-44228;0.9;0.99\n"))
	first := modified()
	run("2026-01-02T00:00:00Z", "epss="+writeFile(t, "b.csv", "CVE-2021-44228;0.8;0.98\n"))
	if got := modified(); !got.Equal(first) {
		t.Errorf("modifiedAt after an EPSS change = %v, want %v", got, first)
	}
	rec, _ := db.Record(ctx, "CVE-2021-44228")
	if rec.EPSS == nil || rec.EPSS.Score != 0.8 {
		t.Errorf("EPSS = %+v, want the new score 0.8", rec.EPSS)
	}
	// A content change moves modifiedAt.
	kev := writeFile(t, "kev.json", `{"title":"t","catalogVersion":"x","dateReleased":"2026-01-03T00:00:00Z","count":1,"vulnerabilities":[
		{"cveID":"CVE-2021-44228","vendorProject":"Apache","product":"Log4j2","vulnerabilityName":"n","dateAdded":"2021-12-10",
		 "shortDescription":"changed","requiredAction":"patch","dueDate":"2021-12-24","knownRansomwareCampaignUse":"Known","notes":"","cwes":["CWE-20"]}]}`)
	run("2026-01-03T00:00:00Z", "kev="+kev)
	if got := modified(); !got.Equal(*mustTime("2026-01-03T00:00:00Z")) {
		t.Errorf("modifiedAt after a content change = %v, want 2026-01-03", got)
	}
}

func mustTime(s string) *time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return &t
}

func TestMalformedRecordsAreCountedAndNamed(t *testing.T) {
	ctx := context.Background()
	db := mustOpenCatalog(t)
	epss := writeFile(t, "e.csv", "CVE-2021-44228;0.9;0.99\nnot-a-cve;0.1;0.1\nCVE-2020-0001;7;0.5\n")
	res, err := Run(ctx, db, []Source{mustSource(t, "epss="+epss)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Sources[0]; c.Rejected != 2 || c.Added != 1 {
		t.Errorf("counts = %+v, want 1 added and 2 rejected", c)
	}
	if len(res.Rejections) != 2 || res.Rejections[0].Name == "" {
		t.Errorf("rejections = %+v", res.Rejections)
	}
	// EPSS alone makes no served record.
	if _, err := db.Record(ctx, "CVE-2021-44228"); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("record from EPSS alone: err = %v, want not found", err)
	}
}

func TestSampleLoads(t *testing.T) {
	ctx := context.Background()
	db := sampleCatalog(t)
	res := sampleResult(t)
	for _, c := range res.Sources {
		if c.Read == 0 {
			t.Errorf("sample source %s read nothing: %+v", c.Source, c)
		}
	}
	// MSRC's documents name a few CVEs with suffixes ("CVE-2022-2601-M");
	// those, and only those, are rejected.
	for _, r := range res.Rejections {
		if r.Source != "msrc" || !strings.Contains(r.Name, "#CVE-") {
			t.Errorf("unexpected rejection %s %s: %v", r.Source, r.Name, r.Err)
		}
	}
	rec, err := db.Record(ctx, "CVE-2021-44228")
	if err != nil {
		t.Fatal(err)
	}
	if rec.KEV == nil || rec.KEV.DateAdded != "2021-12-10" {
		t.Errorf("kev = %+v", rec.KEV)
	}
	var _ cve.Catalog = db
}
