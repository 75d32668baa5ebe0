package feed

import (
	"slices"
	"strings"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/version"
)

// SortAtoms orders the atoms of one document by ecosystem, product, fixed
// version (under the ecosystem's rules) and then by key, and drops repeated
// ones: those with the same ecosystem, product, fixed version and key.
func SortAtoms(atoms []cve.ProductAtom, key func(cve.ProductAtom) string) []cve.ProductAtom {
	slices.SortStableFunc(atoms, func(a, b cve.ProductAtom) int {
		if c := strings.Compare(a.Ecosystem, b.Ecosystem); c != 0 {
			return c
		}
		if c := strings.Compare(a.Product, b.Product); c != 0 {
			return c
		}
		if c := version.Order(a.Ecosystem, a.FixedVersion, b.FixedVersion); c != 0 {
			return c
		}
		return strings.Compare(key(a), key(b))
	})
	return slices.CompactFunc(atoms, func(a, b cve.ProductAtom) bool {
		return a.Ecosystem == b.Ecosystem && a.Product == b.Product && a.FixedVersion == b.FixedVersion && key(a) == key(b)
	})
}
