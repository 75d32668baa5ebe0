package csaf

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed/feedtest"
)

// No vendor CSAF document is among the sample data. The documents in
// testdata are built from the published examples of the OASIS CSAF 2.0
// specification (oasis-tcs/csaf, csaf_2.0/examples/csaf): rhsa-2021_5217
// and cisco-sa-20180328-smi2 are those examples shortened (fewer notes,
// references and products), rhsa-2022_0011 keeps one of the example's three
// platforms. example-company-2024-0001 follows the specification's "Example
// Company" examples of product_version_range, product groups and scores,
// and msrc_cve-2024-38063 follows the layout of MSRC's CSAF documents
// (vendor Microsoft, product_version_range per product, the KB number as
// vendor_fix details) with values from the MSRC CVRF sample for the same
// CVE.

func mustParse(t *testing.T, name string, data []byte, opts Options) *feedtest.Recorder {
	t.Helper()
	var r feedtest.Recorder
	if err := Read(context.Background(), name, bytes.NewReader(data), &r, opts); err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return &r
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestReadDocuments(t *testing.T) {
	const (
		rh       = "Red Hat Product Security"
		example  = "Example Company ProductCERT"
		exURL    = "https://psirt.example.com/advisories/csaf/2024/example-2024-0001.json"
		msrc     = "Microsoft Security Response Center"
		msrcURL  = "https://msrc.microsoft.com/update-guide/vulnerability/CVE-2024-38063"
		catalog  = "https://catalog.update.microsoft.com/v7/site/Search.aspx?q="
		exFixURL = "https://support.example.com/downloads/"
	)
	tests := []struct {
		file        string
		want        []*cve.Facts
		wantRejects []string
	}{
		{
			file: "rhsa-2021_5217.json",
			want: []*cve.Facts{{
				CVEID:     "CVE-2021-4133",
				Feed:      "csaf",
				Doc:       "RHSA-2021:5217",
				Source:    cve.DataSource{Name: "csaf:" + rh, License: "CC-BY-4.0", URL: feedtest.Ptr("https://access.redhat.com/errata/RHSA-2021:5217")},
				Published: feedtest.Time("2021-12-16T17:05:00Z"),
				Modified:  feedtest.Time("2021-12-20T16:16:00Z"),
				CWEs:      []string{"CWE-863"},
				References: []cve.Reference{
					{URL: "https://access.redhat.com/errata/RHSA-2021:5217", Tags: []string{"vendor-advisory"}},
					{URL: "https://github.com/keycloak/keycloak/security/advisories/GHSA-83x4-9cwr-5487", Tags: []string{}},
					{URL: "https://access.redhat.com/security/cve/CVE-2021-4133", Tags: []string{}},
				},
				Atoms: []cve.ProductAtom{{
					// The product family is fixed, without a version: the
					// fix is named by the erratum in the remediation's URL.
					Ecosystem: "Vendor",
					Product:   "Red Hat Single Sign-On",
					Atom: cve.Atom{
						FixedVersion: "RHSA-2021:5217",
						AdvisoryID:   feedtest.Ptr("RHSA-2021:5217"),
						SourceURL:    feedtest.Ptr("https://access.redhat.com/errata/RHSA-2021:5217"),
						Source:       rh,
						License:      "CC-BY-4.0",
						Unparsed:     true,
					},
				}},
			}},
		},
		{
			file: "rhsa-2022_0011.json",
			want: []*cve.Facts{{
				CVEID:     "CVE-2020-10188",
				Feed:      "csaf",
				Doc:       "RHSA-2022:0011",
				Source:    cve.DataSource{Name: "csaf:" + rh, License: "CC-BY-4.0", URL: feedtest.Ptr("https://access.redhat.com/errata/RHSA-2022:0011")},
				Published: feedtest.Time("2020-02-28T00:00:00Z"),
				Modified:  feedtest.Time("2022-01-04T08:38:00Z"),
				CWEs:      []string{"CWE-119"},
				References: []cve.Reference{
					{URL: "https://access.redhat.com/errata/RHSA-2022:0011", Tags: []string{"vendor-advisory"}},
					{URL: "https://access.redhat.com/security/cve/CVE-2020-10188", Tags: []string{}},
					{URL: "https://bugzilla.redhat.com/show_bug.cgi?id=1811673", Tags: []string{}},
				},
				// One atom per package of the platform, whatever the
				// architecture; the version keeps the RPM epoch.
				Atoms: []cve.ProductAtom{
					{
						Ecosystem: "Vendor",
						Product:   "Red Hat Enterprise Linux Server AUS (v. 7.6) telnet",
						Atom: cve.Atom{
							FixedVersion: "1:0.17-65.el7_6",
							AdvisoryID:   feedtest.Ptr("RHSA-2022:0011"),
							SourceURL:    feedtest.Ptr("https://access.redhat.com/errata/RHSA-2022:0011"),
							Source:       rh,
							License:      "CC-BY-4.0",
							Unparsed:     true,
						},
					},
					{
						Ecosystem: "Vendor",
						Product:   "Red Hat Enterprise Linux Server AUS (v. 7.6) telnet-server",
						Atom: cve.Atom{
							FixedVersion: "1:0.17-65.el7_6",
							AdvisoryID:   feedtest.Ptr("RHSA-2022:0011"),
							SourceURL:    feedtest.Ptr("https://access.redhat.com/errata/RHSA-2022:0011"),
							Source:       rh,
							License:      "CC-BY-4.0",
							Unparsed:     true,
						},
					},
				},
			}},
		},
		{
			// Affected products and a workaround, no vendor fix: no atoms.
			file: "cisco-sa-20180328-smi2.json",
			want: []*cve.Facts{{
				CVEID:     "CVE-2018-0171",
				Feed:      "csaf",
				Doc:       "cisco-sa-20180328-smi2",
				Source:    cve.DataSource{Name: "csaf:Cisco PSIRT", License: "see Cisco PSIRT"},
				Published: feedtest.Time("2018-03-28T16:00:00Z"),
				Modified:  feedtest.Time("2018-04-17T15:08:41Z"),
				Metrics: []cve.Metric{{
					Version: "3.0", Vector: "CVSS:3.0/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", Score: 9.8,
					Severity: "CRITICAL", Source: "Cisco PSIRT", Type: cve.MetricCNA,
				}},
				References: []cve.Reference{
					{URL: "https://tools.cisco.com/security/center/content/CiscoSecurityAdvisory/cisco-sa-20180328-smi2", Tags: []string{}},
				},
			}},
		},
		{
			file: "example-company-2024-0001.json",
			want: []*cve.Facts{
				{
					CVEID:       "CVE-2024-0001",
					Feed:        "csaf",
					Doc:         "EXAMPLE-2024-0001",
					Source:      cve.DataSource{Name: "csaf:" + example, License: "TLP:WHITE", URL: feedtest.Ptr(exURL)},
					Description: "The web interface of the affected products does not neutralize user input in the device name field.",
					Published:   feedtest.Time("2024-02-12T10:00:00Z"),
					Modified:    feedtest.Time("2024-02-13T10:00:00Z"),
					Metrics: []cve.Metric{
						{Version: "3.1", Vector: "CVSS:3.1/AV:N/AC:L/PR:N/UI:R/S:C/C:L/I:L/A:N", Score: 6.1, Severity: "MEDIUM", Source: example, Type: cve.MetricCNA},
						{Version: "2.0", Vector: "AV:N/AC:M/Au:N/C:N/I:P/A:N", Score: 4.3, Severity: "MEDIUM", Source: example, Type: cve.MetricCNA},
					},
					CWEs: []string{"CWE-79"},
					References: []cve.Reference{
						{URL: exURL, Tags: []string{"vendor-advisory"}},
						{URL: "https://psirt.example.com/notices/example-2024-0001", Tags: []string{}},
					},
					Atoms: []cve.ProductAtom{
						{
							// The fixed version 4.2.0 and the vendor fix of
							// the range it ends make one atom.
							Ecosystem: "Vendor",
							Product:   "Example Company Controller A",
							Atom: cve.Atom{
								FixedVersion:  "4.2.0",
								AffectedRange: feedtest.Ptr("vers:intdot/<4.2.0"),
								AdvisoryID:    feedtest.Ptr("EXAMPLE-2024-0001"),
								SourceURL:     feedtest.Ptr(exFixURL + "controller-a"),
								Source:        example,
								License:       "TLP:WHITE",
							},
						},
						{
							// A vendor fix through a product group.
							Ecosystem: "Vendor",
							Product:   "Example Company Gateway B",
							Atom: cve.Atom{
								FixedVersion:  "V2.9.2",
								AffectedRange: feedtest.Ptr("<V2.9.2"),
								AdvisoryID:    feedtest.Ptr("EXAMPLE-2024-0001"),
								SourceURL:     feedtest.Ptr(exFixURL + "gateway-b/fw-V2.9.2"),
								Source:        example,
								License:       "TLP:WHITE",
							},
						},
						{
							// A vendor fix that names no version.
							Ecosystem: "Vendor",
							Product:   "Example Company Sensor C",
							Atom: cve.Atom{
								FixedVersion: "EXAMPLE-2024-0001",
								AdvisoryID:   feedtest.Ptr("EXAMPLE-2024-0001"),
								SourceURL:    feedtest.Ptr(exURL),
								Source:       example,
								License:      "TLP:WHITE",
								Unparsed:     true,
							},
						},
					},
				},
				{
					CVEID:      "CVE-2024-0002",
					Feed:       "csaf",
					Doc:        "EXAMPLE-2024-0001",
					Source:     cve.DataSource{Name: "csaf:" + example, License: "TLP:WHITE", URL: feedtest.Ptr(exURL)},
					Published:  feedtest.Time("2024-02-12T10:00:00Z"),
					Modified:   feedtest.Time("2024-02-13T10:00:00Z"),
					References: []cve.Reference{{URL: exURL, Tags: []string{"vendor-advisory"}}},
					Atoms: []cve.ProductAtom{{
						Ecosystem: "Vendor",
						Product:   "Example Company Sensor C",
						Atom: cve.Atom{
							FixedVersion: "EX-FIX-2024-02",
							AdvisoryID:   feedtest.Ptr("EXAMPLE-2024-0001"),
							SourceURL:    feedtest.Ptr(exURL),
							Source:       example,
							License:      "TLP:WHITE",
							Unparsed:     true,
						},
					}},
				},
			},
			wantRejects: []string{`example-company-2024-0001.json#vulnerabilities[3]: malformed CVE id "CVE-24-1": want CVE-YYYY-NNNN`},
		},
		{
			file: "msrc_cve-2024-38063.json",
			want: []*cve.Facts{{
				CVEID:     "CVE-2024-38063",
				Feed:      "csaf",
				Doc:       "msrc_CVE-2024-38063",
				Source:    cve.DataSource{Name: "csaf:" + msrc, License: "Public", URL: feedtest.Ptr(msrcURL)},
				Published: feedtest.Time("2024-08-13T07:00:00Z"),
				Modified:  feedtest.Time("2024-08-13T07:00:00Z"),
				Metrics: []cve.Metric{{
					Version: "3.1", Vector: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H/E:U/RL:O/RC:C", Score: 9.8,
					Severity: "CRITICAL", Source: msrc, Type: cve.MetricCNA,
				}},
				CWEs:       []string{"CWE-191"},
				References: []cve.Reference{{URL: msrcURL, Tags: []string{"vendor-advisory"}}},
				Atoms: []cve.ProductAtom{
					{
						// "<=" ends no range: the KB names the fix.
						Ecosystem: "Microsoft",
						Product:   "Microsoft .NET Framework 4.8 on Windows Server 2012",
						Atom: cve.Atom{
							FixedVersion: "KB5041947",
							AdvisoryID:   feedtest.Ptr("msrc_CVE-2024-38063"),
							SourceURL:    feedtest.Ptr("https://support.microsoft.com/help/5041947"),
							Source:       msrc,
							License:      "Public",
							KB:           "KB5041947",
							Unparsed:     true,
						},
					},
					{
						Ecosystem: "Windows",
						Product:   "Windows 11 Version 23H2 for x64-based Systems",
						Atom: cve.Atom{
							FixedVersion:  "10.0.22631.4037",
							AffectedRange: feedtest.Ptr("<10.0.22631.4037"),
							AdvisoryID:    feedtest.Ptr("msrc_CVE-2024-38063"),
							SourceURL:     feedtest.Ptr(catalog + "KB5041585"),
							Source:        msrc,
							License:       "Public",
							KB:            "KB5041585",
						},
					},
					{
						Ecosystem: "Windows",
						Product:   "Windows Server 2019",
						Atom: cve.Atom{
							FixedVersion:  "10.0.17763.6189",
							AffectedRange: feedtest.Ptr("<10.0.17763.6189"),
							AdvisoryID:    feedtest.Ptr("msrc_CVE-2024-38063"),
							SourceURL:     feedtest.Ptr(catalog + "KB5041578"),
							Source:        msrc,
							License:       "Public",
							KB:            "KB5041578",
						},
					},
				},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			r := mustParse(t, tt.file, mustRead(t, tt.file), Options{})
			if diff := cmp.Diff(tt.want, r.Received, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("facts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantRejects, r.Messages(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("rejects (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadOptions(t *testing.T) {
	opts := Options{
		Feed: "msrc",
		Source: func(id string) cve.DataSource {
			u := "https://msrc.microsoft.com/update-guide/vulnerability/" + id
			return cve.DataSource{Name: "msrc", License: "Microsoft Terms of Use", URL: &u}
		},
		AtomSource:   "Microsoft Security Response Center",
		License:      "Microsoft Terms of Use",
		MetricSource: "microsoft",
		KBAdvisory:   true,
	}
	r := mustParse(t, "msrc_cve-2024-38063.json", mustRead(t, "msrc_cve-2024-38063.json"), opts)
	if len(r.Received) != 1 {
		t.Fatalf("got %d facts, want 1", len(r.Received))
	}
	f := r.Received[0]
	if f.Feed != "msrc" || f.Source.Name != "msrc" || f.Source.License != "Microsoft Terms of Use" {
		t.Errorf("feed %q, source %+v", f.Feed, f.Source)
	}
	if f.Metrics[0].Source != "microsoft" {
		t.Errorf("metric source %q, want microsoft", f.Metrics[0].Source)
	}
	for _, a := range f.Atoms {
		if a.License != "Microsoft Terms of Use" || a.Source != "Microsoft Security Response Center" {
			t.Errorf("atom %s: source %q, license %q", a.Product, a.Source, a.License)
		}
		if a.AdvisoryID == nil || *a.AdvisoryID != a.KB {
			t.Errorf("atom %s: advisory %v, want the KB %q", a.Product, a.AdvisoryID, a.KB)
		}
	}
}

func TestReadInline(t *testing.T) {
	// A CSAF 2.1 style document: cwes, metrics, cvss_v4 and a purl.
	const doc21 = `{"document":{"category":"csaf_security_advisory","csaf_version":"2.1",
		"publisher":{"category":"vendor","name":"Apple Inc."},
		"tracking":{"id":"APPLE-SA-2023-09-21","current_release_date":"2023-09-21T00:00:00Z","initial_release_date":"2023-09-21T00:00:00Z"},
		"distribution":{"tlp":{"label":"CLEAR"}}},
	"product_tree":{"branches":[{"category":"vendor","name":"Apple","branches":[
		{"category":"product_name","name":"iOS","branches":[
			{"category":"product_version","name":"17.0.1","product":{"name":"iOS 17.0.1","product_id":"ios-17.0.1"}}]}]}],
		"full_product_names":[{"name":"WebKit","product_id":"webkit","product_identification_helper":{"purl":"pkg:generic/webkit@617.1.17"}}]},
	"vulnerabilities":[{"cve":"cve-2023-41992","cwes":[{"id":"CWE-269"}],
		"product_status":{"fixed":["ios-17.0.1","webkit"]},
		"metrics":[{"content":{"cvss_v4":{"version":"4.0","vectorString":"CVSS:4.0/AV:L/AC:L/AT:N/PR:L/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N","baseScore":8.5,"baseSeverity":"HIGH"}},"products":["ios-17.0.1"]}]}]}`
	r := mustParse(t, "apple.json", []byte(doc21), Options{})
	want := []*cve.Facts{{
		CVEID:     "CVE-2023-41992",
		Feed:      "csaf",
		Doc:       "APPLE-SA-2023-09-21",
		Source:    cve.DataSource{Name: "csaf:Apple Inc.", License: "TLP:CLEAR"},
		Published: feedtest.Time("2023-09-21T00:00:00Z"),
		Modified:  feedtest.Time("2023-09-21T00:00:00Z"),
		Metrics: []cve.Metric{{
			Version: "4.0", Vector: "CVSS:4.0/AV:L/AC:L/AT:N/PR:L/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N", Score: 8.5,
			Severity: "HIGH", Source: "Apple Inc.", Type: cve.MetricCNA,
		}},
		CWEs: []string{"CWE-269"},
		Atoms: []cve.ProductAtom{
			{
				Ecosystem: "Apple",
				Product:   "iOS",
				Atom:      cve.Atom{FixedVersion: "17.0.1", AdvisoryID: feedtest.Ptr("APPLE-SA-2023-09-21"), Source: "Apple Inc.", License: "TLP:CLEAR"},
			},
			{
				Ecosystem: "Apple",
				Product:   "webkit",
				Atom:      cve.Atom{FixedVersion: "617.1.17", AdvisoryID: feedtest.Ptr("APPLE-SA-2023-09-21"), Source: "Apple Inc.", License: "TLP:CLEAR"},
			},
		},
	}}
	if diff := cmp.Diff(want, r.Received, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("facts (-want +got):\n%s", diff)
	}
}

func TestReadErrors(t *testing.T) {
	for name, data := range map[string]string{
		"not json":       `{"document":`,
		"not csaf":       `{"@odata.context":"https://api.msrc.microsoft.com/$metadata#Updates","value":[]}`,
		"csaf 1":         `{"document":{"csaf_version":"1.2","publisher":{"name":"X"},"tracking":{"id":"X-1"}}}`,
		"no tracking id": `{"document":{"category":"csaf_base","csaf_version":"2.0","publisher":{"name":"X"},"tracking":{}}}`,
		"no publisher":   `{"document":{"category":"csaf_base","csaf_version":"2.0","tracking":{"id":"X-1"}}}`,
	} {
		var r feedtest.Recorder
		if err := Read(context.Background(), name, strings.NewReader(data), &r, Options{}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	r := feedtest.Recorder{FailOn: 1}
	err := Read(context.Background(), "x.json", bytes.NewReader(mustRead(t, "example-company-2024-0001.json")), &r, Options{})
	if !errors.Is(err, feedtest.ErrSink) || len(r.Received) != 1 {
		t.Errorf("sink error: got %v after %d facts, want %v after 1", err, len(r.Received), feedtest.ErrSink)
	}
}

func TestSniff(t *testing.T) {
	want := Header{Category: "csaf_vex", Publisher: "Microsoft Security Response Center", TrackingID: "msrc_CVE-2024-38063"}
	got, ok := Sniff(mustRead(t, "msrc_cve-2024-38063.json"))
	if diff := cmp.Diff(want, got); !ok || diff != "" {
		t.Errorf("Sniff(msrc) = _, %v (-want +got):\n%s", ok, diff)
	}
	index, err := os.ReadFile("../../sample/data/msrc/updates-index.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := Sniff(index); ok {
		t.Error("Sniff(updates-index.json) = true")
	}
}

func TestUpperBound(t *testing.T) {
	for rng, want := range map[string]string{
		"<4.2.0":                         "4.2.0",
		"< V8.18.13":                     "V8.18.13",
		"vers:intdot/<4.2.0":             "4.2.0",
		"vers:all/<V4.5":                 "V4.5",
		"vers:intdot/>2.1.0|<4.2.0":      "4.2.0",
		">=2.0 <2.9.2":                   "2.9.2",
		"<=4.8.4739.0":                   "",
		"vers:intdot/>=4.2.0":            "",
		"":                               "",
		"all versions before the update": "",
	} {
		if got := upperBound(rng); got != want {
			t.Errorf("upperBound(%q) = %q, want %q", rng, got, want)
		}
	}
}

func TestLowerBound(t *testing.T) {
	for rng, want := range map[string]string{
		">=V2.9.2":                  "V2.9.2",
		"vers:intdot/>=4.2.0":       "4.2.0",
		"vers:intdot/>=4.2.0|<5.0":  "4.2.0",
		"<4.2.0":                    "",
		"all versions after update": "",
	} {
		if got := lowerBound(rng); got != want {
			t.Errorf("lowerBound(%q) = %q, want %q", rng, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	feedtest.Fuzz(f, Parser, "fuzz.json", nil)
}
