package merge

import (
	"cmp"
	"slices"
	"strings"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/version"
)

// Lifecycles finds the support window of a product release.
type Lifecycles interface {
	// Lifecycle returns the lifecycle of cycle of an endoflife.date product.
	Lifecycle(product, cycle string) (cve.Lifecycle, bool)
}

// LifecycleTable is a Lifecycles held in memory.
type LifecycleTable map[[2]string]cve.Lifecycle

// NewLifecycleTable indexes ls.
func NewLifecycleTable(ls []cve.Lifecycle) LifecycleTable {
	t := LifecycleTable{}
	for _, l := range ls {
		t[[2]string{l.Product, l.Cycle}] = l
	}
	return t
}

// Lifecycle implements Lifecycles.
func (t LifecycleTable) Lifecycle(product, cycle string) (cve.Lifecycle, bool) {
	l, ok := t[[2]string{product, cycle}]
	return l, ok
}

// releaseOf maps an atom's ecosystem to the endoflife.date product and cycle
// of the release it names: Debian:12 → (debian, 12), Ubuntu:22.04:LTS →
// (ubuntu, 22.04), Alpine:v3.19 → (alpine-linux, 3.19), AlmaLinux:9 →
// (almalinux, 9), Red Hat:9 → (rhel, 9).
func releaseOf(ecosystem string) (product, cycle string, ok bool) {
	name, rest, found := strings.Cut(ecosystem, ":")
	if !found || rest == "" {
		return "", "", false
	}
	release, _, _ := strings.Cut(rest, ":")
	switch name {
	case "Debian":
		return "debian", release, true
	case "Ubuntu":
		return "ubuntu", release, true
	case "Alpine":
		return "alpine-linux", strings.TrimPrefix(release, "v"), true
	case "AlmaLinux":
		return "almalinux", release, true
	case "Rocky Linux":
		return "rocky-linux", release, true
	case "Red Hat":
		return "rhel", release, true
	}
	return "", "", false
}

// eolOf returns the eol object of a fix on ecosystem's release, or nil when
// the release is supported (or unknown).
func eolOf(lc Lifecycles, ecosystem string, today string) *cve.EOL {
	if lc == nil {
		return nil
	}
	product, cycle, ok := releaseOf(ecosystem)
	if !ok {
		return nil
	}
	l, ok := lc.Lifecycle(product, cycle)
	if !ok || !ended(l.EOL, today) {
		return nil
	}
	e := &cve.EOL{}
	if isDate(l.EOL) {
		e.EOLFrom = ptr(l.EOL)
	}
	if isDate(l.EOES) {
		e.EOESFrom = ptr(l.EOES)
	}
	return e
}

func isDate(s string) bool { return len(s) == 10 && s[4] == '-' && s[7] == '-' }

// ended reports whether an endoflife.date eol value ("YYYY-MM-DD", "true"
// or "") is in the past on today (YYYY-MM-DD).
func ended(eol, today string) bool {
	if eol == "true" {
		return true
	}
	return isDate(eol) && eol <= today
}

type atomEntry struct {
	product string
	eco     string
	atom    cve.Atom
	auth    int
	// ver is the fixed version parsed under the ecosystem's rules, when
	// it parses (atom.Unparsed is false): parsed once, compared often.
	ver version.Version
}

// atomKey is what makes two atoms of a record the same: the fix, or for
// an atom without one, the affected range.
type atomKey struct {
	eco, product, fixed, source string
	advisory                    string
	hasAdvisory                 bool
	kb                          string
	unfixedRange                string
}

func keyOf(e *atomEntry) atomKey {
	k := atomKey{eco: e.eco, product: e.product, fixed: e.atom.FixedVersion, source: e.atom.Source, kb: e.atom.KB}
	if e.atom.AdvisoryID != nil {
		k.advisory, k.hasAdvisory = *e.atom.AdvisoryID, true
	}
	if !e.atom.HasFix() {
		k.unfixedRange = *e.atom.AffectedRange
	}
	return k
}

// rank places the atoms of a product: fixed versions that parse, then
// those that do not (they cannot be placed in order), then the affected
// ranges without a fix.
func rank(e *atomEntry) int {
	switch {
	case !e.atom.HasFix():
		return 2
	case e.atom.Unparsed:
		return 1
	}
	return 0
}

