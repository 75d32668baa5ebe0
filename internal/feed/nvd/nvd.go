// Package nvd reads NVD CVE API 2.0 JSON: a single CVE object (bare, as in
// per-CVE mirrors, or wrapped as {"cve": {...}}), and API response pages and
// the yearly feed files, whose "vulnerabilities" array is streamed one
// record at a time so that a 100 MB feed is never held in memory.
//
// A record gives NVD's own CVSS metrics (Primary) beside those it carries
// for other scorers (Secondary), CWEs, tagged references, and remediation
// atoms from its CPE configurations: a vulnerable CPE match with a
// versionEndExcluding bound is fixed in that version.
package nvd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed"
)

// The NVD as a record's dataSources names it.
const (
	sourceName    = "nvd"
	sourceLicense = "Public domain (NVD)"
	detailURL     = "https://nvd.nist.gov/vuln/detail/"
	atomSource    = "NVD"
)

// Parser reads NVD CVE API 2.0 JSON.
var Parser = feed.Parser{
	Name:  sourceName,
	Exts:  []string{".json"},
	Parse: parse,
}

// item is the part of an NVD CVE object that the catalog uses.
type item struct {
	ID             string           `json:"id"`
	Published      string           `json:"published"`
	LastModified   string           `json:"lastModified"`
	VulnStatus     string           `json:"vulnStatus"`
	Descriptions   []feed.LangValue `json:"descriptions"`
	Metrics        metrics          `json:"metrics"`
	Weaknesses     []weakness       `json:"weaknesses"`
	Configurations []configuration  `json:"configurations"`
	References     []reference      `json:"references"`
}

// metrics holds the CVSS metric lists; other kinds (ssvcV203 ...) are not
// read.
type metrics struct {
	V2  []metric `json:"cvssMetricV2"`
	V30 []metric `json:"cvssMetricV30"`
	V31 []metric `json:"cvssMetricV31"`
	V40 []metric `json:"cvssMetricV40"`
}

type metric struct {
	Source   string `json:"source"`
	Type     string `json:"type"`
	CVSSData struct {
		VectorString string   `json:"vectorString"`
		BaseScore    *float64 `json:"baseScore"`
		BaseSeverity string   `json:"baseSeverity"`
	} `json:"cvssData"`
	// BaseSeverity is where CVSS 2.0 metrics keep it: beside cvssData.
	BaseSeverity string `json:"baseSeverity"`
}

type weakness struct {
	Description []feed.LangValue `json:"description"`
}

type configuration struct {
	Nodes []node `json:"nodes"`
}

type node struct {
	Negate   bool       `json:"negate"`
	CPEMatch []cpeMatch `json:"cpeMatch"`
	Children []node     `json:"children"`
}

type cpeMatch struct {
	Vulnerable            bool   `json:"vulnerable"`
	Criteria              string `json:"criteria"`
	VersionStartIncluding string `json:"versionStartIncluding"`
	VersionStartExcluding string `json:"versionStartExcluding"`
	VersionEndIncluding   string `json:"versionEndIncluding"`
	VersionEndExcluding   string `json:"versionEndExcluding"`
}

type reference struct {
	URL  string   `json:"url"`
	Tags []string `json:"tags"`
}

// parse reads one file. The top-level object is walked member by member:
// a "vulnerabilities" array is streamed element by element, and a record in
// it that does not decode is rejected on its own; any other member is kept
// so that a file holding one CVE object, bare or under "cve", can be read
// once the object ends.
func parse(ctx context.Context, name string, r io.Reader, sink feed.Sink) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dec := json.NewDecoder(r)
	if err := feed.ExpectDelim(dec, '{'); err != nil {
		return fmt.Errorf("nvd %s: %w", name, err)
	}
	fields := map[string]json.RawMessage{}
	page := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("nvd %s: %w", name, err)
		}
		key, _ := tok.(string)
		if key == "vulnerabilities" {
			page = true
			if err := streamVulnerabilities(ctx, dec, name, sink); err != nil {
				return err
			}
			continue
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("nvd %s: %s: %w", name, key, err)
		}
		if !page {
			fields[key] = raw
		}
	}
	if err := feed.ExpectDelim(dec, '}'); err != nil {
		return fmt.Errorf("nvd %s: %w", name, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("nvd %s: unexpected data after the top-level object", name)
	}
	if page {
		return nil
	}
	var it item
	switch {
	case fields["cve"] != nil:
		if err := json.Unmarshal(fields["cve"], &it); err != nil {
			return fmt.Errorf("nvd %s: cve: %w", name, err)
		}
	case fields["id"] != nil:
		whole, err := json.Marshal(fields)
		if err != nil {
			return fmt.Errorf("nvd %s: %w", name, err)
		}
		if err := json.Unmarshal(whole, &it); err != nil {
			return fmt.Errorf("nvd %s: %w", name, err)
		}
	default:
		return fmt.Errorf("nvd %s: neither an API page (vulnerabilities) nor a CVE object (id or cve)", name)
	}
	f, err := it.facts()
	if err != nil {
		return fmt.Errorf("nvd %s: %w", name, err)
	}
	return sink.Facts(f)
}

