// Package version parses and compares the fixed versions of remediation
// atoms under the rules of their ecosystem.
//
// Ecosystem names are OSV's ("Debian:12", "Ubuntu:22.04:LTS", "AlmaLinux:9",
// "Alpine:v3.19", "PyPI", "npm", "Go", "Maven", "crates.io" ...): the part
// before the first ':' names the rules, the rest is the release. OSV
// ecosystems are compared by osv-scalibr's semantic package, which
// implements each ecosystem's native rules (dpkg, rpmvercmp, apk, PEP 440,
// Maven's ComparableVersion, SemVer ...). "Azure Linux" and "Photon OS",
// RPM distributions that package does not list, follow the RPM rules.
//
// Patchline adds ecosystems of its own:
//
//   - Windows and Microsoft: dotted numeric builds with at least two
//     components, such as 10.0.17763.2029 or 16.0.5422.1000. A KB number
//     ("KB5004947", "5004947") names an update, not a comparable version.
//   - Apple: dotted numeric versions such as 17.0.3.
//   - Desktop and Vendor: best effort for third-party applications and
//     vendor products: a dotted numeric version with optional suffixes
//     ("7.2.1", "2.15.0-rc2", "1.1.1w", "9.3p2"), ordered by Maven's rules,
//     which know the usual pre-release qualifiers (alpha, beta, milestone,
//     rc, snapshot) and put other suffixes after the release. Anything
//     else does not parse.
package version

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/google/osv-scalibr/semantic"
)

// Errors returned by Parse and Compare, wrapped with the ecosystem and the
// version at fault.
var (
	// ErrUnknownEcosystem marks an ecosystem whose version rules are not
	// known.
	ErrUnknownEcosystem = errors.New("unknown ecosystem")
	// ErrInvalid marks a version that does not parse under its
	// ecosystem's rules.
	ErrInvalid = errors.New("invalid version")
	// ErrIncomparable marks two versions that follow different rules.
	ErrIncomparable = errors.New("versions of different ecosystems")
)

// maxLen bounds the length of a version: real ones are far shorter, and
// some comparators are quadratic in the number of components.
const maxLen = 256

// Version is a version parsed under the rules of one ecosystem.
type Version struct {
	ecosystem string
	rules     string
	text      string
	v         semantic.Version
}

// String returns the version as it was given.
func (v Version) String() string { return v.text }

// Ecosystem returns the ecosystem the version was parsed for, as given.
func (v Version) Ecosystem() string { return v.ecosystem }

// Compare returns -1, 0 or +1 as v sorts before, equal to or after w. It
// returns an ErrIncomparable error when v and w follow different rules
// (releases of one ecosystem, such as Debian:11 and Debian:12, compare).
func (v Version) Compare(w Version) (int, error) {
	if v.v == nil || w.v == nil {
		return 0, fmt.Errorf("compare %q with %q: %w", v.text, w.text, ErrInvalid)
	}
	if v.rules != w.rules {
		return 0, fmt.Errorf("compare %s %q with %s %q: %w", v.ecosystem, v.text, w.ecosystem, w.text, ErrIncomparable)
	}
	c, err := v.v.Compare(w.v)
	if err != nil {
		return 0, fmt.Errorf("compare %s %q with %q: %w", v.ecosystem, v.text, w.text, err)
	}
	return sign(c), nil
}

// Comparable reports whether v and w are valid versions that follow the
// same rules, which Compare can order without comparing them.
func (v Version) Comparable(w Version) bool {
	return v.v != nil && w.v != nil && v.rules == w.rules
}

// Parse parses s under the rules of ecosystem. It returns an error wrapping
// ErrUnknownEcosystem when the ecosystem's rules are not known and one
// wrapping ErrInvalid when s does not parse under them.
func Parse(ecosystem, s string) (Version, error) {
	rules, _, _ := strings.Cut(ecosystem, ":")
	k, ok := kinds[rules]
	if !ok {
		return Version{}, fmt.Errorf("parse %q: %w %q", s, ErrUnknownEcosystem, ecosystem)
	}
	if !plain(s) {
		return Version{}, fmt.Errorf("parse %s version %q: %w", ecosystem, clip(s), ErrInvalid)
	}
	var (
		v   semantic.Version
		err error
	)
	switch k {
	case kindBuild:
		v, err = parseDotted(s, 2)
	case kindDotted:
		v, err = parseDotted(s, 1)
	case kindLoose:
		if !loose.MatchString(s) {
			err = errors.New("want a dotted numeric version")
		} else {
			v = semantic.ParseMavenVersion(strings.TrimLeft(s, "vV"))
		}
	case kindRPM:
		v, err = parseSemantic(s, "Red Hat", anyDigit)
	case kindSyntax:
		v, err = parseSemantic(s, rules, syntax[rules])
	case kindDigit:
		v, err = parseSemantic(s, rules, anyDigit)
	default:
		v, err = parseSemantic(s, rules, nil)
	}
	if err != nil {
		return Version{}, fmt.Errorf("parse %s version %q: %w: %v", ecosystem, clip(s), ErrInvalid, err)
	}
	return Version{ecosystem: ecosystem, rules: ruleName(rules, k), text: s, v: v}, nil
}

