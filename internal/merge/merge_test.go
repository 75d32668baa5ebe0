package merge

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/cve"
)

var (
	cvelistSrc = cve.DataSource{Name: "cvelist", License: "CVE Terms of Use"}
	nvdSrc     = cve.DataSource{Name: "nvd", License: "Public domain (NVD)"}
	kevSrc     = cve.DataSource{Name: "kev", License: "CC0-1.0"}
	epssSrc    = cve.DataSource{Name: "epss", License: "FIRST"}
	debianSrc  = cve.DataSource{Name: "debian", License: "Debian"}
	ghsaSrc    = cve.DataSource{Name: "osv:GHSA", License: "CC-BY-4.0"}
)

func date(s string) *time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return &t
}

func TestEPSSAloneMakesNoRecord(t *testing.T) {
	_, ok := Record("CVE-2020-0001", []cve.Facts{{Feed: "epss", Source: epssSrc, EPSS: &cve.EPSS{Score: 0.5}}}, Options{})
	if ok {
		t.Fatal("a record was made from EPSS alone")
	}
}

func TestCVSSPreference(t *testing.T) {
	cna31 := cve.Metric{Version: "3.1", Vector: "CVSS:3.1/AV:N", Score: 9.8, Severity: "CRITICAL", Source: "apache", Type: cve.MetricCNA}
	cna40 := cve.Metric{Version: "4.0", Vector: "CVSS:4.0/AV:N", Score: 9.3, Severity: "CRITICAL", Source: "apache", Type: cve.MetricCNA}
	adp := cve.Metric{Version: "3.1", Vector: "CVSS:3.1/AV:L", Score: 5.5, Severity: "MEDIUM", Source: "CISA-ADP", Type: cve.MetricADP}
	nvdPrimary := cve.Metric{Version: "3.1", Vector: "CVSS:3.1/AV:N/x", Score: 10, Severity: "CRITICAL", Source: "nvd@nist.gov", Type: cve.MetricPrimary}
	nvdV2 := cve.Metric{Version: "2.0", Vector: "AV:N", Score: 9.3, Severity: "HIGH", Source: "nvd@nist.gov", Type: cve.MetricPrimary}
	tests := []struct {
		name  string
		facts []cve.Facts
		want  cve.Metric
	}{
		{"adp only", []cve.Facts{{Feed: "cvelist", Source: cvelistSrc, Metrics: []cve.Metric{adp}}}, adp},
		{"cna over adp", []cve.Facts{{Feed: "cvelist", Source: cvelistSrc, Metrics: []cve.Metric{adp, cna31}}}, cna31},
		{"newest cna version", []cve.Facts{{Feed: "cvelist", Source: cvelistSrc, Metrics: []cve.Metric{cna31, cna40}}}, cna40},
		{"nvd primary over cna 4.0", []cve.Facts{
			{Feed: "cvelist", Source: cvelistSrc, Metrics: []cve.Metric{cna40}},
			{Feed: "nvd", Source: nvdSrc, Metrics: []cve.Metric{nvdV2, nvdPrimary}},
		}, nvdPrimary},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, ok := Record("CVE-2021-44228", tt.facts, Options{})
			if !ok || rec.CVSS == nil {
				t.Fatalf("no CVSS: %+v", rec)
			}
			if diff := cmp.Diff(tt.want, rec.CVSS.Metric); diff != "" {
				t.Errorf("preferred metric (-want +got):\n%s", diff)
			}
			if rec.Severity == nil || *rec.Severity != tt.want.Severity {
				t.Errorf("severity = %v, want %s", rec.Severity, tt.want.Severity)
			}
		})
	}
}

func TestReferencesMergedByURL(t *testing.T) {
	rec, _ := Record("CVE-2021-44228", []cve.Facts{
		{Feed: "cvelist", Source: cvelistSrc, References: []cve.Reference{{URL: "https://a.example/x", Tags: []string{"vendor-advisory"}}}},
		{Feed: "nvd", Source: nvdSrc, References: []cve.Reference{
			{URL: "https://a.example/x", Tags: []string{"Third Party Advisory", "vendor-advisory"}},
			{URL: "https://b.example/y"},
		}},
	}, Options{})
	want := []cve.Reference{
		{URL: "https://a.example/x", Tags: []string{"Third Party Advisory", "vendor-advisory"}},
		{URL: "https://b.example/y", Tags: []string{}},
	}
	if diff := cmp.Diff(want, rec.References); diff != "" {
		t.Errorf("references (-want +got):\n%s", diff)
	}
}

