package exposure

import (
	"sort"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/sbom"
	"github.com/patchline/patchline/internal/version"
)

// Match returns the findings of an inventory, ordered by CVE id, product
// and package, and the product keys the inventory holds (which the store
// keeps, so that a change of the catalog finds the agents it concerns).
//
// An item finds the catalog's products by Key of its ecosystem and its
// name, and also of its source package when it has one (distribution
// trackers name source packages: libsope1 is built from sope). For each
// CVE with atoms for that product, the rule is, in order:
//
//  1. Windows and Microsoft: an installed update (KB) that an atom of the
//     CVE names, for any of the item's products, means the item is fixed.
//  2. An installed version that does not parse under the ecosystem's rules,
//     or none at all (a question about every CVE of a package), is
//     Unknown, never fixed.
//  3. When every atom whose fixed version parses also has an affected
//     range that parses ("< 2.3.1", ">= 2.4, < 2.12.2", ">= 2.13.0,
//     < 2.15.0"), the item is affected exactly when its version lies in
//     one of the ranges, and the fix is the fixed version of that range.
//  4. Otherwise by the fixed versions alone, branch by branch: with f the
//     greatest fixed version at or below the installed version v, the item
//     is fixed when f exists and is on v's branch (all but the last
//     dotted component of the leading release equal: 2.12.2 and 2.12.5 are
//     on branch 2.12) or when no fixed version lies above v; otherwise it
//     is affected and the fix is the least fixed version above v. So with
//     fixes 2.3.1, 2.12.2 and 2.15.0, 2.12.1 is fixed by 2.12.2, 2.12.2
//     is not affected, 2.13.0 is fixed by 2.15.0, and 2.3.2 is not
//     affected.
//  5. When rules 3 and 4 find no fix that applies, the item is affected
//     with no fix when its version lies in the affected range of an atom
//     without fixed version (">= 1.2.0, <= 1.4.7", ">= 1.2.0", "*").
//  6. When rules 3 to 5 find the item not affected but some atoms of the
//     product cannot be compared (a fix known only as a KB, a version that
//     does not parse), the item is Unknown: the unparsed atom could be the
//     one that applies.
func (x *Index) Match(inv device.Inventory) (findings []Finding, keys []string) {
	kbs := map[string]bool{}
	for _, u := range inv.InstalledUpdates {
		kbs[normKB(u.ID)] = true
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	seenKey := map[string]bool{}
	for _, item := range inv.Software {
		for _, name := range itemNames(item) {
			if k := Key(item.Ecosystem, name); !seenKey[k] {
				seenKey[k] = true
				keys = append(keys, k)
			}
		}
		x.judge(item, kbs, func(en entry, f *Finding) bool {
			g := *f
			g.CVEID = x.cveID(en)
			findings = append(findings, g)
			return true
		})
	}
	sort.Strings(keys)
	sort.Slice(findings, func(i, j int) bool {
		a, b := findings[i], findings[j]
		if c := cve.Compare(a.CVEID, b.CVEID); c != 0 {
			return c < 0
		}
		if a.Product != b.Product {
			return a.Product < b.Product
		}
		if a.Package != b.Package {
			return a.Package < b.Package
		}
		return a.Installed < b.Installed
	})
	// One finding per (CVE, package, installed version): architectures of
	// one Windows product give the same answer. An affected finding wins
	// over an unknown one, and a finding without KB takes the KB of one
	// with the same fix.
	out := findings[:0]
	for i, f := range findings {
		if i > 0 {
			p := &out[len(out)-1]
			if p.CVEID == f.CVEID && p.Package == f.Package && p.Installed == f.Installed && p.Ecosystem == f.Ecosystem {
				switch {
				case p.Status == Unknown && f.Status == Affected:
					*p = f
				case p.Status == f.Status && p.Fixed == f.Fixed && p.KB == "" && f.KB != "":
					p.KB = f.KB
				}
				continue
			}
		}
		out = append(out, f)
	}
	return out, keys
}

// CVERef names a CVE of the index and when the catalog last modified its
// record (the zero time when the catalog gives none).
type CVERef struct {
	ID       string
	Modified time.Time
}

// AffectedCVEs returns the CVEs that affect a package, in CVE id order,
// each once: those Match finds Affected, or for a package without version
// every CVE of its product. It answers what Match answers, without the
// findings. With max > 0 it stops at max CVEs; complete is false when it
// stopped there (more may follow).
func (x *Index) AffectedCVEs(p sbom.Package, max int) (cves []CVERef, complete bool) {
	item := device.Software{Name: p.Name, Version: p.Version, Ecosystem: p.Ecosystem}
	x.mu.RLock()
	defer x.mu.RUnlock()
	// The entries of a key are in CVE order (see insert), and an item
	// without source package has one key: the CVEs come sorted, those of
	// a CVE with two products of the key side by side. They grow as they
	// are found: a package at a fixed version is affected by few of its
	// product's CVEs, which may be thousands.
	last := int32(-1)
	complete = true
	x.judge(item, nil, func(en entry, f *Finding) bool {
		if (f.Status == Affected || p.Version == "") && en.slot != last {
			if max > 0 && len(cves) == max {
				complete = false
				return false
			}
			e := &x.cves[en.slot]
			cves = append(cves, CVERef{ID: cve.IDOfKey(e.key), Modified: e.modified.time()})
			last = en.slot
		}
		return true
	})
	return cves, complete
}

// itemNames are the names under which an item finds the catalog's
// products: its own, and its source package's when it has one.
func itemNames(item device.Software) []string {
	if item.Source != "" && !strings.EqualFold(item.Source, item.Name) {
		return []string{item.Name, item.Source}
	}
	return []string{item.Name}
}

// judge applies the rule of Match to one item: it calls found with each
// entry of the item's keys that the item is affected by or may be, in
// order, and the finding (its CVEID not set), until found returns false.
// The caller holds mu.
func (x *Index) judge(item device.Software, kbs map[string]bool, found func(entry, *Finding) bool) {
	names := itemNames(item)
	// entries visits the entries of the item's names, those of both names
	// once, but not those of CVEs dropped from the index. It does not look
	// at an entry's fixes: a product's entries are many (thousands for a
	// distribution's kernel) and share few sets of atoms, which the memo
	// below judges once each.
	entries := func(yield func(entry) bool) {
		var done map[entry]bool
		if len(names) > 1 {
			done = map[entry]bool{}
		}
		for _, name := range names {
			for _, en := range x.products.get(Key(item.Ecosystem, name)) {
				if done != nil {
					if done[en] {
						continue
					}
					done[en] = true
				}
				if x.unswept > 0 && x.cves[en.slot].flags&dropped != 0 {
					continue
				}
				if !yield(en) {
					return
				}
			}
		}
	}
	// On Windows, only the atoms of the item's architecture apply.
	arch := normArch(item.Arch)
	ofArch := func(fixes int32) bool {
		a := x.fixes.arch(fixes)
		return a == "" || arch == "" || arch == a
	}
	// Rule 1 holds for the CVE, whichever of its products names the
	// update: the CNA's product without KB and MSRC's with it are one
	// Windows release.
	var fixedByKB map[int64]bool
	if len(kbs) > 0 {
		fixedByKB = map[int64]bool{}
		for en := range entries {
			if !ofArch(en.fixes) {
				continue
			}
			for _, a := range x.fixes.atomsOf(x.fixes.rows[en.fixes]) {
				if a.kb != "" && kbs[normKB(a.kb)] {
					fixedByKB[x.cves[en.slot].key] = true
				}
			}
		}
	}
	// The item's version, parsed once: every entry of its keys is of its
	// ecosystem. The answer for an entry depends on its atoms only, which
	// the index shares between the CVEs that have the same fixes for the
	// product (a distribution's kernel erratum, a Patch Tuesday): each set
	// of atoms is judged once.
	installed := parseInstalled(item)
	var m memo
	for en := range entries {
		if fixedByKB != nil && fixedByKB[x.cves[en.slot].key] {
			continue
		}
		j := m.find(en.fixes)
		if j == nil {
			var f Finding
			ok := false
			if ofArch(en.fixes) {
				fx := x.fixes.get(en.fixes)
				f, ok = matchEntry(&fx, item, installed)
			}
			j = m.add(judged{fixes: en.fixes, f: f, ok: ok})
		}
		if j.ok && !found(en, &j.f) {
			return
		}
	}
}

// judged is the answer of matchEntry for one item and a set of atoms.
type judged struct {
	fixes int32
	f     Finding
	ok    bool
}

// memoList is the most answers a memo searches in a row before it keeps
// a map of them: most packages have a few sets of atoms.
const memoList = 16

// memo keeps the answers of matchEntry for one item, by set of atoms. The
// ids it searches are kept apart from the answers, in a row, so that a
// search reads one small array.
type memo struct {
	ids     []int32  // the sets of atoms of answers, in the same order
	answers []judged // values: a memo allocates as its arrays grow only
	at      map[int32]int32
}

// find returns the answer for a set of atoms, nil when there is none yet.
func (m *memo) find(fixes int32) *judged {
	if m.at != nil {
		if i, ok := m.at[fixes]; ok {
			return &m.answers[i]
		}
		return nil
	}
	for i, id := range m.ids {
		if id == fixes {
			return &m.answers[i]
		}
	}
	return nil
}

// add keeps an answer and returns it. An answer returned earlier stays
// valid: answers are never changed once kept.
func (m *memo) add(j judged) *judged {
	m.ids = append(m.ids, j.fixes)
	m.answers = append(m.answers, j)
	n := int32(len(m.ids) - 1)
	switch {
	case m.at != nil:
		m.at[j.fixes] = n
	case len(m.ids) > memoList:
		m.at = make(map[int32]int32, 2*memoList)
		for i, id := range m.ids {
			m.at[id] = int32(i)
		}
	}
	return &m.answers[n]
}

func normKB(id string) string {
	id = strings.ToUpper(strings.TrimSpace(id))
	if !strings.HasPrefix(id, "KB") {
		id = "KB" + id
	}
	return id
}

// installed is the version of an inventory item, parsed under the rules
// of its ecosystem.
type installed struct {
	v   version.Version
	err error
}

func parseInstalled(item device.Software) installed {
	v, err := version.Parse(item.Ecosystem, item.Version)
	return installed{v, err}
}

// matchEntry applies the rule of Match to one item, its version parsed,
// and the atoms of one CVE's product, and returns the finding without its CVEID (the
// caller's: the answer is that of every CVE with the same atoms). Match
// has applied rule 1 already.
func matchEntry(en *fixes, item device.Software, in installed) (Finding, bool) {
	f := Finding{Ecosystem: en.ecosystem, Product: en.product, Package: item.Name, Installed: item.Version}
	if item.Version == "" {
		f.Status, f.Reason = Unknown, "no installed version is given"
		return f, true
	}
	v, err := in.v, in.err
	if err != nil {
		f.Status, f.Reason = Unknown, "the installed version does not parse under the "+en.ecosystem+" rules"
		return f, true
	}
	var usable, unfixed []*atom
	incomparable := false
	allRanges := true
	for _, a := range en.atoms {
		if a.fixedVersion == "" {
			// Affected versions without a fix: matched by range only.
			if a.rangeOK {
				unfixed = append(unfixed, a)
			} else {
				incomparable = true
			}
			continue
		}
		if !a.parsed {
			incomparable = true
			continue
		}
		if !v.Comparable(a.fixed) {
			incomparable = true
			continue
		}
		usable = append(usable, a)
		allRanges = allRanges && a.rangeOK
	}
	if len(usable) == 0 && len(unfixed) == 0 {
		f.Status, f.Reason = Unknown, "no fixed version of this product can be compared with the installed one"
		switch a := en.atoms[0]; {
		case a.kb != "":
			f.KB = a.kb
			f.Reason = "the fix is known only as " + a.kb + ", which is not installed"
		case !a.parsed && a.fixedVersion != "":
			// A Click-to-Run release of a month, a vendor's note.
			f.Fixed = a.fixedVersion
			f.Reason = "the fix is known only as “" + a.fixedVersion + "”, which cannot be compared with the installed version"
			if a.sourceURL != "" {
				f.Reason += " (see " + a.sourceURL + ")"
			}
		}
		return f, true
	}
	var fix *atom
	switch {
	case len(usable) == 0:
	case allRanges:
		for i := range usable {
			in, err := contains(usable[i].rng, v)
			if err != nil {
				incomparable = true
				continue
			}
			if in && (fix == nil || less(usable[i].fixed, fix.fixed)) {
				fix = usable[i]
			}
		}
	default:
		fix = byBranch(usable, v)
	}
	if fix == nil {
		for _, a := range unfixed {
			in, err := contains(a.rng, v)
			if err != nil {
				incomparable = true
				continue
			}
			if in {
				f.Status, f.Reason = Affected, "no fix is known for this version"
				return f, true
			}
		}
		if incomparable {
			f.Status, f.Reason = Unknown, "some fixes of this product cannot be compared with the installed version"
			return f, true
		}
		return f, false
	}
	f.Status, f.Fixed, f.KB = Affected, fix.fixedVersion, fix.kb
	f.EOLFrom, f.EOESFrom = fix.eolFrom, fix.eoesFrom
	return f, true
}

// byBranch is rule 4 of Match: the atom whose fix applies to v, nil when
// v is not affected.
func byBranch(atoms []*atom, v version.Version) *atom {
	sort.SliceStable(atoms, func(i, j int) bool { return less(atoms[i].fixed, atoms[j].fixed) })
	var below, above *atom
	for _, a := range atoms {
		c, _ := v.Compare(a.fixed)
		if c >= 0 {
			below = a
		} else if above == nil {
			above = a
		}
	}
	if above == nil {
		return nil
	}
	if below != nil && branch(below.fixed.String()) == branch(v.String()) {
		return nil
	}
	return above
}

func less(a, b version.Version) bool {
	c, err := a.Compare(b)
	return err == nil && c < 0
}

// branch returns the release branch of a version: its leading run of
// digits and dots (after an epoch "N:" and a leading "v"), without the
// last component. "2.12.2" → "2.12", "1:9.2p1-2+deb12u3" → "9", "10.0.22631.4037"
// → "10.0.22631".
func branch(s string) string {
	if i := strings.IndexByte(s, ':'); i >= 0 && i < len(s)-1 {
		if strings.Trim(s[:i], "0123456789") == "" {
			s = s[i+1:]
		}
	}
	s = strings.TrimLeft(s, "vV")
	end := 0
	for end < len(s) && (s[end] == '.' || (s[end] >= '0' && s[end] <= '9')) {
		end++
	}
	rel := strings.TrimRight(s[:end], ".")
	if i := strings.LastIndexByte(rel, '.'); i >= 0 {
		return rel[:i]
	}
	return rel
}
