// Package catalogtest is the test suite of catalog stores. Every backend
// runs it: the SQLite store always, the PostgreSQL store when
// PATCHLINE_TEST_POSTGRES names a server.
//
//	func TestCatalog(t *testing.T) { catalogtest.Run(t, mustOpenStore) }
//
// The suite's cases are one function each, here and in list.go, rows.go,
// sources.go and sync.go; this file, over 600 lines, holds the cases of
// records, facts and ingest transactions.
package catalogtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/feed"
	"github.com/patchline/patchline/internal/ingest"
)

// Open opens a new, empty store of its own for a test, ends the test when
// it cannot, and closes the store when the test ends.
type Open func(t *testing.T) catalog.Store

// The bounds every store applies to a ListQuery.
const (
	maxListLimit   = 1000
	maxSearchTerms = 32
)

// Run runs every test of the suite on stores that open returns, each
// subtest on a store of its own.
func Run(t *testing.T, open Open) {
	tests := []struct {
		name string
		fn   func(*testing.T, Open)
	}{
		{"Records", testRecords},
		{"Walk", testWalk},
		{"Stats", testStats},
		{"TxWrites", testTxWrites},
		{"TxVisibility", testTxVisibility},
		{"ReadsAfterCommit", testReadsAfterCommit},
		{"IngestAtomic", testIngestAtomic},
		{"ListPages", testListPages},
		{"ListSummaries", testListSummaries},
		{"ListSearch", ListSearch},
		{"SearchText", testSearchText},
		{"ListStableUnderChanges", testListStableUnderChanges},
		{"ListInvalid", testListInvalid},
		{"ListOddPositions", testListOddPositions},
		{"ListRandom", testListRandom},
		{"SyncStates", testSyncStates},
		{"SyncLease", testSyncLease},
		{"SourceCatalog", testSourceCatalog},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open) })
	}
}

// sampleFeeds are the feeds of the bundled sample that the suite ingests:
// all but msrc, whose size would only slow it down.
var sampleFeeds = []string{"cvelist", "nvd", "kev", "epss", "osv", "debian", "eol"}

// IngestSample ingests the bundled sample catalog (without its MSRC
// documents) into s at a fixed time.
func IngestSample(tb testing.TB, s catalog.Store) ingest.Result {
	tb.Helper()
	var sources []ingest.Source
	for _, src := range ingest.SampleSources() {
		if slices.Contains(sampleFeeds, src.Parser.Name) {
			sources = append(sources, src)
		}
	}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	res, err := ingest.Run(context.Background(), s, sources, ingest.Options{Now: func() time.Time { return now }})
	if err != nil {
		tb.Fatalf("ingest the sample: %v", err)
	}
	return res
}

