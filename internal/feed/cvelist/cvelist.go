// Package cvelist reads CVE List records in the CVE JSON 5.x record format
// (dataVersion 5.0, 5.1 and 5.2), one record per file, as published in
// CVEProject/cvelistV5 and cisagov/vulnrichment.
//
// A record gives the description, dates and state of a CVE, the CVSS
// metrics, CWEs and tagged references of its CNA container and of every ADP
// container (CISA-ADP's vulnrichment among them), and remediation atoms:
// the fixed versions named by the versions the CNA lists as affected and
// unaffected, or, when the CNA names none, by the ADP containers.
package cvelist

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed"
)

// The CVE List as a record's dataSources names it.
const (
	sourceName    = "cvelist"
	sourceLicense = "CVE Terms of Use"
	recordURL     = "https://www.cve.org/CVERecord?id="
)

// Parser reads CVE JSON 5.x records.
var Parser = feed.Parser{
	Name:  sourceName,
	Exts:  []string{".json"},
	Parse: parse,
}

// record is the part of a CVE JSON 5.x record that the catalog uses.
type record struct {
	DataType    string   `json:"dataType"`
	DataVersion string   `json:"dataVersion"`
	Metadata    metadata `json:"cveMetadata"`
	Containers  struct {
		CNA container   `json:"cna"`
		ADP []container `json:"adp"`
	} `json:"containers"`
}

type metadata struct {
	ID                string `json:"cveId"`
	State             string `json:"state"`
	AssignerShortName string `json:"assignerShortName"`
	DatePublished     string `json:"datePublished"`
	DateUpdated       string `json:"dateUpdated"`
}

// container is a CNA or ADP container.
type container struct {
	ProviderMetadata struct {
		ShortName string `json:"shortName"`
	} `json:"providerMetadata"`
	Descriptions    []feed.LangValue `json:"descriptions"`
	RejectedReasons []feed.LangValue `json:"rejectedReasons"`
	Affected        []affected       `json:"affected"`
	Metrics         []metric         `json:"metrics"`
	ProblemTypes    []problemType    `json:"problemTypes"`
	References      []reference      `json:"references"`
}

// metric is one element of a container's metrics: at most one CVSS object
// beside other kinds (SSVC and KEV in "other", scenarios) that are not
// read here.
type metric struct {
	V20 *cvss `json:"cvssV2_0"`
	V30 *cvss `json:"cvssV3_0"`
	V31 *cvss `json:"cvssV3_1"`
	V40 *cvss `json:"cvssV4_0"`
}

type cvss struct {
	VectorString string   `json:"vectorString"`
	BaseScore    *float64 `json:"baseScore"`
	BaseSeverity string   `json:"baseSeverity"`
}

type problemType struct {
	Descriptions []struct {
		CWEID       string `json:"cweId"`
		Description string `json:"description"`
	} `json:"descriptions"`
}

type reference struct {
	URL  string   `json:"url"`
	Tags []string `json:"tags"`
}

// skipFile reports whether a file of a cvelistV5 checkout is bookkeeping
// rather than a record: the delta files at the root of cves/ list the
// records changed by the last update.
func skipFile(name string) bool {
	switch path.Base(name) {
	case "delta.json", "deltaLog.json":
		return true
	}
	return false
}

// parse reads one record. A file that is not a CVE record, or whose record
// is malformed, is an error: the file holds a single record.
func parse(ctx context.Context, name string, r io.Reader, sink feed.Sink) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if skipFile(name) {
		return nil
	}
	dec := json.NewDecoder(r)
	var rec record
	if err := dec.Decode(&rec); err != nil {
		return fmt.Errorf("cvelist %s: %w", name, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("cvelist %s: unexpected data after the record", name)
	}
	f, err := rec.facts()
	if err != nil {
		return fmt.Errorf("cvelist %s: %w", name, err)
	}
	return sink.Facts(f)
}

