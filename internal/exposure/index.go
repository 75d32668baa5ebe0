package exposure

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/version"
)

// Index holds, for each product of the catalog (an ecosystem and a
// product name, see Key), the CVEs whose remediation names it and their
// atoms, with the fixed versions and affected ranges parsed once. It keeps
// of each atom only what matching needs, and shares what repeats across
// CVEs (names, versions parsed or not, ranges) through its pool: a catalog
// of 300,000 CVEs names a few thousand distinct products and fixes.
type Index struct {
	mu       sync.RWMutex
	products map[string][]entry // by Key
	cves     map[string]*cveEntry
	// bare are the CVEs whose record names no product, with the time the
	// catalog last modified it: read once, and again when modified.
	bare map[string]time.Time
	// advisories are the CVEs whose atoms name an advisory (GHSA,
	// PYSEC, RUSTSEC, GO, DSA, ALSA ...), by the advisory's id in upper
	// case.
	advisories map[string][]*cveEntry
	// built is true once a Refresh has completed.
	built bool
	// wanted is set by Want: a reader other than the agents' evaluation
	// asked for the index.
	wanted atomic.Bool
	// refresh serializes Refresh, the only user of pool.
	refresh sync.Mutex
	pool    pool
}

// cveEntry is what the index knows of one CVE.
type cveEntry struct {
	modified   time.Time
	risk       Risk
	products   []*fixes
	advisories []string // the ids of advisories its atoms name
}

// keys returns the product keys of e's entries.
func (e *cveEntry) keys() []string {
	var keys []string
	for _, f := range e.products {
		keys = append(keys, productKeys(f.ecosystem, f.product)...)
	}
	return keys
}

// entry is one product of one CVE. It holds the CVE's id beside the
// pointer: a query reads the ids of a product's entries in a row, without
// a visit to each CVE.
type entry struct {
	cve *cveEntry
	*fixes
	id string
}

func (en entry) cveID() string { return en.id }

// fixes are the atoms of a product, which the entries of every CVE with
// the same atoms for the product share.
type fixes struct {
	ecosystem string
	product   string
	arch      string // Windows: the architecture the product names, "" for any
	atoms     []*atom
}

// atom is what matching needs of a remediation atom, its versions parsed.
// The pool hands out one atom for equal ones: the fix of a Patch Tuesday
// is the same atom in the entries of every CVE it fixes.
type atom struct {
	id           uint32 // in the pool
	fixedVersion string // as the catalog gives it
	kb           string
	sourceURL    string // of a fixed version that does not parse only
	fixed        version.Version
	parsed       bool // fixed parsed
	rng          []bound
	rangeOK      bool // the affected range parsed
	eolFrom      string
	eoesFrom     string
}

// bound is one comparison of an affected range: "< 2.12.2", ">= 2.4".
type bound struct {
	op string
	v  version.Version
}

// pool hands out one copy of each string, parsed version and parsed
// range the index holds. It keeps what CVEs removed from the index named:
// that is bounded by the distinct values the catalog ever had.
type pool struct {
	fixes    map[string]*fixes // by ecosystem, product and atom ids
	atoms    map[atomKey]*atom
	strs     map[string]string
	versions map[string]parsedVersion // by ecosystem, NUL, version
	ranges   map[string]parsedRange   // by ecosystem, NUL, range
}

// atomKey is what makes an atom.
type atomKey struct {
	ecosystem, fixedVersion, kb, sourceURL, affectedRange, eolFrom, eoesFrom string
	unparsed                                                                 bool
}

type parsedVersion struct {
	v  version.Version
	ok bool
}

type parsedRange struct {
	bounds []bound
	ok     bool
}

// str returns the pool's copy of s.
func (p *pool) str(s string) string {
	if s == "" {
		return ""
	}
	if v, ok := p.strs[s]; ok {
		return v
	}
	if p.strs == nil {
		p.strs = map[string]string{}
	}
	p.strs[s] = s
	return s
}

