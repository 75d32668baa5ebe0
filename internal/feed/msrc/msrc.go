// Package msrc reads the Microsoft Security Response Center's security
// update data: the monthly CVRF 1.2 documents of the Security Updates API
// (api.msrc.microsoft.com/cvrf/v3.0/cvrf/<YYYY-Mon>), and the per-CVE CSAF
// 2.0 documents MSRC has published since 2024, which are read by the csaf
// package with MSRC's provenance.
//
// A CVRF document is streamed with encoding/xml's token decoder, one
// vulnerability at a time (the documents are several megabytes). It gives
// one cve.Facts per CVE and month (a CVE listed twice in a month is merged
// into one; security advisories such as ADV240001 are not CVEs and are
// passed over), with one atom per product of each vendor fix
// (vuln:Remediation Type="Vendor Fix"):
//
//   - Products whose name starts with "Windows" (Windows Server included)
//     are in the Windows ecosystem, Microsoft's other products (Office,
//     Exchange, .NET, Edge ...) in the Microsoft ecosystem, both named as
//     MSRC names them.
//   - The CBL-Mariner and Azure Linux packages MSRC lists in the same
//     documents ("cbl2 curl 8.8.0-1 on CBL Mariner 2.0") are in OSV's
//     "Azure Linux:<major>" ecosystem (CBL-Mariner 2.0 is Azure Linux 2),
//     named by their package ("curl"), so that they meet the Azure Linux
//     OSV records; their fixed versions follow the RPM rules.
//   - The fixed version is vuln:FixedBuild (a build such as 10.0.17763.2029,
//     or a package version), else the KB article ("KB5004947"). A list of
//     versions ("1.17.13-2,1.18.8-2") gives one atom per version. A
//     Click-to-Run fix of Microsoft 365 Apps and Office (Description
//     "Click to Run", FixedBuild the link to the channels' release notes)
//     is fixed in the Click-to-Run release of the document's month: its
//     atom says so ("Click-to-Run release of 2023-02"), keeps the link,
//     and is marked unparsed, as no build is named. Any other vendor fix
//     that names neither a build nor a KB ("Release Notes" without a
//     build) gives no atom: there is nothing to install or compare.
//   - The atom's KB is the remediation's numeric vuln:Description, and the
//     KB is its advisory id (the CVE when there is none).
//
// CVSS scores are Microsoft's own; they are kept, as the CNA's, only for
// CVEs whose CNA is Microsoft and for CVSS 3.x vectors. The description is
// the Description note when MSRC gives one (older documents do), except
// the notes MSRC writes on other CNAs' CVEs to say how its products take
// the fix ("This CVE was assigned by Chrome. Microsoft Edge
// (Chromium-based) ingests Chromium ..."), which do not describe the
// vulnerability; the title is not used.
package msrc

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"html"
	"io"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed"
	"github.com/patchline/patchline/internal/feed/csaf"
	"github.com/patchline/patchline/internal/version"
)

// Parser reads MSRC's CVRF XML documents and CSAF JSON documents, and
// passes over the API's listing of monthly documents (updates-index.json).
var Parser = feed.Parser{
	Name:  "msrc",
	Exts:  []string{".xml", ".json"},
	Parse: parse,
}

// Provenance of every MSRC fact.
const (
	// License is the license of MSRC's data.
	License = "Microsoft Terms of Use"
	// Source is the Source of MSRC's atoms.
	Source = "Microsoft Security Response Center"
	// guideURL is the Security Update Guide page of a CVE.
	guideURL = "https://msrc.microsoft.com/update-guide/vulnerability/"
	// metricSource is the Source of the scores Microsoft gives as CNA.
	metricSource = "microsoft"
)

// dataSource is the data source credited for a CVE.
func dataSource(id string) cve.DataSource {
	u := guideURL + id
	return cve.DataSource{Name: "msrc", License: License, URL: &u}
}

func parse(ctx context.Context, name string, r io.Reader, sink feed.Sink) error {
	if strings.EqualFold(path.Ext(name), ".json") {
		return parseJSON(ctx, name, r, sink)
	}
	return parseCVRF(ctx, name, r, sink)
}