// facts turns a record into the facts of its CVE.
func (rec *record) facts() (*cve.Facts, error) {
	if rec.DataType != "" && rec.DataType != "CVE_RECORD" {
		return nil, fmt.Errorf("dataType %q is not CVE_RECORD", rec.DataType)
	}
	if rec.DataVersion != "" && !strings.HasPrefix(rec.DataVersion, "5.") {
		return nil, fmt.Errorf("dataVersion %q is not 5.x", rec.DataVersion)
	}
	id, err := cve.ParseID(rec.Metadata.ID)
	if err != nil {
		return nil, fmt.Errorf("cveMetadata.cveId: %w", err)
	}
	url := recordURL + id
	f := &cve.Facts{
		CVEID:  id,
		Feed:   sourceName,
		Source: cve.DataSource{Name: sourceName, License: sourceLicense, URL: &url},
	}
	if f.Published, err = feed.ParseTime(rec.Metadata.DatePublished); err != nil {
		return nil, fmt.Errorf("cveMetadata.datePublished: %w", err)
	}
	if f.Modified, err = feed.ParseTime(rec.Metadata.DateUpdated); err != nil {
		return nil, fmt.Errorf("cveMetadata.dateUpdated: %w", err)
	}
	cna := &rec.Containers.CNA
	switch strings.ToUpper(rec.Metadata.State) {
	case cve.StateRejected:
		// A rejected record keeps its dates and the reason, nothing else.
		f.State = cve.StateRejected
		f.RejectedReason = feed.English(cna.RejectedReasons)
		return f, nil
	case cve.StatePublished:
		f.State = cve.StatePublished
	default:
		return nil, fmt.Errorf("cveMetadata.state %q is neither PUBLISHED nor REJECTED", rec.Metadata.State)
	}
	f.Description = feed.English(cna.Descriptions)

	cnaName := cna.ProviderMetadata.ShortName
	if cnaName == "" {
		cnaName = rec.Metadata.AssignerShortName
	}
	f.Metrics = appendMetrics(f.Metrics, cna.Metrics, cnaName, cve.MetricCNA)
	cwes := cweList{}
	cwes.add(cna.ProblemTypes)
	var refs cve.References
	addReferences(&refs, cna.References)
	for i := range rec.Containers.ADP {
		adp := &rec.Containers.ADP[i]
		f.Metrics = appendMetrics(f.Metrics, adp.Metrics, adp.ProviderMetadata.ShortName, cve.MetricADP)
		cwes.add(adp.ProblemTypes)
		addReferences(&refs, adp.References)
	}
	f.CWEs = cwes.list
	f.References = refs.List()
	f.Atoms = recordAtoms(rec, id, cnaName)
	return f, nil
}

// appendMetrics appends the CVSS metrics of a container, scored by source.
// A CVSS object without a base score in 0..10 is passed over.
func appendMetrics(dst []cve.Metric, ms []metric, source, typ string) []cve.Metric {
	for _, m := range ms {
		for _, c := range []struct {
			version string
			v       *cvss
		}{{"2.0", m.V20}, {"3.0", m.V30}, {"3.1", m.V31}, {"4.0", m.V40}} {
			if c.v == nil || c.v.BaseScore == nil {
				continue
			}
			score := *c.v.BaseScore
			sev := cve.SeverityOf(c.version, score)
			if sev == "" {
				continue
			}
			if given := strings.ToUpper(strings.TrimSpace(c.v.BaseSeverity)); validSeverity(given) && c.version != "2.0" {
				sev = given
			}
			mt := cve.Metric{
				Version:  c.version,
				Vector:   strings.TrimSpace(c.v.VectorString),
				Score:    score,
				Severity: sev,
				Source:   source,
				Type:     typ,
			}
			if !containsMetric(dst, mt) {
				dst = append(dst, mt)
			}
		}
	}
	return dst
}

func validSeverity(s string) bool {
	switch s {
	case cve.SeverityNone, cve.SeverityLow, cve.SeverityMedium, cve.SeverityHigh, cve.SeverityCritical:
		return true
	}
	return false
}

func containsMetric(ms []cve.Metric, m cve.Metric) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

var cweRE = regexp.MustCompile(`^(?i:CWE)-([0-9]{1,6})\b`)

// cweList collects CWE ids in order, without repeats.
type cweList struct {
	list []string
	seen map[string]bool
}

// add adds the CWEs of problem types. An entry without cweId counts when
// its description starts with a CWE id ("CWE-400: Uncontrolled ..."), as
// in records converted from the older format.
func (c *cweList) add(pts []problemType) {
	for _, pt := range pts {
		for _, d := range pt.Descriptions {
			m := cweRE.FindStringSubmatch(strings.TrimSpace(d.CWEID))
			if m == nil && d.CWEID == "" {
				m = cweRE.FindStringSubmatch(strings.TrimSpace(d.Description))
			}
			if m == nil {
				continue
			}
			id := "CWE-" + m[1]
			if c.seen[id] {
				continue
			}
			if c.seen == nil {
				c.seen = map[string]bool{}
			}
			c.seen[id] = true
			c.list = append(c.list, id)
		}
	}
}

// ignoredTags are tags that describe how a reference reached the record
// rather than what it points to: x_transferred marks every reference the
// CVE Program carried over from the legacy format.
var ignoredTags = map[string]bool{"x_transferred": true}

// addReferences adds refs to out, without the ignored tags.
func addReferences(out *cve.References, refs []reference) {
	for _, r := range refs {
		tags := slices.DeleteFunc(slices.Clone(r.Tags), func(t string) bool { return ignoredTags[strings.TrimSpace(t)] })
		out.Add(r.URL, tags...)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
