package cvelist

import (
	"regexp"
	"strings"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed/cpe"
)

// affected is one element of a container's affected list: a product and
// what the container says about its versions.
type affected struct {
	Vendor        string    `json:"vendor"`
	Product       string    `json:"product"`
	PackageName   string    `json:"packageName"`
	CPEs          []string  `json:"cpes"`
	DefaultStatus string    `json:"defaultStatus"`
	Versions      []version `json:"versions"`
}

// version is one element of versions: a single version, or a range from
// Version up to LessThan or LessThanOrEqual, with an optional list of status
// changes within the range.
type version struct {
	Version         string   `json:"version"`
	Status          string   `json:"status"`
	LessThan        string   `json:"lessThan"`
	LessThanOrEqual string   `json:"lessThanOrEqual"`
	Changes         []change `json:"changes"`
}

type change struct {
	At     string `json:"at"`
	Status string `json:"status"`
}

const (
	statusAffected   = "affected"
	statusUnaffected = "unaffected"
)

// recordAtoms returns the remediation atoms of a published record.
//
// Atoms come from the CNA's affected list. When that names no fixed version
// at all, the ADP containers' affected lists are read instead: CISA-ADP adds
// CPE-based entries with lessThan bounds to records whose CNA gave none (or
// gave only lessThanOrEqual bounds), and those are the only fixed versions
// the record knows.
func recordAtoms(rec *record, id, cnaName string) []cve.ProductAtom {
	b := atomBuilder{url: recordURL + id}
	cna := &rec.Containers.CNA
	source := "CVE List (CNA)"
	if cnaName != "" {
		source = "CVE List (CNA: " + cnaName + ")"
	}
	advisories := repoAdvisories(cna.References)
	for _, a := range cna.Affected {
		if p, ok := cnaProduct(a); ok {
			b.add(a, p, source, advisories.pick(a.Product, a.PackageName))
		}
	}
	if len(b.atoms) > 0 {
		return b.atoms
	}
	for _, adp := range rec.Containers.ADP {
		source := "CVE List (ADP)"
		if n := adp.ProviderMetadata.ShortName; n != "" {
			source = "CVE List (ADP: " + n + ")"
		}
		for _, a := range adp.Affected {
			if p, ok := adpProduct(a); ok {
				b.add(a, p, source, "")
			}
		}
	}
	return b.atoms
}

// product is where the atoms of an affected entry belong.
type product struct {
	ecosystem string
	name      string
}

type atomKey struct{ ecosystem, product, fixed string }

// atomBuilder collects atoms in order, one per product and fixed version.
type atomBuilder struct {
	url   string
	atoms []cve.ProductAtom
	seen  map[atomKey]bool
}

func (b *atomBuilder) add(a affected, p product, source, advisory string) {
	for _, fx := range fixesOf(a) {
		k := atomKey{p.ecosystem, p.name, fx.fixed}
		if b.seen[k] {
			continue
		}
		if b.seen == nil {
			b.seen = map[atomKey]bool{}
		}
		b.seen[k] = true
		url := b.url
		atom := cve.Atom{
			FixedVersion: fx.fixed,
			SourceURL:    &url,
			Source:       source,
			License:      sourceLicense,
		}
		if fx.affected != "" {
			rng := fx.affected
			atom.AffectedRange = &rng
		}
		if advisory != "" {
			adv := advisory
			atom.AdvisoryID = &adv
		}
		b.atoms = append(b.atoms, cve.ProductAtom{Ecosystem: p.ecosystem, Product: p.name, Atom: atom})
	}
}

// fix is a fixed version and the affected range it ends, as text.
type fix struct {
	fixed    string
	affected string
}