// maxJSON bounds the size of a JSON document.
const maxJSON = 256 << 20

// parseJSON reads a CSAF document of Microsoft's, or passes over the
// Security Updates API's index of monthly documents.
func parseJSON(ctx context.Context, name string, r io.Reader, sink feed.Sink) error {
	data, err := io.ReadAll(io.LimitReader(r, maxJSON+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > maxJSON {
		return fmt.Errorf("read %s: larger than %d bytes", name, maxJSON)
	}
	if h, ok := csaf.Sniff(data); ok {
		if !strings.Contains(strings.ToLower(h.Publisher), "microsoft") {
			return fmt.Errorf("csaf document %s of %q: not Microsoft's, ingest it as csaf", h.TrackingID, h.Publisher)
		}
		switch h.Category {
		case "csaf_security_advisory", "csaf_vex":
		default:
			return fmt.Errorf("csaf document %s: category %q is not an advisory or vex", h.TrackingID, h.Category)
		}
		return csaf.Read(ctx, name, bytes.NewReader(data), sink, csaf.Options{
			Feed:         "msrc",
			Source:       dataSource,
			AtomSource:   Source,
			License:      License,
			MetricSource: metricSource,
			KBAdvisory:   true,
		})
	}
	if isIndex(data) {
		return nil
	}
	return errors.New("not an msrc csaf document or update index")
}

// isIndex reports whether data is the Security Updates API's listing of
// monthly documents (GET /updates): it names documents, it holds no facts.
func isIndex(data []byte) bool {
	var idx struct {
		Context string `json:"@odata.context"`
		Value   []struct {
			ID      string `json:"ID"`
			CvrfURL string `json:"CvrfUrl"`
		} `json:"value"`
	}
	if err := json.Unmarshal(data, &idx); err != nil || idx.Value == nil {
		return false
	}
	if strings.HasSuffix(idx.Context, "#Updates") {
		return true
	}
	for _, v := range idx.Value {
		if v.ID == "" || v.CvrfURL == "" {
			return false
		}
	}
	return len(idx.Value) > 0
}

// The parts of a CVRF document read here. encoding/xml matches element
// names in any namespace, so the cvrf:, prod: and vuln: prefixes need no
// spelling out.
type (
	tracking struct {
		ID                 string `xml:"Identification>ID"`
		InitialReleaseDate string `xml:"InitialReleaseDate"`
		CurrentReleaseDate string `xml:"CurrentReleaseDate"`
	}

	fullProductName struct {
		ProductID string `xml:"ProductID,attr"`
		Name      string `xml:",chardata"`
	}

	vulnerability struct {
		Notes []struct {
			Title string `xml:"Title,attr"`
			Type  string `xml:"Type,attr"`
			Text  string `xml:",chardata"`
		} `xml:"Notes>Note"`
		CVE  string `xml:"CVE"`
		CWEs []struct {
			ID string `xml:"ID,attr"`
		} `xml:"CWE"`
		ScoreSets []struct {
			BaseScore string `xml:"BaseScore"`
			Vector    string `xml:"Vector"`
		} `xml:"CVSSScoreSets>ScoreSet"`
		Remediations []remediation `xml:"Remediations>Remediation"`
		Revisions    []struct {
			Date string `xml:"Date"`
		} `xml:"RevisionHistory>Revision"`
	}

	remediation struct {
		Type        string   `xml:"Type,attr"`
		Description string   `xml:"Description"`
		URL         string   `xml:"URL"`
		ProductIDs  []string `xml:"ProductID"`
		FixedBuild  string   `xml:"FixedBuild"`
	}
)

// parseCVRF streams a CVRF document: the product tree comes before the
// vulnerabilities, each decoded in turn. The facts are handed on once the
// whole document has been read, those of a CVE listed twice merged into
// one, since the catalog keeps one Facts per CVE and document.
func parseCVRF(ctx context.Context, name string, r io.Reader, sink feed.Sink) error {
	dec := xml.NewDecoder(r)
	var (
		doc      tracking
		products = map[string]string{}
		root     = true
		facts    []*cve.Facts
		byCVE    = map[string]*cve.Facts{}
	)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			if root {
				return errors.New("not a cvrf document: empty")
			}
			for _, f := range facts {
				if err := sink.Facts(f); err != nil {
					return err
				}
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("decode cvrf: %w", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if root {
			if se.Name.Local != "cvrfdoc" {
				return fmt.Errorf("not a cvrf document: root element %q", se.Name.Local)
			}
			root = false
			continue
		}
		switch se.Name.Local {
		case "DocumentTracking":
			if err := dec.DecodeElement(&doc, &se); err != nil {
				return fmt.Errorf("decode cvrf tracking: %w", err)
			}
			doc.ID = strings.TrimSpace(doc.ID)
		case "FullProductName":
			var p fullProductName
			if err := dec.DecodeElement(&p, &se); err != nil {
				return fmt.Errorf("decode cvrf product: %w", err)
			}
			if id := strings.TrimSpace(p.ProductID); id != "" {
				products[id] = strings.TrimSpace(p.Name)
			}
		case "Vulnerability":
			if err := ctx.Err(); err != nil {
				return err
			}
			var v vulnerability
			if err := dec.DecodeElement(&v, &se); err != nil {
				return fmt.Errorf("decode cvrf vulnerability: %w", err)
			}
			raw := strings.TrimSpace(v.CVE)
			if !strings.HasPrefix(strings.ToUpper(raw), "CVE-") {
				// Security advisories (ADV240001) are not CVEs.
				continue
			}
			id, err := cve.ParseID(raw)
			if err != nil {
				sink.Reject(name+"#"+raw, err)
				continue
			}
			docID := doc.ID
			if docID == "" {
				// Every real document names itself before its
				// vulnerabilities; the file is named after the month.
				docID = strings.TrimSuffix(path.Base(name), path.Ext(name))
			}
			f := factsOf(id, docID, &v, products)
			if prev, ok := byCVE[id]; ok {
				merge(prev, f)
				continue
			}
			byCVE[id] = f
			facts = append(facts, f)
		}
	}
}

// factsOf returns the facts of one vulnerability of the document docID.
func factsOf(id, docID string, v *vulnerability, products map[string]string) *cve.Facts {
	f := &cve.Facts{
		CVEID:       id,
		Feed:        "msrc",
		Doc:         docID,
		Source:      dataSource(id),
		Description: description(v),
		References:  []cve.Reference{{URL: guideURL + id, Tags: []string{"vendor-advisory"}}},
		Atoms:       atoms(id, docMonth(docID), v, products),
	}
	for _, c := range v.CWEs {
		cwe := strings.ToUpper(strings.TrimSpace(c.ID))
		if strings.HasPrefix(cwe, "CWE-") && !slices.Contains(f.CWEs, cwe) {
			f.CWEs = append(f.CWEs, cwe)
		}
	}
	if cnaIsMicrosoft(v) {
		f.Metrics = metrics(v)
	}
	for _, r := range v.Revisions {
		t := feed.Time(r.Date)
		if t == nil {
			continue
		}
		if f.Published == nil || t.Before(*f.Published) {
			f.Published = t
		}
		if f.Modified == nil || t.After(*f.Modified) {
			f.Modified = t
		}
	}
	return f
}

// merge adds to f what g, facts about the same CVE, adds.
func merge(f, g *cve.Facts) {
	if f.Description == "" {
		f.Description = g.Description
	}
	if g.Published != nil && (f.Published == nil || g.Published.Before(*f.Published)) {
		f.Published = g.Published
	}
	if g.Modified != nil && (f.Modified == nil || g.Modified.After(*f.Modified)) {
		f.Modified = g.Modified
	}
	for _, c := range g.CWEs {
		if !slices.Contains(f.CWEs, c) {
			f.CWEs = append(f.CWEs, c)
		}
	}
	for _, m := range g.Metrics {
		if !slices.Contains(f.Metrics, m) {
			f.Metrics = append(f.Metrics, m)
		}
	}
	f.Atoms = feed.SortAtoms(append(f.Atoms, g.Atoms...), atomKB)
}

// cnaIsMicrosoft reports whether Microsoft assigned the CVE: its CNA note
// says so, or there is none (Microsoft's own CVEs in older documents).
func cnaIsMicrosoft(v *vulnerability) bool {
	for _, n := range v.Notes {
		if n.Type == "CNA" {
			return strings.EqualFold(strings.TrimSpace(n.Text), "Microsoft") || strings.EqualFold(n.Title, "Microsoft")
		}
	}
	return true
}

// metrics returns the distinct CVSS 3.x scores of a vulnerability.
func metrics(v *vulnerability) []cve.Metric {
	var out []cve.Metric
	for _, s := range v.ScoreSets {
		vec := strings.TrimSpace(s.Vector)
		rest, ok := strings.CutPrefix(vec, "CVSS:3.")
		if !ok || len(rest) < 2 || rest[1] != '/' {
			continue
		}
		score, err := strconv.ParseFloat(strings.TrimSpace(s.BaseScore), 64)
		if err != nil || score < 0 || score > 10 {
			continue
		}
		m := cve.Metric{Version: "3." + rest[:1], Vector: vec, Score: score, Severity: cve.SeverityOf("3."+rest[:1], score), Source: metricSource, Type: cve.MetricCNA}
		if !slices.ContainsFunc(out, func(o cve.Metric) bool { return o.Vector == m.Vector && o.Score == m.Score }) {
			out = append(out, m)
		}
	}
	return out
}

var (
	tags   = regexp.MustCompile(`<[^>]*>`)
	spaces = regexp.MustCompile(`\s+`)
)

// notDescriptions start the Description notes that say how Microsoft's
// products take the fix of another CNA's CVE rather than what the
// vulnerability is.
var notDescriptions = []string{"This CVE was assigned by ", "We are republishing this "}

// description returns the text of the Description note, without its HTML,
// or "" when the note does not describe the vulnerability.
func description(v *vulnerability) string {
	for _, n := range v.Notes {
		if n.Type != "Description" {
			continue
		}
		text := html.UnescapeString(tags.ReplaceAllString(n.Text, " "))
		text = strings.TrimSpace(spaces.ReplaceAllString(text, " "))
		for _, p := range notDescriptions {
			if strings.HasPrefix(text, p) {
				return ""
			}
		}
		return text
	}
	return ""
}

// Names MSRC gives CBL-Mariner and Azure Linux packages: a package of a
// release ("cbl2 curl 8.8.0-1 on CBL Mariner 2.0", sometimes without the
// version), an RPM file ("less-590-2.cm2.x86_64.rpm on CBL Mariner 2.0
// x64"), or the release itself ("Azure Linux 3.0 x64"), whose vendor fix
// names the package in its description.
var (
	marinerPackage = regexp.MustCompile(`^\S+\s+(\S+)\s+(?:\S+\s+)?on (?:CBL Mariner|CBL-Mariner|Azure Linux) ([0-9]+)\.[0-9]+$`)
	marinerRPM     = regexp.MustCompile(`^(\S+)-[^-\s]+-[^-\s]+\.(?:x86_64|aarch64|noarch|src)\.rpm on (?:CBL Mariner|CBL-Mariner|Azure Linux) ([0-9]+)\.[0-9]+(?: x64| ARM)?$`)
	marinerRelease = regexp.MustCompile(`^(?:CBL Mariner|CBL-Mariner|Azure Linux) ([0-9]+)\.[0-9]+ (?:x64|ARM)$`)
	packageName    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9+._-]*$`)
)

// product returns the ecosystem and product of an MSRC product name; desc
// is the description of the vendor fix.
func product(name, desc string) (ecosystem, product string) {
	if m := marinerPackage.FindStringSubmatch(name); m != nil {
		return "Azure Linux:" + m[2], m[1]
	}
	if m := marinerRPM.FindStringSubmatch(name); m != nil {
		return "Azure Linux:" + m[2], m[1]
	}
	if m := marinerRelease.FindStringSubmatch(name); m != nil && packageName.MatchString(desc) && !kbNumber.MatchString(desc) {
		return "Azure Linux:" + m[1], desc
	}
	if strings.HasPrefix(name, "Windows") {
		return "Windows", name
	}
	return "Microsoft", name
}

var kbNumber = regexp.MustCompile(`^(?:KB)?([0-9]{6,8})$`)

// docMonth returns the month of a monthly document ("2023-Feb" →
// "2023-02"), or its id when it is not one.
func docMonth(docID string) string {
	if t, err := time.Parse("2006-Jan", docID); err == nil {
		return t.Format("2006-01")
	}
	return docID
}

// clickToRun reports whether a vendor fix is a Click-to-Run release.
func clickToRun(r remediation) bool {
	return strings.EqualFold(clean(r.Description), "Click to Run") ||
		strings.Contains(strings.ToLower(clean(r.FixedBuild)), "officesecurityreleases")
}

// atoms returns an atom per product of each vendor fix; month is the
// document's ("2023-02").
func atoms(id, month string, v *vulnerability, products map[string]string) []cve.ProductAtom {
	var out []cve.ProductAtom
	for _, r := range v.Remediations {
		if r.Type != "Vendor Fix" {
			continue
		}
		build := clean(r.FixedBuild)
		link := clean(r.URL)
		if build == "-" || isURL(build) {
			if link == "" && isURL(build) {
				link = build
			}
			build = ""
		}
		if link == "" || !isURL(link) {
			link = guideURL + id
		}
		kb := ""
		if m := kbNumber.FindStringSubmatch(clean(r.Description)); m != nil {
			kb = "KB" + m[1]
		}
		fixes := builds(build)
		if len(fixes) == 0 && kb != "" {
			fixes = []string{kb}
		}
		if len(fixes) == 0 && clickToRun(r) {
			fixes = []string{"Click-to-Run release of " + month}
		}
		if len(fixes) == 0 {
			continue
		}
		advisory := id
		if kb != "" {
			advisory = kb
		}
		for _, pid := range r.ProductIDs {
			name, ok := products[strings.TrimSpace(pid)]
			if !ok || name == "" {
				continue
			}
			eco, prod := product(name, clean(r.Description))
			for _, fixed := range fixes {
				valid := version.Valid(eco, fixed)
				a := cve.ProductAtom{
					Ecosystem: eco,
					Product:   prod,
					Atom: cve.Atom{
						FixedVersion: fixed,
						AdvisoryID:   &advisory,
						SourceURL:    &link,
						Source:       Source,
						License:      License,
						KB:           kb,
						Unparsed:     !valid,
					},
				}
				if valid && fixed != kb {
					rng := "< " + fixed
					a.AffectedRange = &rng
				}
				out = append(out, a)
			}
		}
	}
	return feed.SortAtoms(out, atomKB)
}

// atomKB tells apart atoms of one fixed version by their KB.
func atomKB(a cve.ProductAtom) string { return a.KB }

// listed matches one version of a list of versions.
var listed = regexp.MustCompile(`^[0-9][0-9A-Za-z.+~_:-]*$`)

// builds splits a FixedBuild that lists versions ("1.17.13-2,1.18.8-2",
// "3.0.6920.8954; 2.0.50727.8970") into them; anything else is one build,
// kept as MSRC wrote it.
func builds(build string) []string {
	if build == "" {
		return nil
	}
	parts := strings.FieldsFunc(build, func(r rune) bool { return r == ',' || r == ';' })
	if len(parts) < 2 {
		return []string{build}
	}
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
		if !listed.MatchString(parts[i]) {
			return []string{build}
		}
	}
	return parts
}

// clean trims a CVRF text of white space and of the zero-width characters
// some builds carry.
func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		switch r {
		case '\u200b', '\u200c', '\u200d', '\u2060', '\ufeff':
			return -1
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}

func isURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}
