// Package csaf reads CSAF 2.0 and 2.1 advisories (OASIS Common Security Advisory
// Framework) of any vendor: one cve.Facts per vulnerability with a CVE,
// with remediation atoms for the fixed products and vendor fixes.
//
// Documents are decoded into the subset of the CSAF schema read here, not
// into the document types of the gocsaf library (github.com/gocsaf/csaf/v3,
// v3.6.0), for three reasons:
//
//   - Its types validate while they decode: one value outside the 2.0
//     schema (a CVE id written "CVE-24-1" or in lower case, an enumeration
//     value of a later version) fails the whole advisory, where this parser
//     rejects the one vulnerability at fault and keeps the others.
//   - They are CSAF 2.0 only: csaf_version "2.1" does not decode, and the
//     2.1 fields that carry the same facts (cwes, metrics, cvss_v4) have no
//     types. They are read here.
//   - Its csaf package also holds the provider, ROLIE and remote-validation
//     code, and importing it links bbolt (an embedded database), gval,
//     jsonpath, shopspring/decimal and x/time into the binary, for the
//     twenty-odd fields a parser reads.
//
// Products are resolved through the product tree: the vendor, product_name
// (or product_family) and product_version branches above a product, the
// full product names, and relationships, whose component names the package
// and version (from its purl, or an RPM name-version-release.arch) and
// whose platform names the product. Atoms come from two places:
//
//   - a product of product_status fixed or first_fixed: its version, or the
//     ">=" bound of its product_version_range, is the fixed version;
//   - a product of a vendor_fix remediation: the upper bound of its
//     product_version_range ("<2.9.2", "vers:intdot/>=2.0|<2.9.2") is the
//     fixed version; otherwise the fix is named by an id taken from the
//     remediation, a KB number from its details or URL, a short details
//     text, the last segment of its URL (an erratum such as RHSA-2021:5217,
//     an advisory such as cisco-sa-20180328-smi2), or the document's
//     tracking id, and the atom is flagged as unparsed. Such an atom is
//     left out for a product that already has a fixed version.
//
// The ecosystem is Windows for Microsoft products whose name starts with
// "Windows", Microsoft for Microsoft's other products, Apple for Apple's,
// and Vendor for everyone else. Windows, Microsoft and Apple products keep
// their name as the vendor writes it; Vendor products are prefixed with the
// vendor's name ("Cisco IOS XE Software") unless the name already starts
// with it.
//
// This file is long (about 900 lines) because the subset of the schema it
// decodes and the rules that read each part of it are kept side by side:
// the product tree, the statuses and the remediations are read together.
package csaf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed"
	"github.com/patchline/patchline/internal/version"
)

// Parser reads CSAF documents, one per file.
var Parser = feed.Parser{
	Name: "csaf",
	Exts: []string{".json"},
	Parse: func(ctx context.Context, name string, r io.Reader, sink feed.Sink) error {
		return Read(ctx, name, r, sink, Options{})
	},
}

// Options adapt the facts of a document to the feed that reads it, for
// feeds that publish CSAF as one of their formats (MSRC). The zero value
// credits the document's publisher.
type Options struct {
	// Feed is the Feed of the facts; "csaf" when empty.
	Feed string
	// Source, when set, returns the data source credited for a CVE in
	// place of "csaf:<publisher>".
	Source func(cveID string) cve.DataSource
	// AtomSource, when set, replaces the publisher's name as the Source of
	// the atoms.
	AtomSource string
	// License, when set, replaces the license the document states.
	License string
	// MetricSource, when set, replaces the publisher's name as the Source
	// of the CVSS scores.
	MetricSource string
	// KBAdvisory makes the KB of a Microsoft fix its atom's AdvisoryID, in
	// place of the tracking id, as MSRC names its updates.
	KBAdvisory bool
}

// maxFile bounds the size of a document; the largest real advisories
// (kernel errata listing every package of every stream) are tens of
// megabytes.
const maxFile = 512 << 20

// Read parses one CSAF document from r and hands the facts of each of its
// vulnerabilities with a CVE to sink. A vulnerability whose CVE id is
// malformed is rejected; Read returns an error when r is not a CSAF 2.x
// document or when the sink fails.
func Read(ctx context.Context, name string, r io.Reader, sink feed.Sink, opts Options) error {
	var d document
	dec := json.NewDecoder(io.LimitReader(r, maxFile))
	if err := dec.Decode(&d); err != nil {
		return fmt.Errorf("decode csaf document: %w", err)
	}
	if err := d.check(); err != nil {
		return err
	}
	p := newParse(&d, opts)
	for i, v := range d.Vulnerabilities {
		if err := ctx.Err(); err != nil {
			return err
		}
		raw := strings.TrimSpace(v.CVE)
		if raw == "" {
			continue
		}
		id, err := cve.ParseID(raw)
		if err != nil {
			sink.Reject(fmt.Sprintf("%s#vulnerabilities[%d]", name, i), err)
			continue
		}
		if err := sink.Facts(p.facts(id, &v)); err != nil {
			return err
		}
	}
	return nil
}

