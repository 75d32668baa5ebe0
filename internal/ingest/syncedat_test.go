package ingest

import (
	"context"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/catalog/postgres"
	"github.com/patchline/patchline/internal/catalog/postgres/pgtest"
)

// TestSyncedAt follows the syncedAt of a record's data sources over runs,
// on both engines: a source's time moves when a run adds or changes its
// facts of the record, and only then; it never moves the record's
// modifiedAt by itself (a new source does, by adding to dataSources).
func TestSyncedAt(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testSyncedAt(t, mustOpenCatalog(t)) })
	t.Run("postgres", func(t *testing.T) {
		db, err := postgres.Open(context.Background(), pgtest.NewDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		testSyncedAt(t, db)
	})
}

func testSyncedAt(t *testing.T, db catalog.Store) {
	ctx := context.Background()
	epss1 := writeFile(t, "epss1.csv", "CVE-2021-44228;0.9;0.99\n")
	epss2 := writeFile(t, "epss2.csv", "CVE-2021-44228;0.8;0.98\n")
	epss3 := writeFile(t, "epss3.csv", "CVE-2021-44228;0.7;0.97\n")
	steps := []struct {
		name     string
		at       string
		source   string
		want     map[string]string // syncedAt by data source
		modified string
	}{
		{"kev first", "2026-01-01T00:00:00Z", "kev=" + kevFile,
			map[string]string{"kev": "2026-01-01T00:00:00Z"}, "2026-01-01T00:00:00Z"},
		{"epss added", "2026-01-02T00:00:00Z", "epss=" + epss1,
			map[string]string{"kev": "2026-01-01T00:00:00Z", "epss": "2026-01-02T00:00:00Z"}, "2026-01-02T00:00:00Z"},
		{"epss unchanged", "2026-01-03T00:00:00Z", "epss=" + epss1,
			map[string]string{"kev": "2026-01-01T00:00:00Z", "epss": "2026-01-02T00:00:00Z"}, "2026-01-02T00:00:00Z"},
		{"epss changed", "2026-01-04T00:00:00Z", "epss=" + epss2,
			map[string]string{"kev": "2026-01-01T00:00:00Z", "epss": "2026-01-04T00:00:00Z"}, "2026-01-02T00:00:00Z"},
		{"kev unchanged", "2026-01-05T00:00:00Z", "kev=" + kevFile,
			map[string]string{"kev": "2026-01-01T00:00:00Z", "epss": "2026-01-04T00:00:00Z"}, "2026-01-02T00:00:00Z"},
		// The record is merged again for epss: kev keeps the time the
		// stored record gives it, not that of the last kev run (01-05).
		{"epss changed after kev", "2026-01-06T00:00:00Z", "epss=" + epss3,
			map[string]string{"kev": "2026-01-01T00:00:00Z", "epss": "2026-01-06T00:00:00Z"}, "2026-01-02T00:00:00Z"},
	}
	for _, st := range steps {
		if _, err := Run(ctx, db, []Source{mustSource(t, st.source)}, Options{Now: clock(st.at)}); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		rec, err := db.Record(ctx, "CVE-2021-44228")
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got := map[string]string{}
		for _, ds := range rec.DataSources {
			if ds.SyncedAt == nil {
				t.Errorf("%s: data source %s has no syncedAt", st.name, ds.Name)
				continue
			}
			got[ds.Name] = ds.SyncedAt.Format(time.RFC3339)
		}
		if diff := gocmp.Diff(st.want, got); diff != "" {
			t.Errorf("%s: syncedAt by source (-want +got):\n%s", st.name, diff)
		}
		if m := rec.ModifiedAt.Format(time.RFC3339); m != st.modified {
			t.Errorf("%s: modifiedAt = %s, want %s", st.name, m, st.modified)
		}
	}
}

// TestSampleSyncedAt checks that the bundled sample's records carry the
// dates of the sample's data, not the time they were loaded.
func TestSampleSyncedAt(t *testing.T) {
	rec, err := sampleCatalog(t).Record(context.Background(), "CVE-2021-44228")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"cvelist": "2025-01-24", "kev": "2025-08-25", "epss": "2026-08-16", "osv:GHSA": "2026-11-21"}
	for _, ds := range rec.DataSources {
		w, ok := want[ds.Name]
		if !ok {
			continue
		}
		delete(want, ds.Name)
		if ds.SyncedAt == nil || ds.SyncedAt.Format(time.DateOnly) != w {
			t.Errorf("%s syncedAt = %v, want %s", ds.Name, ds.SyncedAt, w)
		}
	}
	if len(want) > 0 {
		t.Errorf("data sources missing from the record: %v", want)
	}
}

// TestSyncedAtOfAnnotations checks that an EPSS score kept before any
// source described its CVE carries the time of the run that took it in,
// once another source makes the record.
func TestSyncedAtOfAnnotations(t *testing.T) {
	ctx := context.Background()
	db := mustOpenCatalog(t)
	epss := writeFile(t, "epss.csv", "CVE-2021-44228;0.9;0.99\n")
	if _, err := Run(ctx, db, []Source{mustSource(t, "epss="+epss)}, Options{Now: clock("2026-02-01T00:00:00Z")}); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(ctx, db, []Source{mustSource(t, "kev="+kevFile)}, Options{Now: clock("2026-02-02T00:00:00Z")}); err != nil {
		t.Fatal(err)
	}
	rec, err := db.Record(ctx, "CVE-2021-44228")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"kev": "2026-02-02T00:00:00Z", "epss": "2026-02-01T00:00:00Z"}
	got := map[string]string{}
	for _, ds := range rec.DataSources {
		if ds.SyncedAt != nil {
			got[ds.Name] = ds.SyncedAt.Format(time.RFC3339)
		}
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("syncedAt by source (-want +got):\n%s", diff)
	}
}
