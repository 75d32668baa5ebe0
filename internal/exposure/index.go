package exposure

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/version"
)

// Index holds, for each product of the catalog (an ecosystem and a
// product name, see Key), the CVEs whose remediation names it and their
// atoms, with the fixed versions and affected ranges parsed once.
type Index struct {
	mu       sync.RWMutex
	products map[string][]*entry // by Key
	cves     map[string]*cveEntry
}

// cveEntry is what the index knows of one CVE.
type cveEntry struct {
	modified time.Time
	risk     Risk
	keys     []string // product keys of its entries
}

// entry is one product of one CVE.
type entry struct {
	cveID     string
	ecosystem string
	product   string
	arch      string // Windows: the architecture the product names, "" for any
	atoms     []atom
}

// atom is a remediation atom with its versions parsed.
type atom struct {
	cve.Atom
	fixed    version.Version
	parsed   bool // fixed parsed
	rng      []bound
	rangeOK  bool // the affected range parsed
	eolFrom  string
	eoesFrom string
}

// bound is one comparison of an affected range: "< 2.12.2", ">= 2.4".
type bound struct {
	op string
	v  version.Version
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{products: map[string][]*entry{}, cves: map[string]*cveEntry{}}
}

// Len returns the number of CVEs in the index.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.cves)
}

// Update is what Refresh changed.
type Update struct {
	// Keys are the product keys whose atoms changed: the agents holding
	// one of them must be evaluated again.
	Keys []string
	// Risks are the CVEs of the index whose risk is new or changed.
	Risks []Risk
	// Records is how many records were read again.
	Records int
}

// Refresh brings the index up to date with the catalog: it walks the
// summaries and reads again only the records that are new or modified
// since the index last saw them, and drops the CVEs the catalog no longer
// has or that no longer name a fix.
func (x *Index) Refresh(ctx context.Context, cat cve.Catalog) (Update, error) {
	var up Update
	changed := map[string]bool{}
	seen := map[string]bool{}
	err := cat.Walk(ctx, "", func(s cve.Summary) error {
		seen[s.CVEID] = true
		x.mu.RLock()
		old := x.cves[s.CVEID]
		x.mu.RUnlock()
		risk := riskOf(s)
		if old != nil && s.ModifiedAt != nil && !s.ModifiedAt.After(old.modified) && s.HasRemediation {
			if !sameRisk(old.risk, risk) {
				risk.Description = old.risk.Description
				x.mu.Lock()
				old.risk = risk
				x.mu.Unlock()
				up.Risks = append(up.Risks, risk)
			}
			return nil
		}
		if old == nil && !s.HasRemediation {
			return nil
		}
		var entries []*entry
		if s.HasRemediation {
			r, err := cat.Record(ctx, s.CVEID)
			if errors.Is(err, errs.ErrNotFound) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("read %s: %w", s.CVEID, err)
			}
			up.Records++
			entries = entriesOf(r)
			if r.Description != nil {
				risk.Description = *r.Description
			}
		}
		x.mu.Lock()
		defer x.mu.Unlock()
		if old != nil {
			for _, k := range old.keys {
				changed[k] = true
			}
			x.remove(s.CVEID, old)
		}
		if len(entries) == 0 {
			return nil
		}
		e := &cveEntry{risk: risk}
		if s.ModifiedAt != nil {
			e.modified = *s.ModifiedAt
		}
		for _, en := range entries {
			for _, k := range productKeys(en.ecosystem, en.product) {
				x.products[k] = append(x.products[k], en)
				e.keys = append(e.keys, k)
				changed[k] = true
			}
		}
		x.cves[s.CVEID] = e
		up.Risks = append(up.Risks, risk)
		return nil
	})
	if err != nil {
		return up, fmt.Errorf("refresh exposure index: %w", err)
	}
	x.mu.Lock()
	for id, old := range x.cves {
		if !seen[id] {
			for _, k := range old.keys {
				changed[k] = true
			}
			x.remove(id, old)
		}
	}
	x.mu.Unlock()
	for k := range changed {
		up.Keys = append(up.Keys, k)
	}
	sort.Strings(up.Keys)
	return up, nil
}

// remove drops a CVE; the caller holds mu.
func (x *Index) remove(id string, e *cveEntry) {
	for _, k := range e.keys {
		list := x.products[k][:0]
		for _, en := range x.products[k] {
			if en.cveID != id {
				list = append(list, en)
			}
		}
		if len(list) == 0 {
			delete(x.products, k)
		} else {
			x.products[k] = list
		}
	}
	delete(x.cves, id)
}

func riskOf(s cve.Summary) Risk {
	r := Risk{CVEID: s.CVEID, KEV: s.IsKEV, EPSS: s.EPSS, CVSS: s.CVSS}
	if s.Severity != nil {
		r.Severity = *s.Severity
	}
	return r
}

func sameRisk(a, b Risk) bool {
	return a.KEV == b.KEV && eqFloat(a.EPSS, b.EPSS) && eqFloat(a.CVSS, b.CVSS) && a.Severity == b.Severity
}

