package lookupapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ossf/osv-schema/bindings/go/osvconstants"
	"github.com/ossf/osv-schema/bindings/go/osvschema"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/patchline/patchline/internal/cve"
)

// The OSV document of a record (GET /cve/{id}/osv) is written with the
// schema's official bindings and declares the schema version they
// implement. It carries:
//
//   - the CVE id, its dates (withdrawn for a rejected CVE), a summary (the
//     first sentence of the description) and the description as details;
//   - the advisories of the fixes: GitHub's advisories, one per CVE, as
//     aliases, every other advisory (distribution errata, other databases'
//     records, which may bundle several CVEs or a CVE of a bundled library)
//     as related;
//   - the CVSS vectors, the preferred one first, one per CVSS version;
//   - the references, with an OSV type from their tags, then the
//     advisories of the fixes;
//   - for each product in an ecosystem the OSV schema registers, an
//     affected entry with a range per fix (SEMVER where the ecosystem uses
//     Semantic Versioning and the versions are valid ones, ECOSYSTEM
//     otherwise) and, in its database_specific, every fix with its source
//     and license;
//   - database_specific: the record's state, severity, CWEs, KEV and EPSS,
//     the contributing sources with their licenses (data_sources), and the
//     products in this service's own ecosystems (Apple, Windows, Microsoft,
//     Desktop, Vendor, or any other the schema does not register):
//     extension_ecosystems names those ecosystems and extension_affected
//     lists their products in the shape of affected entries. They are kept
//     out of affected because the schema only admits registered ecosystems
//     there.

// registeredEcosystems are the ecosystems the OSV schema registers, as the
// bindings list them, without the release suffix some take ("Debian:12",
// "Ubuntu:22.04:LTS").
var registeredEcosystems = map[string]bool{}

func init() {
	for _, e := range []osvconstants.Ecosystem{
		osvconstants.EcosystemAlmaLinux, osvconstants.EcosystemAlpaquita, osvconstants.EcosystemAlpine,
		osvconstants.EcosystemAndroid, osvconstants.EcosystemAzureLinux,
		osvconstants.EcosystemBellSoftHardenedContainers, osvconstants.EcosystemBioconductor,
		osvconstants.EcosystemBitnami, osvconstants.EcosystemChainguard, osvconstants.EcosystemCleanStart,
		osvconstants.EcosystemConanCenter, osvconstants.EcosystemCRAN, osvconstants.EcosystemCratesIO,
		osvconstants.EcosystemDebian, osvconstants.EcosystemDockerHardenedImages, osvconstants.EcosystemEcho,
		osvconstants.EcosystemFreeBSD, osvconstants.EcosystemGHC, osvconstants.EcosystemGitHubActions,
		osvconstants.EcosystemGo, osvconstants.EcosystemHackage, osvconstants.EcosystemHex,
		osvconstants.EcosystemJulia, osvconstants.EcosystemKubernetes, osvconstants.EcosystemLinux,
		osvconstants.EcosystemMageia, osvconstants.EcosystemMaven, osvconstants.EcosystemMinimOS,
		osvconstants.EcosystemNPM, osvconstants.EcosystemNuGet, osvconstants.EcosystemOpam,
		osvconstants.EcosystemOpenEuler, osvconstants.EcosystemOpenSUSE, osvconstants.EcosystemOSSFuzz,
		osvconstants.EcosystemPackagist, osvconstants.EcosystemPhotonOS, osvconstants.EcosystemPub,
		osvconstants.EcosystemPyPI, osvconstants.EcosystemRedHat, osvconstants.EcosystemRockyLinux,
		osvconstants.EcosystemRoot, osvconstants.EcosystemRubyGems, osvconstants.EcosystemSUSE,
		osvconstants.EcosystemSwiftURL, osvconstants.EcosystemTuxCare, osvconstants.EcosystemUbuntu,
		osvconstants.EcosystemVSCode, osvconstants.EcosystemWolfi,
	} {
		registeredEcosystems[string(e)] = true
	}
}

