package exposure

import (
	"encoding/binary"
	"hash/maphash"
	"slices"
	"strings"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/version"
)

// pool hands out one copy of each string of the atoms, parsed version,
// parsed range and set of atoms the index holds. It keeps what CVEs removed
// from the index named: that is bounded by the distinct values the catalog
// ever had.
//
// Product names are not pooled: a catalog names about as many products as
// it has sets of atoms (a package of a language ecosystem has a record or
// two), so each set keeps its own. The sets are found by a hash of what
// makes them, checked against the set itself: a map keyed by the bytes
// would cost as much again as the sets.
type pool struct {
	seed     maphash.Seed
	fixes    map[uint64]int32 // ids in Index.fixes, by hashFixes
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

// productsOf returns the ids of the fixes of each product of a record,
// its atoms parsed, giving each new set of atoms its id. The caller holds
// refresh (it alone adds to x.fixes).
func (x *Index) productsOf(r *cve.Record) []int32 {
	p := &x.pool
	var out []int32
	for _, prod := range r.Remediation.Products {
		if len(prod.Atoms) == 0 {
			continue
		}
		atoms := make([]*atom, len(prod.Atoms))
		for i, a := range prod.Atoms {
			atoms[i] = p.atom(prod.Ecosystem, a)
		}
		h := p.hashFixes(prod.Ecosystem, prod.Product, atoms)
		id, ok := p.fixes[h]
		if !ok || !x.fixes.is(id, prod.Ecosystem, prod.Product, atoms) {
			f := fixes{ecosystem: prod.Ecosystem, product: prod.Product, atoms: atoms}
			if f.ecosystem == "Windows" || f.ecosystem == "Microsoft" {
				_, f.arch = windowsProduct(prod.Product)
			}
			var added bool
			if id, added = x.addFixes(f); !added {
				continue
			}
			if p.fixes == nil {
				p.fixes = map[uint64]int32{}
			}
			if !ok {
				// Two sets of the same hash: the first keeps it, the
				// second goes without sharing.
				p.fixes[h] = id
			}
		}
		out = append(out, id)
	}
	return out
}

// hashFixes is the hash of a set of atoms of a product, by which the pool
// finds it.
func (p *pool) hashFixes(ecosystem, product string, atoms []*atom) uint64 {
	var h maphash.Hash
	h.SetSeed(p.seed)
	h.WriteString(ecosystem)
	h.WriteByte(0)
	h.WriteString(product)
	h.WriteByte(0)
	for _, a := range atoms {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], a.id)
		h.Write(b[:])
	}
	return h.Sum64()
}

// advisoriesOf returns the ids of the advisories the atoms of a record
// name, in upper case, each once: not the CVE itself, nor a KB (an
// update), nor a free-form note.
func advisoriesOf(r *cve.Record) []string {
	var out []string
	for _, prod := range r.Remediation.Products {
		for _, a := range prod.Atoms {
			id := strings.ToUpper(strings.TrimSpace(deref(a.AdvisoryID)))
			if id == "" || id == r.CVEID || id == strings.ToUpper(a.KB) || strings.ContainsAny(id, " \t\n") || slices.Contains(out, id) {
				continue
			}
			out = append(out, id)
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