func eqFloat(a, b *float64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// entriesOf returns the products of a record with their atoms parsed.
func entriesOf(r *cve.Record) []*entry {
	var out []*entry
	for _, p := range r.Remediation.Products {
		en := &entry{cveID: r.CVEID, ecosystem: p.Ecosystem, product: p.Product}
		if p.Ecosystem == "Windows" || p.Ecosystem == "Microsoft" {
			_, en.arch = windowsProduct(p.Product)
		}
		for _, a := range p.Atoms {
			at := atom{Atom: a}
			if a.FixedVersion != "" && !a.Unparsed {
				if v, err := version.Parse(p.Ecosystem, a.FixedVersion); err == nil {
					at.fixed, at.parsed = v, true
				}
			}
			if a.AffectedRange != nil {
				at.rng, at.rangeOK = parseRange(p.Ecosystem, *a.AffectedRange)
			}
			if a.EOL != nil {
				if a.EOL.EOLFrom != nil {
					at.eolFrom = *a.EOL.EOLFrom
				}
				if a.EOL.EOESFrom != nil {
					at.eoesFrom = *a.EOL.EOESFrom
				}
			}
			en.atoms = append(en.atoms, at)
		}
		if len(en.atoms) > 0 {
			out = append(out, en)
		}
	}
	return out
}

// parseRange parses an affected range of comparisons joined by commas,
// all of which must hold: "< 2.3.1", ">= 2.4, < 2.12.2". ok is false for
// anything else, or when a version does not parse.
func parseRange(ecosystem, s string) (bounds []bound, ok bool) {
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		var op string
		for _, o := range []string{"<=", ">=", "<", ">", "="} {
			if strings.HasPrefix(part, o) {
				op = o
				break
			}
		}
		if op == "" {
			return nil, false
		}
		v, err := version.Parse(ecosystem, strings.TrimSpace(part[len(op):]))
		if err != nil {
			return nil, false
		}
		bounds = append(bounds, bound{op, v})
	}
	// A range is bounded above, or it would not name a fix.
	for _, b := range bounds {
		if b.op == "<" || b.op == "<=" || b.op == "=" {
			return bounds, true
		}
	}
	return nil, false
}

// contains reports whether v satisfies every bound.
func contains(bounds []bound, v version.Version) (bool, error) {
	for _, b := range bounds {
		c, err := v.Compare(b.v)
		if err != nil {
			return false, err
		}
		var ok bool
		switch b.op {
		case "<":
			ok = c < 0
		case "<=":
			ok = c <= 0
		case ">":
			ok = c > 0
		case ">=":
			ok = c >= 0
		case "=":
			ok = c == 0
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// Key returns the key under which an inventory item of ecosystem named
// name finds the catalog's products: the ecosystem as given, and the name
// folded as the ecosystem's products are named.
//
//   - Windows and Microsoft: case folded, the architecture suffix of
//     MSRC's product names (" for x64-based Systems") left out, so that
//     "Windows 11 Version 23H2" finds "Windows 11 Version 23H2 for
//     x64-based Systems".
//   - Desktop and Vendor: letters and digits only, case folded: "7-Zip"
//     finds "7zip" and "Google Chrome" finds "googlechrome".
//   - Every other ecosystem (distributions, language packages): case
//     folded.
func Key(ecosystem, name string) string {
	switch ecosystem {
	case "Windows", "Microsoft":
		p, _ := windowsProduct(name)
		return ecosystem + "\x00" + strings.ToLower(p)
	case "Desktop", "Vendor":
		return ecosystem + "\x00" + alnum(name)
	}
	return ecosystem + "\x00" + strings.ToLower(name)
}

// productKeys returns the keys of a catalog product: its Key, and for a
// CPE-style "vendor:product" name of the Desktop and Vendor ecosystems
// also the keys of "product" and of "vendor product", as applications
// report their names ("WinRAR" for rarlab:winrar, "Google Chrome" for
// google:chrome).
func productKeys(ecosystem, product string) []string {
	keys := []string{Key(ecosystem, product)}
	if ecosystem == "Desktop" || ecosystem == "Vendor" {
		if vendor, name, ok := strings.Cut(product, ":"); ok && name != "" {
			for _, k := range []string{Key(ecosystem, name), Key(ecosystem, vendor+" "+name)} {
				if !containsString(keys, k) {
					keys = append(keys, k)
				}
			}
		}
	}
	return keys
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func alnum(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// windowsArch maps the architecture suffixes of MSRC product names to the
// architectures agents report.
var windowsArch = []struct{ suffix, arch string }{
	{" for x64-based systems", "x64"},
	{" for arm64-based systems", "arm64"},
	{" for 32-bit systems", "x86"},
	{" for 64-bit systems", "x64"}, // Office and Microsoft 365 Apps
	{" for 32-bit editions", "x86"},
	{" for 64-bit editions", "x64"},
}

// windowsProduct splits an MSRC product name into the product and the
// architecture its suffix names ("" for none).
func windowsProduct(name string) (product, arch string) {
	lower := strings.ToLower(name)
	for _, w := range windowsArch {
		if strings.HasSuffix(lower, w.suffix) {
			return name[:len(name)-len(w.suffix)], w.arch
		}
	}
	return name, ""
}

// normArch maps an agent's architecture to windowsArch's names.
func normArch(a string) string {
	switch strings.ToLower(a) {
	case "x64", "amd64", "x86_64", "x86-64":
		return "x64"
	case "arm64", "aarch64":
		return "arm64"
	case "x86", "386", "i386", "i686", "32-bit":
		return "x86"
	}
	return ""
}