// streamVulnerabilities reads the elements of a vulnerabilities array, each
// {"cve": {...}}. An element that does not make a record is rejected under
// name#id (or name#index when it has no usable id); a syntax error ends the
// file, as nothing after it can be read.
func streamVulnerabilities(ctx context.Context, dec *json.Decoder, name string, sink feed.Sink) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("nvd %s: vulnerabilities: %w", name, err)
	}
	if tok == nil {
		return nil // "vulnerabilities": null, an empty page
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("nvd %s: vulnerabilities is not an array", name)
	}
	for i := 0; dec.More(); i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("nvd %s: vulnerabilities[%d]: %w", name, i, err)
		}
		var w struct {
			CVE *item `json:"cve"`
		}
		err := json.Unmarshal(raw, &w)
		label := name + "#" + strconv.Itoa(i)
		if w.CVE != nil {
			if id, idErr := cve.ParseID(w.CVE.ID); idErr == nil {
				label = name + "#" + id
			}
		}
		if err != nil {
			sink.Reject(label, err)
			continue
		}
		if w.CVE == nil {
			sink.Reject(label, errors.New("element has no cve object"))
			continue
		}
		f, err := w.CVE.facts()
		if err != nil {
			sink.Reject(label, err)
			continue
		}
		if err := sink.Facts(f); err != nil {
			return err
		}
	}
	if err := feed.ExpectDelim(dec, ']'); err != nil {
		return fmt.Errorf("nvd %s: vulnerabilities: %w", name, err)
	}
	return nil
}

// facts turns an NVD CVE object into the facts of its CVE.
func (it *item) facts() (*cve.Facts, error) {
	id, err := cve.ParseID(it.ID)
	if err != nil {
		return nil, fmt.Errorf("id: %w", err)
	}
	url := detailURL + id
	f := &cve.Facts{
		CVEID:  id,
		Feed:   sourceName,
		Source: cve.DataSource{Name: sourceName, License: sourceLicense, URL: &url},
	}
	if f.Published, err = feed.ParseTime(it.Published); err != nil {
		return nil, fmt.Errorf("published: %w", err)
	}
	if f.Modified, err = feed.ParseTime(it.LastModified); err != nil {
		return nil, fmt.Errorf("lastModified: %w", err)
	}
	desc := feed.English(it.Descriptions)
	if strings.EqualFold(strings.TrimSpace(it.VulnStatus), "Rejected") {
		// A rejected record keeps its dates and the reason, nothing else.
		f.State = cve.StateRejected
		f.RejectedReason = rejectReason(desc)
		return f, nil
	}
	f.State = cve.StatePublished
	f.Description = desc
	for _, m := range []struct {
		version string
		list    []metric
	}{{"2.0", it.Metrics.V2}, {"3.0", it.Metrics.V30}, {"3.1", it.Metrics.V31}, {"4.0", it.Metrics.V40}} {
		for _, x := range m.list {
			if mt, ok := x.metric(m.version); ok && !containsMetric(f.Metrics, mt) {
				f.Metrics = append(f.Metrics, mt)
			}
		}
	}
	f.CWEs = cwes(it.Weaknesses)
	f.References = references(it.References)
	f.Atoms = atoms(it.Configurations, url)
	return f, nil
}

// rejectReason is the description of a rejected record without the
// "** REJECT **" marker of older records.
func rejectReason(desc string) string {
	const marker = "** REJECT **"
	if len(desc) >= len(marker) && strings.EqualFold(desc[:len(marker)], marker) {
		desc = strings.TrimSpace(desc[len(marker):])
	}
	return desc
}

// metric converts one CVSS metric. ok is false for a metric without a base
// score in 0..10.
func (m metric) metric(version string) (cve.Metric, bool) {
	if m.CVSSData.BaseScore == nil {
		return cve.Metric{}, false
	}
	score := *m.CVSSData.BaseScore
	sev := cve.SeverityOf(version, score)
	if sev == "" {
		return cve.Metric{}, false
	}
	given := m.CVSSData.BaseSeverity
	if given == "" {
		given = m.BaseSeverity
	}
	if given = strings.ToUpper(strings.TrimSpace(given)); validSeverity(version, given) {
		sev = given
	}
	typ := cve.MetricSecondary
	if strings.EqualFold(strings.TrimSpace(m.Type), cve.MetricPrimary) {
		typ = cve.MetricPrimary
	}
	return cve.Metric{
		Version:  version,
		Vector:   strings.TrimSpace(m.CVSSData.VectorString),
		Score:    score,
		Severity: sev,
		Source:   scorer(m.Source),
		Type:     typ,
	}, true
}

// knownScorers maps the organisation ids NVD writes as a metric's source
// to the short names the CVE List uses for the same organisation, so that
// a score reads the same from either feed.
var knownScorers = map[string]string{
	"134c704f-9b21-4f2e-91b3-4a467353bcc0": "CISA-ADP",
}

// scorer is the source of a metric: an e-mail address such as
// nvd@nist.gov, or a known organisation's short name.
func scorer(source string) string {
	source = strings.TrimSpace(source)
	if name, ok := knownScorers[strings.ToLower(source)]; ok {
		return name
	}
	return source
}

// validSeverity reports whether s is a severity of the rating scale of
// version: CVSS 2.0 knows only LOW, MEDIUM and HIGH.
func validSeverity(version, s string) bool {
	switch s {
	case cve.SeverityLow, cve.SeverityMedium, cve.SeverityHigh:
		return true
	case cve.SeverityNone, cve.SeverityCritical:
		return version != "2.0"
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

var cweRE = regexp.MustCompile(`^CWE-[0-9]{1,6}$`)

// cwes returns the CWE ids of the weaknesses in order, without repeats.
// NVD's NVD-CWE-noinfo and NVD-CWE-Other name no weakness and are left out.
func cwes(ws []weakness) []string {
	var out []string
	for _, w := range ws {
		for _, d := range w.Description {
			v := strings.ToUpper(strings.TrimSpace(d.Value))
			if cweRE.MatchString(v) && !contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out
}

// references returns the references in order, one per URL with the union
// of their tags.
func references(refs []reference) []cve.Reference {
	var out cve.References
	for _, r := range refs {
		out.Add(r.URL, r.Tags...)
	}
	return out.List()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