// fixesOf returns the fixed versions an affected entry names:
//
//   - an affected range with a lessThan bound X is fixed in X;
//   - within a range, a change to "unaffected" at V is fixed in V (Log4j's
//     2.3.1, 2.12.2 and 2.15.0 are three such changes in one range);
//   - an affected range with only a lessThanOrEqual bound names the last
//     affected version, not a fix, and gives nothing;
//   - an unaffected version V that is open upwards (no bound, "*" or a
//     series wildcard such as "5.15.*") is a fix when versions below it
//     are affected: by defaultStatus "affected" (Linux, Red Hat) or by an
//     affected entry that starts below V (libdwarf's 0.1.0 and 0.9.2). An
//     unaffected version with nothing affected below it is a release line
//     the CVE never touched (PAN-OS 9.0.0 beside an affected 10.2.0);
//   - an affected "version" written as a range, as the GitHub CNA does
//     (">= 2.3.0, < 2.31.0"), is fixed at its "<" bound.
//
// Bounds that are not versions a patch tool can install give nothing:
// placeholders ("unspecified", "n/a", "*", "0"), text with wildcards
// ("log4j-core*") and git commit hashes.
func fixesOf(a affected) []fix {
	var starts []string // lower bounds of the affected entries
	for _, v := range a.Versions {
		if strings.EqualFold(v.Status, statusAffected) {
			if s := lowerBound(v.Version); s != "" {
				starts = append(starts, s)
			}
		}
	}
	defaultAffected := strings.EqualFold(strings.TrimSpace(a.DefaultStatus), statusAffected)
	var out []fix
	for _, v := range a.Versions {
		status := strings.ToLower(strings.TrimSpace(v.Status))
		switch {
		case len(v.Changes) > 0:
			out = append(out, changeFixes(v, status)...)
		case status == statusAffected:
			out = append(out, rangeFixes(v)...)
		case status == statusUnaffected:
			if fx, ok := unaffectedFix(v, defaultAffected, starts); ok {
				out = append(out, fx)
			}
		}
	}
	return out
}

// rangeFixes returns the fixes of an affected entry without changes.
func rangeFixes(v version) []fix {
	lt := strings.TrimSpace(v.LessThan)
	if lt == "" {
		if strings.TrimSpace(v.LessThanOrEqual) != "" {
			return nil
		}
		if fx, ok := textRangeFix(v.Version); ok {
			return []fix{fx}
		}
		return nil
	}
	start := lowerBound(v.Version)
	if start == lt {
		// "version X, lessThan X" is how some CNAs (curl, Chrome) write
		// "everything before X".
		start = ""
	}
	return boundFixes(start, lt)
}

// boundFixes returns the fixes of a lessThan bound. A bound may list one
// fixed version per release line ("9.8P19, 9.9.1P16, 9.13.1"): each is a
// fix, and the affected range is the CNA's text.
func boundFixes(start, lt string) []fix {
	if !strings.Contains(lt, ",") {
		if !isVersion(lt) {
			return nil
		}
		return []fix{{fixed: lt, affected: rangeText(start, lt)}}
	}
	var parts []string
	for p := range strings.SplitSeq(lt, ",") {
		if p = strings.TrimSpace(p); p != "" {
			parts = append(parts, p)
		}
	}
	rng := rangeText(start, strings.Join(parts, ", "))
	var out []fix
	for _, p := range parts {
		if isVersion(p) {
			out = append(out, fix{fixed: p, affected: rng})
		}
	}
	return out
}

// changeFixes walks the status changes of a range: every change from
// affected to unaffected is a fix, and the range's lessThan bound is one
// too when the range is still affected after the last change.
func changeFixes(v version, status string) []fix {
	var out []fix
	affectedNow := status == statusAffected
	start := lowerBound(v.Version)
	for _, c := range v.Changes {
		at := strings.TrimSpace(c.At)
		switch strings.ToLower(strings.TrimSpace(c.Status)) {
		case statusUnaffected:
			if affectedNow && isVersion(at) {
				out = append(out, fix{fixed: at, affected: rangeText(start, at)})
			}
			affectedNow = false
		case statusAffected:
			if !affectedNow {
				start = lowerBound(at)
			}
			affectedNow = true
		}
	}
	if affectedNow {
		if lt := strings.TrimSpace(v.LessThan); lt != "" && lt != start {
			out = append(out, boundFixes(start, lt)...)
		}
	}
	return out
}