// orderFixed orders the entries of one ecosystem by fixed version as
// version.Order does, from the versions parsed once.
func orderFixed(a, b *atomEntry) int {
	switch {
	case !a.atom.Unparsed && !b.atom.Unparsed:
		if c, err := a.ver.Compare(b.ver); err == nil && c != 0 {
			return c
		}
	case !a.atom.Unparsed:
		return -1
	case !b.atom.Unparsed:
		return 1
	}
	return strings.Compare(a.atom.FixedVersion, b.atom.FixedVersion)
}

func (m *merger) remediation(facts []cve.Facts, opt Options) {
	today := opt.Now.UTC().Format("2006-01-02")
	var entries []atomEntry
	seen := map[atomKey]bool{}
	annotated, fixed := false, false
	for _, f := range facts {
		for _, pa := range f.Atoms {
			a := pa.Atom
			if strings.TrimSpace(a.FixedVersion) == "" {
				// Affected versions without a fix: kept when they say
				// which versions.
				if a.AffectedRange == nil || strings.TrimSpace(*a.AffectedRange) == "" {
					continue
				}
				a.FixedVersion, a.EOL, a.KB = "", nil, ""
			}
			if pa.Ecosystem == "" || pa.Product == "" {
				continue
			}
			if a.Source == "" {
				a.Source = f.Source.Name
			}
			if a.License == "" {
				a.License = f.Source.License
			}
			if a.EOL == nil && a.HasFix() {
				a.EOL = eolOf(opt.Lifecycles, pa.Ecosystem, today)
				annotated = annotated || a.EOL != nil
			}
			e := atomEntry{product: pa.Product, eco: pa.Ecosystem, atom: a, auth: authority(f.Feed)}
			k := keyOf(&e)
			if seen[k] {
				continue
			}
			seen[k] = true
			if a.HasFix() {
				var err error
				e.ver, err = version.Parse(pa.Ecosystem, a.FixedVersion)
				e.atom.Unparsed = err != nil
				fixed = true
			} else {
				e.atom.Unparsed = false
			}
			entries = append(entries, e)
			m.use(f.Source, "remediation")
		}
	}
	if annotated {
		m.use(eolSource, "end-of-life dates of releases")
	}
	if len(entries) == 0 {
		return
	}
	type group struct {
		eco, product string
		entries      []atomEntry
	}
	var groups []*group
	for _, e := range entries {
		i := slices.IndexFunc(groups, func(g *group) bool { return g.eco == e.eco && g.product == e.product })
		if i < 0 {
			groups = append(groups, &group{eco: e.eco, product: e.product})
			i = len(groups) - 1
		}
		groups[i].entries = append(groups[i].entries, e)
	}
	best := func(g *group) int {
		b := 3
		for _, e := range g.entries {
			b = min(b, e.auth)
		}
		return b
	}
	slices.SortStableFunc(groups, func(a, b *group) int {
		return cmp.Or(cmp.Compare(best(a), best(b)), compareEcosystems(a.eco, b.eco), cmp.Compare(a.product, b.product))
	})
	for _, g := range groups {
		slices.SortStableFunc(g.entries, func(a, b atomEntry) int {
			if c := cmp.Compare(rank(&a), rank(&b)); c != 0 || rank(&a) == 2 {
				return cmp.Or(c, strings.Compare(*a.atom.AffectedRange, *b.atom.AffectedRange), cmp.Compare(a.auth, b.auth))
			}
			return cmp.Or(orderFixed(&a, &b), cmp.Compare(a.auth, b.auth))
		})
		p := cve.Product{Ecosystem: g.eco, Product: g.product}
		for _, e := range g.entries {
			p.Atoms = append(p.Atoms, e.atom)
		}
		m.rec.Remediation.Products = append(m.rec.Remediation.Products, p)
	}
	m.rec.Remediation.Available = fixed
}

// compareEcosystems orders ecosystem names with their releases in numeric
// order: Debian:8 before Debian:10, Ubuntu:20.04:LTS before Ubuntu:22.04:LTS.
func compareEcosystems(a, b string) int {
	for a != "" && b != "" {
		ra, rb := run(a), run(b)
		a, b = a[len(ra):], b[len(rb):]
		if isDigit(ra[0]) && isDigit(rb[0]) {
			na, nb := strings.TrimLeft(ra, "0"), strings.TrimLeft(rb, "0")
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb)); c != 0 {
				return c
			}
			continue
		}
		if c := strings.Compare(ra, rb); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

// run returns the leading run of digits or of other bytes of a non-empty s.
func run(s string) string {
	d := isDigit(s[0])
	i := 1
	for i < len(s) && isDigit(s[i]) == d {
		i++
	}
	return s[:i]
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