// version returns s parsed under the rules of ecosystem, ok false when it
// does not parse.
func (p *pool) version(ecosystem, s string) (version.Version, bool) {
	k := ecosystem + "\x00" + s
	if pv, found := p.versions[k]; found {
		return pv.v, pv.ok
	}
	v, err := version.Parse(p.str(ecosystem), p.str(s))
	if p.versions == nil {
		p.versions = map[string]parsedVersion{}
	}
	p.versions[k] = parsedVersion{v, err == nil}
	return v, err == nil
}

// rangeOf returns parseRange of ecosystem and s.
func (p *pool) rangeOf(ecosystem, s string) ([]bound, bool) {
	k := ecosystem + "\x00" + s
	if pr, found := p.ranges[k]; found {
		return pr.bounds, pr.ok
	}
	bounds, ok := parseRange(p, ecosystem, s)
	if p.ranges == nil {
		p.ranges = map[string]parsedRange{}
	}
	p.ranges[k] = parsedRange{bounds, ok}
	return bounds, ok
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{products: map[string][]entry{}, cves: map[string]*cveEntry{}, bare: map[string]time.Time{},
		advisories: map[string][]*cveEntry{}}
}

// Built reports whether the index has been refreshed from the catalog at
// least once: before that it knows no CVE.
func (x *Index) Built() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.built
}

// Want records that a reader needs the index (a package query before the
// first build), so that a Service waiting for agents builds it now.
func (x *Index) Want() { x.wanted.Store(true) }

// Wanted reports whether Want was called.
func (x *Index) Wanted() bool { return x.wanted.Load() }

// CVE returns what the index knows of a CVE: its risk and the time the
// catalog last modified its record. ok is false for a CVE the index does
// not hold (unknown to the catalog, or naming no product).
func (x *Index) CVE(id string) (risk Risk, modified time.Time, ok bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e, ok := x.cves[id]
	if !ok {
		return Risk{}, time.Time{}, false
	}
	return e.risk, e.modified, true
}

// Advisory returns the CVEs whose fixes an advisory gives (its id in any
// case: GHSA-…, PYSEC-…, RUSTSEC-…, GO-…, DSA-…, ALSA-…), in CVE id order,
// none for an advisory the index does not know.
func (x *Index) Advisory(id string) []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []string
	for _, e := range x.advisories[strings.ToUpper(strings.TrimSpace(id))] {
		out = append(out, e.risk.CVEID)
	}
	slices.SortFunc(out, cve.Compare)
	return out
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
// has or that no longer name a product. A record without a fix
// (hasRemediation false) is read too: it may name versions affected with
// no fix known.
func (x *Index) Refresh(ctx context.Context, cat cve.Catalog) (Update, error) {
	x.refresh.Lock()
	defer x.refresh.Unlock()
	var up Update
	changed := map[string]bool{}
	seen := map[string]bool{}
	inserted := false
	err := cat.Walk(ctx, "", func(s cve.Summary) error {
		seen[s.CVEID] = true
		x.mu.RLock()
		old := x.cves[s.CVEID]
		x.mu.RUnlock()
		risk := riskOf(s)
		seenBefore := func(modified time.Time) bool { return s.ModifiedAt != nil && !s.ModifiedAt.After(modified) }
		if old == nil {
			x.mu.RLock()
			modified, bare := x.bare[s.CVEID]
			x.mu.RUnlock()
			if bare && seenBefore(modified) {
				return nil
			}
		}
		if old != nil && seenBefore(old.modified) {
			if !sameRisk(old.risk, risk) {
				risk.Description = old.risk.Description
				x.mu.Lock()
				old.risk = risk
				x.mu.Unlock()
				up.Risks = append(up.Risks, risk)
			}
			return nil
		}
		r, err := cat.Record(ctx, s.CVEID)
		if errors.Is(err, errs.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", s.CVEID, err)
		}
		up.Records++
		products := x.pool.productsOf(r)
		advisories := x.pool.advisoriesOf(r)
		if r.Description != nil {
			risk.Description = *r.Description
		}
		var modified time.Time
		if s.ModifiedAt != nil {
			modified = *s.ModifiedAt
		}
		x.mu.Lock()
		defer x.mu.Unlock()
		if old != nil {
			for _, k := range old.keys() {
				changed[k] = true
			}
			x.remove(old)
		}
		if len(products) == 0 {
			x.bare[s.CVEID] = modified
			return nil
		}
		delete(x.bare, s.CVEID)
		e := &cveEntry{risk: risk, products: products, advisories: advisories, modified: modified}
		for _, k := range x.insert(e) {
			changed[k] = true
		}
		inserted = true
		up.Risks = append(up.Risks, risk)
		return nil
	})
	if err != nil {
		return up, fmt.Errorf("refresh exposure index: %w", err)
	}
	x.mu.Lock()
	for id := range x.bare {
		if !seen[id] {
			delete(x.bare, id)
		}
	}
	for id, old := range x.cves {
		if !seen[id] {
			for _, k := range old.keys() {
				changed[k] = true
			}
			x.remove(old)
		}
	}
	if inserted {
		x.compact()
	}
	x.built = true
	x.mu.Unlock()
	for k := range changed {
		up.Keys = append(up.Keys, k)
	}
	sort.Strings(up.Keys)
	return up, nil
}

