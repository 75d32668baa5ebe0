package catalogtest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/ingest"
	"github.com/patchline/patchline/internal/sample"
)

// testSourceCatalog checks what a store knows of its sources: the records
// each contributed to, against the records themselves, the newest run of
// each source, and a generation that moves with every ingest run.
func testSourceCatalog(t *testing.T, open Open) {
	ctx := context.Background()
	store := open(t)
	db, ok := store.(cve.SourceCatalog)
	if !ok {
		t.Fatalf("%T does not implement cve.SourceCatalog", store)
	}
	gen0, err := db.Generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts, err := db.SourceRecords(ctx); err != nil || len(counts) != 0 {
		t.Errorf("SourceRecords of an empty catalog = %v, %v; want none", counts, err)
	}
	if runs, err := db.LastIngests(ctx); err != nil || len(runs) != 0 {
		t.Errorf("LastIngests of an empty catalog = %v, %v; want none", runs, err)
	}

	IngestSample(t, store)
	gen1, err := db.Generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if gen1 == gen0 {
		t.Errorf("Generation after an ingest = %d, the same as before", gen1)
	}

	// The records of KEV and EPSS, counted from the records themselves.
	var kev, epss, all int
	err = store.Walk(ctx, "", func(s cve.Summary) error {
		all++
		if s.IsKEV {
			kev++
		}
		if s.EPSS != nil {
			epss++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	counts, err := db.SourceRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]cve.SourceRecords{}
	for i, c := range counts {
		byName[c.Name] = c
		if i > 0 && counts[i-1].Name >= c.Name {
			t.Errorf("SourceRecords not in name order: %q before %q", counts[i-1].Name, c.Name)
		}
		if c.Records <= 0 || c.Records > all {
			t.Errorf("%s: %d records, want 1 to %d", c.Name, c.Records, all)
		}
	}
	tests := []struct {
		name    string
		records int // 0: any number above 0
		license string
	}{
		{"kev", kev, ""},
		{"epss", epss, ""},
		{"cvelist", 0, ""},
		{"nvd", 0, ""},
		{"debian", 0, ""},
		{"osv:GHSA", 0, "CC-BY-4.0"},
		{"osv:RustSec", 0, "CC0-1.0"},
	}
	for _, tt := range tests {
		got, ok := byName[tt.name]
		switch {
		case !ok:
			t.Errorf("SourceRecords has no %s; it has %v", tt.name, counts)
		case tt.records > 0 && got.Records != tt.records:
			t.Errorf("%s: %d records, want %d", tt.name, got.Records, tt.records)
		case got.License != tt.license:
			t.Errorf("%s: license %q, want %q", tt.name, got.License, tt.license)
		}
	}
	if _, ok := byName["osv"]; ok {
		t.Error("SourceRecords counts osv as a whole: want each database")
	}

	sampleAt := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	runs, err := db.LastIngests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range runs {
		names = append(names, r.Source)
		if r.Location != sample.Label+r.Source || !r.Started.Equal(sampleAt) || r.Read == 0 {
			t.Errorf("LastIngests %s = %+v: want the sample's run of %v", r.Source, r, sampleAt)
		}
	}
	if diff := gocmp.Diff([]string{"cvelist", "debian", "eol", "epss", "kev", "nvd", "osv"}, names); diff != "" {
		t.Errorf("LastIngests sources (-want +got):\n%s", diff)
	}

	// A later run of one source is its newest; the others keep theirs.
	later := sampleAt.Add(time.Hour)
	kevFile := writeTemp(t, "kev.json", `{"vulnerabilities":[{"cveID":"CVE-2021-44228","vendorProject":"Apache","product":"Log4j2","dateAdded":"2021-12-10"}]}`)
	src, err := ingest.ParseSource("kev=" + kevFile)
	if err != nil {
		t.Fatal(err)
	}
	// A run of cvelist that changes nothing comes first: the record keeps
	// the time of the cvelist data it holds, not that run's.
	cvelistFile := filepath.Join("..", "..", "sample", "data", "cvelist", "CVE-2024-3094.json")
	unchanged, err := ingest.ParseSource("cvelist=" + cvelistFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ingest.Run(ctx, store, []ingest.Source{unchanged}, ingest.Options{Now: func() time.Time { return later.Add(-time.Minute) }}); err != nil {
		t.Fatal(err)
	}
	if _, err := ingest.Run(ctx, store, []ingest.Source{src}, ingest.Options{Now: func() time.Time { return later }}); err != nil {
		t.Fatal(err)
	}
	if gen2, err := db.Generation(ctx); err != nil || gen2 == gen1 {
		t.Errorf("Generation after a second ingest = %d, %v; want other than %d", gen2, err, gen1)
	}
	// The record the run changed: kev's data is of the run, the others'
	// kept from the stored record (the sample's dates).
	rec, err := store.Record(ctx, "CVE-2021-44228")
	if err != nil {
		t.Fatal(err)
	}
	synced := map[string]string{}
	for _, ds := range rec.DataSources {
		if ds.SyncedAt != nil {
			synced[ds.Name] = ds.SyncedAt.Format(time.RFC3339)
		}
	}
	for name, want := range map[string]string{"kev": later.Format(time.RFC3339), "cvelist": "2025-01-24T00:00:00Z", "epss": "2026-08-16T00:00:00Z", "osv:GHSA": "2026-11-21T00:00:00Z"} {
		if synced[name] != want {
			t.Errorf("CVE-2021-44228: syncedAt of %s = %q, want %q (all: %v)", name, synced[name], want, synced)
		}
	}

	runs, err = db.LastIngests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		want := sample.Label + r.Source
		switch r.Source {
		case "kev":
			want = kevFile
		case "cvelist":
			want = cvelistFile
		}
		if r.Location != want {
			t.Errorf("LastIngests %s location = %q, want %q", r.Source, r.Location, want)
		}
	}
}