// Header identifies a CSAF document.
type Header struct {
	Category   string // csaf_security_advisory, csaf_vex, csaf_base ...
	Publisher  string // the publisher's name
	TrackingID string
}

// Sniff reports whether data is a CSAF 2.x document and returns its header.
func Sniff(data []byte) (Header, bool) {
	var d struct {
		Document *struct {
			CSAFVersion string `json:"csaf_version"`
			Category    string `json:"category"`
			Publisher   struct {
				Name string `json:"name"`
			} `json:"publisher"`
			Tracking struct {
				ID string `json:"id"`
			} `json:"tracking"`
		} `json:"document"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(data), &d); err != nil || d.Document == nil {
		return Header{}, false
	}
	if !strings.HasPrefix(d.Document.CSAFVersion, "2.") || d.Document.Category == "" {
		return Header{}, false
	}
	return Header{Category: d.Document.Category, Publisher: d.Document.Publisher.Name, TrackingID: d.Document.Tracking.ID}, true
}

// document is the part of a CSAF document read here.
type document struct {
	Document *struct {
		Category     string `json:"category"`
		CSAFVersion  string `json:"csaf_version"`
		Distribution *struct {
			Text string `json:"text"`
			TLP  *struct {
				Label string `json:"label"`
			} `json:"tlp"`
		} `json:"distribution"`
		Notes     []note `json:"notes"`
		Publisher struct {
			Category string `json:"category"`
			Name     string `json:"name"`
		} `json:"publisher"`
		References []reference `json:"references"`
		Tracking   struct {
			ID                 string `json:"id"`
			InitialReleaseDate string `json:"initial_release_date"`
			CurrentReleaseDate string `json:"current_release_date"`
		} `json:"tracking"`
	} `json:"document"`
	ProductTree     *productTree    `json:"product_tree"`
	Vulnerabilities []vulnerability `json:"vulnerabilities"`
}

type note struct {
	Category string `json:"category"`
	Text     string `json:"text"`
}

type reference struct {
	Category string `json:"category"`
	URL      string `json:"url"`
}

type productTree struct {
	Branches         []branch          `json:"branches"`
	FullProductNames []fullProductName `json:"full_product_names"`
	Relationships    []struct {
		FullProductName  fullProductName `json:"full_product_name"`
		ProductReference string          `json:"product_reference"`
		RelatesTo        string          `json:"relates_to_product_reference"`
	} `json:"relationships"`
	ProductGroups []struct {
		GroupID    string   `json:"group_id"`
		ProductIDs []string `json:"product_ids"`
	} `json:"product_groups"`
}

type branch struct {
	Category string           `json:"category"`
	Name     string           `json:"name"`
	Product  *fullProductName `json:"product"`
	Branches []branch         `json:"branches"`
}

type fullProductName struct {
	Name      string `json:"name"`
	ProductID string `json:"product_id"`
	Helper    *struct {
		PURL string `json:"purl"`
	} `json:"product_identification_helper"`
}

type vulnerability struct {
	CVE string `json:"cve"`
	CWE *struct {
		ID string `json:"id"`
	} `json:"cwe"`
	CWEs []struct {
		ID string `json:"id"`
	} `json:"cwes"`
	Notes         []note `json:"notes"`
	ProductStatus *struct {
		Fixed      []string `json:"fixed"`
		FirstFixed []string `json:"first_fixed"`
	} `json:"product_status"`
	References   []reference `json:"references"`
	ReleaseDate  string      `json:"release_date"`
	Remediations []struct {
		Category   string   `json:"category"`
		Details    string   `json:"details"`
		URL        string   `json:"url"`
		ProductIDs []string `json:"product_ids"`
		GroupIDs   []string `json:"group_ids"`
	} `json:"remediations"`
	Scores  []scores `json:"scores"`
	Metrics []struct {
		Content scores `json:"content"`
	} `json:"metrics"`
}

type scores struct {
	CVSSv2 *cvss `json:"cvss_v2"`
	CVSSv3 *cvss `json:"cvss_v3"`
	CVSSv4 *cvss `json:"cvss_v4"`
}

type cvss struct {
	Version      string  `json:"version"`
	VectorString string  `json:"vectorString"`
	BaseScore    float64 `json:"baseScore"`
	BaseSeverity string  `json:"baseSeverity"`
}

// check reports a document that is not CSAF 2.x or lacks what every fact
// needs.
func (d *document) check() error {
	if d.Document == nil {
		return errors.New("not a csaf document: no document property")
	}
	if !strings.HasPrefix(d.Document.CSAFVersion, "2.") {
		return fmt.Errorf("not a csaf 2 document: csaf_version %q", d.Document.CSAFVersion)
	}
	if strings.TrimSpace(d.Document.Tracking.ID) == "" {
		return errors.New("csaf document without tracking id")
	}
	if strings.TrimSpace(d.Document.Publisher.Name) == "" {
		return errors.New("csaf document without publisher name")
	}
	return nil
}

// product is a product of the tree with what its branches say about it.
type product struct {
	vendor  string
	name    string // product_name, product_family or the full product name
	version string // product_version
	rng     string // product_version_range
	purl    string
}

// parse holds what one document's vulnerabilities share.
type parse struct {
	opts      Options
	trackID   string
	publisher string
	license   string
	docURL    string
	published *time.Time
	modified  *time.Time
	products  map[string]product
	groups    map[string][]string
}

func newParse(d *document, opts Options) *parse {
	doc := d.Document
	p := &parse{
		opts:      opts,
		trackID:   strings.TrimSpace(doc.Tracking.ID),
		publisher: strings.TrimSpace(doc.Publisher.Name),
		published: feed.Time(doc.Tracking.InitialReleaseDate),
		modified:  feed.Time(doc.Tracking.CurrentReleaseDate),
		products:  map[string]product{},
		groups:    map[string][]string{},
	}
	for _, r := range doc.References {
		if r.Category == "self" && strings.TrimSpace(r.URL) != "" {
			p.docURL = strings.TrimSpace(r.URL)
			break
		}
	}
	p.license = opts.License
	if p.license == "" {
		p.license = licenseOf(d)
	}
	vendor := ""
	if doc.Publisher.Category == "vendor" {
		vendor = p.publisher
	}
	if t := d.ProductTree; t != nil {
		p.walk(t.Branches, product{vendor: vendor}, "")
		for _, f := range t.FullProductNames {
			pr := product{vendor: vendor, name: strings.TrimSpace(f.Name), purl: purlOf(&f)}
			if name, ver, ok := purlParts(pr.purl); ok {
				pr.name, pr.version = name, ver
			}
			p.add(f, pr)
		}
		for _, r := range t.Relationships {
			comp, ok1 := p.products[r.ProductReference]
			plat, ok2 := p.products[r.RelatesTo]
			if !ok1 || !ok2 {
				continue
			}
			pkg, ver := component(comp)
			rel := product{vendor: plat.vendor, name: joinName(plat.name, pkg), version: ver, rng: comp.rng}
			if rel.vendor == "" {
				rel.vendor = comp.vendor
			}
			p.add(r.FullProductName, rel)
		}
		for _, g := range t.ProductGroups {
			p.groups[g.GroupID] = g.ProductIDs
		}
	}
	return p
}

// walk records the products under branches; family is the nearest
// product_family, used when no product_name names the product.
func (p *parse) walk(branches []branch, at product, family string) {
	for _, b := range branches {
		here, fam := at, family
		name := strings.TrimSpace(b.Name)
		switch b.Category {
		case "vendor":
			here.vendor = name
		case "product_family":
			fam = name
		case "product_name":
			here.name = name
		case "product_version":
			here.version = name
		case "product_version_range":
			here.rng = name
		}
		if b.Product != nil {
			leaf := here
			if leaf.name == "" {
				leaf.name = fam
			}
			if leaf.name == "" {
				leaf.name = strings.TrimSpace(b.Product.Name)
			}
			leaf.purl = purlOf(b.Product)
			p.add(*b.Product, leaf)
		}
		p.walk(b.Branches, here, fam)
	}
}

func (p *parse) add(f fullProductName, pr product) {
	if f.ProductID == "" {
		return
	}
	if pr.name == "" {
		pr.name = strings.TrimSpace(f.Name)
	}
	p.products[f.ProductID] = pr
}

// facts returns the facts of one vulnerability.
func (p *parse) facts(id string, v *vulnerability) *cve.Facts {
	f := &cve.Facts{
		CVEID:       id,
		Feed:        p.opts.Feed,
		Doc:         p.trackID,
		Description: noteText(v.Notes, "description"),
		Published:   feed.Time(v.ReleaseDate),
		Modified:    p.modified,
		CWEs:        cwes(v),
		Metrics:     p.metrics(v),
		References:  p.references(v),
		Atoms:       p.atoms(v),
	}
	if f.Feed == "" {
		f.Feed = "csaf"
	}
	if f.Published == nil {
		f.Published = p.published
	}
	if p.opts.Source != nil {
		f.Source = p.opts.Source(id)
	} else {
		f.Source = cve.DataSource{Name: "csaf:" + p.publisher, License: p.license}
		if p.docURL != "" {
			u := p.docURL
			f.Source.URL = &u
		}
	}
	return f
}

// fix is what a vendor_fix remediation says about a product.
type fix struct {
	details, url string
}

// atoms returns the atoms of one vulnerability (see the package comment).
func (p *parse) atoms(v *vulnerability) []cve.ProductAtom {
	fixes := map[string]fix{}
	var order []string
	for _, r := range v.Remediations {
		if r.Category != "vendor_fix" {
			continue
		}
		ids := slices.Clone(r.ProductIDs)
		for _, g := range r.GroupIDs {
			ids = append(ids, p.groups[g]...)
		}
		for _, pid := range ids {
			if _, ok := fixes[pid]; !ok {
				fixes[pid] = fix{details: strings.TrimSpace(r.Details), url: strings.TrimSpace(r.URL)}
				order = append(order, pid)
			}
		}
	}
	var fixed []string
	if ps := v.ProductStatus; ps != nil {
		fixed = append(slices.Clone(ps.Fixed), ps.FirstFixed...)
	}

	type candidate struct {
		atom cve.ProductAtom
		fix  fix
	}
	var all []candidate
	versioned := map[string]bool{} // ecosystem and product with a fixed version
	done := map[string]bool{}
	// Fixed products first, then the products of vendor fixes.
	for i, pid := range append(fixed, order...) {
		pr, ok := p.products[pid]
		if !ok || done[pid] {
			continue
		}
		done[pid] = true
		fx := fixes[pid]
		a := p.atom(pr, fx)
		switch bound := upperBound(pr.rng); {
		case i < len(fixed) && pr.version != "":
			a.FixedVersion = pr.version
		case i < len(fixed) && lowerBound(pr.rng) != "":
			// A fixed range ">=2.9.2" starts at the fix.
			a.FixedVersion = lowerBound(pr.rng)
		case bound != "":
			a.FixedVersion = bound
			rng := pr.rng
			a.AffectedRange = &rng
		}
		if a.FixedVersion != "" {
			a.Unparsed = !version.Valid(a.Ecosystem, a.FixedVersion)
			versioned[a.Ecosystem+"\x00"+a.Product] = true
		}
		all = append(all, candidate{a, fx})
	}
	// An atom that names the fix by an id stands for a product without a
	// fixed version only.
	var out []cve.ProductAtom
	for _, c := range all {
		if c.atom.FixedVersion == "" {
			if versioned[c.atom.Ecosystem+"\x00"+c.atom.Product] {
				continue
			}
			c.atom.FixedVersion = p.fixID(c.fix)
			c.atom.Unparsed = !version.Valid(c.atom.Ecosystem, c.atom.FixedVersion)
		}
		out = append(out, c.atom)
	}
	return sortAtoms(out)
}

// atom returns the atom of a product, without its fixed version.
func (p *parse) atom(pr product, fx fix) cve.ProductAtom {
	eco := ecosystemOf(pr.vendor, pr.name)
	name := pr.name
	if eco == "Vendor" && pr.vendor != "" && !hasPrefixFold(name, pr.vendor) {
		name = joinName(pr.vendor, name)
	}
	id := p.trackID
	a := cve.ProductAtom{
		Ecosystem: eco,
		Product:   name,
		Atom: cve.Atom{
			AdvisoryID: &id,
			Source:     p.atomSource(),
			License:    p.license,
		},
	}
	switch {
	case fx.url != "":
		u := fx.url
		a.SourceURL = &u
	case p.docURL != "":
		u := p.docURL
		a.SourceURL = &u
	}
	if eco == "Windows" || eco == "Microsoft" {
		a.KB = kbOf(fx)
		if a.KB != "" && p.opts.KBAdvisory {
			kb := a.KB
			a.AdvisoryID = &kb
		}
	}
	return a
}

// fixID names a fix by an id when no fixed version is known: a KB, a short
// details text, the last segment of the remediation's URL, or else the
// document's tracking id.
func (p *parse) fixID(fx fix) string {
	if kb := kbOf(fx); kb != "" {
		return kb
	}
	if fx.details != "" && len(fx.details) <= 64 && !strings.ContainsAny(fx.details, " \t\r\n") {
		return fx.details
	}
	if id := urlID(fx.url); id != "" {
		return id
	}
	return p.trackID
}

func (p *parse) atomSource() string {
	if p.opts.AtomSource != "" {
		return p.opts.AtomSource
	}
	return p.publisher
}
