package nvd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed/feedtest"
)

const dataDir = "nvd"

func readFile(tb testing.TB, file string) []byte {
	tb.Helper()
	return feedtest.Sample(tb, path.Join(dataDir, file))
}

// parseFile parses one sample file, which must give no rejection.
func parseFile(tb testing.TB, file string) *feedtest.Recorder {
	tb.Helper()
	rec := feedtest.Parse(tb, Parser, file, readFile(tb, file))
	if len(rec.Rejects()) != 0 {
		tb.Fatalf("parse %s: rejected %v", file, rec.Rejects())
	}
	return rec
}

// atomMaker returns a constructor of the atoms of one CVE.
func atomMaker(id string) func(eco, product, fixed, rng string) cve.ProductAtom {
	return func(eco, product, fixed, rng string) cve.ProductAtom {
		return cve.ProductAtom{Ecosystem: eco, Product: product, Atom: cve.Atom{
			FixedVersion:  fixed,
			AffectedRange: feedtest.Ptr(rng),
			SourceURL:     feedtest.Ptr("https://nvd.nist.gov/vuln/detail/" + id),
			Source:        "NVD",
			License:       "Public domain (NVD)",
		}}
	}
}

func nvdMetric(version, vector string, score float64, sev, source, typ string) cve.Metric {
	return cve.Metric{Version: version, Vector: vector, Score: score, Severity: sev, Source: source, Type: typ}
}

