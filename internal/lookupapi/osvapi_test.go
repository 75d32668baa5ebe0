package lookupapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ossf/osv-schema/bindings/go/osvschema"
	"google.golang.org/protobuf/encoding/protojson"
	"gopkg.in/yaml.v3"
	"osv.dev/bindings/go/api"
	"osv.dev/bindings/go/osvdev"
	"osv.dev/bindings/go/osvdevexperimental"

	"github.com/patchline/patchline/internal/catalog/sqlite"
	"github.com/patchline/patchline/internal/exposure"
	"github.com/patchline/patchline/internal/ingest"
	"github.com/patchline/patchline/internal/version"
)

// osvData is the folder of real OSV records of the repository's shared
// test data (see its SOURCE.md); osvUnfixed holds real records whose
// ranges end in last_affected or do not end, which osvData lacks.
const (
	osvData    = "../../../shared/data/osv"
	osvUnfixed = "../feed/osv/testdata"
)

// osvServer is a Server over a catalog ingested from osvData, built once
// for the tests of this file.
var osvServer = sync.OnceValues(func() (*Server, error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "patchline-osv-test")
	if err != nil {
		return nil, err
	}
	db, err := sqlite.Open(ctx, filepath.Join(dir, "catalog.db"))
	if err != nil {
		return nil, err
	}
	var srcs []ingest.Source
	for _, dir := range []string{osvData, osvUnfixed} {
		src, err := ingest.ParseSource("osv=" + dir)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, src)
	}
	if _, err := ingest.Run(ctx, db, srcs, ingest.Options{}); err != nil {
		return nil, err
	}
	idx := exposure.NewIndex()
	if _, err := idx.Refresh(ctx, db); err != nil {
		return nil, err
	}
	return New(Config{Catalog: db, Packages: idx})
})

func mustOSVServer(tb testing.TB) *Server {
	tb.Helper()
	if _, err := os.Stat(osvData); err != nil {
		tb.Skipf("the shared OSV data is not here: %v", err)
	}
	s, err := osvServer()
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// readOSVRecords reads every record of osvData and osvUnfixed: JSON
// files, and PyPA's YAML.
func readOSVRecords(tb testing.TB) []*osvschema.Vulnerability {
	tb.Helper()
	var out []*osvschema.Vulnerability
	walk := func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		switch filepath.Ext(path) {
		case ".yaml", ".yml":
			var v any
			if err := yaml.Unmarshal(data, &v); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if data, err = json.Marshal(v); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		case ".json":
		default:
			return nil
		}
		var v osvschema.Vulnerability
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, &v); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, &v)
		return nil
	}
	for _, dir := range []string{osvData, osvUnfixed} {
		if err := filepath.WalkDir(dir, walk); err != nil {
			tb.Fatal(err)
		}
	}
	return out
}

// cvesOf returns the CVEs an OSV record is about, as the osv feed reads
// them: its id and aliases, else its related and upstream ids.
func cvesOf(v *osvschema.Vulnerability) []string {
	pick := func(ids ...[]string) []string {
		var out []string
		for _, list := range ids {
			for _, id := range list {
				if strings.HasPrefix(id, "CVE-") && !slices.Contains(out, id) {
					out = append(out, id)
				}
			}
		}
		return out
	}
	if c := pick([]string{v.GetId()}, v.GetAliases()); len(c) > 0 {
		return c
	}
	return pick(v.GetRelated(), v.GetUpstream())
}

// osvRange is one ECOSYSTEM or SEMVER range of a package in a record.
type osvCase struct {
	ecosystem, name string
	events          []*osvschema.Event
	versions        []string // the record's list of affected versions
}

// affectedByOSV is the OSV schema's rule for a version and the ranges of
// a package: affected when a range's events, in order, put it at or above
// an introduced version and below the next fixed one, or at or below the
// next last_affected one, or at or above the last introduced one when no
// event follows it.
func affectedByOSV(t *testing.T, eco, v string, ranges []osvCase) bool {
	t.Helper()
	cmp := func(a, b string) int {
		if b == "0" {
			return 1
		}
		c, err := version.Compare(eco, a, b)
		if err != nil {
			t.Fatalf("compare %s %q with %q: %v", eco, a, b, err)
		}
		return c
	}
	for _, r := range ranges {
		introduced := ""
		for _, ev := range r.events {
			switch {
			case ev.GetIntroduced() != "":
				introduced = ev.GetIntroduced()
			case ev.GetFixed() != "" && introduced != "":
				if cmp(v, introduced) >= 0 && cmp(v, ev.GetFixed()) < 0 {
					return true
				}
				introduced = ""
			case ev.GetLastAffected() != "" && introduced != "":
				if cmp(v, introduced) >= 0 && cmp(v, ev.GetLastAffected()) <= 0 {
					return true
				}
				introduced = ""
			}
		}
		if introduced != "" && cmp(v, introduced) >= 0 {
			return true
		}
	}
	return false
}

