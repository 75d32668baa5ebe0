// Package merge assembles the served record of a CVE from the facts every
// source gave about it, with the preference rules of the catalog:
//
//   - state, description and dates: the CVE List first, then NVD, then the
//     vendors, the distributions and the OSV databases; a KEV-only record
//     takes KEV's short description;
//   - CVSS: NVD's primary score over the CNA's (or NVD's secondary copy of
//     it) over an ADP's; within one rank the newest CVSS version;
//   - references: merged by URL with the union of their tags;
//   - remediation: atoms grouped by (ecosystem, product), every source's atom
//     kept with its own provenance, ordered by fixed version and, for the
//     same fix, the most authoritative source first (vendor or
//     distribution, then the OSV database, then NVD and CNA ranges); atoms on
//     a release past its end of life carry eol;
//   - dataSources: exactly the sources that contributed, with what they
//     contributed.
package merge

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/cve"
)

// feedRank orders feeds for the choice of state, description and dates, and
// for the order of dataSources.
var feedRank = map[string]int{
	"cvelist": 0, "nvd": 1, "msrc": 2, "csaf": 3, "debian": 4, "osv": 5, "kev": 6, "epss": 7,
}

// listOrder orders dataSources as the catalog's table of sources does.
var listOrder = map[string]int{
	"cvelist": 0, "nvd": 1, "kev": 2, "epss": 3, "osv": 4, "debian": 5, "msrc": 6, "csaf": 7,
}

func rankOf(feed string) int {
	if r, ok := feedRank[feed]; ok {
		return r
	}
	return len(feedRank)
}

// authority orders the sources of remediation atoms: the vendor or
// distribution says it first, then an OSV database, then the ranges of NVD
// and the CNA.
func authority(feed string) int {
	switch feed {
	case "msrc", "csaf", "debian", "ubuntu", "alpine", "redhat":
		return 0
	case "osv":
		return 1
	}
	return 2
}

// Options are the inputs of a merge besides the facts.
type Options struct {
	// Lifecycles finds the support window of the release a fix lands on.
	Lifecycles Lifecycles
	// Now decides which releases are past their end of life.
	Now time.Time
}

// Record merges the facts of one CVE (canonical id) into its record. ok is
// false when no facts define a record: only annotation feeds such as EPSS
// know the CVE. The record's ModifiedAt and Links are left for the caller.
func Record(id string, facts []cve.Facts, opt Options) (rec *cve.Record, ok bool) {
	facts = slices.Clone(facts)
	slices.SortStableFunc(facts, func(a, b cve.Facts) int {
		return cmp.Or(cmp.Compare(rankOf(a.Feed), rankOf(b.Feed)), cmp.Compare(a.Source.Name, b.Source.Name), cmp.Compare(a.Doc, b.Doc))
	})
	if !slices.ContainsFunc(facts, func(f cve.Facts) bool { return cve.Defines(f.Feed) }) {
		return nil, false
	}
	m := &merger{rec: &cve.Record{
		CVEID:       id,
		State:       cve.StatePublished,
		CWEs:        []string{},
		References:  []cve.Reference{},
		DataSources: []cve.DataSource{},
		Remediation: cve.Remediation{Products: []cve.Product{}},
	}, uses: map[string][]string{}}
	m.state(facts)
	if m.rec.State == cve.StateRejected {
		m.rejected(facts)
	} else {
		m.description(facts)
		m.dates(facts)
		m.cvss(facts)
		m.cwes(facts)
		m.references(facts)
		m.scores(facts)
		m.remediation(facts, opt)
	}
	m.dataSources(facts)
	return m.rec, true
}

type merger struct {
	rec *cve.Record
	// uses collects, per data source name, what it contributed.
	uses map[string][]string
	// order keeps data source names in the order they were first used.
	order []string
	// sources keeps the DataSource of each name.
	sources map[string]cve.DataSource
}

func (m *merger) use(src cve.DataSource, what string) {
	if m.sources == nil {
		m.sources = map[string]cve.DataSource{}
	}
	if _, seen := m.sources[src.Name]; !seen {
		m.sources[src.Name] = src
		m.order = append(m.order, src.Name)
	}
	if !slices.Contains(m.uses[src.Name], what) {
		m.uses[src.Name] = append(m.uses[src.Name], what)
	}
}

func (m *merger) state(facts []cve.Facts) {
	for _, f := range facts {
		if f.State != "" && (f.Feed == "cvelist" || f.Feed == "nvd") {
			m.rec.State = f.State
			if f.State == cve.StateRejected && f.RejectedReason != "" {
				reason := f.RejectedReason
				m.rec.RejectedReason = &reason
			}
			return
		}
	}
}

// rejected keeps what a client needs to know of a rejected id: when, why and
// who says so.
func (m *merger) rejected(facts []cve.Facts) {
	for _, f := range facts {
		if f.Feed != "cvelist" && f.Feed != "nvd" {
			continue
		}
		if f.State == cve.StateRejected {
			m.use(f.Source, "rejection")
		}
		if m.rec.PublishedAt == nil && f.Published != nil {
			m.rec.PublishedAt = utc(f.Published)
		}
	}
}