// isRegistered reports whether an ecosystem is one the OSV schema
// registers: a registered name, alone or with a non-empty suffix.
func isRegistered(eco string) bool {
	base, suffix, hasSuffix := strings.Cut(eco, ":")
	return registeredEcosystems[base] && (!hasSuffix || suffix != "")
}

// semverEcosystems version their packages with Semantic Versioning, so that
// their ranges are SEMVER ranges when the versions are valid ones.
var semverEcosystems = map[string]bool{"Go": true, "npm": true, "crates.io": true}

// semverRE is the grammar of a Semantic Versioning 2.0.0 version.
var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// extensionNote explains extension_ecosystems to the reader of a document.
const extensionNote = "ecosystems not registered in the OSV schema, added by this service: " +
	"Apple, Windows and Microsoft products, Desktop (third-party desktop applications), " +
	"Vendor (other vendors' products); their products are listed in extension_affected, " +
	"in the shape of affected entries"

// OSV returns the OSV document of a record: its remediation as affected
// packages with a range per fix, its scores, references and dates. The
// products of the extension ecosystems, flagged in database_specific, are
// listed there too, with the source and license of every fix and of every
// contributing source.
func OSV(rec *cve.Record) (*osvschema.Vulnerability, error) {
	v := &osvschema.Vulnerability{
		SchemaVersion: osvconstants.SchemaVersion,
		Id:            rec.CVEID,
	}
	switch {
	case rec.ModifiedAt != nil:
		v.Modified = timestamppb.New(*rec.ModifiedAt)
	case rec.PublishedAt != nil:
		v.Modified = timestamppb.New(*rec.PublishedAt)
	default:
		v.Modified = timestamppb.New(time.Unix(0, 0))
	}
	if rec.PublishedAt != nil {
		v.Published = timestamppb.New(*rec.PublishedAt)
	}
	if rec.State == cve.StateRejected {
		v.Withdrawn = v.Modified
	}
	if rec.Description != nil {
		v.Details = *rec.Description
		v.Summary = summaryOf(*rec.Description)
	}
	if rec.State == cve.StateRejected && rec.RejectedReason != nil && v.Details == "" {
		v.Details = *rec.RejectedReason
		v.Summary = summaryOf(*rec.RejectedReason)
	}
	v.Aliases, v.Related = advisoryIDs(rec)

	var extensions, extensionAffected []any
	for _, p := range rec.Remediation.Products {
		a, err := osvAffected(p)
		if err != nil {
			return nil, fmt.Errorf("osv of %s: %w", rec.CVEID, err)
		}
		if isRegistered(p.Ecosystem) {
			v.Affected = append(v.Affected, a)
			continue
		}
		if !slices.Contains(extensions, any(p.Ecosystem)) {
			extensions = append(extensions, p.Ecosystem)
		}
		m, err := asMap(a)
		if err != nil {
			return nil, fmt.Errorf("osv of %s: %w", rec.CVEID, err)
		}
		extensionAffected = append(extensionAffected, m)
	}
	v.Severity = osvSeverity(rec.CVSS)
	v.References = osvReferences(rec)

	sources := []any{}
	for _, d := range rec.DataSources {
		sources = append(sources, map[string]any{
			"name": d.Name, "use": d.Use, "license": d.License, "url": optString(d.URL),
		})
	}
	dbs := map[string]any{
		"source":       "patchline",
		"state":        rec.State,
		"data_sources": sources,
	}
	if len(extensions) > 0 {
		dbs["extension_ecosystems"] = extensions
		dbs["extension_ecosystems_note"] = extensionNote
		dbs["extension_affected"] = extensionAffected
	}
	if rec.Severity != nil {
		dbs["severity"] = *rec.Severity
	}
	if len(rec.CWEs) > 0 {
		dbs["cwe_ids"] = stringsAny(rec.CWEs)
	}
	if rec.KEV != nil {
		dbs["cisa_kev"] = map[string]any{
			"date_added": rec.KEV.DateAdded, "due_date": rec.KEV.DueDate,
			"required_action":               rec.KEV.RequiredAction,
			"known_ransomware_campaign_use": rec.KEV.KnownRansomwareCampaignUse,
		}
	}
	if rec.EPSS != nil {
		dbs["epss"] = map[string]any{
			"score": rec.EPSS.Score, "percentile": rec.EPSS.Percentile, "date": rec.EPSS.Date,
		}
	}
	st, err := structpb.NewStruct(dbs)
	if err != nil {
		return nil, fmt.Errorf("osv of %s: %w", rec.CVEID, err)
	}
	v.DatabaseSpecific = st
	return v, nil
}