// unaffectedFix reports whether an unaffected entry names a fixed version.
func unaffectedFix(v version, defaultAffected bool, starts []string) (fix, bool) {
	fixed := strings.TrimSpace(v.Version)
	if !isVersion(fixed) {
		return fix{}, false
	}
	bound := strings.TrimSpace(v.LessThan)
	if bound == "" {
		bound = strings.TrimSpace(v.LessThanOrEqual)
	}
	series := ""
	switch {
	case bound == "" || bound == "*":
	case strings.HasSuffix(bound, ".*") && isVersion(strings.TrimSuffix(bound, ".*")):
		series = strings.TrimSuffix(bound, ".*")
	default:
		// Unaffected up to a bound: versions the CVE never reached.
		return fix{}, false
	}
	lowest := ""
	for _, s := range starts {
		if compareVersions(s, fixed) < 0 && (lowest == "" || compareVersions(s, lowest) < 0) {
			lowest = s
		}
	}
	switch {
	case series != "" && compareVersions(series, fixed) <= 0:
		return fix{fixed: fixed, affected: rangeText(series, fixed)}, defaultAffected || lowest != ""
	case defaultAffected:
		return fix{fixed: fixed, affected: rangeText("", fixed)}, true
	case lowest != "":
		return fix{fixed: fixed, affected: rangeText(lowest, fixed)}, true
	}
	return fix{}, false
}

// textRangeFix reads a range written in the version field, such as
// ">= 2.0.0, < 2.0.7" or "< 1.26.18": its "<" bound is the fix.
func textRangeFix(s string) (fix, bool) {
	s = strings.TrimSpace(s)
	if s == "" || !strings.ContainsAny(s[:1], "<>=") {
		return fix{}, false
	}
	var parts []string
	fixed := ""
	for p := range strings.SplitSeq(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		i := 0
		for i < len(p) && strings.IndexByte("<>=!", p[i]) >= 0 {
			i++
		}
		op, val := p[:i], strings.TrimSpace(p[i:])
		switch op {
		case "<":
			if !isVersion(val) {
				return fix{}, false
			}
			fixed = val
		case "<=", ">=", ">", "=", "==":
		default:
			return fix{}, false
		}
		parts = append(parts, op+" "+val)
	}
	if fixed == "" {
		return fix{}, false
	}
	return fix{fixed: fixed, affected: strings.Join(parts, ", ")}, true
}

// rangeText is the readable affected range from start (inclusive, "" for
// unbounded) to fixed (exclusive).
func rangeText(start, fixed string) string {
	if start == "" {
		return "< " + fixed
	}
	return ">= " + start + ", < " + fixed
}

// lowerBound returns the start of a range, or "" when it is unbounded
// ("0", "unspecified", "n/a") or not a version.
func lowerBound(s string) string {
	s = strings.TrimSpace(s)
	if !isVersion(s) {
		return ""
	}
	return s
}

// placeholders are the words CNAs write where they know no version.
var placeholders = map[string]bool{
	"": true, "0": true, "*": true, "-": true, "n/a": true, "na": true, "none": true,
	"all": true, "unknown": true, "unspecified": true, "various": true, "latest": true,
}

// isVersion reports whether s names a version a patch tool could install:
// it contains a digit, no wildcard, no whitespace or list separator, no
// comparison operator, and it is neither a placeholder nor a git commit
// hash.
func isVersion(s string) bool {
	if placeholders[strings.ToLower(s)] || len(s) > 128 || isCommitHash(s) {
		return false
	}
	if strings.ContainsAny(s, "*, \t\n<>=") {
		return false
	}
	return strings.ContainsAny(s, "0123456789")
}

var hashRE = regexp.MustCompile(`^[0-9a-fA-F]{7,64}$`)

// isCommitHash reports whether s looks like a git commit id: a full 40 or
// 64 hex digit hash, or an abbreviated one that has a letter (so that a
// plain number is still a version).
func isCommitHash(s string) bool {
	if !hashRE.MatchString(s) {
		return false
	}
	return len(s) == 40 || len(s) == 64 || strings.ContainsAny(strings.ToLower(s), "abcdef")
}

// compareVersions orders two version strings by their runs of digits
// (numerically) and of other characters (as text). It only decides which of
// two versions of one product comes first, for the unaffected rule above.
func compareVersions(a, b string) int {
	for a != "" && b != "" {
		var ra, rb string
		ra, a = nextRun(a)
		rb, b = nextRun(b)
		da, db := isDigit(ra[0]), isDigit(rb[0])
		switch {
		case da && db:
			ra, rb = strings.TrimLeft(ra, "0"), strings.TrimLeft(rb, "0")
			if len(ra) != len(rb) {
				return cmpInt(len(ra), len(rb))
			}
			if c := strings.Compare(ra, rb); c != 0 {
				return c
			}
		case da:
			return 1
		case db:
			return -1
		default:
			if c := strings.Compare(ra, rb); c != 0 {
				return c
			}
		}
	}
	return cmpInt(len(a), len(b))
}

