// Package sbom reads what a client asks the catalog about by package:
// package URLs (purls) and software bills of materials, CycloneDX 1.4 to
// 1.6 JSON and SPDX 2.3 JSON, each with the format's own Go library
// (CycloneDX/cyclonedx-go, spdx/tools-golang), purls with
// package-url/packageurl-go. Every package comes out as an OSV ecosystem,
// a name and a version, the shape the exposure index matches.
package sbom

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
	spdxjson "github.com/spdx/tools-golang/json"
	spdxv23 "github.com/spdx/tools-golang/spdx"

	"github.com/patchline/patchline/internal/errs"
)

// MaxComponents bounds the components of one document.
const MaxComponents = 10000

// Formats of documents.
const (
	CycloneDX = "CycloneDX"
	SPDX      = "SPDX"
)

// Document is what Parse reads of an SBOM.
type Document struct {
	// Format is CycloneDX or SPDX, Version its specification version.
	Format, Version string
	// Packages are the components that name a package of a known
	// ecosystem through their purl, in document order, each once.
	Packages []Package
	// Skipped are the components that do not: no purl, or a purl of a
	// type that names no ecosystem of the catalog (pkg:generic,
	// pkg:github ...).
	Skipped []Skipped
}

// Skipped is a component Parse could not match, and why.
type Skipped struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	PURL    string `json:"purl,omitempty"`
	Reason  string `json:"reason"`
}

// component is what Parse needs of a component of either format.
type component struct {
	ref, name, version, purl string
}

// Parse reads a CycloneDX (1.4 to 1.6) or SPDX 2.3 JSON document. It
// returns an errs.ErrInvalid error naming what is wrong for anything else,
// for a document that does not decode, for more than MaxComponents
// components, and for a component whose purl does not parse.
func Parse(data []byte) (*Document, error) {
	var probe struct {
		BOMFormat   string `json:"bomFormat"`
		SpecVersion string `json:"specVersion"`
		SPDXVersion string `json:"spdxVersion"`
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, errs.Invalidf("the document is not JSON: %v; want CycloneDX or SPDX 2.3 JSON", err)
	}
	var (
		doc   = &Document{}
		comps []component
		err   error
	)
	switch {
	case probe.BOMFormat == "CycloneDX":
		doc.Format, doc.Version = CycloneDX, probe.SpecVersion
		comps, err = cycloneDX(data, probe.SpecVersion)
	case probe.SPDXVersion != "":
		doc.Format, doc.Version = SPDX, probe.SPDXVersion
		comps, err = spdx(data, probe.SPDXVersion)
	default:
		return nil, errs.Invalidf(`the document is neither CycloneDX ("bomFormat": "CycloneDX") nor SPDX ("spdxVersion"): want CycloneDX 1.4–1.6 or SPDX 2.3 JSON`)
	}
	if err != nil {
		return nil, err
	}
	if len(comps) > MaxComponents {
		return nil, errs.Invalidf("the document has %d components; at most %d are allowed", len(comps), MaxComponents)
	}
	seen := map[Package]bool{}
	for _, c := range comps {
		if c.purl == "" {
			doc.Skipped = append(doc.Skipped, Skipped{Name: c.name, Version: c.version, Reason: "no purl"})
			continue
		}
		p, known, err := fromPURL(c.purl)
		if err != nil {
			return nil, errs.Invalidf("component %s: %s", c.label(), errs.Message(err))
		}
		if !known {
			doc.Skipped = append(doc.Skipped, Skipped{Name: c.name, Version: c.version, PURL: c.purl,
				Reason: "the purl's type names no ecosystem of the catalog"})
			continue
		}
		if p.Version == "" {
			p.Version = c.version
		}
		if _, ok := needsRelease(p.Ecosystem); ok {
			doc.Skipped = append(doc.Skipped, Skipped{Name: c.name, Version: c.version, PURL: c.purl,
				Reason: "the purl names no release of " + p.Ecosystem + " (a distro qualifier)"})
			continue
		}
		if err := Check(p); err != nil {
			return nil, errs.Invalidf("component %s: %s", c.label(), errs.Message(err))
		}
		doc.add(p, seen)
	}
	return doc, nil
}