// OSVJSON returns the JSON encoding of OSV(rec), compact and stable.
func OSVJSON(rec *cve.Record) ([]byte, error) {
	v, err := OSV(rec)
	if err != nil {
		return nil, err
	}
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode osv of %s: %w", rec.CVEID, err)
	}
	// protojson varies its whitespace on purpose; compact it so that the
	// same record always gives the same bytes (and ETag).
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, fmt.Errorf("encode osv of %s: %w", rec.CVEID, err)
	}
	return out.Bytes(), nil
}

// asMap returns the JSON form of an affected entry as a map, for
// database_specific.
func asMap(a *osvschema.Affected) (map[string]any, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(a)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// osvAffected returns the affected entry of one product: a range per fix,
// one per range affected with no fix known (ending in last_affected, in
// limit, or not at all), and the provenance of each atom in
// database_specific.
func osvAffected(p cve.Product) (*osvschema.Affected, error) {
	a := &osvschema.Affected{
		Package: &osvschema.Package{Ecosystem: p.Ecosystem, Name: p.Product},
	}
	type span struct{ introduced, fixed, lastAffected, limit string }
	seen := map[span]bool{}
	fixes := []any{}
	var unparsed []any
	for _, at := range p.Atoms {
		fix := map[string]any{
			"fixed_version":  at.FixedVersion,
			"affected_range": optString(at.AffectedRange),
			"advisory_id":    optString(at.AdvisoryID),
			"source_url":     optString(at.SourceURL),
			"source":         at.Source,
			"license":        at.License,
		}
		if at.KB != "" {
			fix["kb"] = at.KB
		}
		if at.EOL != nil {
			fix["eol"] = map[string]any{"eol_from": optString(at.EOL.EOLFrom), "eoes_from": optString(at.EOL.EOESFrom)}
		}
		fixes = append(fixes, fix)
		sp := span{introduced: introducedOf(at.AffectedRange)}
		switch {
		case !at.HasFix():
			sp.lastAffected, sp.limit = upperOf(at.AffectedRange, "<="), upperOf(at.AffectedRange, "<")
		case at.Unparsed:
			unparsed = append(unparsed, at.FixedVersion)
			continue
		default:
			sp.fixed = at.FixedVersion
		}
		if seen[sp] {
			continue
		}
		seen[sp] = true
		end := &osvschema.Event{Fixed: sp.fixed, LastAffected: sp.lastAffected, Limit: sp.limit}
		a.Ranges = append(a.Ranges, osvRange(p.Ecosystem, sp.introduced, end))
	}
	dbs := map[string]any{"fixes": fixes}
	if !isRegistered(p.Ecosystem) {
		dbs["extension_ecosystem"] = true
	}
	if len(unparsed) > 0 {
		dbs["unparsed_fixed_versions"] = unparsed
	}
	st, err := structpb.NewStruct(dbs)
	if err != nil {
		return nil, err
	}
	a.DatabaseSpecific = st
	return a, nil
}

// osvRange is the range from an introducing version to an end event (a
// fixed, last_affected or limit version, or none: an empty event):
// SEMVER where the ecosystem uses Semantic Versioning and its versions are
// valid ones, ECOSYSTEM otherwise.
func osvRange(eco, introduced string, end *osvschema.Event) *osvschema.Range {
	typ := osvschema.Range_ECOSYSTEM
	ends := []*string{&end.Fixed, &end.LastAffected, &end.Limit}
	if semverEcosystems[eco] {
		in := strings.TrimPrefix(introduced, "v")
		ok := in == "0" || semverRE.MatchString(in)
		for _, e := range ends {
			ok = ok && (*e == "" || semverRE.MatchString(strings.TrimPrefix(*e, "v")))
		}
		if ok {
			typ, introduced = osvschema.Range_SEMVER, in
			for _, e := range ends {
				*e = strings.TrimPrefix(*e, "v")
			}
		}
	}
	r := &osvschema.Range{Type: typ, Events: []*osvschema.Event{{Introduced: introduced}}}
	if end.Fixed+end.LastAffected+end.Limit != "" {
		r.Events = append(r.Events, end)
	}
	return r
}

// upperOf returns the version of the bound op ("<" or "<=") of an
// affected range written "<= 1.4.7" or ">= 1.2.0, < 1.5.0", "" when it
// has none.
func upperOf(rng *string, op string) string {
	if rng == nil {
		return ""
	}
	for part := range strings.SplitSeq(*rng, ",") {
		part = strings.TrimSpace(part)
		if v, ok := strings.CutPrefix(part, op); ok && (op == "<=" || !strings.HasPrefix(v, "=")) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// introducedOf reads the lower bound of an affected range written
// ">= 2.0, < 2.15.0" or "> 2.0, < 2.15.0", and returns "0" when there is
// none. An exclusive bound becomes an inclusive one: OSV has no other, and
// claiming one version too many is the safe side.
func introducedOf(rng *string) string {
	if rng == nil {
		return "0"
	}
	for part := range strings.SplitSeq(*rng, ",") {
		part = strings.TrimSpace(part)
		var v string
		switch {
		case strings.HasPrefix(part, ">="):
			v = part[2:]
		case strings.HasPrefix(part, ">"):
			v = part[1:]
		default:
			continue
		}
		if v = strings.TrimSpace(v); v != "" && v != "0" {
			return v
		}
	}
	return "0"
}

// CVSS vectors as the OSV schema accepts them, by severity type.
var cvssVectors = map[osvschema.Severity_Type]*regexp.Regexp{
	osvschema.Severity_CVSS_V2: regexp.MustCompile(`^((AV:[NAL]|AC:[LMH]|Au:[MSN]|[CIA]:[NPC]|E:(U|POC|F|H|ND)|RL:(OF|TF|W|U|ND)|RC:(UC|UR|C|ND)|CDP:(N|L|LM|MH|H|ND)|TD:(N|L|M|H|ND)|[CIA]R:(L|M|H|ND))/)*(AV:[NAL]|AC:[LMH]|Au:[MSN]|[CIA]:[NPC]|E:(U|POC|F|H|ND)|RL:(OF|TF|W|U|ND)|RC:(UC|UR|C|ND)|CDP:(N|L|LM|MH|H|ND)|TD:(N|L|M|H|ND)|[CIA]R:(L|M|H|ND))$`),
	osvschema.Severity_CVSS_V3: regexp.MustCompile(`^CVSS:3[.][01]/((AV:[NALP]|AC:[LH]|PR:[NLH]|UI:[NR]|S:[UC]|[CIA]:[NLH]|E:[XUPFH]|RL:[XOTWU]|RC:[XURC]|[CIA]R:[XLMH]|MAV:[XNALP]|MAC:[XLH]|MPR:[XNLH]|MUI:[XNR]|MS:[XUC]|M[CIA]:[XNLH])/)*(AV:[NALP]|AC:[LH]|PR:[NLH]|UI:[NR]|S:[UC]|[CIA]:[NLH]|E:[XUPFH]|RL:[XOTWU]|RC:[XURC]|[CIA]R:[XLMH]|MAV:[XNALP]|MAC:[XLH]|MPR:[XNLH]|MUI:[XNR]|MS:[XUC]|M[CIA]:[XNLH])$`),
	osvschema.Severity_CVSS_V4: regexp.MustCompile(`^CVSS:4[.]0/AV:[NALP]/AC:[LH]/AT:[NP]/PR:[NLH]/UI:[NPA]/VC:[HLN]/VI:[HLN]/VA:[HLN]/SC:[HLN]/SI:[HLN]/SA:[HLN](/E:[XAPU])?(/CR:[XHML])?(/IR:[XHML])?(/AR:[XHML])?(/MAV:[XNALP])?(/MAC:[XLH])?(/MAT:[XNP])?(/MPR:[XNLH])?(/MUI:[XNPA])?(/MVC:[XNLH])?(/MVI:[XNLH])?(/MVA:[XNLH])?(/MSC:[XNLH])?(/MSI:[XNLHS])?(/MSA:[XNLHS])?(/S:[XNP])?(/AU:[XNY])?(/R:[XAUI])?(/V:[XDC])?(/RE:[XLMH])?(/U:(X|Clear|Green|Amber|Red))?$`),
}

// osvSeverity lists the CVSS vectors of a record, the preferred one first,
// one per CVSS major version. A vector the schema would not accept (a
// scorer's typo) is left out.
func osvSeverity(c *cve.CVSS) []*osvschema.Severity {
	if c == nil {
		return nil
	}
	var out []*osvschema.Severity
	seen := map[osvschema.Severity_Type]bool{}
	add := func(m cve.Metric) {
		var t osvschema.Severity_Type
		switch {
		case m.Version == "2.0":
			t = osvschema.Severity_CVSS_V2
		case strings.HasPrefix(m.Version, "3"):
			t = osvschema.Severity_CVSS_V3
		case strings.HasPrefix(m.Version, "4"):
			t = osvschema.Severity_CVSS_V4
		default:
			return
		}
		if seen[t] || !cvssVectors[t].MatchString(m.Vector) {
			return
		}
		seen[t] = true
		out = append(out, &osvschema.Severity{Type: t, Score: m.Vector})
	}
	add(c.Metric)
	for _, m := range c.Metrics {
		add(m)
	}
	return out
}

// advisoryIDs returns the advisories of a record's fixes: GitHub's as
// aliases (GitHub publishes one advisory per CVE), every other as related
// (an erratum fixes several CVEs; another database's record may be about
// a copy of the library the CVE is about). KB articles are updates, not
// advisories, and are left out.
func advisoryIDs(rec *cve.Record) (aliases, related []string) {
	for _, p := range rec.Remediation.Products {
		for _, at := range p.Atoms {
			if at.AdvisoryID == nil {
				continue
			}
			id := strings.TrimSpace(*at.AdvisoryID)
			switch {
			case id == "" || strings.EqualFold(id, rec.CVEID) || id == at.KB || strings.ContainsAny(id, " \t\n"):
			case strings.HasPrefix(id, "GHSA-"):
				if !slices.Contains(aliases, id) {
					aliases = append(aliases, id)
				}
			default:
				if !slices.Contains(related, id) {
					related = append(related, id)
				}
			}
		}
	}
	slices.Sort(aliases)
	slices.Sort(related)
	return aliases, related
}

// validURL reports whether s is an absolute http(s) URL, as the schema's
// references require.
func validURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && !strings.ContainsAny(s, " \t\n")
}

// osvReferences lists the record's references with an OSV type from their
// tags, then the advisories of the fixes.
func osvReferences(rec *cve.Record) []*osvschema.Reference {
	var out []*osvschema.Reference
	seen := map[string]bool{}
	for _, ref := range rec.References {
		if !validURL(ref.URL) || seen[ref.URL] {
			continue
		}
		seen[ref.URL] = true
		out = append(out, &osvschema.Reference{Type: referenceType(ref.Tags), Url: ref.URL})
	}
	for _, p := range rec.Remediation.Products {
		for _, at := range p.Atoms {
			if at.SourceURL == nil || !validURL(*at.SourceURL) || seen[*at.SourceURL] {
				continue
			}
			seen[*at.SourceURL] = true
			out = append(out, &osvschema.Reference{Type: osvschema.Reference_ADVISORY, Url: *at.SourceURL})
		}
	}
	return out
}

// referenceTypes map the tags of the CVE List (vendor-advisory), of NVD
// (Vendor Advisory) and of OSV records (advisory, fix: OSV's own types in
// lower case), written in lower case with spaces, to an OSV reference type
// and a rank: the tag that says most wins.
var referenceTypes = map[string]struct {
	typ  osvschema.Reference_Type
	rank int
}{
	"patch":                  {osvschema.Reference_FIX, 6},
	"fix":                    {osvschema.Reference_FIX, 6},
	"vendor advisory":        {osvschema.Reference_ADVISORY, 5},
	"third party advisory":   {osvschema.Reference_ADVISORY, 5},
	"us government resource": {osvschema.Reference_ADVISORY, 5},
	"government resource":    {osvschema.Reference_ADVISORY, 5},
	"vdb entry":              {osvschema.Reference_ADVISORY, 5},
	"advisory":               {osvschema.Reference_ADVISORY, 5},
	"confirm":                {osvschema.Reference_ADVISORY, 5},
	"exploit":                {osvschema.Reference_EVIDENCE, 4},
	"evidence":               {osvschema.Reference_EVIDENCE, 4},
	"signature":              {osvschema.Reference_DETECTION, 4},
	"detection":              {osvschema.Reference_DETECTION, 4},
	"issue tracking":         {osvschema.Reference_REPORT, 3},
	"report":                 {osvschema.Reference_REPORT, 3},
	"introduced":             {osvschema.Reference_INTRODUCED, 3},
	"mailing list":           {osvschema.Reference_ARTICLE, 2},
	"technical description":  {osvschema.Reference_ARTICLE, 2},
	"press/media coverage":   {osvschema.Reference_ARTICLE, 2},
	"media coverage":         {osvschema.Reference_ARTICLE, 2},
	"release notes":          {osvschema.Reference_ARTICLE, 2},
	"article":                {osvschema.Reference_ARTICLE, 2},
	"discussion":             {osvschema.Reference_DISCUSSION, 2},
	"product":                {osvschema.Reference_PACKAGE, 1},
	"package":                {osvschema.Reference_PACKAGE, 1},
	"git":                    {osvschema.Reference_GIT, 1},
}

// referenceType maps the tags of a reference to an OSV reference type:
// WEB when none says anything.
func referenceType(tags []string) osvschema.Reference_Type {
	best := osvschema.Reference_WEB
	rank := 0
	for _, tag := range tags {
		t := strings.ToLower(strings.NewReplacer("-", " ", "_", " ").Replace(tag))
		t = strings.TrimPrefix(t, "x refsource ")
		if r, ok := referenceTypes[t]; ok && r.rank > rank {
			best, rank = r.typ, r.rank
		}
	}
	return best
}

// summaryOf returns the first sentence of a description, cut to about 120
// characters.
func summaryOf(desc string) string {
	s := strings.Join(strings.Fields(desc), " ")
	if i := strings.Index(s, ". "); i > 0 {
		s = s[:i+1]
	}
	if utf8.RuneCountInString(s) <= 120 {
		return s
	}
	r := []rune(s)[:117]
	cut := string(r)
	if i := strings.LastIndex(cut, " "); i > 60 {
		cut = cut[:i]
	}
	return cut + "…"
}

func optString(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func stringsAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
