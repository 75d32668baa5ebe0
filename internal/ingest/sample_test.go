package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/catalog/sqlite"
)

var (
	update  = flag.Bool("update", false, "rewrite the golden files in testdata")
	dataDir = flag.String("data", "", "check remediation on this directory, laid out like internal/sample/data (a folder per ingest source), in place of the bundled sample")
)

// sampleNow is the clock of the sample ingests: modifiedAt of every record,
// and the day that decides which releases are past their end of life.
const sampleNow = "2026-01-01T00:00:00Z"

// tempRoot holds the catalogs shared by the tests of this package; TestMain
// removes it.
var tempRoot string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "patchline-ingest-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tempRoot = dir
	code := m.Run()
	for _, c := range shared {
		if c.db != nil {
			c.db.Close()
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// sharedCatalog is a catalog ingested once and read by several tests.
type sharedCatalog struct {
	once sync.Once
	db   *sqlite.DB
	res  Result
	err  error
}

var shared = map[string]*sharedCatalog{"sample": {}, "data": {}}

// sampleCatalog returns a catalog holding the bundled sample, ingested as
// serve loads it, at sampleNow. Tests must not write to it.
func sampleCatalog(tb testing.TB) *sqlite.DB {
	tb.Helper()
	return sharedIngest(tb, "sample", SampleSources)
}

// sampleResult returns the result of the ingest of sampleCatalog.
func sampleResult(tb testing.TB) Result {
	tb.Helper()
	sampleCatalog(tb)
	return shared["sample"].res
}

// dataCatalog returns a catalog holding every feed folder of the -data
// directory, or the bundled sample without the flag, and the files it was
// ingested from.
func dataCatalog(tb testing.TB) (*sqlite.DB, fs.FS) {
	tb.Helper()
	if *dataDir == "" {
		return sampleCatalog(tb), os.DirFS(filepath.Join("..", "sample", "data"))
	}
	fsys := os.DirFS(*dataDir)
	db := sharedIngest(tb, "data", func() []Source { return dirSources(fsys) })
	return db, fsys
}

// dirSources returns a source per folder of fsys named after an ingest
// source.
func dirSources(fsys fs.FS) []Source {
	var out []Source
	for _, name := range Names() {
		if fi, err := fs.Stat(fsys, name); err == nil && fi.IsDir() {
			p, _ := ParserFor(name)
			out = append(out, Source{Parser: p, Location: name, FS: fsys})
		}
	}
	return out
}

func sharedIngest(tb testing.TB, name string, sources func() []Source) *sqlite.DB {
	tb.Helper()
	c := shared[name]
	c.once.Do(func() {
		ctx := context.Background()
		c.db, c.err = sqlite.Open(ctx, filepath.Join(tempRoot, name+".db"))
		if c.err != nil {
			return
		}
		c.res, c.err = Run(ctx, c.db, sources(), Options{Now: clock(sampleNow)})
	})
	if c.err != nil {
		tb.Fatalf("ingest %s: %v", name, c.err)
	}
	return c.db
}

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

// TestGoldenRecords compares merged records of the bundled sample with
// their golden files: a product of each kind and the sources that meet on
// it.
func TestGoldenRecords(t *testing.T) {
	tests := []struct {
		id   string
		what string
	}{
		{"CVE-2023-41064", "Apple: the CNA's fixed bounds, KEV, CISA-ADP's CVSS"},
		{"CVE-2024-23222", "Apple: iOS, macOS and tvOS fixes"},
		{"CVE-2024-38063", "Windows: MSRC builds and KBs beside the CNA's bounds"},
		{"CVE-2024-6387", "Linux package: AlmaLinux OSV, Azure Linux from MSRC, Red Hat as CNA"},
		{"CVE-2021-44228", "library: GHSA's Maven fixes, the CNA's, MSRC's, KEV and EPSS"},
		{"CVE-2023-4863", "libraries: PyPA and RustSec fixes of a bundled libwebp"},
		{"CVE-2025-53603", "Debian releases, one past its end of life"},
		{"CVE-2019-25161", "a rejected CVE"},
	}
	db := sampleCatalog(t)
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			rec, err := db.Record(context.Background(), tt.id)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			enc := json.NewEncoder(&out)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(rec); err != nil {
				t.Fatal(err)
			}
			compareGolden(t, filepath.Join("golden", tt.id+".json"), out.Bytes())
		})
	}
}