// insert adds a CVE under the keys of its products, each list of entries
// kept in CVE order, and returns those keys; the caller holds mu.
func (x *Index) insert(e *cveEntry) []string {
	keys := e.keys()
	i := 0
	for _, f := range e.products {
		for range productKeys(f.ecosystem, f.product) {
			k := x.pool.str(keys[i])
			list, en := x.products[k], entry{cve: e, fixes: f, id: e.risk.CVEID}
			// A build walks the catalog in CVE order: the new entry goes
			// last, but for a CVE added or changed since.
			at := len(list)
			if at > 0 && cve.Compare(list[at-1].cveID(), en.cveID()) > 0 {
				at, _ = slices.BinarySearchFunc(list, en, func(a, b entry) int { return cve.Compare(a.cveID(), b.cveID()) })
			}
			x.products[k] = slices.Insert(list, at, en)
			i++
		}
	}
	x.cves[e.risk.CVEID] = e
	for _, a := range e.advisories {
		x.advisories[a] = append(x.advisories[a], e)
	}
	return keys
}

// remove drops a CVE; the caller holds mu.
func (x *Index) remove(e *cveEntry) {
	for _, k := range e.keys() {
		list := x.products[k][:0]
		for _, en := range x.products[k] {
			if en.cve != e {
				list = append(list, en)
			}
		}
		if len(list) == 0 {
			delete(x.products, k)
		} else {
			x.products[k] = list
		}
	}
	delete(x.cves, e.risk.CVEID)
	for _, a := range e.advisories {
		list := slices.DeleteFunc(x.advisories[a], func(o *cveEntry) bool { return o == e })
		if len(list) == 0 {
			delete(x.advisories, a)
		} else {
			x.advisories[a] = list
		}
	}
}

