// Package osv reads OSV databases: a directory of OSV JSON records (GitHub
// Advisory Database, Go, RustSec, AlmaLinux ...), PyPA's records in YAML,
// or the per-ecosystem all.zip that OSV.dev publishes, one file at a time.
//
// Records are decoded with the OSV schema's official Go bindings
// (protocol buffer messages, read with protojson; fields of newer schema
// versions are passed over), PyPA's YAML after re-encoding it as JSON.
// Each record gives one cve.Facts per CVE it names, credited to its
// database ("osv:GHSA", "osv:Go", "osv:PyPA", "osv:RustSec",
// "osv:AlmaLinux" ..., known by the id prefix, else by the ecosystem) under
// the database's license, with an atom per fixed version of each affected
// package and one per range of versions affected with no fix known. A
// withdrawn record gives no facts.
//
// A record names its CVEs in its id (CVE-…, or DEBIAN-CVE-… and the like),
// in aliases, or, for databases such as AlmaLinux whose records are errata,
// only in related or upstream; those are read only when the id and the
// aliases name no CVE, since related ids are not always the same
// vulnerability.
//
// Reference types become lower-case tags ("advisory", "fix", "report"),
// like the tags of the CVE List; WEB, the type of a page OSV says nothing
// more about, gives none. OSV's summary and details describe the package
// rather than the CVE, so the facts carry no description.
package osv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ossf/osv-schema/bindings/go/osvschema"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"gopkg.in/yaml.v3"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed"
	"github.com/patchline/patchline/internal/version"
)

// Parser reads OSV records in JSON or YAML: one record per file as the
// databases publish them, or an array of records, or an object with a
// "vulns" array as the OSV.dev API returns them.
var Parser = feed.Parser{
	Name:  "osv",
	Exts:  []string{".json", ".yaml", ".yml"},
	Parse: parse,
}

// maxFile bounds the size of one file. A record is a few kilobytes; the
// largest real ones (kernel errata) are a few megabytes.
const maxFile = 256 << 20

// advisoryURL is where OSV.dev shows an advisory.
const advisoryURL = "https://osv.dev/vulnerability/"