// dotted matches a version of numbers and dots only, which nextVersion and
// prevVersion can step.
var dotted = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*$`)

// nextVersion returns a version just above v (its last number plus one:
// 21.2.0 → 21.2.1), "" when v is not dotted numbers.
func nextVersion(v string) string {
	if !dotted.MatchString(v) {
		return ""
	}
	parts := strings.Split(v, ".")
	n, _ := strconv.Atoi(parts[len(parts)-1])
	parts[len(parts)-1] = strconv.Itoa(n + 1)
	return strings.Join(parts, ".")
}

// prevVersion returns a version just below v (1.3.0 → 1.2.999), "" when v
// is not dotted numbers or is all zeros.
func prevVersion(v string) string {
	if !dotted.MatchString(v) {
		return ""
	}
	parts := strings.Split(v, ".")
	for i := len(parts) - 1; i >= 0; i-- {
		if n, _ := strconv.Atoi(parts[i]); n > 0 {
			parts[i] = strconv.Itoa(n - 1)
			for j := i + 1; j < len(parts); j++ {
				parts[j] = "999"
			}
			return strings.Join(parts, ".")
		}
	}
	return ""
}

// TestOSVQueryRealRecords asks the OSV API, for every range of every real
// OSV record, about each fixed version (not affected, unless another range
// holds it), the version just below it (the greatest version the record
// lists as affected below the fix, else the introducing version: affected),
// every introducing version and the version just below it, and every
// last_affected version and the version just above it, and compares the
// answer with the OSV schema's rule over every range of every record of
// the same CVE and package: introduced, fixed, last_affected, ranges that
// do not end, and multiple ranges.
func TestOSVQueryRealRecords(t *testing.T) {
	srv := mustOSVServer(t)
	type key struct{ cve, eco, name string }
	ranges := map[key][]osvCase{}
	var keys []key
	for _, v := range readOSVRecords(t) {
		if v.GetWithdrawn() != nil {
			continue
		}
		for _, a := range v.GetAffected() {
			eco, name := a.GetPackage().GetEcosystem(), a.GetPackage().GetName()
			for _, rg := range a.GetRanges() {
				if t := rg.GetType(); t != osvschema.Range_ECOSYSTEM && t != osvschema.Range_SEMVER {
					continue
				}
				for _, id := range cvesOf(v) {
					k := key{id, eco, name}
					if _, ok := ranges[k]; !ok {
						keys = append(keys, k)
					}
					ranges[k] = append(ranges[k], osvCase{eco, name, rg.GetEvents(), a.GetVersions()})
				}
			}
		}
	}
	type probe struct {
		key
		version, why string
	}
	var probes []probe
	for _, k := range keys {
		seen := map[string]bool{}
		add := func(v, why string) {
			if v == "" || v == "0" || seen[v] || !version.Valid(k.eco, v) {
				return
			}
			seen[v] = true
			probes = append(probes, probe{k, v, why})
		}
		for _, r := range ranges[k] {
			introduced := ""
			for _, ev := range r.events {
				switch {
				case ev.GetIntroduced() != "":
					introduced = ev.GetIntroduced()
					add(introduced, "introduced")
					add(prevVersion(introduced), "just below introduced "+introduced)
				case ev.GetFixed() != "":
					fixed := ev.GetFixed()
					add(fixed, "fixed")
					below := ""
					for _, lv := range r.versions {
						if version.Valid(k.eco, lv) && version.Order(k.eco, lv, fixed) < 0 &&
							(introduced == "" || introduced == "0" || version.Order(k.eco, lv, introduced) >= 0) &&
							(below == "" || version.Order(k.eco, lv, below) > 0) {
							below = lv
						}
					}
					add(below, "just below "+fixed)
					introduced = ""
				case ev.GetLastAffected() != "":
					add(ev.GetLastAffected(), "last_affected")
					add(nextVersion(ev.GetLastAffected()), "just above last_affected "+ev.GetLastAffected())
				}
			}
		}
	}
	if len(probes) < 100 {
		t.Fatalf("only %d versions to ask about: is %s complete?", len(probes), osvData)
	}
	// Asked as OSV.dev's Go client asks, which follows each query's
	// next_page_token.
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c := osvdev.DefaultClient()
	c.BaseHostURL = hs.URL + OSVBasePath
	var affected, notAffected int
	for start := 0; start < len(probes); start += MaxOSVBatch {
		batch := probes[start:min(start+MaxOSVBatch, len(probes))]
		var queries []*api.Query
		for _, p := range batch {
			queries = append(queries, &api.Query{Package: &osvschema.Package{Ecosystem: p.eco, Name: p.name},
				Param: &api.Query_Version{Version: p.version}})
		}
		got, err := osvdevexperimental.BatchQueryPaging(context.Background(), c, queries)
		if err != nil || len(got.GetResults()) != len(batch) {
			t.Fatalf("querybatch: %v, %d results for %d queries", err, len(got.GetResults()), len(batch))
		}
		for i, p := range batch {
			want := affectedByOSV(t, p.eco, p.version, ranges[p.key])
			gotAffected := slices.ContainsFunc(got.GetResults()[i].GetVulns(), func(v *osvschema.Vulnerability) bool { return v.GetId() == p.cve })
			if want {
				affected++
			} else {
				notAffected++
			}
			if gotAffected != want {
				t.Errorf("%s %s %s (%s): affected by %s = %v, want %v", p.eco, p.name, p.version, p.why, p.cve, gotAffected, want)
			}
		}
	}
	t.Logf("%d versions asked about: %d affected, %d not", affected+notAffected, affected, notAffected)
	if affected == 0 || notAffected == 0 {
		t.Errorf("affected %d, not affected %d: the table tests one side only", affected, notAffected)
	}
}

// httpServe serves one request to s.
func httpServe(s *Server, method, path, body string) *httptest.ResponseRecorder {
	req := newRequest(method, path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec
}
