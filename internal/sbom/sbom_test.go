package sbom

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/errs"
)

func mustRead(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestParseExamples reads the example documents of the formats' own
// libraries.
func TestParseExamples(t *testing.T) {
	tests := []struct {
		file            string
		format, version string
		packages        []Package
		skipped         []string // names
	}{
		{
			file: "cyclonedx-valid-bom-1.6.json", format: CycloneDX, version: "1.6",
			packages: []Package{{Ecosystem: "npm", Name: "acme/component", Version: "1.0.0", PURL: "pkg:npm/acme/component@1.0.0"}},
			skipped:  []string{"mylibrary"},
		},
		{
			file: "cyclonedx-bom-1.4.json", format: CycloneDX, version: "1.4",
			packages: []Package{{Ecosystem: "npm", Name: "acme/component", Version: "1.0.0", PURL: "pkg:npm/acme/component@1.0.0"}},
			skipped:  []string{"mylibrary"},
		},
		{
			file: "SPDXJSONExample-v2.3.spdx.json", format: SPDX, version: "SPDX-2.3",
			packages: []Package{{Ecosystem: "Maven", Name: "org.apache.jena:apache-jena", Version: "3.12.0", PURL: "pkg:maven/org.apache.jena/apache-jena@3.12.0"}},
			skipped:  []string{"glibc", "Apache Commons Lang", "Saxon", "centos"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			doc, err := Parse(mustRead(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if doc.Format != tc.format || doc.Version != tc.version {
				t.Errorf("format %s %s, want %s %s", doc.Format, doc.Version, tc.format, tc.version)
			}
			if diff := cmp.Diff(tc.packages, doc.Packages); diff != "" {
				t.Errorf("packages (-want +got):\n%s", diff)
			}
			var skipped []string
			for _, s := range doc.Skipped {
				skipped = append(skipped, s.Name)
				if s.Reason == "" {
					t.Errorf("skipped %q without a reason", s.Name)
				}
			}
			if diff := cmp.Diff(tc.skipped, skipped); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
		})
	}
}

// cdxDoc returns a CycloneDX 1.5 document of components given as JSON.
func cdxDoc(components ...string) []byte {
	return []byte(`{"bomFormat":"CycloneDX","specVersion":"1.5","version":1,"components":[` + strings.Join(components, ",") + `]}`)
}

func TestParseRefuses(t *testing.T) {
	many := make([]string, MaxComponents+1)
	for i := range many {
		many[i] = fmt.Sprintf(`{"type":"library","name":"p%d","version":"1.0","purl":"pkg:pypi/p%d@1.0"}`, i, i)
	}
	tests := []struct {
		name string
		doc  []byte
		want string // in the message
	}{
		{"not JSON", []byte("name,version\n"), "not JSON"},
		{"another format", []byte(`{"hello":"world"}`), "neither CycloneDX"},
		{"CycloneDX 1.2", []byte(`{"bomFormat":"CycloneDX","specVersion":"1.2","version":1}`), `specVersion "1.2"`},
		{"SPDX 2.1", []byte(`{"spdxVersion":"SPDX-2.1"}`), `"SPDX-2.1"`},
		{"malformed CycloneDX", []byte(`{"bomFormat":"CycloneDX","specVersion":"1.5","components":{"a":1}}`), "CycloneDX document"},
		{"malformed purl", cdxDoc(`{"type":"library","bom-ref":"ref-1","name":"x","purl":"pkg:"}`), `component "ref-1" ("x")`},
		{"maven purl without group", cdxDoc(`{"type":"library","name":"x","purl":"pkg:maven/x@1"}`), "namespace"},
		{"version that does not parse", cdxDoc(`{"type":"library","name":"django","purl":"pkg:pypi/django@not%20a%20version"}`), "does not parse"},
		{"too many components", cdxDoc(many...), "at most 10000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.doc)
			if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(errs.Message(err), tc.want) {
				t.Errorf("Parse: %v, want an invalid error saying %q", err, tc.want)
			}
		})
	}
}

func TestParseSkipsAndDeduplicates(t *testing.T) {
	doc, err := Parse(cdxDoc(
		`{"type":"library","name":"django","version":"4.2.0","purl":"pkg:pypi/django@4.2.0"}`,
		`{"type":"library","name":"Django","version":"4.2.0","purl":"pkg:pypi/django@4.2.0"}`,
		`{"type":"library","name":"tool","version":"1","purl":"pkg:generic/tool@1"}`,
		`{"type":"file","name":"readme.txt"}`,
		`{"type":"library","name":"requests","version":"2.31.0","purl":"pkg:pypi/requests"}`,
		`{"type":"library","name":"openssl","version":"3.0.11-1","purl":"pkg:deb/debian/openssl@3.0.11-1"}`,
	))
	if err != nil {
		t.Fatal(err)
	}
	want := []Package{
		{Ecosystem: "PyPI", Name: "django", Version: "4.2.0", PURL: "pkg:pypi/django@4.2.0"},
		{Ecosystem: "PyPI", Name: "requests", Version: "2.31.0", PURL: "pkg:pypi/requests"},
	}
	if diff := cmp.Diff(want, doc.Packages); diff != "" {
		t.Errorf("packages (-want +got):\n%s", diff)
	}
	wantSkipped := []Skipped{
		{Name: "tool", Version: "1", PURL: "pkg:generic/tool@1", Reason: "the purl's type names no ecosystem of the catalog"},
		{Name: "readme.txt", Reason: "no purl"},
		{Name: "openssl", Version: "3.0.11-1", PURL: "pkg:deb/debian/openssl@3.0.11-1", Reason: "the purl names no release of Debian (a distro qualifier)"},
	}
	if diff := cmp.Diff(wantSkipped, doc.Skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
}

func TestFromPURL(t *testing.T) {
	tests := []struct {
		purl string
		want Package
		err  string
	}{
		{"pkg:pypi/django@4.2.0", Package{Ecosystem: "PyPI", Name: "django", Version: "4.2.0"}, ""},
		{"pkg:npm/%40babel/core@7.0.0", Package{Ecosystem: "npm", Name: "@babel/core", Version: "7.0.0"}, ""},
		{"pkg:maven/org.apache.logging.log4j/log4j-core@2.14.1", Package{Ecosystem: "Maven", Name: "org.apache.logging.log4j:log4j-core", Version: "2.14.1"}, ""},
		{"pkg:golang/golang.org/x/net@v0.17.0", Package{Ecosystem: "Go", Name: "golang.org/x/net", Version: "v0.17.0"}, ""},
		{"pkg:cargo/hyper@0.14.0", Package{Ecosystem: "crates.io", Name: "hyper", Version: "0.14.0"}, ""},
		{"pkg:gem/rails@7.0.0", Package{Ecosystem: "RubyGems", Name: "rails", Version: "7.0.0"}, ""},
		{"pkg:composer/laravel/framework@10.0.0", Package{Ecosystem: "Packagist", Name: "laravel/framework", Version: "10.0.0"}, ""},
		{"pkg:nuget/Newtonsoft.Json@13.0.1", Package{Ecosystem: "NuGet", Name: "Newtonsoft.Json", Version: "13.0.1"}, ""},
		{"pkg:deb/debian/openssl@3.0.11-1~deb12u2?distro=bookworm", Package{Ecosystem: "Debian:12", Name: "openssl", Version: "3.0.11-1~deb12u2"}, ""},
		{"pkg:deb/ubuntu/openssl@3.0.2-0ubuntu1.10?distro=ubuntu-22.04", Package{Ecosystem: "Ubuntu:22.04:LTS", Name: "openssl", Version: "3.0.2-0ubuntu1.10"}, ""},
		{"pkg:apk/alpine/busybox@1.36.1-r5?distro=3.19.1", Package{Ecosystem: "Alpine:v3.19", Name: "busybox", Version: "1.36.1-r5"}, ""},
		{"pkg:rpm/almalinux/openssl@3.0.7-24.el9?distro=almalinux-9.3", Package{Ecosystem: "AlmaLinux:9", Name: "openssl", Version: "3.0.7-24.el9"}, ""},
		{"pkg:generic/openssl@3.0.0", Package{}, "names no ecosystem"},
		{"pkg:pypi", Package{}, "purl"},
		{"django@4.2.0", Package{}, "purl"},
	}
	for _, tc := range tests {
		t.Run(tc.purl, func(t *testing.T) {
			got, err := FromPURL(tc.purl)
			if tc.err != "" {
				if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(errs.Message(err), tc.err) {
					t.Errorf("FromPURL: %v, want an invalid error saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.want.PURL = tc.purl
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
