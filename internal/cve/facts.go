package cve

import "time"

// Facts is what one upstream document says about one CVE. Feed parsers emit
// Facts; the catalog stores them per (CVE, Feed, Doc) and merges every Facts
// of a CVE into its Record. Only the fields a source knows are set.
type Facts struct {
	CVEID string `json:"cveId"`
	// Feed is the ingest source that produced these facts: cvelist, nvd,
	// kev, epss, osv, debian, msrc, csaf.
	Feed string `json:"feed"`
	// Doc identifies the upstream document within the feed when one CVE can
	// appear in several (an OSV advisory id, an MSRC month, a CSAF document
	// id); empty when the feed has one document per CVE.
	Doc string `json:"doc,omitempty"`
	// Source is the data source credited in the record's dataSources. Its
	// Use is filled in by the merge from what the facts contain.
	Source DataSource `json:"source"`

	State          string     `json:"state,omitempty"` // PUBLISHED or REJECTED
	RejectedReason string     `json:"rejectedReason,omitempty"`
	Description    string     `json:"description,omitempty"`
	Published      *time.Time `json:"published,omitempty"`
	Modified       *time.Time `json:"modified,omitempty"`

	Metrics    []Metric      `json:"metrics,omitempty"`
	CWEs       []string      `json:"cwes,omitempty"`
	References []Reference   `json:"references,omitempty"`
	Atoms      []ProductAtom `json:"atoms,omitempty"`
	KEV        *KEV          `json:"kev,omitempty"`
	EPSS       *EPSS         `json:"epss,omitempty"`
}

// ProductAtom is an Atom together with the product it fixes.
type ProductAtom struct {
	Ecosystem string `json:"ecosystem"`
	Product   string `json:"product"`
	// Release names the distribution release of the fix when the ecosystem
	// alone does not (e.g. "bookworm"); used to find its end of life.
	Release string `json:"release,omitempty"`
	Atom
}

// Feeds whose facts alone do not make a record: an EPSS score for a CVE
// that no other source knows is kept, and shown once another source
// describes the CVE.
var annotationOnly = map[string]bool{"epss": true}

// Defines reports whether facts from feed are enough to serve a record.
func Defines(feed string) bool { return !annotationOnly[feed] }