func nextRun(s string) (run, rest string) {
	d := isDigit(s[0])
	i := 1
	for i < len(s) && isDigit(s[i]) == d {
		i++
	}
	return s[:i], s[i:]
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cnaProduct names the product of a CNA affected entry and its ecosystem.
//
// The name is the CNA's product, with the package name in parentheses when
// the product does not already contain it ("Red Hat Enterprise Linux 9
// (openssh)"), or the package name alone when the CNA gave no product. It is
// prefixed with the vendor (less a leading "The") when the name does not
// already carry the vendor's first word: "Palo Alto Networks PAN-OS", "IBM Security Verify
// Privilege", but "Apache Log4j2" for the Apache Software Foundation and
// "CPython" for the Python Software Foundation. Apple and Windows products
// are named as the vendor names them ("macOS", "Windows Server 2022"): the
// ecosystem already says whose they are.
func cnaProduct(a affected) (product, bool) {
	vendor := clean(a.Vendor)
	name := clean(a.Product)
	pkg := clean(a.PackageName)
	if name == "" {
		name, pkg = pkg, ""
	}
	if name == "" {
		return product{}, false
	}
	if pkg != "" && !containsFold(name, pkg) {
		name += " (" + pkg + ")"
	}
	eco := cpe.Ecosystem("", vendor, name)
	if eco != cpe.Apple && eco != cpe.Windows && vendor != "" {
		if w := firstWord(vendor); w != "" && !containsFold(name, w) {
			name = trimThe(vendor) + " " + name
		}
	}
	return product{ecosystem: eco, name: name}, true
}

// adpProduct names the product of an ADP affected entry. CISA-ADP entries
// are built from CPEs: they are named "vendor:product" from the CPE, as the
// NVD names them, so that both sources' atoms land on one product.
func adpProduct(a affected) (product, bool) {
	for _, c := range a.CPEs {
		if n, ok := cpe.Parse(c); ok {
			return product{ecosystem: cpe.Ecosystem(n.Part, n.Vendor, n.Product), name: n.Vendor + ":" + n.Product}, true
		}
	}
	return cnaProduct(a)
}

// clean returns s with runs of whitespace collapsed, or "" for the
// placeholders CNAs write where they know no name.
func clean(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	switch strings.ToLower(s) {
	case "n/a", "na", "unknown", "[unknown]", "unspecified", "-":
		return ""
	}
	return s
}

// trimThe removes a leading "The " from a vendor name ("The GNU C Library").
func trimThe(s string) string {
	if len(s) > 4 && strings.EqualFold(s[:4], "the ") {
		return strings.TrimSpace(s[4:])
	}
	return s
}

// firstWord returns the first word of a vendor name, not counting "The".
func firstWord(s string) string {
	for _, w := range strings.Fields(s) {
		if !strings.EqualFold(w, "the") {
			return w
		}
	}
	return ""
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// advisory is a repository security advisory among a record's references.
type advisory struct {
	repo string // the repository's name, without owner
	id   string // GHSA-xxxx-xxxx-xxxx
}

type advisories []advisory

var ghsaURL = regexp.MustCompile(`^https://github\.com/[^/]+/([^/]+)/security/advisories/(GHSA(?:-[0-9a-z]{4}){3})/?$`)

// repoAdvisories returns the GitHub repository security advisories among
// references: published by the project's maintainers, they are the vendor
// advisory of the fix.
func repoAdvisories(refs []reference) advisories {
	var out advisories
	for _, r := range refs {
		m := ghsaURL.FindStringSubmatch(strings.TrimSpace(r.URL))
		if m == nil {
			continue
		}
		a := advisory{repo: m[1], id: m[2]}
		if !contains(out.ids(), a.id) {
			out = append(out, a)
		}
	}
	return out
}

func (as advisories) ids() []string {
	var ids []string
	for _, a := range as {
		ids = append(ids, a.id)
	}
	return ids
}

// pick returns the advisory of a product: the one whose repository is
// named like the product or package, else the only one, else "".
func (as advisories) pick(names ...string) string {
	for _, a := range as {
		for _, n := range names {
			if n = strings.TrimSpace(n); n != "" && strings.EqualFold(a.repo, n) {
				return a.id
			}
		}
	}
	if len(as) == 1 {
		return as[0].id
	}
	return ""
}
