package feed

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/cve"
)

func TestSortAtoms(t *testing.T) {
	atom := func(eco, product, fixed, kb string) cve.ProductAtom {
		return cve.ProductAtom{Ecosystem: eco, Product: product, Atom: cve.Atom{FixedVersion: fixed, KB: kb}}
	}
	in := []cve.ProductAtom{
		atom("Windows", "Windows 11", "10.0.22621.4037", "KB5041585"),
		atom("Debian:12", "curl", "7.88.1-10+deb12u7", ""),
		atom("Windows", "Windows 10", "10.0.19045.4780", "KB5041580"),
		atom("Debian:12", "curl", "7.88.1-10+deb12u12", ""),
		atom("Windows", "Windows 10", "10.0.19045.4780", "KB5041580"),
		atom("Windows", "Windows 10", "10.0.19045.4780", "KB5041571"),
	}
	want := []cve.ProductAtom{
		// Debian's versions in dpkg order: u7 before u12.
		atom("Debian:12", "curl", "7.88.1-10+deb12u7", ""),
		atom("Debian:12", "curl", "7.88.1-10+deb12u12", ""),
		atom("Windows", "Windows 10", "10.0.19045.4780", "KB5041571"),
		atom("Windows", "Windows 10", "10.0.19045.4780", "KB5041580"),
		atom("Windows", "Windows 11", "10.0.22621.4037", "KB5041585"),
	}
	got := SortAtoms(in, func(a cve.ProductAtom) string { return a.KB })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SortAtoms (-want +got):\n%s", diff)
	}
}
