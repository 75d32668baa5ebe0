package csaf

import (
	"regexp"
	"slices"
	"strings"

	"github.com/patchline/patchline/internal/cve"
)

// The facts of a vulnerability besides its fixes: scores, references,
// weaknesses, notes, and the license of the document.

// metrics returns the distinct CVSS scores of a vulnerability.
func (p *parse) metrics(v *vulnerability) []cve.Metric {
	source := p.opts.MetricSource
	if source == "" {
		source = p.publisher
	}
	all := slices.Clone(v.Scores)
	for _, m := range v.Metrics {
		all = append(all, m.Content)
	}
	var out []cve.Metric
	add := func(c *cvss, fallback string) {
		if c == nil || c.VectorString == "" {
			return
		}
		ver := c.Version
		if ver == "" {
			ver = fallback
			if rest, ok := strings.CutPrefix(c.VectorString, "CVSS:"); ok {
				ver, _, _ = strings.Cut(rest, "/")
			}
		}
		sev := strings.ToUpper(c.BaseSeverity)
		if sev == "" {
			sev = cve.SeverityOf(ver, c.BaseScore)
		}
		m := cve.Metric{Version: ver, Vector: c.VectorString, Score: c.BaseScore, Severity: sev, Source: source, Type: cve.MetricCNA}
		if !slices.ContainsFunc(out, func(o cve.Metric) bool { return o.Version == m.Version && o.Vector == m.Vector }) {
			out = append(out, m)
		}
	}
	for _, s := range all {
		add(s.CVSSv4, "4.0")
		add(s.CVSSv3, "3.1")
		add(s.CVSSv2, "2.0")
	}
	return out
}

// references returns the vulnerability's references, and the document's
// own URL tagged as the vendor's advisory.
func (p *parse) references(v *vulnerability) []cve.Reference {
	var refs cve.References
	if p.docURL != "" {
		refs.Add(p.docURL, "vendor-advisory")
	}
	for _, r := range v.References {
		tag := ""
		if r.Category == "self" {
			tag = "vendor-advisory"
		}
		refs.Add(r.URL, tag)
	}
	return refs.List()
}

var cweID = regexp.MustCompile(`^CWE-[0-9]+$`)

func cwes(v *vulnerability) []string {
	var out []string
	add := func(id string) {
		id = strings.ToUpper(strings.TrimSpace(id))
		if cweID.MatchString(id) && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	if v.CWE != nil {
		add(v.CWE.ID)
	}
	for _, c := range v.CWEs {
		add(c.ID)
	}
	return out
}

func noteText(notes []note, category string) string {
	for _, n := range notes {
		if n.Category == category && strings.TrimSpace(n.Text) != "" {
			return strings.TrimSpace(n.Text)
		}
	}
	return ""
}

// licenseOf returns the license a document states: a Creative Commons
// license named by its legal disclaimer, its distribution text, its TLP
// label, or else a pointer to its publisher.
func licenseOf(d *document) string {
	doc := d.Document
	for _, n := range doc.Notes {
		if n.Category != "legal_disclaimer" {
			continue
		}
		t := strings.ToLower(n.Text)
		switch {
		case strings.Contains(t, "creative commons attribution 4.0"), strings.Contains(t, "cc by 4.0"), strings.Contains(t, "cc-by-4.0"):
			return "CC-BY-4.0"
		case strings.Contains(t, "cc0"):
			return "CC0-1.0"
		}
	}
	if dist := doc.Distribution; dist != nil {
		if t := strings.TrimSpace(dist.Text); t != "" {
			return t
		}
		if dist.TLP != nil && strings.TrimSpace(dist.TLP.Label) != "" {
			return "TLP:" + strings.ToUpper(strings.TrimSpace(dist.TLP.Label))
		}
	}
	return "see " + strings.TrimSpace(doc.Publisher.Name)
}