// Compare parses a and b under the rules of ecosystem and returns -1, 0 or
// +1 as a sorts before, equal to or after b. It returns Parse's errors.
func Compare(ecosystem, a, b string) (int, error) {
	va, err := Parse(ecosystem, a)
	if err != nil {
		return 0, err
	}
	vb, err := Parse(ecosystem, b)
	if err != nil {
		return 0, err
	}
	return va.Compare(vb)
}

// Valid reports whether v parses under the rules of ecosystem. It is false
// for an ecosystem whose rules are not known.
func Valid(ecosystem, v string) bool {
	_, err := Parse(ecosystem, v)
	return err == nil
}

// Order is a total order for sorting the fixed versions of one ecosystem:
// versions that parse come first, in the ecosystem's order, then those that
// do not, in byte order. Versions that compare equal under the ecosystem's
// rules but are spelt differently ("1.0" and "1.0.0") are ordered by bytes.
func Order(ecosystem, a, b string) int {
	va, errA := Parse(ecosystem, a)
	vb, errB := Parse(ecosystem, b)
	switch {
	case errA == nil && errB == nil:
		if c, err := va.Compare(vb); err == nil && c != 0 {
			return c
		}
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return strings.Compare(a, b)
}

// kind is a family of version rules.
type kind int

const (
	kindSemantic kind = iota // semantic.Parse checks the syntax
	kindSyntax               // semantic, after a check of the ecosystem's syntax
	kindDigit                // semantic, lenient parser: must hold a digit
	kindRPM                  // rpmvercmp, for RPM distributions semantic does not list
	kindBuild                // dotted numeric, two components or more
	kindDotted               // dotted numeric
	kindLoose                // dotted numeric with suffixes, Maven order
)

// kinds maps the rules part of an ecosystem name to its rules.
var kinds = map[string]kind{
	// Parsers of the semantic package that reject malformed versions.
	"CRAN":    kindSemantic,
	"Debian":  kindSemantic,
	"Hackage": kindSemantic,
	"Ubuntu":  kindSemantic,

	// Ecosystems whose semantic parser accepts more than the ecosystem's
	// own syntax: the version is checked against that syntax first.
	"Alpaquita":                    kindSyntax,
	"Alpine":                       kindSyntax,
	"BellSoft Hardened Containers": kindSyntax,
	"Chainguard":                   kindSyntax,
	"MinimOS":                      kindSyntax,
	"Wolfi":                        kindSyntax,
	"PyPI":                         kindSyntax,
	"crates.io":                    kindSyntax,
	"Go":                           kindSyntax,
	"Hex":                          kindSyntax,
	"Julia":                        kindSyntax,
	"npm":                          kindSyntax,
	"SwiftURL":                     kindSyntax,

	// Lenient parsers of the semantic package for ecosystems with free-form
	// versions: the version must at least hold a digit.
	"AlmaLinux":              kindDigit,
	"Bioconductor":           kindDigit,
	"Bitnami":                kindDigit,
	"ConanCenter":            kindDigit,
	"Docker Hardened Images": kindDigit,
	"GHC":                    kindDigit,
	"Mageia":                 kindDigit,
	"Maven":                  kindDigit,
	"NuGet":                  kindDigit,
	"openEuler":              kindDigit,
	"openSUSE":               kindDigit,
	"Packagist":              kindDigit,
	"Pub":                    kindDigit,
	"Red Hat":                kindDigit,
	"Rocky Linux":            kindDigit,
	"RubyGems":               kindDigit,
	"SUSE":                   kindDigit,

	// RPM distributions the semantic package does not list.
	"Azure Linux": kindRPM,
	"Photon OS":   kindRPM,

	// Patchline's ecosystems.
	"Windows":   kindBuild,
	"Microsoft": kindBuild,
	"Apple":     kindDotted,
	"Desktop":   kindLoose,
	"Vendor":    kindLoose,
}

var (
	// apk is the syntax of Alpine package versions (apk-tools' version.c).
	apk = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*[a-z]?(_(alpha|beta|pre|rc|cvs|svn|git|hg|p)[0-9]*)*(~[0-9a-f]+)?(-r[0-9]+)?$`)
	// pep440 is the version syntax of PEP 440, appendix B.
	pep440 = regexp.MustCompile(`(?i)^v?([0-9]+!)?[0-9]+(\.[0-9]+)*` +
		`([-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?[0-9]*)?` +
		`((-[0-9]+)|([-_.]?(post|rev|r)[-_.]?[0-9]*))?` +
		`([-_.]?dev[-_.]?[0-9]*)?` +
		`(\+[a-z0-9]+([-_.][a-z0-9]+)*)?$`)
	// semverish is SemVer with an optional leading v and any number of
	// numeric components.
	semverish = regexp.MustCompile(`^v?[0-9]+(\.[0-9]+)*([-+][0-9A-Za-z.+-]*)?$`)
	anyDigit  = regexp.MustCompile(`[0-9]`)
	loose     = regexp.MustCompile(`^[vV]?[0-9]+(\.[0-9]+)*([-+._~]?[0-9A-Za-z]+)*$`)
)

// syntax is the version syntax of the kindSyntax ecosystems.
var syntax = map[string]*regexp.Regexp{
	"Alpaquita":                    apk,
	"Alpine":                       apk,
	"BellSoft Hardened Containers": apk,
	"Chainguard":                   apk,
	"MinimOS":                      apk,
	"Wolfi":                        apk,
	"PyPI":                         pep440,
	"crates.io":                    semverish,
	"Go":                           semverish,
	"Hex":                          semverish,
	"Julia":                        semverish,
	"npm":                          semverish,
	"SwiftURL":                     semverish,
}

// ruleName names the rules a version follows, so that versions of
// ecosystems that share rules compare.
func ruleName(rules string, k kind) string {
	switch k {
	case kindRPM:
		return "Red Hat"
	case kindBuild:
		return "build"
	case kindLoose:
		return "loose"
	}
	return rules
}

func parseSemantic(s, rules string, re *regexp.Regexp) (semantic.Version, error) {
	if re != nil && !re.MatchString(s) {
		return nil, errors.New("unexpected characters")
	}
	return semantic.Parse(s, rules)
}

// plain reports whether s could be a version at all: not empty, not too
// long, printable and without spaces.
func plain(s string) bool {
	if s == "" || len(s) > maxLen {
		return false
	}
	for _, r := range s {
		if r == unicode.ReplacementChar || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return strings.ToValidUTF8(s, "�")
}

func sign(c int) int {
	switch {
	case c < 0:
		return -1
	case c > 0:
		return 1
	}
	return 0
}

// dotted is a dotted numeric version: its components without leading
// zeros, so that they compare as decimal numbers of any length.
type dotted []string

func parseDotted(s string, min int) (dotted, error) {
	parts := strings.Split(s, ".")
	if len(parts) < min {
		return nil, fmt.Errorf("want %d dotted numbers or more", min)
	}
	d := make(dotted, len(parts))
	for i, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return nil, errors.New("want dotted numbers")
		}
		p = strings.TrimLeft(p, "0")
		if p == "" {
			p = "0"
		}
		d[i] = p
	}
	return d, nil
}

func (d dotted) component(i int) string {
	if i < len(d) {
		return d[i]
	}
	return "0"
}

func (d dotted) compare(e dotted) int {
	for i := range max(len(d), len(e)) {
		a, b := d.component(i), e.component(i)
		if len(a) != len(b) {
			return sign(len(a) - len(b))
		}
		if c := strings.Compare(a, b); c != 0 {
			return c
		}
	}
	return 0
}

// Compare implements semantic.Version.
func (d dotted) Compare(w semantic.Version) (int, error) {
	e, ok := w.(dotted)
	if !ok {
		return 0, semantic.ErrNotSameEcosystem
	}
	return d.compare(e), nil
}

// CompareStr implements semantic.Version.
func (d dotted) CompareStr(s string) (int, error) {
	e, err := parseDotted(s, 1)
	if err != nil {
		return 0, err
	}
	return d.compare(e), nil
}

// Known reports whether the version rules of ecosystem are known: Parse
// can succeed for it.
func Known(ecosystem string) bool {
	rules, suffix, hasSuffix := strings.Cut(ecosystem, ":")
	_, ok := kinds[rules]
	return ok && (!hasSuffix || suffix != "")
}