func TestParseRecords(t *testing.T) {
	heartbleed := atomMaker("CVE-2014-0160")
	apparmor := atomMaker("CVE-2016-1585")
	protobuf := atomMaker("CVE-2025-4565")
	putty := atomMaker("CVE-2024-31497")
	ontap := atomMaker("CVE-2023-27314")
	curl := atomMaker("CVE-2018-14618")

	tests := []struct {
		name      string
		file      string
		id        string
		desc      string // prefix of the description
		published string
		modified  string
		metrics   []cve.Metric
		cwes      []string
		ref       cve.Reference // a reference that must be there with exactly these tags
		refs      int
		atoms     []cve.ProductAtom
	}{
		{
			name:      "bare object from a per-cve mirror",
			file:      "CVE-2014-0160.json",
			id:        "CVE-2014-0160",
			desc:      "The (1) TLS and (2) DTLS implementations in OpenSSL 1.0.1 before 1.0.1g do not properly handle Heartbeat",
			published: "2014-04-07T22:55:03.893Z",
			modified:  "2025-10-21T20:16:09.947Z",
			metrics: []cve.Metric{
				nvdMetric("2.0", "AV:N/AC:L/Au:N/C:P/I:N/A:N", 5, "MEDIUM", "nvd@nist.gov", "Primary"),
				nvdMetric("3.1", "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:N/A:N", 7.5, "HIGH", "nvd@nist.gov", "Primary"),
				nvdMetric("3.1", "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:N/A:N", 7.5, "HIGH", "CISA-ADP", "Secondary"),
			},
			cwes: []string{"CWE-125"},
			ref:  cve.Reference{URL: "http://www.openssl.org/news/secadv_20140407.txt", Tags: []string{"Broken Link", "Vendor Advisory"}},
			refs: 128,
			atoms: []cve.ProductAtom{
				heartbleed("Vendor", "openssl:openssl", "1.0.1g", ">= 1.0.1, < 1.0.1g"),
				heartbleed("Vendor", "filezilla-project:filezilla_server", "0.9.44", "< 0.9.44"),
				heartbleed("Vendor", "siemens:elan-8.2", "8.3.3", "< 8.3.3"),
				heartbleed("Vendor", "splunk:splunk", "6.0.3", ">= 6.0.0, < 6.0.3"),
			},
		},
		{
			name:      "api page with cvss 2.0, 3.0 and 3.1 and a noinfo weakness",
			file:      "CVE-2016-1585.json",
			id:        "CVE-2016-1585",
			desc:      "In all versions of AppArmor mount rules are accidentally widened when compiled.",
			published: "2019-04-22T16:29:01.303Z",
			modified:  "2025-05-02T14:12:14.837Z",
			metrics: []cve.Metric{
				nvdMetric("2.0", "AV:N/AC:L/Au:N/C:P/I:P/A:P", 7.5, "HIGH", "nvd@nist.gov", "Primary"),
				nvdMetric("3.0", "CVSS:3.0/AV:L/AC:H/PR:H/UI:N/S:U/C:L/I:L/A:L", 3.9, "LOW", "security@ubuntu.com", "Secondary"),
				nvdMetric("3.1", "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", 9.8, "CRITICAL", "nvd@nist.gov", "Primary"),
			},
			refs: 2,
			atoms: []cve.ProductAtom{
				apparmor("Vendor", "canonical:apparmor", "2.13.10", "< 2.13.10"),
				apparmor("Vendor", "canonical:apparmor", "3.0.12", ">= 3.0.0, < 3.0.12"),
				apparmor("Vendor", "canonical:apparmor", "3.1.6", ">= 3.1.0, < 3.1.6"),
			},
		},
		{
			name:      "versionEndIncluding names no fix",
			file:      "CVE-2017-6507.json",
			id:        "CVE-2017-6507",
			desc:      "An issue was discovered in AppArmor before 2.12.",
			published: "2017-03-24T07:59:00.233Z",
			modified:  "2025-04-20T01:37:25.860Z",
			metrics: []cve.Metric{
				nvdMetric("2.0", "AV:N/AC:M/Au:N/C:N/I:P/A:N", 4.3, "MEDIUM", "nvd@nist.gov", "Primary"),
				nvdMetric("3.0", "CVSS:3.0/AV:N/AC:H/PR:N/UI:N/S:U/C:N/I:H/A:N", 5.9, "MEDIUM", "nvd@nist.gov", "Primary"),
			},
			cwes: []string{"CWE-269"},
			refs: 5,
		},
		{
			name:      "exact vulnerable versions give no atom, ssvc metric passed over",
			file:      "CVE-2024-3094.json",
			id:        "CVE-2024-3094",
			desc:      "Malicious code was discovered in the upstream tarballs of xz, starting with version 5.6.0.",
			published: "2024-03-29T17:15:21.150Z",
			modified:  "2026-06-17T07:43:17.830Z",
			metrics: []cve.Metric{
				nvdMetric("3.1", "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:C/C:H/I:H/A:H", 10, "CRITICAL", "secalert@redhat.com", "Secondary"),
				nvdMetric("3.1", "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:C/C:H/I:H/A:H", 10, "CRITICAL", "nvd@nist.gov", "Primary"),
			},
			cwes: []string{"CWE-506"},
			refs: 55,
		},
		{
			name:      "timestamps with a timezone, record under analysis",
			file:      "CVE-2023-5341.json",
			id:        "CVE-2023-5341",
			desc:      "A heap use-after-free flaw was found in coders/bmp.c in ImageMagick.",
			published: "2023-11-19T10:15:49.433Z",
			modified:  "2023-11-20T00:02:51.467Z",
			metrics: []cve.Metric{
				nvdMetric("3.1", "CVSS:3.1/AV:L/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:H", 6.2, "MEDIUM", "secalert@redhat.com", "Secondary"),
			},
			cwes: []string{"CWE-416"},
			refs: 3,
		},
		{
			name:      "awaiting analysis, no configurations",
			file:      "CVE-2024-47177.json",
			id:        "CVE-2024-47177",
			desc:      "CUPS is a standards-based, open-source printing system, and ",
			published: "2024-09-26T22:15:04.740Z",
			modified:  "2024-09-30T12:46:20.237Z",
			metrics: []cve.Metric{
				nvdMetric("3.1", "CVSS:3.1/AV:N/AC:H/PR:N/UI:N/S:C/C:H/I:H/A:H", 9, "CRITICAL", "security-advisories@github.com", "Secondary"),
			},
			cwes: []string{"CWE-77"},
			refs: 6,
		},
		{
			name:      "cvss 4.0 in a page of several records",
			file:      "google-osv.dev_conversion-nvd-testdata-test.json",
			id:        "CVE-2025-4565",
			desc:      "Any project that uses Protobuf Pure-Python backend to parse ",
			published: "2025-06-16T15:15:24.990Z",
			modified:  "2025-08-14T17:05:37.770Z",
			metrics: []cve.Metric{
				nvdMetric("3.1", "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:L", 5.3, "MEDIUM", "nvd@nist.gov", "Primary"),
				nvdMetric("4.0", "CVSS:4.0/AV:N/AC:L/AT:P/PR:N/UI:N/VC:N/VI:N/VA:H/SC:N/SI:N/SA:N/E:X/CR:X/IR:X/AR:X/MAV:X/MAC:X/MAT:X/MPR:X/MUI:X/MVC:X/MVI:X/MVA:X/MSC:X/MSI:X/MSA:X/S:X/AU:X/R:X/V:X/RE:X/U:X", 8.2, "HIGH", "cve-coordination@google.com", "Secondary"),
			},
			cwes: []string{"CWE-674"},
			ref:  cve.Reference{URL: "https://github.com/protocolbuffers/protobuf/commit/17838beda2943d08b8a9d4df5b68f5f04f26d901", Tags: []string{"Patch"}},
			refs: 1,
			atoms: []cve.ProductAtom{
				protobuf("Vendor", "google:protobuf-python", "4.25.8", "< 4.25.8"),
				protobuf("Vendor", "google:protobuf-python", "5.29.5", ">= 5.26.0, < 5.29.5"),
				protobuf("Vendor", "google:protobuf-python", "6.31.1", ">= 6.30.0, < 6.31.1"),
			},
		},
		{
			name:      "desktop applications, one cwe from two weaknesses",
			file:      "google-osv.dev_conversion-nvd-testdata-test.json",
			id:        "CVE-2024-31497",
			desc:      "In PuTTY 0.68 through 0.80 before 0.81, biased ECDSA nonce generation",
			published: "2024-04-15T20:15:11.077Z",
			modified:  "2025-11-04T22:16:00.673Z",
			metrics: []cve.Metric{
				nvdMetric("3.1", "CVSS:3.1/AV:N/AC:H/PR:N/UI:N/S:U/C:H/I:N/A:N", 5.9, "MEDIUM", "nvd@nist.gov", "Primary"),
				nvdMetric("3.1", "CVSS:3.1/AV:N/AC:H/PR:N/UI:N/S:U/C:H/I:N/A:N", 5.9, "MEDIUM", "CISA-ADP", "Secondary"),
			},
			cwes: []string{"CWE-338"},
			ref:  cve.Reference{URL: "https://bugzilla.redhat.com/show_bug.cgi?id=2275183", Tags: []string{"Issue Tracking"}},
			refs: 32,
			atoms: []cve.ProductAtom{
				putty("Desktop", "putty:putty", "0.81", ">= 0.68, < 0.81"),
				putty("Desktop", "filezilla-project:filezilla_client", "3.67.0", "< 3.67.0"),
				putty("Desktop", "winscp:winscp", "6.3.3", "< 6.3.3"),
				putty("Desktop", "tortoisegit:tortoisegit", "2.15.0.1", "< 2.15.0.1"),
				putty("Desktop", "tigris:tortoisesvn", "1.14.6", "< 1.14.6"),
			},
		},
		{
			name:      "cvss 2.0 severity beside cvssData",
			file:      "google-osv.dev_conversion-nvd-testdata-test.json",
			id:        "CVE-2018-14618",
			desc:      "curl before version 7.61.1 is vulnerable to a buffer overrun",
			published: "2018-09-05T19:29:00.420Z",
			modified:  "2024-11-21T03:49:26.003Z",
			metrics: []cve.Metric{
				nvdMetric("2.0", "AV:N/AC:L/Au:N/C:C/I:C/A:C", 10, "HIGH", "nvd@nist.gov", "Primary"),
				nvdMetric("3.0", "CVSS:3.0/AV:N/AC:H/PR:N/UI:R/S:U/C:H/I:H/A:H", 7.5, "HIGH", "secalert@redhat.com", "Secondary"),
				nvdMetric("3.0", "CVSS:3.0/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", 9.8, "CRITICAL", "nvd@nist.gov", "Primary"),
			},
			cwes: []string{"CWE-122", "CWE-131", "CWE-190"},
			refs: 11,
			atoms: []cve.ProductAtom{
				curl("Vendor", "haxx:libcurl", "7.61.1", "< 7.61.1"),
			},
		},
		{
			name:      "vendor advisory in a 38-record page",
			file:      "anchore-vunnel_full-page.json",
			id:        "CVE-2023-27314",
			desc:      "ONTAP 9 versions prior to 9.8P19, 9.9.1P16, 9.10.1P12, 9.11.1P8, ",
			published: "2023-10-12T19:15:11.747Z",
			modified:  "2023-10-18T18:00:24.900Z",
			metrics: []cve.Metric{
				nvdMetric("3.1", "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:H", 7.5, "HIGH", "nvd@nist.gov", "Primary"),
				nvdMetric("3.1", "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:H", 7.5, "HIGH", "security-alert@netapp.com", "Secondary"),
			},
			cwes: []string{"CWE-400"},
			ref:  cve.Reference{URL: "https://security.netapp.com/advisory/ntap-20231009-0001/", Tags: []string{"Vendor Advisory"}},
			refs: 1,
			atoms: []cve.ProductAtom{
				ontap("Vendor", "netapp:clustered_data_ontap", "9.8", ">= 9.0, < 9.8"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := parseFile(t, tt.file).Find(tt.id)
			if f == nil {
				t.Fatalf("no facts for %s", tt.id)
			}
			if f.Feed != "nvd" || f.State != cve.StatePublished || f.RejectedReason != "" || f.Doc != "" {
				t.Errorf("feed, state, doc = %q, %q (%q), %q; want nvd, PUBLISHED", f.Feed, f.State, f.RejectedReason, f.Doc)
			}
			wantSource := cve.DataSource{Name: "nvd", License: "Public domain (NVD)", URL: feedtest.Ptr("https://nvd.nist.gov/vuln/detail/" + tt.id)}
			feedtest.CheckPublished(t, f, feedtest.Published{
				Source: wantSource, Desc: tt.desc, Published: tt.published, Modified: tt.modified,
				Metrics: tt.metrics, CWEs: tt.cwes, Ref: tt.ref, Refs: tt.refs,
			})
			if diff := cmp.Diff(tt.atoms, f.Atoms); diff != "" {
				t.Errorf("atoms (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSampleFiles parses every sample file: each CVE object gives one
// Facts with a canonical id and UTC times, and nothing is rejected. The
// aquasecurity pages carry paging numbers made up by their test authors
// (respPageFull says resultsPerPage 1 but holds 3 records): the records
// are read whatever the numbers say.
func TestSampleFiles(t *testing.T) {
	files := feedtest.SampleGlob(t, path.Join(dataDir, "*.json"))
	if len(files) == 0 {
		t.Fatal("no sample files")
	}
	total := 0
	for _, p := range files {
		file := path.Base(p)
		rec := parseFile(t, file)
		var top struct {
			Vulnerabilities []json.RawMessage `json:"vulnerabilities"`
		}
		if err := json.Unmarshal(readFile(t, file), &top); err != nil {
			t.Fatal(err)
		}
		want := max(len(top.Vulnerabilities), 1)
		if len(rec.Received) != want {
			t.Errorf("%s: %d facts, want %d", file, len(rec.Received), want)
		}
		if strings.HasPrefix(file, "CVE-") && rec.Received[0].CVEID != strings.TrimSuffix(file, ".json") {
			t.Errorf("%s: id %q", file, rec.Received[0].CVEID)
		}
		for _, f := range rec.Received {
			if id, err := cve.ParseID(f.CVEID); err != nil || id != f.CVEID {
				t.Errorf("%s: id %q is not canonical", file, f.CVEID)
			}
			if f.Published == nil || f.Modified == nil || f.Modified.Location() != time.UTC {
				t.Errorf("%s %s: times %v, %v", file, f.CVEID, f.Published, f.Modified)
			}
			if f.Description == "" {
				t.Errorf("%s %s: no description", file, f.CVEID)
			}
			for _, m := range f.Metrics {
				if m.Severity == "" || m.Source == "" || m.Vector == "" || (m.Type != "Primary" && m.Type != "Secondary") {
					t.Errorf("%s %s: incomplete metric %+v", file, f.CVEID, m)
				}
			}
			for _, a := range f.Atoms {
				if a.FixedVersion == "" || !strings.Contains(a.Product, ":") || a.AffectedRange == nil {
					t.Errorf("%s %s: bad atom %+v", file, f.CVEID, a)
				}
			}
		}
		total += len(rec.Received)
	}
	if total != 74 {
		t.Errorf("%d facts in all, want 74", total)
	}
}

// cveObject is a synthetic NVD CVE object, for what no sample shows.
const cveObject = `{
	"id": "cve-2099-0001",
	"published": "2099-01-02T03:04:05.678",
	"lastModified": "2099-01-03T00:00:00+02:00",
	"vulnStatus": "Analyzed",
	"descriptions": [{"lang": "es", "value": "Descripción"}, {"lang": "en", "value": " English "}],
	"metrics": {
		"cvssMetricV2": [{"source": "nvd@nist.gov", "type": "Primary", "cvssData": {"version": "2.0", "vectorString": "AV:N/AC:L/Au:N/C:N/I:N/A:P", "baseScore": 5.0}}],
		"cvssMetricV31": [
			{"source": "nvd@nist.gov", "type": "Primary", "cvssData": {"vectorString": "CVSS:3.1/AV:N", "baseScore": 9.1, "baseSeverity": "critical"}},
			{"source": "nvd@nist.gov", "type": "Primary", "cvssData": {"vectorString": "CVSS:3.1/AV:N", "baseScore": 9.1, "baseSeverity": "CRITICAL"}},
			{"source": "cna@example.com", "cvssData": {"vectorString": "CVSS:3.1/AV:L", "baseScore": 3.3}},
			{"source": "cna@example.com", "type": "Secondary", "cvssData": {"vectorString": "CVSS:3.1/AV:L"}},
			{"source": "cna@example.com", "type": "Secondary", "cvssData": {"vectorString": "CVSS:3.1/AV:L", "baseScore": 12}}
		],
		"ssvcV203": [{"source": "x", "ssvcData": {}}]
	},
	"weaknesses": [{"description": [{"lang": "en", "value": "NVD-CWE-Other"}, {"lang": "en", "value": "cwe-79"}, {"lang": "en", "value": "NVD-CWE-noinfo"}, {"lang": "en", "value": "CWE-79"}]}],
	"configurations": [
		{"nodes": [{"operator": "OR", "negate": false, "cpeMatch": [
			{"vulnerable": true, "criteria": "cpe:2.3:a:notepad-plus-plus:notepad\\+\\+:*:*:*:*:*:*:*:*", "versionEndExcluding": "8.6.5"},
			{"vulnerable": true, "criteria": "cpe:2.3:o:microsoft:windows_10_22h2:*:*:*:*:*:*:*:*", "versionStartExcluding": "10.0.19045.0", "versionEndExcluding": "10.0.19045.4529"},
			{"vulnerable": true, "criteria": "cpe:2.3:a:microsoft:office:*:*:*:*:*:*:*:*", "versionEndExcluding": "16.0.17"},
			{"vulnerable": true, "criteria": "cpe:2.3:o:apple:macos:*:*:*:*:*:*:*:*", "versionStartIncluding": "14.0", "versionEndExcluding": "14.3"},
			{"vulnerable": true, "criteria": "cpe:2.3:a:acme:router\\:firmware:*:*:*:*:*:*:*:*", "versionEndExcluding": "2.0"},
			{"vulnerable": true, "criteria": "cpe:2.3:a:acme:widget:*:*:*:*:*:*:*:*", "versionEndIncluding": "3.0"},
			{"vulnerable": true, "criteria": "cpe:2.3:a:acme:widget:1.5:*:*:*:*:*:*:*"},
			{"vulnerable": false, "criteria": "cpe:2.3:a:acme:platform:*:*:*:*:*:*:*:*", "versionEndExcluding": "9.0"},
			{"vulnerable": true, "criteria": "not a cpe", "versionEndExcluding": "1.0"},
			{"vulnerable": true, "criteria": "cpe:2.3:a:acme:tool:*:*:*:*:*:*:*:*", "versionEndExcluding": "*"},
			{"vulnerable": true, "criteria": "cpe:2.3:a:notepad-plus-plus:notepad\\+\\+:*:*:*:*:*:*:*:*", "versionStartIncluding": "8.0", "versionEndExcluding": "8.6.5"}
		]}]},
		{"nodes": [{"operator": "OR", "negate": true, "cpeMatch": [
			{"vulnerable": true, "criteria": "cpe:2.3:a:acme:negated:*:*:*:*:*:*:*:*", "versionEndExcluding": "1.0"}
		]}]}
	],
	"references": [
		{"url": "https://example.com/a", "source": "nvd@nist.gov", "tags": ["Patch"]},
		{"url": "https://example.com/a", "source": "cna@example.com", "tags": ["Vendor Advisory", "Patch"]},
		{"url": "https://example.com/b", "source": "cna@example.com"},
		{"url": ""}
	]
}`

func TestShapes(t *testing.T) {
	mk := atomMaker("CVE-2099-0001")
	want := &cve.Facts{
		CVEID:       "CVE-2099-0001",
		Feed:        "nvd",
		Source:      cve.DataSource{Name: "nvd", License: "Public domain (NVD)", URL: feedtest.Ptr("https://nvd.nist.gov/vuln/detail/CVE-2099-0001")},
		State:       cve.StatePublished,
		Description: "English",
		Published:   feedtest.Time("2099-01-02T03:04:05.678Z"),
		Modified:    feedtest.Time("2099-01-02T22:00:00Z"),
		Metrics: []cve.Metric{
			nvdMetric("2.0", "AV:N/AC:L/Au:N/C:N/I:N/A:P", 5, "MEDIUM", "nvd@nist.gov", "Primary"),
			nvdMetric("3.1", "CVSS:3.1/AV:N", 9.1, "CRITICAL", "nvd@nist.gov", "Primary"),
			nvdMetric("3.1", "CVSS:3.1/AV:L", 3.3, "LOW", "cna@example.com", "Secondary"),
		},
		CWEs: []string{"CWE-79"},
		References: []cve.Reference{
			{URL: "https://example.com/a", Tags: []string{"Patch", "Vendor Advisory"}},
			{URL: "https://example.com/b", Tags: []string{}},
		},
		Atoms: []cve.ProductAtom{
			mk("Desktop", "notepad-plus-plus:notepad++", "8.6.5", "< 8.6.5"),
			mk("Windows", "microsoft:windows_10_22h2", "10.0.19045.4529", "> 10.0.19045.0, < 10.0.19045.4529"),
			mk("Microsoft", "microsoft:office", "16.0.17", "< 16.0.17"),
			mk("Apple", "apple:macos", "14.3", ">= 14.0, < 14.3"),
			mk("Vendor", "acme:router:firmware", "2.0", "< 2.0"),
		},
	}
	for _, tt := range []struct{ name, doc string }{
		{"bare", cveObject},
		{"wrapped", `{"cve": ` + cveObject + `}`},
		{"page", `{"resultsPerPage": 1, "startIndex": 0, "totalResults": 1, "format": "NVD_CVE", "version": "2.0", "vulnerabilities": [{"cve": ` + cveObject + `}]}`},
		{"page with fields after the records", `{"vulnerabilities": [{"cve": ` + cveObject + `}], "totalResults": 1}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var rec feedtest.Recorder
			if err := Parser.Parse(context.Background(), "x.json", strings.NewReader(tt.doc), &rec); err != nil {
				t.Fatal(err)
			}
			if len(rec.Received) != 1 || len(rec.Rejects()) != 0 {
				t.Fatalf("%d facts, rejects %v; want 1 facts", len(rec.Received), rec.Rejects())
			}
			if diff := cmp.Diff(want, rec.Received[0]); diff != "" {
				t.Errorf("facts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRejectedRecord(t *testing.T) {
	doc := `{"cve": {"id": "CVE-2021-36593", "published": "2021-07-12T00:00:00", "lastModified": "2024-05-02T21:17:22.890",
		"vulnStatus": "Rejected",
		"descriptions": [{"lang": "en", "value": "** REJECT ** DO NOT USE THIS CANDIDATE NUMBER. Reason: withdrawn."}],
		"metrics": {"cvssMetricV31": [{"source": "nvd@nist.gov", "type": "Primary", "cvssData": {"vectorString": "CVSS:3.1/AV:N", "baseScore": 9.8}}]},
		"references": [{"url": "https://example.com"}]}}`
	var rec feedtest.Recorder
	if err := Parser.Parse(context.Background(), "x.json", strings.NewReader(doc), &rec); err != nil {
		t.Fatal(err)
	}
	want := []*cve.Facts{{
		CVEID:          "CVE-2021-36593",
		Feed:           "nvd",
		Source:         cve.DataSource{Name: "nvd", License: "Public domain (NVD)", URL: feedtest.Ptr("https://nvd.nist.gov/vuln/detail/CVE-2021-36593")},
		State:          cve.StateRejected,
		RejectedReason: "DO NOT USE THIS CANDIDATE NUMBER. Reason: withdrawn.",
		Published:      feedtest.Time("2021-07-12T00:00:00Z"),
		Modified:       feedtest.Time("2024-05-02T21:17:22.890Z"),
	}}
	if diff := cmp.Diff(want, rec.Received); diff != "" {
		t.Errorf("facts (-want +got):\n%s", diff)
	}
}

// TestRejectsBadRecords checks that a record of a page that does not make
// facts is rejected under its id, or its index when it has none, and that
// the others are read.
func TestRejectsBadRecords(t *testing.T) {
	good := func(id string) string {
		return `{"cve": {"id": "` + id + `", "published": "2020-01-01T00:00:00", "lastModified": "2020-01-01T00:00:00", "descriptions": [{"lang": "en", "value": "x"}]}}`
	}
	doc := `{"resultsPerPage": 2000, "vulnerabilities": [` + strings.Join([]string{
		good("CVE-2020-0001"),
		`{"cve": {"id": "CVE-2020-0002", "metrics": {"cvssMetricV31": "not a list"}}}`,
		`{"cve": {"id": "CVE-20-3"}}`,
		`{"notcve": {}}`,
		`{"cve": {"id": "CVE-2020-0005", "published": "last tuesday"}}`,
		`"a string"`,
		`{"cve": {"id": ["CVE-2020-0007"]}}`,
		good("CVE-2020-0008"),
	}, ",") + `]}`
	var rec feedtest.Recorder
	if err := Parser.Parse(context.Background(), "page.json", strings.NewReader(doc), &rec); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range rec.Received {
		ids = append(ids, f.CVEID)
	}
	if diff := cmp.Diff([]string{"CVE-2020-0001", "CVE-2020-0008"}, ids); diff != "" {
		t.Errorf("facts (-want +got):\n%s", diff)
	}
	wantRejects := []string{"page.json#CVE-2020-0002", "page.json#2", "page.json#3", "page.json#CVE-2020-0005", "page.json#5", "page.json#6"}
	if diff := cmp.Diff(wantRejects, rec.Rejects()); diff != "" {
		t.Errorf("rejects (-want +got):\n%s", diff)
	}
}

func TestParseMalformed(t *testing.T) {
	page := string(readFile(t, "aquasecurity-vuln-list-update_respPage1.json"))
	cut := strings.Index(page, `"CVE-2021-22903"`)
	tests := []struct {
		name  string
		input string
		facts int // facts read before the error
	}{
		{"empty", "", 0},
		{"not json", "nvd", 0},
		{"array", `[{"cve": {"id": "CVE-2020-0001"}}]`, 0},
		{"neither page nor record", `{"format": "NVD_CVE"}`, 0},
		{"bare record with a bad id", `{"id": "CVE-1", "descriptions": []}`, 0},
		{"wrapped record with a bad field", `{"cve": {"id": "CVE-2020-0001", "descriptions": "x"}}`, 0},
		{"bare record with a bad timestamp", `{"id": "CVE-2020-0001", "published": "2020-13-45"}`, 0},
		{"vulnerabilities not an array", `{"vulnerabilities": {"cve": {}}}`, 0},
		{"trailing data", `{"vulnerabilities": []} {}`, 0},
		{"page cut in the second record", page[:cut], 1},
		{"syntax error in a record", `{"vulnerabilities": [{"cve": {"id": "CVE-2020-0001"}}, {"cve": {"id": nope}}]}`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec feedtest.Recorder
			err := Parser.Parse(context.Background(), "x.json", strings.NewReader(tt.input), &rec)
			if err == nil {
				t.Fatalf("parse succeeded with %d facts, want an error", len(rec.Received))
			}
			if !strings.HasPrefix(err.Error(), "nvd x.json: ") {
				t.Errorf("error %q does not name the file", err)
			}
			if len(rec.Received) != tt.facts {
				t.Errorf("%d facts before the error, want %d", len(rec.Received), tt.facts)
			}
		})
	}
}

func TestEmptyPage(t *testing.T) {
	for _, doc := range []string{`{"totalResults": 0, "vulnerabilities": []}`, `{"vulnerabilities": null}`} {
		var rec feedtest.Recorder
		if err := Parser.Parse(context.Background(), "x.json", strings.NewReader(doc), &rec); err != nil || len(rec.Received)+len(rec.Rejects()) != 0 {
			t.Errorf("%s: error %v, %d facts, %d rejects; want nothing", doc, err, len(rec.Received), len(rec.Rejects()))
		}
	}
}

func TestSinkErrorStops(t *testing.T) {
	errFull := errors.New("sink full")
	rec := feedtest.Recorder{OnFacts: func(*cve.Facts) error { return errFull }}
	err := Parser.Parse(context.Background(), "x.json", bytes.NewReader(readFile(t, "anchore-vunnel_full-page.json")), &rec)
	if !errors.Is(err, errFull) || len(rec.Received) != 1 {
		t.Fatalf("error %v after %d facts, want the sink's after 1", err, len(rec.Received))
	}
}

func TestCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	rec := feedtest.Recorder{OnFacts: func(*cve.Facts) error { cancel(); return nil }}
	err := Parser.Parse(ctx, "x.json", bytes.NewReader(readFile(t, "anchore-vunnel_full-page.json")), &rec)
	if !errors.Is(err, context.Canceled) || len(rec.Received) != 1 {
		t.Fatalf("error %v after %d facts, want context.Canceled after 1", err, len(rec.Received))
	}
}

// TestStreamsPages feeds a page through a pipe that only sends the rest of
// the array once the first record has reached the sink: a parser that read
// the whole file first would never see it.
func TestStreamsPages(t *testing.T) {
	pr, pw := io.Pipe()
	first := make(chan struct{})
	go func() {
		fmt.Fprint(pw, `{"resultsPerPage": 2000, "vulnerabilities": [`)
		fmt.Fprint(pw, `{"cve": {"id": "CVE-2020-0001", "descriptions": [{"lang": "en", "value": "one"}]}}`)
		select {
		case <-first:
		case <-time.After(10 * time.Second):
			pw.CloseWithError(errors.New("first record never reached the sink"))
			return
		}
		for i := 2; i <= 1000; i++ {
			fmt.Fprintf(pw, `,{"cve": {"id": "CVE-2020-%04d", "descriptions": [{"lang": "en", "value": "x"}]}}`, i)
		}
		fmt.Fprint(pw, `]}`)
		pw.Close()
	}()
	rec := feedtest.Recorder{OnFacts: func(f *cve.Facts) error {
		if f.CVEID == "CVE-2020-0001" {
			close(first)
		}
		return nil
	}}
	if err := Parser.Parse(context.Background(), "stream.json", pr, &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Received) != 1000 || rec.Received[999].CVEID != "CVE-2020-1000" {
		t.Fatalf("%d facts, want 1000", len(rec.Received))
	}
}

func FuzzParse(f *testing.F) {
	for _, file := range []string{"CVE-2016-1585.json", "CVE-2024-3094.json", "CVE-2023-5341.json", "aquasecurity-vuln-list-update_respPage1.json", "CVE-2022-25929.json"} {
		f.Add(readFile(f, file))
	}
	f.Add([]byte(`{"cve": ` + cveObject + `}`))
	f.Add([]byte(cveObject))
	feedtest.Fuzz(f, Parser, "fuzz.json", func(t *testing.T, rec *feedtest.Recorder, _ error) {
		for _, fa := range rec.Received {
			for _, a := range fa.Atoms {
				if a.AffectedRange == nil {
					t.Fatalf("atom without affected range %+v", a)
				}
			}
		}
		for _, name := range rec.Rejects() {
			if !strings.HasPrefix(name, "fuzz.json#") {
				t.Fatalf("reject named %q", name)
			}
		}
	})
}