func TestRemediationOrderAndProvenance(t *testing.T) {
	lc := NewLifecycleTable([]cve.Lifecycle{
		{Product: "debian", Cycle: "9", EOL: "2020-07-06", EOES: "2027-06-30"},
		{Product: "debian", Cycle: "12", EOL: "2028-06-10"},
	})
	facts := []cve.Facts{
		{Feed: "nvd", Source: nvdSrc, Atoms: []cve.ProductAtom{
			{Ecosystem: "Vendor", Product: "apache:log4j", Atom: cve.Atom{FixedVersion: "2.15.0", Source: "NVD"}},
		}},
		{Feed: "osv", Doc: "GHSA-jfh8-c2jp-5v3q", Source: ghsaSrc, Atoms: []cve.ProductAtom{
			{Ecosystem: "Maven", Product: "org.apache.logging.log4j:log4j-core", Atom: cve.Atom{FixedVersion: "2.15.0", Source: "GitHub Advisory Database"}},
			{Ecosystem: "Maven", Product: "org.apache.logging.log4j:log4j-core", Atom: cve.Atom{FixedVersion: "2.3.1", Source: "GitHub Advisory Database"}},
		}},
		{Feed: "debian", Doc: "apache-log4j2", Source: debianSrc, Atoms: []cve.ProductAtom{
			{Ecosystem: "Debian:12", Product: "apache-log4j2", Atom: cve.Atom{FixedVersion: "2.15.0-1", Source: "Debian Security Tracker"}},
			{Ecosystem: "Debian:9", Product: "apache-log4j2", Atom: cve.Atom{FixedVersion: "2.7-2+deb9u1", Source: "Debian Security Tracker"}},
		}},
		{Feed: "epss", Source: epssSrc, EPSS: &cve.EPSS{Score: 0.9}},
	}
	rec, ok := Record("CVE-2021-44228", facts, Options{Lifecycles: lc, Now: *date("2026-11-21T00:00:00Z")})
	if !ok {
		t.Fatal("no record")
	}
	var got []string
	for _, p := range rec.Remediation.Products {
		for _, a := range p.Atoms {
			s := p.Ecosystem + " " + p.Product + " " + a.FixedVersion + " " + a.Source + " " + a.License
			if a.EOL != nil {
				s += " eol " + *a.EOL.EOLFrom + " eoes " + *a.EOL.EOESFrom
			}
			got = append(got, s)
		}
	}
	want := []string{
		"Debian:9 apache-log4j2 2.7-2+deb9u1 Debian Security Tracker Debian eol 2020-07-06 eoes 2027-06-30",
		"Debian:12 apache-log4j2 2.15.0-1 Debian Security Tracker Debian",
		"Maven org.apache.logging.log4j:log4j-core 2.3.1 GitHub Advisory Database CC-BY-4.0",
		"Maven org.apache.logging.log4j:log4j-core 2.15.0 GitHub Advisory Database CC-BY-4.0",
		"Vendor apache:log4j 2.15.0 NVD Public domain (NVD)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("atoms (-want +got):\n%s", diff)
	}
	if !rec.Remediation.Available {
		t.Error("remediation.available is false")
	}
	var names []string
	for _, ds := range rec.DataSources {
		names = append(names, ds.Name+": "+ds.Use)
	}
	wantNames := []string{"nvd: remediation", "epss: EPSS score", "osv:GHSA: remediation", "debian: remediation", "eol: end-of-life dates of releases"}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("dataSources (-want +got):\n%s", diff)
	}
}