// compact gives back the room that appends left at the end of the
// products' lists; the caller holds mu.
func (x *Index) compact() {
	for k, list := range x.products {
		if cap(list) > len(list)+len(list)/4 {
			x.products[k] = slices.Clone(list)
		}
	}
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

// productsOf returns the products of a record with their atoms parsed.
func (p *pool) productsOf(r *cve.Record) []*fixes {
	var out []*fixes
	for _, prod := range r.Remediation.Products {
		if len(prod.Atoms) == 0 {
			continue
		}
		atoms := make([]*atom, len(prod.Atoms))
		key := make([]byte, 0, len(prod.Ecosystem)+len(prod.Product)+2+4*len(atoms))
		key = append(append(append(append(key, prod.Ecosystem...), 0), prod.Product...), 0)
		for i, a := range prod.Atoms {
			atoms[i] = p.atom(prod.Ecosystem, a)
			key = binary.LittleEndian.AppendUint32(key, atoms[i].id)
		}
		f, ok := p.fixes[string(key)]
		if !ok {
			f = &fixes{ecosystem: p.str(prod.Ecosystem), product: p.str(prod.Product), atoms: atoms}
			if f.ecosystem == "Windows" || f.ecosystem == "Microsoft" {
				_, f.arch = windowsProduct(prod.Product)
			}
			if p.fixes == nil {
				p.fixes = map[string]*fixes{}
			}
			p.fixes[string(key)] = f
		}
		out = append(out, f)
	}
	return out
}

// advisoriesOf returns the ids of the advisories the atoms of a record
// name, in upper case, each once: not the CVE itself, nor a KB (an
// update), nor a free-form note.
func (p *pool) advisoriesOf(r *cve.Record) []string {
	var out []string
	for _, prod := range r.Remediation.Products {
		for _, a := range prod.Atoms {
			id := strings.ToUpper(strings.TrimSpace(deref(a.AdvisoryID)))
			if id == "" || id == r.CVEID || id == strings.ToUpper(a.KB) || strings.ContainsAny(id, " \t\n") || slices.Contains(out, id) {
				continue
			}
			out = append(out, p.str(id))
		}
	}
	return slices.Clip(out)
}

// atom returns the pool's atom for a of a product of ecosystem.
func (p *pool) atom(ecosystem string, a cve.Atom) *atom {
	k := atomKey{ecosystem: ecosystem, fixedVersion: a.FixedVersion, kb: a.KB, affectedRange: deref(a.AffectedRange), unparsed: a.Unparsed}
	if a.EOL != nil {
		k.eolFrom, k.eoesFrom = deref(a.EOL.EOLFrom), deref(a.EOL.EOESFrom)
	}
	if at, ok := p.atoms[k]; ok {
		return at
	}
	at := &atom{fixedVersion: p.str(k.fixedVersion), kb: p.str(k.kb), eolFrom: p.str(k.eolFrom), eoesFrom: p.str(k.eoesFrom)}
	if k.fixedVersion != "" && !k.unparsed {
		at.fixed, at.parsed = p.version(ecosystem, k.fixedVersion)
	}
	if a.AffectedRange != nil {
		at.rng, at.rangeOK = p.rangeOf(ecosystem, k.affectedRange)
		// The range of a fix is bounded above, or it would not end at
		// the fix.
		at.rangeOK = at.rangeOK && (k.fixedVersion == "" || slices.ContainsFunc(at.rng, func(b bound) bool {
			return b.op == "<" || b.op == "<=" || b.op == "="
		}))
	}
	if !at.parsed && k.fixedVersion != "" {
		// The one use of the URL: naming where an unparsed fix is told.
		k.sourceURL = deref(a.SourceURL)
		if at2, ok := p.atoms[k]; ok {
			return at2
		}
		at.sourceURL = p.str(k.sourceURL)
	}
	if p.atoms == nil {
		p.atoms = map[atomKey]*atom{}
	}
	at.id = uint32(len(p.atoms))
	p.atoms[k] = at
	return at
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// parseRange parses an affected range of comparisons joined by commas,
// all of which must hold: "< 2.3.1", ">= 2.4, < 2.12.2", ">= 1.2.0", or
// "*" for every version (no bounds). ok is false for anything else, or
// when a version does not parse. Its versions come from p.
func parseRange(p *pool, ecosystem, s string) (bounds []bound, ok bool) {
	if strings.TrimSpace(s) == "*" {
		return nil, true
	}
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
		v, ok := p.version(ecosystem, strings.TrimSpace(part[len(op):]))
		if !ok {
			return nil, false
		}
		bounds = append(bounds, bound{op, v})
	}
	return slices.Clip(bounds), true
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