func testRecords(t *testing.T, open Open) {
	ctx := context.Background()
	db := open(t)
	res := IngestSample(t, db)
	if res.Merged < 100 {
		t.Fatalf("the sample merged %d records, want at least 100", res.Merged)
	}

	rec, err := db.Record(ctx, "CVE-2021-44228")
	if err != nil {
		t.Fatal(err)
	}
	if rec.CVEID != "CVE-2021-44228" || rec.Description == nil || rec.CVSS == nil || rec.CVSS.Score != 10 ||
		rec.KEV == nil || rec.EPSS == nil || !rec.Remediation.Available || rec.ModifiedAt == nil {
		t.Errorf("Record(CVE-2021-44228) = %+v", rec)
	}
	body, err := db.RecordJSON(ctx, "CVE-2021-44228")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(body, []byte("{")) || !bytes.HasSuffix(body, []byte("}")) {
		t.Errorf("RecordJSON is not a JSON object: %.80s…", body)
	}
	var decoded cve.Record
	if err := json.Unmarshal(body, &decoded); err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff(&decoded, rec); diff != "" {
		t.Errorf("Record and RecordJSON differ (-json +record):\n%s", diff)
	}
	if decoded.Links != nil {
		t.Errorf("stored record has _links: %+v", decoded.Links)
	}

	for _, id := range []string{"CVE-1999-0001", "CVE-2021-44228000000000", "not-an-id", ""} {
		if _, err := db.Record(ctx, id); !errors.Is(err, errs.ErrNotFound) {
			t.Errorf("Record(%q) error = %v, want ErrNotFound", id, err)
		}
		if _, err := db.RecordJSON(ctx, id); !errors.Is(err, errs.ErrNotFound) {
			t.Errorf("RecordJSON(%q) error = %v, want ErrNotFound", id, err)
		}
	}

	var known []string
	err = db.Walk(ctx, "", func(s cve.Summary) error {
		known = append(known, s.CVEID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(known) != res.Merged {
		t.Errorf("Walk saw %d records, the ingest merged %d", len(known), res.Merged)
	}
	ids := append(slices.Clone(known[:40]), "CVE-1999-0001", "garbage", known[3])
	got, err := db.RecordsJSON(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 40 {
		t.Errorf("RecordsJSON of 40 known ids and 2 unknown ones: %d records", len(got))
	}
	for _, id := range known[:40] {
		one, err := db.RecordJSON(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[id], one) {
			t.Errorf("RecordsJSON[%s] differs from RecordJSON", id)
		}
	}
	if got, err := db.RecordsJSON(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("RecordsJSON(nil) = %v, %v", got, err)
	}
}

// summaryOf is the summary List and Walk give of a stored row.
func summaryOf(r catalog.Row) cve.Summary {
	s := cve.Summary{CVEID: r.ID, Severity: r.Severity, CVSSVersion: r.CVSSVersion, IsKEV: r.IsKEV, HasRemediation: r.HasFix, Rejected: r.Rejected}
	if r.CVSS >= 0 {
		s.CVSS = ptr(r.CVSS)
	}
	if r.EPSS >= 0 {
		s.EPSS = ptr(r.EPSS)
	}
	if r.Published >= 0 {
		s.PublishedAt = ptr(time.Unix(r.Published, 0).UTC())
	}
	s.ModifiedAt = ptr(time.Unix(r.Modified, 0).UTC())
	return s
}

func testWalk(t *testing.T, open Open) {
	ctx := context.Background()
	db := open(t)
	rows := GenRows(rand.New(rand.NewPCG(21, 22)), 300)
	PutRows(t, db, rows)
	sorted := slices.Clone(rows)
	slices.SortFunc(sorted, func(a, b catalog.Row) int { return cve.Compare(a.ID, b.ID) })

	walk := func(after string) ([]cve.Summary, error) {
		var out []cve.Summary
		err := db.Walk(ctx, after, func(s cve.Summary) error {
			out = append(out, s)
			return nil
		})
		return out, err
	}
	for _, after := range []string{"", sorted[0].ID, sorted[149].ID, "CVE-2010-0000", sorted[299].ID, "CVE-9999-99999"} {
		var want []cve.Summary
		for _, r := range sorted {
			if after == "" || cve.Compare(r.ID, after) > 0 {
				want = append(want, summaryOf(r))
			}
		}
		got, err := walk(after)
		if err != nil {
			t.Fatal(err)
		}
		if diff := gocmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Walk(%q) (-want +got):\n%s", after, diff)
		}
	}
	if _, err := walk("CVE-21-1"); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("Walk after a malformed id: error %v, want ErrInvalid", err)
	}
	stop := errors.New("stop")
	n := 0
	err := db.Walk(ctx, "", func(cve.Summary) error {
		n++
		if n == 5 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 5 {
		t.Errorf("Walk whose fn fails at the 5th row: %d rows, error %v", n, err)
	}
}

func testStats(t *testing.T, open Open) {
	ctx := context.Background()
	db := open(t)
	s, err := db.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s != (cve.Stats{}) {
		t.Errorf("Stats of an empty catalog = %+v", s)
	}
	rows := GenRows(rand.New(rand.NewPCG(23, 24)), 100)
	rejected := 0
	for _, r := range rows {
		if r.Rejected {
			rejected++
		}
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for i := range rows {
		if err := tx.PutRecord(ctx, &rows[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i, feedName := range []string{"cvelist", "nvd", "epss"} {
		f := &cve.Facts{CVEID: rows[i].ID, Feed: feedName}
		if _, err := tx.PutFacts(ctx, rows[i].Key, f); err != nil {
			t.Fatal(err)
		}
	}
	for _, finished := range []int64{1_700_000_100, 1_700_000_300, 1_700_000_200} {
		if err := tx.LogRun(ctx, catalog.Run{Started: finished - 10, Finished: finished}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	s, err = db.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := cve.Stats{Records: 100, Rejected: rejected, Facts: 3, Updated: time.Unix(1_700_000_300, 0).UTC()}
	if s != want {
		t.Errorf("Stats = %+v, want %+v", s, want)
	}
}

func testTxWrites(t *testing.T, open Open) {
	ctx := context.Background()
	db := open(t)
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	key, _ := cve.Key("CVE-2024-3094")
	put := func(f cve.Facts) catalog.Change {
		t.Helper()
		c, err := tx.PutFacts(ctx, key, &f)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	desc := "xz backdoor"
	nvd := cve.Facts{CVEID: "CVE-2024-3094", Feed: "nvd", Description: desc}
	osvA := cve.Facts{CVEID: "CVE-2024-3094", Feed: "osv", Doc: "GHSA-a", Source: cve.DataSource{Name: "osv"}}
	osvB := cve.Facts{CVEID: "CVE-2024-3094", Feed: "osv", Doc: "DEBIAN-b"}
	steps := []struct {
		name string
		f    cve.Facts
		want catalog.Change
	}{
		{"new", nvd, catalog.Added},
		{"same again", nvd, catalog.Unchanged},
		{"other doc of a feed", osvA, catalog.Added},
		{"a third doc", osvB, catalog.Added},
		{"changed", cve.Facts{CVEID: "CVE-2024-3094", Feed: "nvd", Description: desc + "!"}, catalog.Changed},
		{"changed back", nvd, catalog.Changed},
		{"unchanged once more", osvA, catalog.Unchanged},
	}
	for _, s := range steps {
		if got := put(s.f); got != s.want {
			t.Errorf("%s: PutFacts = %v, want %v", s.name, got, s.want)
		}
	}
	facts, err := tx.Facts(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff([]cve.Facts{nvd, osvB, osvA}, facts); diff != "" {
		t.Errorf("Facts in (feed, doc) order (-want +got):\n%s", diff)
	}
	if facts, err := tx.Facts(ctx, key+1); err != nil || len(facts) != 0 {
		t.Errorf("Facts of a key without facts = %v, %v", facts, err)
	}

	deb := cve.Lifecycle{Product: "debian", Cycle: "12", Codename: "bookworm", EOL: "2026-06-10"}
	ubu := cve.Lifecycle{Product: "ubuntu", Cycle: "22.04", EOL: "2027-04-01"}
	for _, s := range []struct {
		l    cve.Lifecycle
		want catalog.Change
	}{
		{ubu, catalog.Added}, {deb, catalog.Added}, {deb, catalog.Unchanged},
		{cve.Lifecycle{Product: "debian", Cycle: "12", EOL: "true"}, catalog.Changed}, {deb, catalog.Changed},
	} {
		if got, err := tx.PutLifecycle(ctx, &s.l); err != nil || got != s.want {
			t.Errorf("PutLifecycle(%+v) = %v, %v; want %v", s.l, got, err, s.want)
		}
	}
	lcs, err := tx.Lifecycles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff([]cve.Lifecycle{deb, ubu}, lcs); diff != "" {
		t.Errorf("Lifecycles (-want +got):\n%s", diff)
	}

	if _, _, ok, err := tx.RecordState(ctx, key); ok || err != nil {
		t.Errorf("RecordState before PutRecord: ok %v, err %v", ok, err)
	}
	row := catalog.Row{Key: key, ID: "CVE-2024-3094", CVSS: 10, EPSS: 0.8, HasFix: true, Published: 1_711_000_000,
		Modified: 1_711_500_000, Hash: []byte{0xde, 0xad}, Body: []byte(`{"cveId":"CVE-2024-3094"}`), Description: desc}
	if err := tx.PutRecord(ctx, &row); err != nil {
		t.Fatal(err)
	}
	other := catalog.Row{Key: key + 1, ID: cve.IDOfKey(key + 1), CVSS: -1, EPSS: -1, Published: -1, Modified: 1,
		Hash: []byte{1}, Body: []byte(`{}`)}
	if err := tx.PutRecord(ctx, &other); err != nil {
		t.Fatal(err)
	}
	hash, modified, ok, err := tx.RecordState(ctx, key)
	if err != nil || !ok || !bytes.Equal(hash, row.Hash) || modified != row.Modified {
		t.Errorf("RecordState = %x, %d, %v, %v; want %x, %d", hash, modified, ok, err, row.Hash, row.Modified)
	}
	row.Hash, row.Modified, row.HasFix = []byte{0xbe, 0xef}, 1_711_600_000, false
	if err := tx.PutRecord(ctx, &row); err != nil {
		t.Fatal(err)
	}
	if hash, modified, _, _ := tx.RecordState(ctx, key); !bytes.Equal(hash, row.Hash) || modified != row.Modified {
		t.Errorf("RecordState after a second PutRecord = %x, %d", hash, modified)
	}
	other.HasFix = true
	if err := tx.PutRecord(ctx, &other); err != nil {
		t.Fatal(err)
	}
	if keys, err := tx.KeysWithAtoms(ctx); err != nil || !slices.Equal(keys, []int64{key + 1}) {
		t.Errorf("KeysWithAtoms = %v, %v; want [%d]", keys, err, key+1)
	}
	if err := tx.DeleteRecord(ctx, key+1); err != nil {
		t.Fatal(err)
	}
	if err := tx.DeleteRecord(ctx, key+2); err != nil {
		t.Errorf("DeleteRecord of a key without a record: %v", err)
	}
	if _, _, ok, _ := tx.RecordState(ctx, key+1); ok {
		t.Error("RecordState finds a deleted record")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RecordJSON(ctx, other.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("RecordJSON of a deleted record: %v", err)
	}
	page, err := db.List(ctx, cve.ListQuery{Q: "backdoor"})
	if err != nil || len(page.Rows) != 1 || page.Rows[0].CVEID != "CVE-2024-3094" || page.Rows[0].HasRemediation {
		t.Errorf("search of the replaced record = %+v, %v", page, err)
	}
}

func testTxVisibility(t *testing.T, open Open) {
	ctx := context.Background()
	db := open(t)
	rows := GenRows(rand.New(rand.NewPCG(25, 26)), 10)
	for i := range rows {
		rows[i].Rejected = false
	}
	PutRows(t, db, rows[:5])
	visible := func() []string {
		t.Helper()
		var ids []string
		if err := db.Walk(ctx, "", func(s cve.Summary) error {
			ids = append(ids, s.CVEID)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(ids)
		return ids
	}
	before := visible()

	// Rolled back: nothing of it is ever seen.
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.PutRecord(ctx, &rows[5]); err != nil {
		t.Fatal(err)
	}
	if err := tx.DeleteRecord(ctx, rows[0].Key); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.PutFacts(ctx, rows[5].Key, &cve.Facts{CVEID: rows[5].ID, Feed: "kev"}); err != nil {
		t.Fatal(err)
	}
	if facts, err := tx.Facts(ctx, rows[5].Key); err != nil || len(facts) != 1 {
		t.Errorf("the transaction does not see its own facts: %v, %v", facts, err)
	}
	if _, _, ok, err := tx.RecordState(ctx, rows[5].Key); !ok || err != nil {
		t.Errorf("the transaction does not see its own record: %v, %v", ok, err)
	}
	if got := visible(); !slices.Equal(got, before) {
		t.Errorf("readers see an open transaction's writes: %v, want %v", got, before)
	}
	if _, err := db.RecordJSON(ctx, rows[5].ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("RecordJSON of a record not committed: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got := visible(); !slices.Equal(got, before) {
		t.Errorf("after rollback: %v, want %v", got, before)
	}
	if s, _ := db.Stats(ctx); s.Facts != 0 {
		t.Errorf("after rollback: %d facts", s.Facts)
	}

	// Committed: all of it is seen at once.
	tx, err = db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for i := 5; i < 10; i++ {
		if err := tx.PutRecord(ctx, &rows[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.DeleteRecord(ctx, rows[0].Key); err != nil {
		t.Fatal(err)
	}
	if page, err := db.List(ctx, cve.ListQuery{Limit: 100}); err != nil || len(page.Rows) != 5 {
		t.Errorf("List during an open transaction: %d rows, %v; want 5", len(page.Rows), err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, r := range rows[1:] {
		want = append(want, r.ID)
	}
	slices.Sort(want)
	if got := visible(); !slices.Equal(got, want) {
		t.Errorf("after commit: %v, want %v", got, want)
	}
	if page, err := db.List(ctx, cve.ListQuery{Limit: 100}); err != nil || len(page.Rows) != 9 {
		t.Errorf("List after commit: %d rows, %v; want 9", len(page.Rows), err)
	}
}

// testReadsAfterCommit reads records, lists and walks, changes the catalog,
// and reads them again: every read after the commit sees it, however the
// store keeps what it read before.
func testReadsAfterCommit(t *testing.T, open Open) {
	ctx := context.Background()
	db := open(t)
	rows := GenRows(rand.New(rand.NewPCG(27, 28)), 20)
	for i := range rows {
		rows[i].Rejected = false
	}
	PutRows(t, db, rows)
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	read := func() (one []byte, all map[string][]byte, listed, walked int) {
		t.Helper()
		one, err := db.RecordJSON(ctx, rows[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if all, err = db.RecordsJSON(ctx, ids); err != nil {
			t.Fatal(err)
		}
		page, err := db.List(ctx, cve.ListQuery{Sort: cve.SortCVSS, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Walk(ctx, "", func(cve.Summary) error { walked++; return nil }); err != nil {
			t.Fatal(err)
		}
		return one, all, len(page.Rows), walked
	}
	for range 3 { // reads that a store may keep
		read()
	}
	changed := rows[0]
	changed.Body = []byte(`{"cveId":"` + changed.ID + `","changed":true}`)
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := tx.PutRecord(ctx, &changed); err != nil {
		t.Fatal(err)
	}
	if err := tx.DeleteRecord(ctx, rows[1].Key); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	one, all, listed, walked := read()
	if string(one) != string(changed.Body) {
		t.Errorf("RecordJSON after the commit = %s, want %s", one, changed.Body)
	}
	if string(all[rows[0].ID]) != string(changed.Body) {
		t.Errorf("RecordsJSON after the commit = %s, want %s", all[rows[0].ID], changed.Body)
	}
	if _, ok := all[rows[1].ID]; ok {
		t.Errorf("RecordsJSON after the commit still holds the deleted %s", rows[1].ID)
	}
	if _, err := db.RecordJSON(ctx, rows[1].ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("RecordJSON of the deleted %s: %v, want ErrNotFound", rows[1].ID, err)
	}
	if listed != len(rows)-1 || walked != len(rows)-1 {
		t.Errorf("after the commit: List gave %d rows and Walk %d, want %d", listed, walked, len(rows)-1)
	}
}

// testIngestAtomic runs an ingest whose second location cannot be read: the
// catalog stays as the first run left it.
func testIngestAtomic(t *testing.T, open Open) {
	ctx := context.Background()
	db := open(t)
	var kev []ingest.Source
	for _, src := range ingest.SampleSources() {
		if src.Parser.Name == "kev" {
			kev = append(kev, src)
		}
	}
	if _, err := ingest.Run(ctx, db, kev, ingest.Options{}); err != nil {
		t.Fatal(err)
	}
	before, err := db.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	beforeBody, err := db.RecordJSON(ctx, "CVE-2021-44228")
	if err != nil {
		t.Fatal(err)
	}
	epss, err := ingest.ParseSource("epss=" + writeTemp(t, "epss.csv", "cve,epss,percentile\nCVE-2021-44228,0.5,0.6\nCVE-2031-0001,0.5,0.6\n"))
	if err != nil {
		t.Fatal(err)
	}
	missing, err := ingest.ParseSource("kev=/nonexistent/kev.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ingest.Run(ctx, db, []ingest.Source{epss, missing}, ingest.Options{}); !errors.Is(err, feed.ErrUnreadable) {
		t.Fatalf("ingest with an unreadable location: error %v, want ErrUnreadable", err)
	}
	after, err := db.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("stats after a failed run = %+v, want %+v", after, before)
	}
	afterBody, err := db.RecordJSON(ctx, "CVE-2021-44228")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(beforeBody, afterBody) {
		t.Error("a failed run changed a record")
	}
	// The same run without the bad location commits.
	if _, err := ingest.Run(ctx, db, []ingest.Source{epss}, ingest.Options{}); err != nil {
		t.Fatal(err)
	}
	rec, err := db.Record(ctx, "CVE-2021-44228")
	if err != nil {
		t.Fatal(err)
	}
	if rec.KEV == nil || rec.EPSS == nil || rec.EPSS.Score != 0.5 {
		t.Errorf("EPSS after a good run = %+v, want 0.5", rec.EPSS)
	}
}