func parse(ctx context.Context, name string, r io.Reader, sink feed.Sink) error {
	data, err := io.ReadAll(io.LimitReader(r, maxFile+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > maxFile {
		return fmt.Errorf("read %s: larger than %d bytes", name, maxFile)
	}
	switch strings.ToLower(path.Ext(name)) {
	case ".yaml", ".yml":
		if data, err = yamlToJSON(data); err != nil {
			return fmt.Errorf("decode yaml: %w", err)
		}
	}
	records, single, err := split(data)
	if err != nil {
		return err
	}
	for i, raw := range records {
		if err := ctx.Err(); err != nil {
			return err
		}
		v, err := decode(raw)
		if err != nil {
			if single {
				return err
			}
			sink.Reject(fmt.Sprintf("%s[%d]", name, i), err)
			continue
		}
		for _, f := range factsOf(v) {
			if err := sink.Facts(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// split returns the records of a file: the file itself when it is one
// record (single is true), else the elements of a top-level array or of
// the "vulns" array of an API response.
func split(data []byte) (records []json.RawMessage, single bool, err error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, false, errors.New("empty file")
	}
	if data[0] == '[' {
		if err := json.Unmarshal(data, &records); err != nil {
			return nil, false, fmt.Errorf("decode osv records: %w", err)
		}
		return records, false, nil
	}
	var probe struct {
		ID    *string           `json:"id"`
		Vulns []json.RawMessage `json:"vulns"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, false, fmt.Errorf("decode osv record: %w", err)
	}
	if probe.ID == nil && probe.Vulns != nil {
		return probe.Vulns, false, nil
	}
	return []json.RawMessage{data}, true, nil
}

// decode decodes one record. Unknown fields and enum values are those of
// newer schema versions and are passed over.
func decode(raw []byte) (*osvschema.Vulnerability, error) {
	v := new(osvschema.Vulnerability)
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, v); err != nil {
		return nil, fmt.Errorf("decode osv record: %w", err)
	}
	if strings.TrimSpace(v.GetId()) == "" {
		return nil, errors.New("decode osv record: no id")
	}
	return v, nil
}

// factsOf returns the facts of a record, one per CVE it names; none for a
// withdrawn record or one that names no CVE.
func factsOf(v *osvschema.Vulnerability) []*cve.Facts {
	if v.GetWithdrawn() != nil {
		return nil
	}
	ids := cveIDs(v)
	if len(ids) == 0 {
		return nil
	}
	id := v.GetId()
	db := databaseOf(v)
	link := advisoryURL + url.PathEscape(id)
	base := cve.Facts{
		Feed:       "osv",
		Doc:        id,
		Source:     cve.DataSource{Name: "osv:" + db.name, License: db.license, URL: &link},
		Published:  timeOf(v.GetPublished()),
		Modified:   timeOf(v.GetModified()),
		CWEs:       cwes(v.GetDatabaseSpecific()),
		References: references(v.GetReferences()),
		Atoms:      atoms(v, db, link),
	}
	out := make([]*cve.Facts, 0, len(ids))
	for _, c := range ids {
		f := base
		f.CVEID = c
		f.CWEs = slices.Clone(base.CWEs)
		f.References = slices.Clone(base.References)
		f.Atoms = slices.Clone(base.Atoms)
		out = append(out, &f)
	}
	return out
}

// cveIDs returns the canonical CVE ids a record is about: its id and its
// aliases, or when those name none, its related and upstream ids.
func cveIDs(v *osvschema.Vulnerability) []string {
	var ids []string
	add := func(s string) {
		if c, ok := cveOf(s); ok && !slices.Contains(ids, c) {
			ids = append(ids, c)
		}
	}
	add(v.GetId())
	for _, a := range v.GetAliases() {
		add(a)
	}
	if len(ids) == 0 {
		for _, a := range v.GetRelated() {
			add(a)
		}
		for _, a := range v.GetUpstream() {
			add(a)
		}
	}
	return ids
}

// embedded finds a CVE id inside a database's own id, such as
// DEBIAN-CVE-2023-4863 or UBUNTU-CVE-2023-4863.
var embedded = regexp.MustCompile(`^[A-Za-z]+-(CVE-[0-9]{4}-[0-9]{4,})$`)

func cveOf(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if m := embedded.FindStringSubmatch(s); m != nil {
		s = m[1]
	}
	c, err := cve.ParseID(s)
	return c, err == nil
}

// database is one OSV database, credited as the source of its records.
type database struct {
	name    string // in the source name "osv:<name>"
	title   string // the atom's Source
	license string
}

var (
	almaLinux = database{"AlmaLinux", "AlmaLinux OSV Database", "MIT"}
	debian    = database{"Debian", "Debian Security Tracker", "see Debian"}
	redHat    = database{"Red Hat", "Red Hat Security Data", "see Red Hat"}
	rocky     = database{"Rocky Linux", "Rocky Linux Errata", "see Rocky Linux"}
	suse      = database{"SUSE", "SUSE Security Advisories", "see SUSE"}
	ubuntu    = database{"Ubuntu", "Ubuntu Security Notices", "see Ubuntu"}
)

// databases maps id prefixes to their database. The licenses are those the
// databases state for their data.
var databases = []struct {
	prefix string
	db     database
}{
	{"GHSA-", database{"GHSA", "GitHub Advisory Database", "CC-BY-4.0"}},
	{"GO-", database{"Go", "Go Vulnerability Database", "CC-BY-4.0"}},
	{"PYSEC-", database{"PyPA", "PyPA Advisory Database", "CC-BY-4.0"}},
	{"RUSTSEC-", database{"RustSec", "RustSec Advisory Database", "CC0-1.0"}},
	{"OSV-", database{"OSS-Fuzz", "OSS-Fuzz", "CC-BY-4.0"}},
	{"ALSA-", almaLinux},
	{"ALBA-", almaLinux},
	{"ALEA-", almaLinux},
	{"USN-", ubuntu},
	{"UBUNTU-", ubuntu},
	{"DSA-", debian},
	{"DLA-", debian},
	{"DTSA-", debian},
	{"DEBIAN-", debian},
	{"RHSA-", redHat},
	{"RHBA-", redHat},
	{"RHEA-", redHat},
	{"RLSA-", rocky},
	{"RXSA-", rocky},
	{"openSUSE-", suse},
	{"SUSE-", suse},
	{"BIT-", database{"Bitnami", "Bitnami Vulnerability Database", "see Bitnami"}},
	{"CGA-", database{"Chainguard", "Chainguard Security Advisories", "see Chainguard"}},
	{"CURL-", database{"curl", "curl Security Advisories", "see curl"}},
	{"HSEC-", database{"Haskell", "Haskell Security Advisories", "see Haskell"}},
	{"MAL-", database{"Malicious Packages", "OpenSSF Malicious Packages", "see Malicious Packages"}},
	{"MGASA-", database{"Mageia", "Mageia Advisories", "see Mageia"}},
	{"OESA-", database{"openEuler", "openEuler Security Advisories", "see openEuler"}},
	{"PHSA-", database{"Photon OS", "Photon OS Security Advisories", "see Photon OS"}},
	{"PSF-", database{"PSF", "Python Software Foundation Advisories", "see PSF"}},
	{"RSEC-", database{"R", "R Security Advisories", "see R"}},
}

// databaseOf returns the database of a record from its id prefix, else from
// its first ecosystem. A license in database_specific (RustSec states one)
// takes precedence.
func databaseOf(v *osvschema.Vulnerability) database {
	id := v.GetId()
	var db database
	found := false
	for _, d := range databases {
		if strings.HasPrefix(id, d.prefix) {
			db, found = d.db, true
			break
		}
	}
	if !found {
		name := ""
		for _, a := range v.GetAffected() {
			if e := a.GetPackage().GetEcosystem(); e != "" {
				name, _, _ = strings.Cut(e, ":")
				break
			}
		}
		if name == "" {
			name, _, _ = strings.Cut(id, "-")
		}
		db = database{name: name, title: name + " (OSV)", license: "see " + name}
	}
	if l := stringField(v.GetDatabaseSpecific(), "license"); spdx.MatchString(l) {
		db.license = l
	}
	return db
}

// spdx matches a plausible SPDX license expression of one identifier.
var spdx = regexp.MustCompile(`^[A-Za-z0-9.+-]{2,40}$`)

func stringField(s *structpb.Struct, key string) string {
	if s == nil {
		return ""
	}
	return s.GetFields()[key].GetStringValue()
}

// timeOf returns a timestamp, or nil when it is absent or a placeholder
// (the Go database writes 0001-01-01T00:00:00Z).
func timeOf(ts *timestamppb.Timestamp) *time.Time {
	if ts == nil || ts.CheckValid() != nil || ts.GetSeconds() <= 0 {
		return nil
	}
	t := ts.AsTime().UTC()
	return &t
}

var cweID = regexp.MustCompile(`^CWE-[0-9]+$`)

// cwes returns database_specific.cwe_ids (GitHub's records have them).
func cwes(s *structpb.Struct) []string {
	if s == nil {
		return nil
	}
	var out []string
	for _, v := range s.GetFields()["cwe_ids"].GetListValue().GetValues() {
		id := strings.ToUpper(strings.TrimSpace(v.GetStringValue()))
		if cweID.MatchString(id) && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// references returns the references with their type as a lower-case tag,
// one entry per URL.
func references(refs []*osvschema.Reference) []cve.Reference {
	var out cve.References
	for _, r := range refs {
		if t := r.GetType(); t == osvschema.Reference_NONE || t == osvschema.Reference_WEB {
			// WEB is OSV's type for a page it says nothing more about.
			out.Add(r.GetUrl())
		} else {
			out.Add(r.GetUrl(), strings.ToLower(t.String()))
		}
	}
	return out.List()
}

// atoms returns the atoms of the ECOSYSTEM and SEMVER ranges of each
// affected package: one per fixed event, with the versions it closes, and
// one without a fixed version for the versions affected with no fix known,
// those of a range that ends in last_affected or limit, or that does not
// end (from its last introduced version on). GIT ranges name commits, not
// versions one can install, and are passed over.
func atoms(v *osvschema.Vulnerability, db database, link string) []cve.ProductAtom {
	id := v.GetId()
	var out []cve.ProductAtom
	for _, a := range v.GetAffected() {
		eco := strings.TrimSpace(a.GetPackage().GetEcosystem())
		product := strings.TrimSpace(a.GetPackage().GetName())
		if eco == "" || product == "" {
			continue
		}
		add := func(fixed, rng string) {
			out = append(out, cve.ProductAtom{
				Ecosystem: eco,
				Product:   product,
				Atom: cve.Atom{
					FixedVersion:  fixed,
					AffectedRange: &rng,
					AdvisoryID:    &id,
					SourceURL:     &link,
					Source:        db.title,
					License:       db.license,
					Unparsed:      fixed != "" && !version.Valid(eco, fixed),
				},
			})
		}
		for _, rg := range a.GetRanges() {
			if t := rg.GetType(); t != osvschema.Range_ECOSYSTEM && t != osvschema.Range_SEMVER {
				continue
			}
			introduced, open := "", false
			for _, ev := range rg.GetEvents() {
				switch {
				case ev.GetIntroduced() != "":
					introduced, open = strings.TrimSpace(ev.GetIntroduced()), true
				case ev.GetFixed() != "":
					fixed := strings.TrimSpace(ev.GetFixed())
					add(fixed, affectedRange(introduced, "< "+fixed))
					introduced, open = "", false
				case ev.GetLastAffected() != "" && open:
					add("", affectedRange(introduced, "<= "+strings.TrimSpace(ev.GetLastAffected())))
					introduced, open = "", false
				case ev.GetLimit() != "" && open:
					add("", affectedRange(introduced, "< "+strings.TrimSpace(ev.GetLimit())))
					introduced, open = "", false
				}
			}
			if open {
				add("", affectedRange(introduced, ""))
			}
		}
	}
	return feed.SortAtoms(out, func(a cve.ProductAtom) string { return deref(a.AffectedRange) })
}

// affectedRange writes the versions from an introducing version up to
// an upper bound ("< 1.56.3", "<= 1.4.7", or "" for none): "< 1.56.3"
// from the start, ">= 1.57.0, < 1.57.1" from an introducing version,
// ">= 1.2.0" from a version on, "*" for every version.
func affectedRange(introduced, upper string) string {
	switch introduced {
	case "", "0", "0.0.0-0":
		if upper == "" {
			return "*"
		}
		return upper
	}
	if upper == "" {
		return ">= " + introduced
	}
	return ">= " + introduced + ", " + upper
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// maxNodes bounds the YAML nodes a document may expand to, aliases
// included.
const maxNodes = 1 << 20

// yamlToJSON re-encodes a YAML document as JSON for the OSV decoder. Every
// scalar but null and booleans becomes a JSON string: OSV's fields are
// strings, and YAML would read an unquoted version such as 2.0 as a number.
func yamlToJSON(data []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	budget := maxNodes
	v, err := yamlValue(&doc, &budget)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func yamlValue(n *yaml.Node, budget *int) (any, error) {
	*budget--
	if *budget < 0 {
		return nil, errors.New("document too large")
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return yamlValue(n.Content[0], budget)
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, errors.New("alias without anchor")
		}
		return yamlValue(n.Alias, budget)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := yamlValue(c, budget)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: mapping key is not a scalar", k.Line)
			}
			v, err := yamlValue(n.Content[i+1], budget)
			if err != nil {
				return nil, err
			}
			out[k.Value] = v
		}
		return out, nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil, nil
		case "!!bool":
			if b, err := strconv.ParseBool(strings.ToLower(n.Value)); err == nil {
				return b, nil
			}
		}
		return n.Value, nil
	}
	return nil, fmt.Errorf("line %d: unexpected yaml node", n.Line)
}