// add appends p to the packages unless seen holds the same package
// (whatever its purl's spelling).
func (d *Document) add(p Package, seen map[Package]bool) {
	key := p
	key.PURL = ""
	if !seen[key] {
		seen[key] = true
		d.Packages = append(d.Packages, p)
	}
}

// label names a component in a message: its reference and name.
func (c component) label() string {
	s := fmt.Sprintf("%q", clip(c.name))
	if c.ref != "" {
		s = fmt.Sprintf("%q (%s)", clip(c.ref), s)
	}
	return s
}

// cycloneDX returns the components of a CycloneDX JSON document, nested
// ones included.
func cycloneDX(data []byte, spec string) ([]component, error) {
	switch spec {
	case "1.4", "1.5", "1.6":
	default:
		return nil, errs.Invalidf("CycloneDX specVersion %q: want 1.4, 1.5 or 1.6", clip(spec))
	}
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(data), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		return nil, errs.Invalidf("CycloneDX document: %v", err)
	}
	var out []component
	var walk func([]cdx.Component) error
	walk = func(cs []cdx.Component) error {
		for _, c := range cs {
			if len(out) > MaxComponents {
				return errs.Invalidf("the document has more than %d components", MaxComponents)
			}
			out = append(out, component{ref: c.BOMRef, name: c.Name, version: c.Version, purl: strings.TrimSpace(c.PackageURL)})
			if c.Components != nil {
				if err := walk(*c.Components); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if bom.Metadata != nil && bom.Metadata.Component != nil && bom.Metadata.Component.PackageURL != "" {
		// The subject of the BOM, when it is a package itself.
		c := bom.Metadata.Component
		out = append(out, component{ref: c.BOMRef, name: c.Name, version: c.Version, purl: c.PackageURL})
	}
	if bom.Components != nil {
		if err := walk(*bom.Components); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readSPDX decodes an SPDX JSON document with tools-golang. Its reader
// panics on some malformed documents (a null package in "packages"):
// that is an error of the document.
func readSPDX(data []byte) (doc *spdxv23.Document, err error) {
	defer func() {
		if r := recover(); r != nil {
			doc, err = nil, fmt.Errorf("malformed document (%v)", r)
		}
	}()
	return spdxjson.Read(bytes.NewReader(data))
}

// spdx returns the packages of an SPDX 2.3 JSON document, each with the
// purl of its PACKAGE-MANAGER external reference.
func spdx(data []byte, spec string) ([]component, error) {
	if spec != "SPDX-2.3" {
		return nil, errs.Invalidf("spdxVersion %q: want SPDX-2.3", clip(spec))
	}
	doc, err := readSPDX(data)
	if err != nil {
		return nil, errs.Invalidf("SPDX document: %v", err)
	}
	if doc == nil {
		return nil, errors.New("SPDX document: nothing read")
	}
	var out []component
	for _, p := range doc.Packages {
		if p == nil {
			continue
		}
		c := component{ref: string(p.PackageSPDXIdentifier), name: p.PackageName, version: p.PackageVersion}
		for _, ref := range p.PackageExternalReferences {
			if ref == nil {
				continue
			}
			cat := strings.ReplaceAll(strings.ToUpper(ref.Category), "_", "-")
			if cat == "PACKAGE-MANAGER" && ref.RefType == "purl" {
				c.purl = strings.TrimSpace(ref.Locator)
				break
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// ParseList reads a package list: one purl a line, blank lines and lines
// starting with # passed over. It returns an errs.ErrInvalid error naming
// the line of a purl that does not parse or names no known ecosystem.
func ParseList(data []byte) (*Document, error) {
	doc := &Document{Format: "purl list"}
	seen := map[Package]bool{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if len(doc.Packages) >= MaxComponents {
			return nil, errs.Invalidf("the list has more than %d packages", MaxComponents)
		}
		p, err := FromPURL(line)
		if err == nil {
			err = Check(p)
		}
		if err != nil {
			return nil, errs.Invalidf("line %d: %s", i+1, errs.Message(err))
		}
		doc.add(p, seen)
	}
	return doc, nil
}
