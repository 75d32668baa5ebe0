package sbom

import (
	"fmt"
	"strings"

	"github.com/google/osv-scalibr/purl"
	"github.com/google/osv-scalibr/purl/ecosystem"
	"github.com/package-url/packageurl-go"

	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/version"
)

// Package is one package to match against the catalog: its OSV ecosystem
// ("PyPI", "Debian:12" ...), its name as that ecosystem writes it and,
// when known, its version.
type Package struct {
	Ecosystem string `json:"ecosystem"`
	Name      string `json:"name"`
	Version   string `json:"version,omitempty"`
	// PURL is the package URL the package was read from, if any.
	PURL string `json:"purl,omitempty"`
}

// purlTypes maps the purl types of language package managers to their OSV
// ecosystem. deb, apk and rpm take a release from the purl's namespace and
// distro qualifier (see FromPURL).
var purlTypes = map[string]string{
	packageurl.TypePyPi:     "PyPI",
	packageurl.TypeNPM:      "npm",
	packageurl.TypeMaven:    "Maven",
	packageurl.TypeGolang:   "Go",
	packageurl.TypeCargo:    "crates.io",
	packageurl.TypeGem:      "RubyGems",
	packageurl.TypeNuget:    "NuGet",
	packageurl.TypeComposer: "Packagist",
	packageurl.TypeHex:      "Hex",
	packageurl.TypePub:      "Pub",
	packageurl.TypeCran:     "CRAN",
	packageurl.TypeHackage:  "Hackage",
	packageurl.TypeConan:    "ConanCenter",
}

// rpmDistros maps the namespace of an rpm purl to its OSV ecosystem.
var rpmDistros = map[string]string{
	"almalinux":  "AlmaLinux",
	"rocky":      "Rocky Linux",
	"rockylinux": "Rocky Linux",
	"redhat":     "Red Hat",
	"opensuse":   "openSUSE",
	"suse":       "SUSE",
	"mageia":     "Mageia",
	"openeuler":  "openEuler",
}

// FromPURL returns the package a package URL names
// ("pkg:pypi/django@4.2.0", "pkg:deb/debian/openssl@3.0.11-1~deb12u2?distro=bookworm").
// It returns an errs.ErrInvalid error naming the purl when it does not
// parse, or when its type names no ecosystem whose versions Patchline
// compares.
func FromPURL(s string) (Package, error) {
	pkg, known, err := fromPURL(s)
	if err == nil && !known {
		p, _ := packageurl.FromString(s)
		err = errs.Invalidf("purl %q: type %q (namespace %q) names no ecosystem Patchline knows", clip(s), p.Type, p.Namespace)
	}
	return pkg, err
}

// fromPURL is FromPURL; known is false for a valid purl whose type
// names no ecosystem.
func fromPURL(s string) (pkg Package, known bool, err error) {
	p, err := packageurl.FromString(s)
	if err != nil {
		return Package{}, false, errs.Invalidf("purl %q: %v", clip(s), err)
	}
	pkg = Package{Name: p.Name, Version: p.Version, PURL: s}
	switch p.Type {
	case packageurl.TypeNPM, packageurl.TypeGolang, packageurl.TypeComposer:
		if p.Namespace != "" {
			pkg.Name = p.Namespace + "/" + p.Name
		}
	case packageurl.TypeMaven:
		if p.Namespace == "" {
			return Package{}, false, errs.Invalidf("purl %q: a maven purl needs a namespace (the group id)", clip(s))
		}
		pkg.Name = p.Namespace + ":" + p.Name
	}
	switch p.Type {
	case packageurl.TypeDebian, packageurl.TypeApk:
		// osv-scalibr knows the releases of Debian, Ubuntu and Alpine
		// by number and by code name.
		sp, err := purl.FromString(s)
		if err != nil {
			return Package{}, false, errs.Invalidf("purl %q: %v", clip(s), err)
		}
		pkg.Ecosystem = ecosystem.FromPURL(&sp).String()
	case packageurl.TypeRPM:
		if eco, ok := rpmDistros[strings.ToLower(p.Namespace)]; ok {
			pkg.Ecosystem = eco
			if rel := release(p.Qualifiers.Map()["distro"]); rel != "" {
				pkg.Ecosystem += ":" + rel
			}
		}
	default:
		pkg.Ecosystem = purlTypes[p.Type]
	}
	if pkg.Ecosystem == "" {
		return Package{}, false, nil
	}
	if pkg.Name == "" {
		return Package{}, false, errs.Invalidf("purl %q: no package name", clip(s))
	}
	return pkg, true, nil
}

// release returns the release number of an rpm distro qualifier:
// "almalinux-9.3" and "el9" give "9".
func release(distro string) string {
	d := distro[strings.LastIndexAny(distro, "-:")+1:]
	d = strings.TrimLeft(d, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
	d, _, _ = strings.Cut(d, ".")
	if d == "" || strings.Trim(d, "0123456789") != "" {
		return ""
	}
	return d
}

// releaseEcosystems are the ecosystems whose catalog products are named per
// release ("Debian:12", "Alpine:v3.19"): a package without its release
// would find nothing, so Check refuses it.
var releaseEcosystems = map[string]string{
	"Debian": "Debian:12", "Ubuntu": "Ubuntu:22.04:LTS", "Alpine": "Alpine:v3.19",
	"AlmaLinux": "AlmaLinux:9", "Rocky Linux": "Rocky Linux:9",
}

// needsRelease returns an example of the ecosystem with a release when
// eco is one of releaseEcosystems without one.
func needsRelease(eco string) (example string, ok bool) {
	example, ok = releaseEcosystems[eco]
	return example, ok
}

// Check returns an errs.ErrInvalid error naming what is wrong with a
// package to match: no name, an ecosystem whose versions Patchline does
// not compare, a version that does not parse under the ecosystem's rules.
// A package without version is valid: it asks for every CVE of the
// package.
func Check(p Package) error {
	switch {
	case strings.TrimSpace(p.Name) == "":
		return errs.Invalidf("package without a name")
	case len(p.Name) > 1024:
		return errs.Invalidf("package name longer than 1024 bytes")
	case !version.Known(p.Ecosystem):
		return errs.Invalidf("package %q: unknown ecosystem %q", clip(p.Name), clip(p.Ecosystem))
	}
	if example, ok := needsRelease(p.Ecosystem); ok {
		return errs.Invalidf("package %q: ecosystem %s needs its release, such as %s (in a purl, a distro qualifier: ?distro=bookworm)",
			clip(p.Name), p.Ecosystem, example)
	}
	if p.Version != "" {
		if _, err := version.Parse(p.Ecosystem, p.Version); err != nil {
			return errs.Invalidf("package %q: version %q does not parse under the %s rules", clip(p.Name), clip(p.Version), p.Ecosystem)
		}
	}
	return nil
}

// clip shortens what a message quotes of a client's input.
func clip(s string) string {
	if len(s) <= 120 {
		return s
	}
	return fmt.Sprintf("%s…", s[:117])
}