func (m *merger) description(facts []cve.Facts) {
	for _, f := range facts {
		if f.Description != "" {
			d := f.Description
			m.rec.Description = &d
			m.use(f.Source, "description")
			return
		}
	}
	for _, f := range facts {
		if f.KEV != nil && f.KEV.ShortDescription != "" {
			d := f.KEV.ShortDescription
			m.rec.Description = &d
			m.use(f.Source, "description")
			return
		}
	}
}

func (m *merger) dates(facts []cve.Facts) {
	for _, f := range facts {
		if f.Published != nil {
			m.rec.PublishedAt = utc(f.Published)
			m.use(f.Source, "publication date")
			return
		}
	}
}

func utc(t *time.Time) *time.Time {
	u := t.UTC()
	return &u
}

// metricRank orders metrics: NVD primary, then the CNA's own score (or NVD's
// secondary copy of it), then an ADP's.
func metricRank(feed string, m cve.Metric) int {
	switch {
	case feed == "nvd" && m.Type == cve.MetricPrimary:
		return 0
	case m.Type == cve.MetricCNA || m.Type == cve.MetricSecondary:
		return 1
	}
	return 2
}

func versionRank(v string) int {
	switch v {
	case "4.0":
		return 0
	case "3.1":
		return 1
	case "3.0":
		return 2
	case "2.0":
		return 3
	}
	return 4
}

func (m *merger) cvss(facts []cve.Facts) {
	type ranked struct {
		cve.Metric
		rank int
	}
	var all []ranked
	for _, f := range facts {
		for _, mt := range f.Metrics {
			if mt.Version == "" || mt.Score < 0 || mt.Score > 10 {
				continue
			}
			dup := slices.ContainsFunc(all, func(r ranked) bool {
				return r.Version == mt.Version && r.Vector == mt.Vector && r.Source == mt.Source && r.Type == mt.Type
			})
			if !dup {
				all = append(all, ranked{mt, metricRank(f.Feed, mt)})
				m.use(f.Source, "CVSS")
			}
		}
	}
	if len(all) == 0 {
		return
	}
	slices.SortStableFunc(all, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(versionRank(a.Version), versionRank(b.Version)))
	})
	c := &cve.CVSS{Metric: all[0].Metric}
	for _, r := range all {
		c.Metrics = append(c.Metrics, r.Metric)
	}
	m.rec.CVSS = c
	if c.Severity != "" {
		s := strings.ToUpper(c.Severity)
		m.rec.Severity = &s
	}
}

func (m *merger) cwes(facts []cve.Facts) {
	add := func(src cve.DataSource, id string) {
		id = strings.ToUpper(strings.TrimSpace(id))
		if !strings.HasPrefix(id, "CWE-") {
			if id == "" || strings.HasPrefix(id, "NVD-") || strings.Trim(id, "0123456789") != "" {
				return
			}
			id = "CWE-" + id
		}
		if !slices.Contains(m.rec.CWEs, id) {
			m.rec.CWEs = append(m.rec.CWEs, id)
			m.use(src, "CWEs")
		}
	}
	for _, f := range facts {
		for _, id := range f.CWEs {
			add(f.Source, id)
		}
		if f.KEV != nil {
			for _, id := range f.KEV.CWEs {
				add(f.Source, id)
			}
		}
	}
}

func (m *merger) references(facts []cve.Facts) {
	var refs cve.References
	for _, f := range facts {
		for _, r := range f.References {
			if refs.Add(r.URL, r.Tags...) {
				m.use(f.Source, "references")
			}
		}
	}
	if list := refs.List(); list != nil {
		m.rec.References = list // or none: the empty list the record starts with
	}
	for i := range m.rec.References {
		slices.Sort(m.rec.References[i].Tags)
	}
}

func (m *merger) scores(facts []cve.Facts) {
	for _, f := range facts {
		if f.KEV != nil && m.rec.KEV == nil {
			k := *f.KEV
			m.rec.KEV = &k
			m.use(f.Source, "known-exploited status")
		}
		if f.EPSS != nil && m.rec.EPSS == nil {
			e := *f.EPSS
			m.rec.EPSS = &e
			m.use(f.Source, "EPSS score")
		}
	}
}

// eolSource is the data source credited for end-of-life annotations.
var eolSource = cve.DataSource{
	Name:    "eol",
	License: "MIT",
	URL:     ptr("https://endoflife.date"),
}

func ptr(s string) *string { return &s }

func (m *merger) dataSources(facts []cve.Facts) {
	names := slices.Clone(m.order)
	rank := func(name string) int {
		if name == "eol" {
			return len(listOrder) + 1
		}
		for _, f := range facts {
			if r, ok := listOrder[f.Feed]; ok && f.Source.Name == name {
				return r
			}
		}
		return len(listOrder)
	}
	slices.SortStableFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a, b)) })
	for _, n := range names {
		ds := m.sources[n]
		ds.Use = strings.Join(m.uses[n], ", ")
		m.rec.DataSources = append(m.rec.DataSources, ds)
	}
}
