// Package cve is the domain of the CVE catalog: the served record with its
// remediation atoms and provenance, the lean summary row, the facts each
// upstream source contributes, CVE id order, and the Catalog interface.
package cve

import (
	"slices"
	"strings"
	"time"
)

// Record is the CveRecord of the lookup API: one CVE, leading with
// remediation, assembled from every source that knows it.
type Record struct {
	CVEID string `json:"cveId"`
	// State is PUBLISHED or REJECTED. Rejected records are kept and served
	// so that a client can tell "rejected" from "unknown", but they carry no
	// scores or remediation and are left out of the list endpoint.
	State          string       `json:"state"`
	RejectedReason *string      `json:"rejectedReason,omitempty"`
	Description    *string      `json:"description"`
	Severity       *string      `json:"severity"`
	CVSS           *CVSS        `json:"cvss"`
	EPSS           *EPSS        `json:"epss"`
	KEV            *KEV         `json:"kev"`
	CWEs           []string     `json:"cwes"`
	Remediation    Remediation  `json:"remediation"`
	References     []Reference  `json:"references"`
	PublishedAt    *time.Time   `json:"publishedAt"`
	ModifiedAt     *time.Time   `json:"modifiedAt"`
	DataSources    []DataSource `json:"dataSources"`
	Links          *Links       `json:"_links,omitempty"`
}

// Record states.
const (
	StatePublished = "PUBLISHED"
	StateRejected  = "REJECTED"
)

// Severity values, as used by the list filter.
const (
	SeverityCritical = "CRITICAL"
	SeverityHigh     = "HIGH"
	SeverityMedium   = "MEDIUM"
	SeverityLow      = "LOW"
	SeverityNone     = "NONE"
)

// Links are the hypermedia links of a record or summary.
type Links struct {
	Self string `json:"self"`
	HTML string `json:"html,omitempty"`
}

// CVSS is the preferred CVSS metric of a record (Version, Vector, Score,
// Severity, Source, Type) followed by every metric the sources gave.
type CVSS struct {
	Metric
	Metrics []Metric `json:"metrics"`
}

// Metric is one CVSS score as a source gave it.
type Metric struct {
	Version  string  `json:"version"` // 2.0, 3.0, 3.1 or 4.0
	Vector   string  `json:"vector"`
	Score    float64 `json:"score"`
	Severity string  `json:"severity"`
	// Source is who scored it: nvd@nist.gov, a CNA's short name or an
	// ADP's (CISA-ADP).
	Source string `json:"source"`
	// Type is Primary or Secondary (NVD's own words), CNA or ADP.
	Type string `json:"type"`
}

// Metric types.
const (
	MetricPrimary   = "Primary"
	MetricSecondary = "Secondary"
	MetricCNA       = "CNA"
	MetricADP       = "ADP"
)

// EPSS is FIRST's exploit prediction for a CVE on one day.
type EPSS struct {
	Score      float64 `json:"score"`
	Percentile float64 `json:"percentile"`
	Date       string  `json:"date,omitempty"`  // YYYY-MM-DD of the scores
	Model      string  `json:"model,omitempty"` // e.g. v2023.03.01
}

// KEV is the CISA Known Exploited Vulnerabilities catalog entry of a CVE.
type KEV struct {
	DateAdded                  string   `json:"dateAdded"`
	DueDate                    string   `json:"dueDate,omitempty"`
	RequiredAction             string   `json:"requiredAction,omitempty"`
	KnownRansomwareCampaignUse string   `json:"knownRansomwareCampaignUse,omitempty"`
	VendorProject              string   `json:"vendorProject,omitempty"`
	Product                    string   `json:"product,omitempty"`
	VulnerabilityName          string   `json:"vulnerabilityName,omitempty"`
	ShortDescription           string   `json:"shortDescription,omitempty"`
	Notes                      string   `json:"notes,omitempty"`
	CWEs                       []string `json:"cwes,omitempty"`
}

// Reference is a URL with the union of the tags every source gave it.
type Reference struct {
	URL  string   `json:"url"`
	Tags []string `json:"tags"`
}

// Remediation says what fixes the CVE, per product. Available is true
// when an atom names a fix (see Atom.HasFix); products may also list
// versions that are affected with no fix known.
type Remediation struct {
	Available bool      `json:"available"`
	Products  []Product `json:"products"`
}

// Product is one affected product in one ecosystem with the atoms that fix it.
type Product struct {
	Ecosystem string `json:"ecosystem"`
	Product   string `json:"product"`
	Atoms     []Atom `json:"atoms"`
}

