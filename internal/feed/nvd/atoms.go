package nvd

import (
	"strings"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed/cpe"
)

type atomKey struct{ ecosystem, product, fixed string }

// atoms returns the remediation atoms of a record's configurations: one per
// product and fixed version, in the order NVD lists them.
//
// A vulnerable CPE match with versionEndExcluding X is fixed in X; its
// affected range runs from versionStartIncluding or versionStartExcluding,
// when given, to X. A match bounded by versionEndIncluding names the last
// affected version and no fix, and gives no atom; so does a match on one
// exact version. Matches under a negated node describe what is not
// affected and are passed over.
func atoms(confs []configuration, url string) []cve.ProductAtom {
	var out []cve.ProductAtom
	seen := map[atomKey]bool{}
	var walk func(nodes []node)
	walk = func(nodes []node) {
		for _, n := range nodes {
			if n.Negate {
				continue
			}
			for _, m := range n.CPEMatch {
				if a, ok := matchAtom(m, url); ok {
					k := atomKey{a.Ecosystem, a.Product, a.FixedVersion}
					if !seen[k] {
						seen[k] = true
						out = append(out, a)
					}
				}
			}
			walk(n.Children)
		}
	}
	for _, c := range confs {
		walk(c.Nodes)
	}
	return out
}

// matchAtom returns the atom of one CPE match, if it names a fix.
func matchAtom(m cpeMatch, url string) (cve.ProductAtom, bool) {
	fixed := strings.TrimSpace(m.VersionEndExcluding)
	if !m.Vulnerable || !isVersion(fixed) {
		return cve.ProductAtom{}, false
	}
	name, ok := cpe.Parse(m.Criteria)
	if !ok {
		return cve.ProductAtom{}, false
	}
	rng := "< " + fixed
	if s := strings.TrimSpace(m.VersionStartIncluding); s != "" {
		rng = ">= " + s + ", " + rng
	} else if s := strings.TrimSpace(m.VersionStartExcluding); s != "" {
		rng = "> " + s + ", " + rng
	}
	src := url
	return cve.ProductAtom{
		Ecosystem: cpe.Ecosystem(name.Part, name.Vendor, name.Product),
		Product:   name.Vendor + ":" + name.Product,
		Atom: cve.Atom{
			FixedVersion:  fixed,
			AffectedRange: &rng,
			SourceURL:     &src,
			Source:        atomSource,
			License:       sourceLicense,
		},
	}, true
}

// isVersion reports whether a CPE version bound is a version: not empty,
// not a CPE wildcard, without whitespace.
func isVersion(s string) bool {
	return s != "" && s != "-" && !strings.ContainsAny(s, "*? \t\n")
}
