package csaf

import (
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/version"
)

// What a product's names say: its ecosystem, KB and advisory ids, the
// bounds of its version ranges, and the name and version of a component
// from its purl or its RPM file name.

// ecosystemOf returns the ecosystem of a vendor's product.
func ecosystemOf(vendor, name string) string {
	v := strings.ToLower(vendor)
	switch {
	case strings.HasPrefix(v, "microsoft"):
		if strings.HasPrefix(name, "Windows") {
			return "Windows"
		}
		return "Microsoft"
	case strings.HasPrefix(v, "apple"):
		return "Apple"
	}
	return "Vendor"
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func joinName(a, b string) string {
	return strings.TrimSpace(strings.TrimSpace(a) + " " + strings.TrimSpace(b))
}

var (
	kbNumber = regexp.MustCompile(`^(?i:KB)?([0-9]{6,8})$`)
	kbInURL  = regexp.MustCompile(`(?i)(?:\bKB|/help/|/kb/)([0-9]{6,8})\b`)
)

// kbOf returns the Microsoft KB article a fix names ("KB5004947"): its
// details as MSRC writes them ("5004947"), or a KB in its URL (a catalog
// search for KB5004947, a support.microsoft.com/help/5004947 page).
func kbOf(fx fix) string {
	if m := kbNumber.FindStringSubmatch(fx.details); m != nil {
		return "KB" + m[1]
	}
	if m := kbInURL.FindStringSubmatch(fx.url); m != nil {
		return "KB" + m[1]
	}
	return ""
}

var urlSegment = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_:.+-]*$`)

// urlID returns the last segment of a URL when it looks like an advisory
// or erratum id rather than a page ("details.aspx", "index.html").
func urlID(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	seg := path.Base(strings.TrimRight(u.Path, "/"))
	if seg, err = url.PathUnescape(seg); err != nil {
		return ""
	}
	if !urlSegment.MatchString(seg) || !strings.ContainsAny(seg, "0123456789") {
		return ""
	}
	switch strings.ToLower(path.Ext(seg)) {
	case ".htm", ".html", ".aspx", ".asp", ".php", ".jsp", ".pdf", ".json", ".xml", ".txt":
		return ""
	}
	return seg
}

// upperBound returns the version a product_version_range of affected
// versions is fixed in: its "<" bound ("<V2.9.2", "< 10.0.17763.6293",
// "vers:intdot/>=2.0|<2.9.2"). A "<=" bound names the last affected
// version, not a fix.
func upperBound(rng string) string {
	return bound(rng, "<", "<=")
}

// lowerBound returns the ">=" bound of a product_version_range of fixed
// versions (">=2.9.2", "vers:intdot/>=2.9.2").
func lowerBound(rng string) string {
	return bound(rng, ">=", "")
}

// bound returns the last version of a range constrained by op (and not by
// notOp, which op is a prefix of).
func bound(rng, op, notOp string) string {
	rng = strings.TrimSpace(rng)
	if rest, ok := strings.CutPrefix(rng, "vers:"); ok {
		_, rng, _ = strings.Cut(rest, "/")
	}
	fields := strings.FieldsFunc(rng, func(r rune) bool { return r == '|' || r == ',' || r == '&' })
	if len(fields) == 1 {
		// "vls" ranges separate constraints by spaces: ">=2.0 <2.9.2".
		fields = splitConstraints(fields[0])
	}
	v := ""
	for _, c := range fields {
		c = strings.TrimSpace(c)
		if strings.HasPrefix(c, op) && (notOp == "" || !strings.HasPrefix(c, notOp)) {
			v = strings.TrimSpace(c[len(op):])
		}
	}
	if strings.ContainsAny(v, " \t") {
		return ""
	}
	return v
}

// splitConstraints splits ">=2.0 <2.9.2" into its constraints, keeping
// "< 2.9.2" whole.
func splitConstraints(s string) []string {
	var out []string
	for _, f := range strings.Fields(s) {
		if len(out) > 0 && strings.Trim(out[len(out)-1], "<>=!") == "" {
			out[len(out)-1] += f
			continue
		}
		out = append(out, f)
	}
	return out
}

func purlOf(f *fullProductName) string {
	if f == nil || f.Helper == nil {
		return ""
	}
	return strings.TrimSpace(f.Helper.PURL)
}

// purlParts returns the name and version of a package URL, with the epoch
// of an RPM: "pkg:rpm/redhat/openssl@3.0.7-24.el9?arch=x86_64&epoch=1"
// is openssl 1:3.0.7-24.el9.
func purlParts(purl string) (name, ver string, ok bool) {
	rest, found := strings.CutPrefix(purl, "pkg:")
	if !found {
		return "", "", false
	}
	rest, _, _ = strings.Cut(rest, "#")
	rest, query, _ := strings.Cut(rest, "?")
	rest, ver, _ = strings.Cut(rest, "@")
	name = path.Base(rest)
	if n, err := url.PathUnescape(name); err == nil {
		name = n
	}
	if v, err := url.PathUnescape(ver); err == nil {
		ver = v
	}
	if q, err := url.ParseQuery(query); err == nil && ver != "" {
		if e := q.Get("epoch"); e != "" && e != "0" {
			ver = e + ":" + ver
		}
	}
	return name, ver, name != "" && name != "."
}

// nevra matches an RPM file name without ".rpm": name-[epoch:]version-release.arch.
var nevra = regexp.MustCompile(`^(.+)-((?:[0-9]+:)?[^-:]+-[^-]+)\.(src|noarch|x86_64|i386|i586|i686|aarch64|ppc64le|ppc64|ppc|s390x|s390|armv7hl|armhfp)$`)

// component returns the package name and version of the component of a
// relationship.
func component(c product) (name, ver string) {
	if name, ver, ok := purlParts(c.purl); ok && ver != "" {
		return name, ver
	}
	for _, s := range []string{c.version, c.name} {
		if m := nevra.FindStringSubmatch(s); m != nil {
			return m[1], m[2]
		}
	}
	return c.name, c.version
}

// sortAtoms orders atoms by ecosystem, product and fixed version and
// merges the atoms of one fix: a fixed product and the vendor fix of the
// affected range it ends give one atom with the range, the KB and the
// remediation's URL.
func sortAtoms(atoms []cve.ProductAtom) []cve.ProductAtom {
	slices.SortStableFunc(atoms, func(a, b cve.ProductAtom) int {
		if c := strings.Compare(a.Ecosystem, b.Ecosystem); c != 0 {
			return c
		}
		if c := strings.Compare(a.Product, b.Product); c != 0 {
			return c
		}
		return version.Order(a.Ecosystem, a.FixedVersion, b.FixedVersion)
	})
	var out []cve.ProductAtom
	for _, a := range atoms {
		n := len(out)
		if n == 0 || out[n-1].Ecosystem != a.Ecosystem || out[n-1].Product != a.Product || out[n-1].FixedVersion != a.FixedVersion {
			out = append(out, a)
			continue
		}
		last := &out[n-1]
		if last.AffectedRange == nil && a.AffectedRange != nil {
			last.AffectedRange = a.AffectedRange
			last.SourceURL = a.SourceURL
		}
		if last.KB == "" && a.KB != "" {
			last.KB, last.AdvisoryID = a.KB, a.AdvisoryID
		}
	}
	return out
}
