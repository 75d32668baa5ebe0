package kev

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed/feedtest"
)

const catalogFile = "kev/known_exploited_vulnerabilities.json"

func readCatalog(tb testing.TB) []byte {
	tb.Helper()
	return feedtest.Sample(tb, catalogFile)
}

func TestParserDeclaration(t *testing.T) {
	if Parser.Name != "kev" || !cmp.Equal(Parser.Exts, []string{".json"}) || Parser.Parse == nil {
		t.Errorf("Parser = %+v", Parser)
	}
}

func TestParseCatalog(t *testing.T) {
	var rec feedtest.Recorder
	if err := Parser.Parse(context.Background(), "known_exploited_vulnerabilities.json", bytes.NewReader(readCatalog(t)), &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Received) != 1404 || len(rec.Rejects()) != 0 {
		t.Fatalf("got %d facts, %d rejects (%v); want 1404, 0", len(rec.Received), len(rec.Rejects()), rec.Rejects())
	}
	url := "https://www.cisa.gov/known-exploited-vulnerabilities-catalog"
	tests := []struct {
		id   string
		want *cve.Facts
	}{
		{
			id: "CVE-2021-44228",
			want: &cve.Facts{
				CVEID:  "CVE-2021-44228",
				Feed:   "kev",
				Source: cve.DataSource{Name: "kev", License: "CC0-1.0", URL: &url},
				CWEs:   []string{"CWE-20", "CWE-400", "CWE-502"},
				KEV: &cve.KEV{
					DateAdded:                  "2021-12-10",
					DueDate:                    "2021-12-24",
					RequiredAction:             "For all affected software assets for which updates exist, the only acceptable remediation actions are: 1) Apply updates; OR 2) remove affected assets from agency networks. Temporary mitigations using one of the measures provided at https://www.cisa.gov/uscert/ed-22-02-apache-log4j-recommended-mitigation-measures are only acceptable until updates are available.",
					KnownRansomwareCampaignUse: "Known",
					VendorProject:              "Apache",
					Product:                    "Log4j2",
					VulnerabilityName:          "Apache Log4j2 Remote Code Execution Vulnerability",
					ShortDescription:           "Apache Log4j2 contains a vulnerability where JNDI features do not protect against attacker-controlled JNDI-related endpoints, allowing for remote code execution.",
					Notes:                      "https://nvd.nist.gov/vuln/detail/CVE-2021-44228",
					CWEs:                       []string{"CWE-20", "CWE-400", "CWE-502"},
				},
			},
		},
		{
			// The last entry of the file.
			id: "CVE-2020-29583",
			want: &cve.Facts{
				CVEID:  "CVE-2020-29583",
				Feed:   "kev",
				Source: cve.DataSource{Name: "kev", License: "CC0-1.0", URL: &url},
				CWEs:   []string{"CWE-522"},
				KEV: &cve.KEV{
					DateAdded:                  "2021-11-03",
					DueDate:                    "2022-05-03",
					RequiredAction:             "Apply updates per vendor instructions.",
					KnownRansomwareCampaignUse: "Unknown",
					VendorProject:              "Zyxel",
					Product:                    "Multiple Products",
					VulnerabilityName:          "Zyxel Multiple Products Use of Hard-Coded Credentials Vulnerability",
					ShortDescription:           `Zyxel firewalls (ATP, USG, VM) and AP Controllers (NXC2500 and NXC5500) contain a use of hard-coded credentials vulnerability in an undocumented account ("zyfwp") with an unchangeable password.`,
					Notes:                      "https://nvd.nist.gov/vuln/detail/CVE-2020-29583",
					CWEs:                       []string{"CWE-522"},
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, rec.Find(tt.id)); diff != "" {
				t.Errorf("facts mismatch (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("first entry keeps escaped text", func(t *testing.T) {
		f := rec.Received[0]
		if f.CVEID != "CVE-2025-48384" || !strings.Contains(f.KEV.ShortDescription, "Git\u2019s") ||
			!strings.Contains(f.KEV.Notes, "https://github.com/git/git/security/advisories/GHSA-vwqx-4fm8-6qc9") {
			t.Errorf("first facts = %+v", f.KEV)
		}
	})
	t.Run("every entry", func(t *testing.T) {
		known, noCWE := 0, 0
		for _, f := range rec.Received {
			if f.Description != "" || f.KEV == nil || f.KEV.DateAdded == "" || f.KEV.DueDate == "" {
				t.Fatalf("%s: %+v", f.CVEID, f)
			}
			if f.KEV.KnownRansomwareCampaignUse == "Known" {
				known++
			}
			if len(f.CWEs) == 0 {
				noCWE++
			}
		}
		// Counted in the file with an independent JSON reader.
		if known != 293 || noCWE != 152 {
			t.Errorf("ransomware Known = %d, without CWEs = %d; want 293, 152", known, noCWE)
		}
	})
}

func TestParseDocuments(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		ids     []string
		rejects []string
		wantErr bool
	}{
		{
			name: "minimal",
			doc:  `{"vulnerabilities":[{"cveID":"CVE-2024-0001","dateAdded":"2024-01-02"}]}`,
			ids:  []string{"CVE-2024-0001"},
		},
		{
			name: "lower-case id is made canonical",
			doc:  `{"count":1,"vulnerabilities":[{"cveID":"cve-2024-12345","dateAdded":"2024-01-02"}],"x":{"y":[1]}}`,
			ids:  []string{"CVE-2024-12345"},
		},
		{
			name:    "malformed id is rejected, the others kept",
			doc:     `{"vulnerabilities":[{"cveID":"CVE-2024-0001","dateAdded":"2024-01-02"},{"cveID":"CVE-24-1","dateAdded":"2024-01-02"},{"cveID":"CVE-2024-0003","dateAdded":"2024-01-02"}]}`,
			ids:     []string{"CVE-2024-0001", "CVE-2024-0003"},
			rejects: []string{"kev.json#1"},
		},
		{
			name:    "wrong types are rejected",
			doc:     `{"vulnerabilities":[{"cveID":42},{"cveID":"CVE-2024-0002","dateAdded":"2024-01-02","cwes":"CWE-79"},[],"x",null]}`,
			rejects: []string{"kev.json#0", "kev.json#1", "kev.json#2", "kev.json#3", "kev.json#4"},
		},
		{
			name:    "bad dates are rejected",
			doc:     `{"vulnerabilities":[{"cveID":"CVE-2024-0001"},{"cveID":"CVE-2024-0002","dateAdded":"2024-13-01"},{"cveID":"CVE-2024-0003","dateAdded":"2024-01-02","dueDate":"soon"}]}`,
			rejects: []string{"kev.json#0", "kev.json#1", "kev.json#2"},
		},
		{name: "empty catalog", doc: `{"count":0,"vulnerabilities":[]}`},
		{name: "no vulnerabilities", doc: `{"count":0}`, wantErr: true},
		{name: "not an object", doc: `[{"cveID":"CVE-2024-0001"}]`, wantErr: true},
		{name: "vulnerabilities not an array", doc: `{"vulnerabilities":{}}`, wantErr: true},
		{name: "truncated", doc: `{"vulnerabilities":[{"cveID":"CVE-2024-0001","dateAdded":"2024-01-02"},{"cve`, ids: []string{"CVE-2024-0001"}, wantErr: true},
		{name: "empty file", doc: ``, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec feedtest.Recorder
			err := Parser.Parse(context.Background(), "kev.json", strings.NewReader(tt.doc), &rec)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			var ids []string
			for _, f := range rec.Received {
				ids = append(ids, f.CVEID)
			}
			if diff := cmp.Diff(tt.ids, ids); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.rejects, rec.Rejects()); diff != "" {
				t.Errorf("rejects (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseSinkError(t *testing.T) {
	feedtest.CheckSinkError(t, Parser, "kev.json", readCatalog(t), 2)
}

func TestParseCanceled(t *testing.T) {
	feedtest.CheckCanceled(t, Parser, "kev.json", readCatalog(t))
}

func FuzzParse(f *testing.F) {
	catalog := readCatalog(f)
	f.Add(catalog)
	// A small catalog made of the first real entries, so that mutations of
	// entries are explored quickly.
	var doc struct {
		Vulnerabilities []json.RawMessage `json:"vulnerabilities"`
	}
	if err := json.Unmarshal(catalog, &doc); err != nil {
		f.Fatal(err)
	}
	small, err := json.Marshal(map[string]any{"count": 3, "vulnerabilities": doc.Vulnerabilities[:3]})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(small)
	f.Add([]byte(`{"vulnerabilities":[{"cveID":"cve-2024-0001","dateAdded":"2024-01-02"},{"cveID":1}]}`))
	feedtest.Fuzz(f, Parser, "kev.json", func(t *testing.T, rec *feedtest.Recorder, _ error) {
		for _, fa := range rec.Received {
			if fa.KEV == nil || fa.Feed != "kev" {
				t.Fatalf("facts without KEV: %+v", fa)
			}
		}
	})
}