// Atom is one fact about a fix: the version, build or KB that fixes the CVE
// for a product, who says so and under which license. An atom without a
// fixed version says that the versions of its affected range are affected
// and that no fix is known for them: ">= 1.2.0, <= 1.4.7" (up to a last
// affected version), ">= 1.2.0" (from a version on) or "*" (every
// version).
type Atom struct {
	FixedVersion  string  `json:"fixedVersion"`
	AffectedRange *string `json:"affectedRange"`
	AdvisoryID    *string `json:"advisoryId"`
	SourceURL     *string `json:"sourceUrl"`
	Source        string  `json:"source"`
	License       string  `json:"license"`
	EOL           *EOL    `json:"eol"`
	// KB is the Microsoft Knowledge Base article of a Windows or Microsoft
	// fix, when the fixed version is a build.
	KB string `json:"kb,omitempty"`
	// Unparsed is true when FixedVersion does not parse under the
	// ecosystem's version rules: the atom is kept, but it cannot be compared.
	Unparsed bool `json:"unparsedVersion,omitempty"`
}

// HasFix reports whether the atom names a fix: a fixed version, build or
// KB, rather than affected versions without a fix.
func (a *Atom) HasFix() bool { return a.FixedVersion != "" }

// EOL marks a fix that lands on a release past its end of life.
type EOL struct {
	EOLFrom  *string `json:"eolFrom"`
	EOESFrom *string `json:"eoesFrom"`
}

// DataSource names a source that contributed to a record.
type DataSource struct {
	Name    string  `json:"name"`
	Use     string  `json:"use"`
	License string  `json:"license"`
	URL     *string `json:"url"`
	// SyncedAt, in a record, is when the catalog took in the data of this
	// source that the record shows: the time of the ingest or sync run
	// that last added or changed it (for the bundled sample, the date of
	// the sample's data). Facts leave it out; records merged before the
	// catalog kept it lack it until the source changes them again.
	SyncedAt *time.Time `json:"syncedAt,omitempty"`
}

// Summary is the lean row of the list endpoint and the bulk stream.
type Summary struct {
	CVEID          string     `json:"cveId"`
	Severity       *string    `json:"severity"`
	CVSS           *float64   `json:"cvss"`
	CVSSVersion    *string    `json:"cvssVersion"` // 2.0, 3.x, 4.0 or null
	EPSS           *float64   `json:"epss"`
	IsKEV          bool       `json:"isKev"`
	HasRemediation bool       `json:"hasRemediation"`
	PublishedAt    *time.Time `json:"publishedAt"`
	ModifiedAt     *time.Time `json:"modifiedAt,omitempty"`
	Links          *Links     `json:"_links,omitempty"`
	// Rejected is true for a record in state REJECTED: lists leave such
	// records out, and the bulk dump says so of them.
	Rejected bool `json:"-"`
}

// Summarize returns the summary row of r.
func Summarize(r *Record) Summary {
	s := Summary{
		CVEID:          r.CVEID,
		Severity:       r.Severity,
		IsKEV:          r.KEV != nil,
		HasRemediation: r.Remediation.Available,
		PublishedAt:    r.PublishedAt,
		ModifiedAt:     r.ModifiedAt,
		Rejected:       r.State == StateRejected,
	}
	if r.CVSS != nil {
		score := r.CVSS.Score
		s.CVSS = &score
		v := SummaryVersion(r.CVSS.Version)
		s.CVSSVersion = &v
	}
	if r.EPSS != nil {
		e := r.EPSS.Score
		s.EPSS = &e
	}
	return s
}

// SummaryVersion maps a CVSS version to the summary's cvssVersion values:
// 2.0, 3.x or 4.0.
func SummaryVersion(v string) string {
	switch v {
	case "3.0", "3.1":
		return "3.x"
	}
	return v
}

// References gathers references one per URL, in the order their URLs
// first come, each with its tags once, in the order they first come: the
// way every feed and the merge combine references. The zero value is
// ready to use.
type References struct {
	list  []Reference
	index map[string]int
}

// Add adds the reference to url with tags, both trimmed of spaces, to the
// reference already gathered for url if there is one. An empty url is
// left out, and so are empty tags; ok reports whether url was kept.
func (r *References) Add(url string, tags ...string) (ok bool) {
	url = strings.TrimSpace(url)
	if url == "" {
		return false
	}
	if r.index == nil {
		r.index = map[string]int{}
	}
	i, found := r.index[url]
	if !found {
		i = len(r.list)
		r.index[url] = i
		r.list = append(r.list, Reference{URL: url, Tags: []string{}})
	}
	ref := &r.list[i]
	for _, t := range tags {
		if t = strings.TrimSpace(t); t != "" && !slices.Contains(ref.Tags, t) {
			ref.Tags = append(ref.Tags, t)
		}
	}
	return true
}

// List returns the references gathered, nil for none.
func (r *References) List() []Reference { return r.list }
