package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"

	"github.com/patchline/patchline/internal/lookupapi"
)

// TestScanEndToEnd runs `patchline scan` on the sample catalog: a
// CycloneDX document written by cyclonedx-go, the example SPDX document of
// tools-golang and a purl list, as a table, as JSON and as a CI gate.
func TestScanEndToEnd(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	bom := cdx.NewBOM()
	bom.Components = &[]cdx.Component{
		{Type: cdx.ComponentTypeLibrary, BOMRef: "django", Name: "django", Version: "4.2.0", PackageURL: "pkg:pypi/django@4.2.0"},
		{Type: cdx.ComponentTypeLibrary, BOMRef: "django-fixed", Name: "django", Version: "4.2.11", PackageURL: "pkg:pypi/django@4.2.11"},
		{Type: cdx.ComponentTypeFile, Name: "README"},
	}
	var buf bytes.Buffer
	enc := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON)
	if err := enc.EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		t.Fatal(err)
	}
	cyclone := filepath.Join(dir, "bom.cdx.json")
	list := filepath.Join(dir, "packages.txt")
	bad := filepath.Join(dir, "bad.txt")
	for name, body := range map[string]string{cyclone: buf.String(), list: "# two packages\npkg:pypi/django@4.2.0\n\npkg:npm/lodash@4.17.0\n", bad: "pkg:pypi/django@4.2.0\npkg:\n"} {
		if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	db := []string{"PATCHLINE_CATALOG_DB=" + sampleCatalog}

	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   []string // each in stdout
		stderr   string
		jsonCVEs []string // with --json: the CVEs of the report, in order
	}{
		{name: "CycloneDX table", args: []string{cyclone}, stdout: []string{"CVE-2024-27351", "4.2.11", "skipped README", "CycloneDX 1.6: 2 packages, 1 vulnerable"}},
		{name: "CycloneDX JSON", args: []string{"--json", cyclone}, jsonCVEs: []string{"CVE-2024-27351"}},
		{name: "SPDX example", args: []string{"--json", "../../internal/sbom/testdata/SPDXJSONExample-v2.3.spdx.json"}, jsonCVEs: nil},
		{name: "purl list", args: []string{list}, stdout: []string{"CVE-2024-27351", "CVE-2021-23337", "lodash"}},
		{name: "gate passes", args: []string{"--fail-on", "critical", cyclone}, stdout: []string{"CVE-2024-27351"}},
		{name: "gate fails", args: []string{"--fail-on", "MEDIUM", cyclone}, code: exitFindings, stderr: "1 findings at or above MEDIUM"},
		{name: "bad purl", args: []string{bad}, code: 1, stderr: "line 2: purl"},
		{name: "bad severity", args: []string{"--fail-on", "SEVERE", list}, code: 1, stderr: "--fail-on"},
		{name: "no file", args: []string{filepath.Join(dir, "nothing.json")}, code: 1, stderr: "nothing.json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := runCLI(t, "", db, append([]string{"scan"}, tc.args...)...)
			if res.Code != tc.code || !strings.Contains(res.Stderr, tc.stderr) {
				t.Fatalf("exit %d stderr %q, want %d with %q\nstdout: %s", res.Code, res.Stderr, tc.code, tc.stderr, res.Stdout)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(res.Stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, res.Stdout)
				}
			}
			if tc.args[0] == "--json" {
				var rep lookupapi.SBOMReport
				if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil {
					t.Fatalf("--json: %v\n%s", err, res.Stdout)
				}
				var got []string
				for _, r := range rep.Results {
					for _, v := range r.Vulnerabilities {
						got = append(got, v.CVEID)
					}
				}
				if strings.Join(got, ",") != strings.Join(tc.jsonCVEs, ",") {
					t.Errorf("--json CVEs %v, want %v", got, tc.jsonCVEs)
				}
			}
		})
	}
}
