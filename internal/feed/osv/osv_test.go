package osv

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed/feedtest"
)

// The records under test are the real ones in internal/sample/data/osv (see
// its SOURCE.md), except for a few small inline records that exercise cases
// the sample does not hold.

const dataDir = "osv"

func mustParse(t *testing.T, name string, data []byte) *feedtest.Recorder {
	t.Helper()
	return feedtest.Parse(t, Parser, name, data)
}

func mustRead(t *testing.T, rel string) []byte {
	t.Helper()
	return feedtest.Sample(t, path.Join(dataDir, rel))
}

// atom builds the atom of an advisory of database db.
func atom(eco, product, fixed, rng, id, title, license string) cve.ProductAtom {
	return cve.ProductAtom{
		Ecosystem: eco,
		Product:   product,
		Atom: cve.Atom{
			FixedVersion:  fixed,
			AffectedRange: feedtest.Ptr(rng),
			AdvisoryID:    feedtest.Ptr(id),
			SourceURL:     feedtest.Ptr(advisoryURL + id),
			Source:        title,
			License:       license,
		},
	}
}

func TestParseRealRecords(t *testing.T) {
	const (
		ghsa    = "GitHub Advisory Database"
		goDB    = "Go Vulnerability Database"
		pypa    = "PyPA Advisory Database"
		rustsec = "RustSec Advisory Database"
	)
	tests := []struct {
		name     string
		file     string
		want     []*cve.Facts // References are checked by refs
		wantRefs map[string][]string
	}{
		{
			name: "ghsa log4shell",
			file: "ghsa/GHSA-jfh8-c2jp-5v3q.json",
			want: []*cve.Facts{{
				CVEID:     "CVE-2021-44228",
				Feed:      "osv",
				Doc:       "GHSA-jfh8-c2jp-5v3q",
				Source:    cve.DataSource{Name: "osv:GHSA", License: "CC-BY-4.0", URL: feedtest.Ptr(advisoryURL + "GHSA-jfh8-c2jp-5v3q")},
				Published: feedtest.Time("2021-12-10T00:40:56Z"),
				Modified:  feedtest.Time("2022-03-25T20:56:18Z"),
				CWEs:      []string{"CWE-20", "CWE-400", "CWE-502", "CWE-917"},
				Atoms: []cve.ProductAtom{
					atom("Maven", "org.apache.logging.log4j:log4j-core", "2.3.1", "< 2.3.1", "GHSA-jfh8-c2jp-5v3q", ghsa, "CC-BY-4.0"),
					atom("Maven", "org.apache.logging.log4j:log4j-core", "2.12.2", ">= 2.4, < 2.12.2", "GHSA-jfh8-c2jp-5v3q", ghsa, "CC-BY-4.0"),
					atom("Maven", "org.apache.logging.log4j:log4j-core", "2.15.0", ">= 2.13.0, < 2.15.0", "GHSA-jfh8-c2jp-5v3q", ghsa, "CC-BY-4.0"),
				},
			}},
			wantRefs: map[string][]string{
				"https://nvd.nist.gov/vuln/detail/CVE-2021-44228":   {"advisory"},
				"https://github.com/apache/logging-log4j2/pull/608": {},
				"https://github.com/apache/logging-log4j2":          {"package"},
			},
		},
		{
			name: "go record naming its CVE in related only, placeholder dates",
			file: "go/GO-2023-2153.json",
			want: []*cve.Facts{{
				CVEID:  "CVE-2023-44487",
				Feed:   "osv",
				Doc:    "GO-2023-2153",
				Source: cve.DataSource{Name: "osv:Go", License: "CC-BY-4.0", URL: feedtest.Ptr(advisoryURL + "GO-2023-2153")},
				Atoms: []cve.ProductAtom{
					atom("Go", "google.golang.org/grpc", "1.56.3", "< 1.56.3", "GO-2023-2153", goDB, "CC-BY-4.0"),
					atom("Go", "google.golang.org/grpc", "1.57.1", ">= 1.57.0, < 1.57.1", "GO-2023-2153", goDB, "CC-BY-4.0"),
					atom("Go", "google.golang.org/grpc", "1.58.3", ">= 1.58.0, < 1.58.3", "GO-2023-2153", goDB, "CC-BY-4.0"),
				},
			}},
			wantRefs: map[string][]string{
				"https://github.com/grpc/grpc-go/pull/6703":                                       {},
				"https://github.com/grpc/grpc-go/commit/f2180b4d5403d2210b30b93098eb7da31c05c721": {"fix"},
			},
		},
		{
			name: "withdrawn go record",
			file: "go/GO-2024-2730.json",
		},
		{
			name: "pypa yaml with git and ecosystem ranges",
			file: "pypa/PYSEC-2023-74.yaml",
			want: []*cve.Facts{{
				CVEID:     "CVE-2023-32681",
				Feed:      "osv",
				Doc:       "PYSEC-2023-74",
				Source:    cve.DataSource{Name: "osv:PyPA", License: "CC-BY-4.0", URL: feedtest.Ptr(advisoryURL + "PYSEC-2023-74")},
				Published: feedtest.Time("2023-05-26T18:15:00Z"),
				Modified:  feedtest.Time("2023-06-05T01:13:00.534973Z"),
				Atoms: []cve.ProductAtom{
					atom("PyPI", "requests", "2.31.0", ">= 2.3.0, < 2.31.0", "PYSEC-2023-74", pypa, "CC-BY-4.0"),
				},
			}},
			wantRefs: map[string][]string{
				"https://github.com/psf/requests/security/advisories/GHSA-j8r2-6x86-q33q":                                                          {"advisory"},
				"https://lists.fedoraproject.org/archives/list/package-announce@lists.fedoraproject.org/message/AW7HNFGYP44RT3DUDQXG2QT3OEV2PJ7Y/": {"article"},
			},
		},
		{
			name: "pypa record relating two CVEs",
			file: "pypa/PYSEC-2023-174.yaml",
			want: []*cve.Facts{
				{
					CVEID:    "CVE-2023-4863",
					Feed:     "osv",
					Doc:      "PYSEC-2023-174",
					Source:   cve.DataSource{Name: "osv:PyPA", License: "CC-BY-4.0", URL: feedtest.Ptr(advisoryURL + "PYSEC-2023-174")},
					Modified: feedtest.Time("2023-09-20T05:12:42.403706Z"),
					Atoms: []cve.ProductAtom{
						atom("PyPI", "imagecodecs", "2023.9.18", "< 2023.9.18", "PYSEC-2023-174", pypa, "CC-BY-4.0"),
					},
				},
				{
					CVEID:    "CVE-2023-5129",
					Feed:     "osv",
					Doc:      "PYSEC-2023-174",
					Source:   cve.DataSource{Name: "osv:PyPA", License: "CC-BY-4.0", URL: feedtest.Ptr(advisoryURL + "PYSEC-2023-174")},
					Modified: feedtest.Time("2023-09-20T05:12:42.403706Z"),
					Atoms: []cve.ProductAtom{
						atom("PyPI", "imagecodecs", "2023.9.18", "< 2023.9.18", "PYSEC-2023-174", pypa, "CC-BY-4.0"),
					},
				},
			},
		},
		{
			name: "rustsec with the minimal semver as introduced",
			file: "rustsec/RUSTSEC-2023-0034.json",
			want: []*cve.Facts{{
				CVEID:     "CVE-2023-26964",
				Feed:      "osv",
				Doc:       "RUSTSEC-2023-0034",
				Source:    cve.DataSource{Name: "osv:RustSec", License: "CC0-1.0", URL: feedtest.Ptr(advisoryURL + "RUSTSEC-2023-0034")},
				Published: feedtest.Time("2023-04-14T12:00:00Z"),
				Modified:  feedtest.Time("2023-04-20T19:17:55Z"),
				Atoms: []cve.ProductAtom{
					atom("crates.io", "h2", "0.3.17", "< 0.3.17", "RUSTSEC-2023-0034", rustsec, "CC0-1.0"),
				},
			}},
			wantRefs: map[string][]string{
				"https://crates.io/crates/h2":                           {"package"},
				"https://rustsec.org/advisories/RUSTSEC-2023-0034.html": {"advisory"},
				"https://github.com/hyperium/hyper/issues/2877":         {"report"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustParse(t, tt.file, mustRead(t, tt.file))
			if len(r.Messages()) > 0 {
				t.Errorf("rejects: %v", r.Messages())
			}
			opt := cmpopts.IgnoreFields(cve.Facts{}, "References")
			if diff := cmp.Diff(tt.want, r.Received, opt, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("facts (-want +got):\n%s", diff)
			}
			for _, f := range r.Received {
				got := map[string][]string{}
				for _, ref := range f.References {
					got[ref.URL] = ref.Tags
				}
				for u, tags := range tt.wantRefs {
					if diff := cmp.Diff(tags, got[u]); diff != "" {
						t.Errorf("%s: tags of %s (-want +got):\n%s", f.CVEID, u, diff)
					}
				}
			}
		})
	}
}

func TestParseAlmaLinux(t *testing.T) {
	r := mustParse(t, "ALSA-2023-5455.json", mustRead(t, "almalinux/ALSA-2023-5455.json"))
	var ids []string
	for _, f := range r.Received {
		ids = append(ids, f.CVEID)
	}
	if diff := cmp.Diff([]string{"CVE-2023-4911", "CVE-2023-4527", "CVE-2023-4806", "CVE-2023-4813"}, ids); diff != "" {
		t.Errorf("CVEs from related (-want +got):\n%s", diff)
	}
	f := r.Received[0]
	if diff := cmp.Diff(cve.DataSource{Name: "osv:AlmaLinux", License: "MIT", URL: feedtest.Ptr(advisoryURL + "ALSA-2023:5455")}, f.Source); diff != "" {
		t.Errorf("source (-want +got):\n%s", diff)
	}
	want := atom("AlmaLinux:8", "glibc", "2.28-225.el8_8.6", "< 2.28-225.el8_8.6", "ALSA-2023:5455", "AlmaLinux OSV Database", "MIT")
	found := false
	for _, a := range f.Atoms {
		if a.Unparsed {
			t.Errorf("atom %s %s: fixed version %q flagged as unparsed", a.Ecosystem, a.Product, a.FixedVersion)
		}
		if a.Product == "glibc" {
			found = true
			if diff := cmp.Diff(want, a); diff != "" {
				t.Errorf("glibc atom (-want +got):\n%s", diff)
			}
		}
	}
	if !found {
		t.Errorf("no glibc atom among %d", len(f.Atoms))
	}
}

// TestParseAllSamples reads every sample record: none is rejected, every
// fact has a canonical CVE id, and every atom has a source and a license.
func TestParseAllSamples(t *testing.T) {
	facts := 0
	for _, p := range samples(t) {
		r := mustParse(t, path.Base(p), feedtest.Sample(t, p))
		if len(r.Messages()) > 0 {
			t.Errorf("%s: rejects %v", p, r.Messages())
		}
		for _, f := range r.Received {
			facts++
			if c, err := cve.ParseID(f.CVEID); err != nil || c != f.CVEID {
				t.Errorf("%s: CVE id %q", p, f.CVEID)
			}
			for _, a := range f.Atoms {
				if a.Source == "" || a.License == "" || a.FixedVersion == "" {
					t.Errorf("%s: incomplete atom %+v", p, a)
				}
			}
		}
	}
	if facts < 400 {
		t.Errorf("%d facts from the samples, want 400 or more", facts)
	}
}

// TestParseUnfixed reads the real records of testdata (see its
// SOURCE.md), whose ranges end in last_affected or do not end: each gives
// an atom without fixed version whose range holds the versions affected
// with no fix known, beside the atoms of its fixed events.
func TestParseUnfixed(t *testing.T) {
	const (
		ghsa = "GitHub Advisory Database"
		goDB = "Go Vulnerability Database"
	)
	tests := []struct {
		file string
		want map[string][]cve.ProductAtom // by CVE
	}{
		{"ghsa/GHSA-w3h3-4rj7-4ph4.json", map[string][]cve.ProductAtom{"CVE-2024-1135": {
			atom("PyPI", "gunicorn", "", "<= 21.2.0", "GHSA-w3h3-4rj7-4ph4", ghsa, "CC-BY-4.0"),
		}}},
		{"ghsa/GHSA-p8p7-x288-28g6.json", map[string][]cve.ProductAtom{"CVE-2023-28155": {
			atom("npm", "@cypress/request", "", "<= 2.88.11", "GHSA-p8p7-x288-28g6", ghsa, "CC-BY-4.0"),
			atom("npm", "request", "", "<= 2.88.2", "GHSA-p8p7-x288-28g6", ghsa, "CC-BY-4.0"),
		}}},
		{"go/GO-2022-0646.json", map[string][]cve.ProductAtom{"CVE-2020-8911": {
			atom("Go", "github.com/aws/aws-sdk-go", "", "*", "GO-2022-0646", goDB, "CC-BY-4.0"),
		}}},
		{"go/GO-2022-0357.json", map[string][]cve.ProductAtom{"CVE-2022-24730": {
			atom("Go", "github.com/argoproj/argo-cd", "", ">= 1.3.0", "GO-2022-0357", goDB, "CC-BY-4.0"),
			atom("Go", "github.com/argoproj/argo-cd/v2", "2.1.11", "< 2.1.11", "GO-2022-0357", goDB, "CC-BY-4.0"),
			atom("Go", "github.com/argoproj/argo-cd/v2", "2.2.6", ">= 2.2.0, < 2.2.6", "GO-2022-0357", goDB, "CC-BY-4.0"),
			atom("Go", "github.com/argoproj/argo-cd/v2", "2.3.0", ">= 2.3.0-rc1, < 2.3.0", "GO-2022-0357", goDB, "CC-BY-4.0"),
		}}},
		{"go/GO-2026-4281.json", map[string][]cve.ProductAtom{"CVE-2025-62877": {
			atom("Go", "github.com/harvester/harvester-installer", "", ">= 1.5.0", "GO-2026-4281", goDB, "CC-BY-4.0"),
			atom("Go", "github.com/harvester/harvester-installer", "", ">= 1.6.0", "GO-2026-4281", goDB, "CC-BY-4.0"),
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			r := mustParse(t, path.Base(tt.file), data)
			got := map[string][]cve.ProductAtom{}
			for _, f := range r.Received {
				got[f.CVEID] = f.Atoms
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("atoms (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseInline(t *testing.T) {
	tests := []struct {
		name        string
		file        string
		data        string
		want        []*cve.Facts
		wantRejects int
	}{
		{
			name: "last_affected without fix and limit",
			file: "GHSA-w3h3-4rj7-4ph4.json",
			data: `{"id":"GHSA-w3h3-4rj7-4ph4","aliases":["CVE-2023-0001"],"modified":"2023-01-01T00:00:00Z",
				"affected":[{"package":{"ecosystem":"npm","name":"left-pad"},
				"ranges":[{"type":"SEMVER","events":[{"introduced":"0"},{"last_affected":"1.3.0"}]},
				          {"type":"ECOSYSTEM","events":[{"introduced":"2.0.0"},{"fixed":"2.0.1"},{"limit":"3.0.0"}]}]}]}`,
			want: []*cve.Facts{{
				CVEID:    "CVE-2023-0001",
				Feed:     "osv",
				Doc:      "GHSA-w3h3-4rj7-4ph4",
				Source:   cve.DataSource{Name: "osv:GHSA", License: "CC-BY-4.0", URL: feedtest.Ptr(advisoryURL + "GHSA-w3h3-4rj7-4ph4")},
				Modified: feedtest.Time("2023-01-01T00:00:00Z"),
				Atoms: []cve.ProductAtom{
					atom("npm", "left-pad", "2.0.1", ">= 2.0.0, < 2.0.1", "GHSA-w3h3-4rj7-4ph4", "GitHub Advisory Database", "CC-BY-4.0"),
					atom("npm", "left-pad", "", "<= 1.3.0", "GHSA-w3h3-4rj7-4ph4", "GitHub Advisory Database", "CC-BY-4.0"),
				},
			}},
		},
		{
			name: "limit closes a range without fix",
			file: "GHSA-0000-0000-0001.json",
			data: `{"id":"GHSA-0000-0000-0001","aliases":["CVE-2023-0002"],
				"affected":[{"package":{"ecosystem":"npm","name":"left-pad"},
				"ranges":[{"type":"SEMVER","events":[{"introduced":"1.0.0"},{"limit":"1.5.0"}]}]}]}`,
			want: []*cve.Facts{{
				CVEID:  "CVE-2023-0002",
				Feed:   "osv",
				Doc:    "GHSA-0000-0000-0001",
				Source: cve.DataSource{Name: "osv:GHSA", License: "CC-BY-4.0", URL: feedtest.Ptr(advisoryURL + "GHSA-0000-0000-0001")},
				Atoms: []cve.ProductAtom{
					atom("npm", "left-pad", "", ">= 1.0.0, < 1.5.0", "GHSA-0000-0000-0001", "GitHub Advisory Database", "CC-BY-4.0"),
				},
			}},
		},
		{
			name: "unknown database, unparsable fix, id naming the CVE",
			file: "DEBIAN-CVE-2024-0002.json",
			data: `{"id":"DEBIAN-CVE-2024-0002","affected":[{"package":{"ecosystem":"Debian:12","name":"openssl"},
				"ranges":[{"type":"ECOSYSTEM","events":[{"introduced":"0"},{"fixed":"not a version"}]}]}]}`,
			want: []*cve.Facts{{
				CVEID:  "CVE-2024-0002",
				Feed:   "osv",
				Doc:    "DEBIAN-CVE-2024-0002",
				Source: cve.DataSource{Name: "osv:Debian", License: "see Debian", URL: feedtest.Ptr(advisoryURL + "DEBIAN-CVE-2024-0002")},
				Atoms: []cve.ProductAtom{func() cve.ProductAtom {
					a := atom("Debian:12", "openssl", "not a version", "< not a version", "DEBIAN-CVE-2024-0002", "Debian Security Tracker", "see Debian")
					a.Unparsed = true
					return a
				}()},
			}},
		},
		{
			name: "ecosystem fallback",
			file: "XYZ-1.json",
			data: `{"id":"XYZ-1","aliases":["cve-2024-0003"],"affected":[{"package":{"ecosystem":"Packagist:https://repo.example","name":"acme/lib"},
				"ranges":[{"type":"GIT","repo":"https://example.com/r","events":[{"introduced":"0"},{"fixed":"abc123"}]}]}]}`,
			want: []*cve.Facts{{
				CVEID:  "CVE-2024-0003",
				Feed:   "osv",
				Doc:    "XYZ-1",
				Source: cve.DataSource{Name: "osv:Packagist", License: "see Packagist", URL: feedtest.Ptr(advisoryURL + "XYZ-1")},
			}},
		},
		{
			name: "yaml with an unquoted number as version",
			file: "PYSEC-0000-1.yaml",
			data: "id: PYSEC-0000-1\naliases: [CVE-2024-0004]\naffected:\n- package: {ecosystem: PyPI, name: foo}\n  ranges:\n  - type: ECOSYSTEM\n    events:\n    - introduced: 1.0\n    - fixed: 2.0\n",
			want: []*cve.Facts{{
				CVEID:  "CVE-2024-0004",
				Feed:   "osv",
				Doc:    "PYSEC-0000-1",
				Source: cve.DataSource{Name: "osv:PyPA", License: "CC-BY-4.0", URL: feedtest.Ptr(advisoryURL + "PYSEC-0000-1")},
				Atoms: []cve.ProductAtom{
					atom("PyPI", "foo", "2.0", ">= 1.0, < 2.0", "PYSEC-0000-1", "PyPA Advisory Database", "CC-BY-4.0"),
				},
			}},
		},
		{
			name: "api response with a malformed record",
			file: "query.json",
			data: `{"vulns":[{"id":"GO-2024-0001","aliases":["CVE-2024-0005"]},{"id":7},{"id":"GHSA-xxxx-no-cve"}]}`,
			want: []*cve.Facts{{
				CVEID:  "CVE-2024-0005",
				Feed:   "osv",
				Doc:    "GO-2024-0001",
				Source: cve.DataSource{Name: "osv:Go", License: "CC-BY-4.0", URL: feedtest.Ptr(advisoryURL + "GO-2024-0001")},
			}},
			wantRejects: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustParse(t, tt.file, []byte(tt.data))
			if diff := cmp.Diff(tt.want, r.Received, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("facts (-want +got):\n%s", diff)
			}
			if len(r.Messages()) != tt.wantRejects {
				t.Errorf("rejects = %v, want %d", r.Messages(), tt.wantRejects)
			}
		})
	}
}

func TestParseMalformedFile(t *testing.T) {
	for name, data := range map[string]string{
		"truncated.json": `{"id":"GHSA-1","aliases":["CVE-2024-0001"`,
		"no-id.json":     `{"aliases":["CVE-2024-0001"]}`,
		"bad-type.json":  `{"id":"GHSA-1","aliases":"CVE-2024-0001"}`,
		"empty.json":     ``,
		"bad.yaml":       "id: [unclosed\n",
	} {
		var r feedtest.Recorder
		if err := Parser.Parse(context.Background(), name, strings.NewReader(data), &r); err == nil {
			t.Errorf("%s: no error", name)
		}
		if len(r.Received) > 0 {
			t.Errorf("%s: facts %v", name, r.Received)
		}
	}
}

// samples returns the paths of the sample's OSV records.
func samples(tb testing.TB) []string {
	tb.Helper()
	var out []string
	for _, p := range feedtest.SampleGlob(tb, path.Join(dataDir, "*", "*")) {
		if !strings.HasSuffix(p, ".md") {
			out = append(out, p)
		}
	}
	return out
}

func FuzzParse(f *testing.F) {
	for _, p := range samples(f) {
		f.Add(path.Base(p), feedtest.Sample(f, p))
	}
	feedtest.FuzzNamed(f, Parser, nil)
}
