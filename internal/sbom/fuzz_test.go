package sbom

import (
	"errors"
	"testing"

	"github.com/patchline/patchline/internal/errs"
)

// fuzzParse checks what Parse makes of any input: a document whose
// packages all pass Check and name their ecosystem and name, or an
// invalid error with a message, never a panic or another error.
func fuzzParse(t *testing.T, data []byte) {
	doc, err := Parse(data)
	if err != nil {
		if !errors.Is(err, errs.ErrInvalid) || errs.Message(err) == "" {
			t.Fatalf("Parse: %v, want an invalid error with a message", err)
		}
		return
	}
	if doc.Format != CycloneDX && doc.Format != SPDX {
		t.Fatalf("format %q", doc.Format)
	}
	if len(doc.Packages)+len(doc.Skipped) > MaxComponents+1 {
		t.Fatalf("%d packages and %d skipped", len(doc.Packages), len(doc.Skipped))
	}
	for _, p := range doc.Packages {
		if err := Check(p); err != nil || p.Ecosystem == "" || p.Name == "" {
			t.Fatalf("package %+v: %v", p, err)
		}
	}
}

// FuzzCycloneDX parses CycloneDX documents, the example documents of
// cyclonedx-go first.
func FuzzCycloneDX(f *testing.F) {
	f.Add(mustRead(f, "cyclonedx-valid-bom-1.6.json"))
	f.Add(mustRead(f, "cyclonedx-bom-1.4.json"))
	f.Add(cdxDoc(`{"type":"library","name":"django","version":"4.2.0","purl":"pkg:pypi/django@4.2.0"}`,
		`{"type":"library","name":"x","purl":"pkg:deb/debian/openssl@3.0.11-1~deb12u2?distro=bookworm",
		  "components":[{"type":"library","name":"y","purl":"pkg:maven/org.example/y@1.0"}]}`))
	f.Add([]byte(`{"bomFormat":"CycloneDX","specVersion":"1.5","components":[{"purl":"pkg:"}]}`))
	f.Fuzz(fuzzParse)
}

// FuzzSPDX parses SPDX documents, the example document of tools-golang
// first.
func FuzzSPDX(f *testing.F) {
	f.Add(mustRead(f, "SPDXJSONExample-v2.3.spdx.json"))
	f.Add([]byte(`{"spdxVersion":"SPDX-2.3","SPDXID":"SPDXRef-DOCUMENT","packages":[{"SPDXID":"SPDXRef-1","name":"django","versionInfo":"4.2.0",
		"externalRefs":[{"referenceCategory":"PACKAGE-MANAGER","referenceType":"purl","referenceLocator":"pkg:pypi/django@4.2.0"}]}]}`))
	f.Add([]byte(`{"spdxVersion":"SPDX-2.3","packages":[null]}`))
	f.Fuzz(fuzzParse)
}
