package lookupapi

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ossf/osv-schema/bindings/go/osvschema"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/patchline/patchline/internal/catalog/sqlite"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/ingest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// compareGolden compares got with testdata/name, or rewrites it with -update.
func compareGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

func TestOSVGolden(t *testing.T) {
	for _, rec := range testRecords() {
		t.Run(rec.CVEID, func(t *testing.T) {
			b, err := OSVJSON(rec)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			json.Indent(&out, b, "", "  ")
			out.WriteByte('\n')
			compareGolden(t, filepath.Join("osv", rec.CVEID+".json"), out.Bytes())

			// The document reads back with the official bindings.
			var v osvschema.Vulnerability
			if err := protojson.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			if v.GetId() != rec.CVEID || v.GetModified() == nil {
				t.Errorf("id %q modified %v", v.GetId(), v.GetModified())
			}
		})
	}
}

func TestOSVRanges(t *testing.T) {
	rec := testRecords()[0]
	v, err := OSV(rec)
	if err != nil {
		t.Fatal(err)
	}
	type rng struct{ Type, Introduced, Fixed string }
	ranges := func(a *osvschema.Affected) []rng {
		out := []rng{}
		for _, r := range a.GetRanges() {
			ev := r.GetEvents()
			out = append(out, rng{r.GetType().String(), ev[0].GetIntroduced(), ev[1].GetFixed()})
		}
		return out
	}
	got := map[string][]rng{}
	for _, a := range v.GetAffected() {
		got[a.GetPackage().GetEcosystem()+" "+a.GetPackage().GetName()] = ranges(a)
	}
	// The extension ecosystems are listed in database_specific, in the
	// shape of affected entries.
	ext, _ := v.GetDatabaseSpecific().AsMap()["extension_affected"].([]any)
	for _, e := range ext {
		b, _ := json.Marshal(e)
		var a osvschema.Affected
		if err := protojson.Unmarshal(b, &a); err != nil {
			t.Fatalf("extension_affected entry %s: %v", b, err)
		}
		got["extension "+a.GetPackage().GetEcosystem()+" "+a.GetPackage().GetName()] = ranges(&a)
	}
	want := map[string][]rng{
		"Maven org.apache.logging.log4j:log4j-core": {{"ECOSYSTEM", "2.13.0", "2.15.0"}, {"ECOSYSTEM", "0", "2.12.2"}},
		"Debian:10 apache-log4j2":                   {{"ECOSYSTEM", "0", "2.15.0-1~deb10u1"}},
		"Go example.com/log4go":                     {{"SEMVER", "0", "1.2.3"}},
		// The unparsed fix is kept in database_specific, not in a range.
		"extension Windows Windows Server 2019": {{"ECOSYSTEM", "0", "10.0.17763.2366"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ranges (-want +got):\n%s", diff)
	}
	dbs := v.GetDatabaseSpecific().AsMap()
	if diff := cmp.Diff([]any{"Windows"}, dbs["extension_ecosystems"]); diff != "" {
		t.Errorf("extension_ecosystems (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"GHSA-jfh8-c2jp-5v3q"}, v.GetAliases()); diff != "" {
		t.Errorf("aliases (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"DSA-5020-1"}, v.GetRelated()); diff != "" {
		t.Errorf("related (-want +got):\n%s", diff)
	}
}

func TestIsRegistered(t *testing.T) {
	tests := map[string]bool{
		"Maven": true, "Debian:12": true, "Ubuntu:22.04:LTS": true, "Azure Linux:2": true, "crates.io": true,
		"Windows": false, "Microsoft": false, "Apple": false, "Desktop": false, "Vendor": false,
		"Debian:": false, "debian": false, "": false,
	}
	for eco, want := range tests {
		if got := isRegistered(eco); got != want {
			t.Errorf("isRegistered(%q) = %v, want %v", eco, got, want)
		}
	}
}

func TestReferenceType(t *testing.T) {
	tests := []struct {
		tags []string
		want osvschema.Reference_Type
	}{
		{nil, osvschema.Reference_WEB},
		{[]string{"x_refsource_MISC"}, osvschema.Reference_WEB},
		{[]string{"Patch", "Third Party Advisory"}, osvschema.Reference_FIX},
		{[]string{"vendor-advisory", "x_refsource_REDHAT"}, osvschema.Reference_ADVISORY},
		{[]string{"mailing-list"}, osvschema.Reference_ARTICLE},
		{[]string{"Exploit", "Mailing List"}, osvschema.Reference_EVIDENCE},
		{[]string{"issue-tracking"}, osvschema.Reference_REPORT},
		{[]string{"signature"}, osvschema.Reference_DETECTION},
		{[]string{"package"}, osvschema.Reference_PACKAGE},
		{[]string{"x_refsource_CONFIRM"}, osvschema.Reference_ADVISORY},
	}
	for _, tt := range tests {
		if got := referenceType(tt.tags); got != tt.want {
			t.Errorf("referenceType(%q) = %v, want %v", tt.tags, got, tt.want)
		}
	}
}

func TestIntroducedOf(t *testing.T) {
	tests := map[string]string{
		"< 2.15.0":               "0",
		">= 2.13.0, < 2.15.0":    "2.13.0",
		"> 2.0, < 2.15.0":        "2.0",
		">= 0, < 1":              "0",
		"<= 1.2":                 "0",
		"":                       "0",
		"  >=1.0.0-rc1 ,< 1.0.1": "1.0.0-rc1",
	}
	for in, want := range tests {
		if got := introducedOf(&in); got != want {
			t.Errorf("introducedOf(%q) = %q, want %q", in, got, want)
		}
	}
	if got := introducedOf(nil); got != "0" {
		t.Errorf("introducedOf(nil) = %q", got)
	}
}

func TestOSVRangeTypes(t *testing.T) {
	tests := []struct {
		eco, introduced, fixed string
		want                   osvschema.Range_Type
		wantFixed              string
	}{
		{"Go", "0", "v1.2.3", osvschema.Range_SEMVER, "1.2.3"},
		{"Go", "0", "v0.0.0-20220101000000-abcdef123456", osvschema.Range_SEMVER, "0.0.0-20220101000000-abcdef123456"},
		{"npm", "1.0.0", "1.2.3", osvschema.Range_SEMVER, "1.2.3"},
		{"npm", "0", "1.2", osvschema.Range_ECOSYSTEM, "1.2"},
		{"crates.io", "0", "0.10.1", osvschema.Range_SEMVER, "0.10.1"},
		{"PyPI", "0", "1.2.3", osvschema.Range_ECOSYSTEM, "1.2.3"},
		{"Debian:12", "0", "1.2.3-1", osvschema.Range_ECOSYSTEM, "1.2.3-1"},
	}
	for _, tt := range tests {
		r := osvRange(tt.eco, tt.introduced, &osvschema.Event{Fixed: tt.fixed})
		if r.GetType() != tt.want || r.GetEvents()[1].GetFixed() != tt.wantFixed {
			t.Errorf("osvRange(%s, %s, %s) = %v", tt.eco, tt.introduced, tt.fixed, r)
		}
	}
}

// TestOSVUnfixedRanges writes the atoms without fixed version back as
// OSV.dev's databases write them: a range ending in last_affected or in
// limit, or not ending, beside the ranges of the fixes.
func TestOSVUnfixedRanges(t *testing.T) {
	rec := &cve.Record{CVEID: "CVE-2022-24730", Remediation: cve.Remediation{Available: true, Products: []cve.Product{
		{Ecosystem: "Go", Product: "github.com/argoproj/argo-cd/v2", Atoms: []cve.Atom{
			{FixedVersion: "2.1.11", AffectedRange: ptr("< 2.1.11")},
			{AffectedRange: ptr(">= 2.4.0, <= 2.4.2")},
			{AffectedRange: ptr(">= 2.5.0, < 2.6.0")},
			{AffectedRange: ptr(">= 2.7.0")},
		}},
		{Ecosystem: "PyPI", Product: "gunicorn", Atoms: []cve.Atom{{AffectedRange: ptr("<= 21.2.0")}}},
		{Ecosystem: "Go", Product: "github.com/aws/aws-sdk-go", Atoms: []cve.Atom{{AffectedRange: ptr("*")}}},
	}}}
	v, err := OSV(rec)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range v.GetAffected() {
		for _, r := range a.GetRanges() {
			b, _ := protojson.MarshalOptions{UseProtoNames: true}.Marshal(r)
			var c bytes.Buffer
			json.Compact(&c, b)
			got = append(got, a.GetPackage().GetName()+" "+c.String())
		}
	}
	want := []string{
		`github.com/argoproj/argo-cd/v2 {"type":"SEMVER","events":[{"introduced":"0"},{"fixed":"2.1.11"}]}`,
		`github.com/argoproj/argo-cd/v2 {"type":"SEMVER","events":[{"introduced":"2.4.0"},{"last_affected":"2.4.2"}]}`,
		`github.com/argoproj/argo-cd/v2 {"type":"SEMVER","events":[{"introduced":"2.5.0"},{"limit":"2.6.0"}]}`,
		`github.com/argoproj/argo-cd/v2 {"type":"SEMVER","events":[{"introduced":"2.7.0"}]}`,
		`gunicorn {"type":"ECOSYSTEM","events":[{"introduced":"0"},{"last_affected":"21.2.0"}]}`,
		`github.com/aws/aws-sdk-go {"type":"SEMVER","events":[{"introduced":"0"}]}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ranges (-want +got):\n%s", diff)
	}
}

func TestSummaryOf(t *testing.T) {
	tests := map[string]string{
		"Short.":                       "Short.",
		"First sentence. Second one.":  "First sentence.",
		"No period at all":             "No period at all",
		"Version 2.1.3 is fine. Next.": "Version 2.1.3 is fine.",
		"A  very\nspaced   one.":       "A very spaced one.",
	}
	for in, want := range tests {
		if got := summaryOf(in); got != want {
			t.Errorf("summaryOf(%q) = %q, want %q", in, got, want)
		}
	}
	long := summaryOf(string(bytes.Repeat([]byte("word "), 60)))
	if n := len([]rune(long)); n > 120 || long[len(long)-3:] != "…" {
		t.Errorf("long summary: %d runes: %q", n, long)
	}
}

func TestOSVRejected(t *testing.T) {
	v, err := OSV(testRecords()[2])
	if err != nil {
		t.Fatal(err)
	}
	if v.GetWithdrawn() == nil || v.GetDetails() != "Duplicate of CVE-2021-44228." {
		t.Errorf("rejected record: withdrawn %v details %q", v.GetWithdrawn(), v.GetDetails())
	}
}

// osvSchema compiles testdata/osvschema/schema.json, the OSV schema's JSON
// schema, with format assertions (timestamps, URIs) on.
func osvSchema(tb testing.TB) *jsonschema.Schema {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", "osvschema", "schema.json"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		tb.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("osv-schema.json", doc); err != nil {
		tb.Fatal(err)
	}
	sch, err := c.Compile("osv-schema.json")
	if err != nil {
		tb.Fatal(err)
	}
	return sch
}

// validateOSV validates the OSV document of rec against the schema.
func validateOSV(t *testing.T, sch *jsonschema.Schema, rec *cve.Record) {
	t.Helper()
	b, err := OSVJSON(rec)
	if err != nil {
		t.Errorf("%s: %v", rec.CVEID, err)
		return
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Errorf("%s: %v", rec.CVEID, err)
		return
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("%s: the OSV document does not validate: %v\n%s", rec.CVEID, err, b)
	}
}

func TestOSVSchemaTestRecords(t *testing.T) {
	sch := osvSchema(t)
	for _, rec := range testRecords() {
		validateOSV(t, sch, rec)
	}
	// The schema is enforced: documents that break it do not validate.
	for _, doc := range []string{
		`{"id":"CVE-2021-44228"}`,
		`{"id":"CVE-2021-44228","modified":"2021-12-10 10:15:09"}`,
		`{"id":"CVE-2021-44228","modified":"2021-12-10T10:15:09Z","affected":[{"package":{"ecosystem":"Windows","name":"Windows Server 2019"}}]}`,
		`{"id":"CVE-2021-44228","modified":"2021-12-10T10:15:09Z","references":[{"type":"WEB","url":"not a url"}]}`,
		`{"id":"CVE-2021-44228","modified":"2021-12-10T10:15:09Z","severity":[{"type":"CVSS_V3","score":"AV:N"}]}`,
	} {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
		if err != nil {
			t.Fatal(err)
		}
		if sch.Validate(inst) == nil {
			t.Errorf("%s validates", doc)
		}
	}
}

// TestOSVSchemaSample validates the OSV document of every record of the
// bundled sample catalog against the OSV schema.
func TestOSVSchemaSample(t *testing.T) {
	if testing.Short() {
		t.Skip("ingests the sample catalog")
	}
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	if _, err := ingest.Run(ctx, db, ingest.SampleSources(), ingest.Options{Now: now}); err != nil {
		t.Fatal(err)
	}
	sch := osvSchema(t)
	var n int
	extensions := map[string]bool{}
	err = db.Walk(ctx, "", func(s cve.Summary) error {
		rec, err := db.Record(ctx, s.CVEID)
		if err != nil {
			return err
		}
		validateOSV(t, sch, rec)
		n++
		for _, p := range rec.Remediation.Products {
			if !isRegistered(p.Ecosystem) {
				base, _, _ := strings.Cut(p.Ecosystem, ":")
				extensions[base] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 1000 {
		t.Errorf("validated %d documents; the sample has thousands of records", n)
	}
	t.Logf("%d OSV documents valid; extension ecosystems %v", n, extensions)

	// A Windows fix: the products are extensions, with their KBs.
	rec, err := db.Record(ctx, "CVE-2024-38063")
	if err != nil {
		t.Fatal(err)
	}
	v, err := OSV(rec)
	if err != nil {
		t.Fatal(err)
	}
	dbs := v.GetDatabaseSpecific().AsMap()
	ext, _ := dbs["extension_affected"].([]any)
	if len(v.GetAffected()) != 0 || len(ext) != len(rec.Remediation.Products) ||
		!cmp.Equal(dbs["extension_ecosystems"], []any{"Windows"}) {
		t.Errorf("CVE-2024-38063: %d affected, %d extension_affected for %d products, extension_ecosystems %v",
			len(v.GetAffected()), len(ext), len(rec.Remediation.Products), dbs["extension_ecosystems"])
	}
	b, _ := json.Marshal(ext)
	if !bytes.Contains(b, []byte(`"kb":"KB5041773"`)) || !bytes.Contains(b, []byte(`"license":"Microsoft Terms of Use"`)) {
		t.Errorf("CVE-2024-38063: the fixes lack their KB or license: %.400s", b)
	}
}