// TestRemediationWithoutFix keeps the ranges affected with no fix known,
// after the fixes of their product, each range once, and says that a fix
// is available only when an atom names one.
func TestRemediationWithoutFix(t *testing.T) {
	rng := func(s string) *string { return &s }
	unfixed := []cve.ProductAtom{
		{Ecosystem: "PyPI", Product: "gunicorn", Atom: cve.Atom{AffectedRange: rng("<= 21.2.0"), Source: "GitHub Advisory Database"}},
		{Ecosystem: "PyPI", Product: "gunicorn", Atom: cve.Atom{AffectedRange: rng("<= 21.2.0"), Source: "GitHub Advisory Database"}},
		{Ecosystem: "PyPI", Product: "gunicorn", Atom: cve.Atom{AffectedRange: rng(">= 23.0"), Source: "GitHub Advisory Database"}},
		{Ecosystem: "PyPI", Product: "gunicorn", Atom: cve.Atom{Source: "GitHub Advisory Database"}}, // says nothing
	}
	for _, tc := range []struct {
		name      string
		atoms     []cve.ProductAtom
		want      []string
		available bool
	}{
		{"no fix", unfixed, []string{" <= 21.2.0", " >= 23.0"}, false},
		{"a fix beside", append([]cve.ProductAtom{
			{Ecosystem: "PyPI", Product: "gunicorn", Atom: cve.Atom{FixedVersion: "22.0.0", AffectedRange: rng(">= 22.0, < 22.0.0"), Source: "GitHub Advisory Database"}},
		}, unfixed...), []string{"22.0.0 >= 22.0, < 22.0.0", " <= 21.2.0", " >= 23.0"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			facts := []cve.Facts{{Feed: "osv", Doc: "GHSA-w3h3-4rj7-4ph4", Source: ghsaSrc, Atoms: tc.atoms}}
			rec, ok := Record("CVE-2024-1135", facts, Options{Now: *date("2026-11-21T00:00:00Z")})
			if !ok {
				t.Fatal("no record")
			}
			var got []string
			for _, p := range rec.Remediation.Products {
				for _, a := range p.Atoms {
					got = append(got, a.FixedVersion+" "+*a.AffectedRange)
					if a.Unparsed || (!a.HasFix() && a.EOL != nil) {
						t.Errorf("atom %+v: unparsed or end of life without a fix", a)
					}
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("atoms (-want +got):\n%s", diff)
			}
			if rec.Remediation.Available != tc.available {
				t.Errorf("remediation.available = %v, want %v", rec.Remediation.Available, tc.available)
			}
			if s := cve.Summarize(rec); s.HasRemediation != tc.available {
				t.Errorf("summary hasRemediation = %v, want %v", s.HasRemediation, tc.available)
			}
		})
	}
}

func TestRejectedKeepsOnlyTheRejection(t *testing.T) {
	rec, ok := Record("CVE-2019-25161", []cve.Facts{
		{Feed: "cvelist", Source: cvelistSrc, State: cve.StateRejected, RejectedReason: "duplicate", Published: date("2024-02-27T00:00:00Z")},
		{Feed: "kev", Source: kevSrc, KEV: &cve.KEV{DateAdded: "2024-01-01"}},
	}, Options{})
	if !ok || rec.State != cve.StateRejected || rec.RejectedReason == nil || *rec.RejectedReason != "duplicate" {
		t.Fatalf("record = %+v", rec)
	}
	if rec.KEV != nil || rec.Remediation.Available || len(rec.DataSources) != 1 || rec.DataSources[0].Name != "cvelist" {
		t.Errorf("rejected record carries more than its rejection: %+v", rec)
	}
}

func TestCompareEcosystems(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"Debian:8", "Debian:10", -1},
		{"Debian:10", "Debian:8", 1},
		{"Debian:12", "Debian:12", 0},
		{"Ubuntu:20.04:LTS", "Ubuntu:22.04:LTS", -1},
		{"AlmaLinux:9", "Azure Linux:2", -1},
		{"Debian", "Debian:12", -1},
		{"Alpine:v3.9", "Alpine:v3.19", -1},
		{"Go", "Maven", -1},
	}
	for _, tt := range tests {
		if got := compareEcosystems(tt.a, tt.b); got != tt.want {
			t.Errorf("compareEcosystems(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
