package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jackc/pgx/v5"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/catalog/catalogtest"
	"github.com/patchline/patchline/internal/catalog/postgres/pgtest"
	"github.com/patchline/patchline/internal/catalog/sqlite"
	"github.com/patchline/patchline/internal/cve"
)

func TestSearchQuery(t *testing.T) {
	tests := []struct{ in, want string }{
		{"kernel", `'kernel':*`},
		{"ke", `'ke'`},
		{"kernel overfl", `'kernel' & 'overfl':*`},
		{"CVE-2021-4422", `('cve' <-> '2021' <-> '4422':*)`},
		{"cve-2021-44", `('cve' <-> '2021' <-> '44')`},
		{"xz-utils liblzma", `('xz' <-> 'utils') & 'liblzma':*`},
		{`'; DROP TABLE records; -- x`, `'drop' & 'table' & 'records' & 'x'`},
		{`it's`, `('it' <-> 's')`},
		{`a\b`, `('a' <-> 'b')`},
		{"!!! & | <->", ``},
		{"Zürich CAFÉ", `'zurich' & 'cafe':*`},
		{"", ``},
	}
	for _, tt := range tests {
		got, err := searchQuery(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("searchQuery(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if got, err := searchQuery("x " + strings.Repeat("a", maxLexemeBytes+1)); got != "" || err != nil {
		t.Errorf("searchQuery of a word too long for a lexeme = %q, %v; want nothing to match", got, err)
	}
}

func TestSearchVector(t *testing.T) {
	got := searchVector("CVE-2021-44228", "Log4j2 JNDI: attacker's \\ LDAP.")
	want := `'cve':1 '2021':2 '44228':3 'log4j2':5 'jndi':6 'attacker':7 's':8 'ldap':9`
	if got != want {
		t.Errorf("searchVector = %q, want %q", got, want)
	}
	long := searchVector("CVE-2021-1", "a "+strings.Repeat("b", maxLexemeBytes+1)+" c")
	if want := `'cve':1 '2021':2 '1':3 'a':5 'c':7`; long != want {
		t.Errorf("searchVector with a word too long for a lexeme = %q, want %q", long, want)
	}
	var b strings.Builder
	quoteLexeme(&b, `it's a \ test`)
	if want := `'it''s a \\ test'`; b.String() != want {
		t.Errorf("quoteLexeme = %s, want %s", b.String(), want)
	}
}

// TestSearchVectorInput stores vectors PostgreSQL must accept: quotes,
// backslashes, a description longer than the positions a tsvector keeps,
// a word repeated more often than the positions it keeps per lexeme.
func TestSearchVectorInput(t *testing.T) {
	db := mustOpen(t)
	ctx := context.Background()
	for _, desc := range []string{
		`it's a \ "test"`,
		strings.Repeat("word ", 20000) + "last",
		strings.Repeat("w1 w2 w3 ", 7000),
		"ünïcödé 日本語のテキスト ١٢٣",
	} {
		var ok bool
		err := db.pool.QueryRow(ctx, `SELECT $1::tsvector @@ $2::tsquery`, searchVector("CVE-2024-0001", desc), `'cve' <-> '2024'`).Scan(&ok)
		if err != nil || !ok {
			t.Errorf("search vector of %.20q: %v, %v", desc, ok, err)
		}
	}
}

// TestConcurrentOpen opens a new database from many replicas at once: each
// migration is applied once, and every replica opens it.
func TestConcurrentOpen(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			db, err := Open(context.Background(), dsn+"&pool_max_conns=2")
			if err != nil {
				errc <- err
				return
			}
			db.Close()
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Errorf("Open: %v", err)
	}
	db := mustOpenDSN(t, dsn)
	names, err := fsNames()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.pool.Query(context.Background(), `SELECT name FROM `+migrations.Table+` ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff(names, got); diff != "" {
		t.Errorf("applied migrations (-want +got):\n%s", diff)
	}
}

func fsNames() ([]string, error) {
	entries, err := migrationFiles.ReadDir("migrations")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names, nil
}

// TestSearchPath opens the catalog in a schema of its own, named by the
// DSN's search_path.
func TestSearchPath(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE SCHEMA catalog`); err != nil {
		t.Fatal(err)
	}
	db := mustOpenDSN(t, dsn+"&search_path=catalog")
	catalogtest.PutRows(t, db, catalogtest.GenRows(rand.New(rand.NewPCG(1, 1)), 10))
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM catalog.records`).Scan(&n); err != nil || n != 10 {
		t.Errorf("rows in catalog.records: %d, %v", n, err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("tables in public: %d, %v", n, err)
	}
	// A session of another search_path changes the records, and with them
	// the catalog's version.
	withVersionWindow(t, 0)
	v1, err := db.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE catalog.records SET severity = severity`); err != nil {
		t.Fatalf("update the records from the public search_path: %v", err)
	}
	if v2, err := db.Version(ctx); err != nil || v2 == v1 {
		t.Errorf("version %d → %d, %v: want a new one", v1, v2, err)
	}
}

// TestReplicaSeesChanges checks that a replica whose summary index, counts
// and version hold the catalog as it was sees, at its next list, walk and
// count, what another replica committed since: records, and an ingest run
// that changed none (which leaves the generation of the records as it
// was).
func TestReplicaSeesChanges(t *testing.T) {
	withVersionWindow(t, 0) // every call asks
	dsn := pgtest.NewDatabase(t)
	a, b := mustOpenDSN(t, dsn), mustOpenDSN(t, dsn)
	ctx := context.Background()
	rows := catalogtest.GenRows(rand.New(rand.NewPCG(3, 4)), 40)
	catalogtest.PutRows(t, a, rows[:20])
	count := func() (listed, walked int, st cve.Stats) {
		t.Helper()
		listed = len(catalogtest.PageAll(t, b, cve.ListQuery{Sort: cve.SortCVE, Limit: 7}, nil))
		if err := b.Walk(ctx, "", func(cve.Summary) error { walked++; return nil }); err != nil {
			t.Fatal(err)
		}
		st, err := b.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return listed, walked, st
	}
	listed, walked, st := count()
	v1, err := b.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	catalogtest.PutRows(t, a, rows[20:])
	listed2, walked2, st2 := count()
	if listed2 != listed+20-rejected(rows[20:]) || walked2 != walked+20 || st2.Records != st.Records+20 {
		t.Errorf("after 20 records more: listed %d → %d, walked %d → %d, counted %d → %d", listed, listed2, walked, walked2, st.Records, st2.Records)
	}
	v2, err := b.Version(ctx)
	if err != nil || v2 == v1 {
		t.Errorf("version %d → %d, %v: want a new one", v1, v2, err)
	}
	// An ingest run that changes no record is seen in the counts, and
	// keeps the generation that the summary index is kept by.
	g1, err := b.generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := tx.LogRun(ctx, catalog.Run{Started: 1_900_000_000, Finished: 1_900_000_001}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, _, st3 := count(); !st3.Updated.Equal(time.Unix(1_900_000_001, 0)) {
		t.Errorf("after an ingest run: updated %v, want %v", st3.Updated, time.Unix(1_900_000_001, 0).UTC())
	}
	v3, err := b.Version(ctx)
	if err != nil || v3 == v2 {
		t.Errorf("version after an ingest run %d → %d, %v: want a new one", v2, v3, err)
	}
	if g2, err := b.generation(ctx); err != nil || g2 != g1 {
		t.Errorf("generation after an ingest run that changed no record %d → %d, %v: want the same", g1, g2, err)
	}
}

// withVersionWindow runs the test with the window of Version set to w.
func withVersionWindow(t *testing.T, w time.Duration) {
	old := versionWindow
	versionWindow = w
	t.Cleanup(func() { versionWindow = old })
}

// TestVersionWindow checks that an answer of Version serves the calls of
// its window, that a commit of another process is seen once the window
// has passed, and one of this process at once.
func TestVersionWindow(t *testing.T) {
	withVersionWindow(t, time.Hour)
	dsn := pgtest.NewDatabase(t)
	a, b := mustOpenDSN(t, dsn), mustOpenDSN(t, dsn)
	ctx := context.Background()
	version := func(db *DB) int64 {
		t.Helper()
		v, err := db.Version(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	va, vb := version(a), version(b)
	catalogtest.PutRows(t, a, catalogtest.GenRows(rand.New(rand.NewPCG(5, 6)), 3))
	if v := version(a); v == va {
		t.Error("the process that committed does not see its own commit")
	}
	if v := version(b); v != vb {
		t.Error("another process asked the server within the window")
	}
	versionWindow = 0
	if v := version(b); v == vb {
		t.Error("another process does not see the commit once the window has passed")
	}
}

// rejected counts the rejected rows.
func rejected(rows []catalog.Row) int {
	n := 0
	for _, r := range rows {
		if r.Rejected {
			n++
		}
	}
	return n
}

// TestIngestLock checks that a second ingest transaction waits for the
// first to end, and gives up when its context ends.
func TestIngestLock(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	a, b := mustOpenDSN(t, dsn), mustOpenDSN(t, dsn)
	ctx := context.Background()
	tx, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if tx2, err := b.Begin(short); err == nil {
		tx2.Rollback()
		t.Fatal("a second ingest began while the first ran")
	}
	began := make(chan time.Time, 1)
	go func() {
		tx2, err := b.Begin(ctx)
		if err != nil {
			t.Error(err)
			began <- time.Time{}
			return
		}
		began <- time.Now()
		tx2.Rollback()
	}()
	time.Sleep(300 * time.Millisecond)
	committed := time.Now()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if at := <-began; at.Before(committed) {
		t.Errorf("the second ingest began at %v, before the first committed at %v", at, committed)
	}
}

// TestSyncLeaseRace has replicas race for a free lease: one wins.
func TestSyncLeaseRace(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	dbs := []*DB{mustOpenDSN(t, dsn), mustOpenDSN(t, dsn), mustOpenDSN(t, dsn)}
	now := time.Date(2026, 11, 21, 5, 0, 0, 0, time.UTC)
	for round := range 5 {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var winners []string
		for i := range 12 {
			wg.Go(func() {
				holder := fmt.Sprintf("replica-%d-%d", round, i)
				ok, _, err := dbs[i%len(dbs)].AcquireSyncLease(context.Background(), holder, now, time.Minute)
				if err != nil {
					t.Error(err)
				}
				if ok {
					mu.Lock()
					winners = append(winners, holder)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(winners) != 1 {
			t.Errorf("round %d: winners %v, want one", round, winners)
		}
		now = now.Add(2 * time.Minute) // the lease expires before the next round
	}
}

func ptr[T any](v T) *T { return &v }

// TestSameAsSQLite ingests the bundled sample into both stores and compares
// what they serve: every record, the walk, and pages of every order, filter
// and search.
func TestSameAsSQLite(t *testing.T) {
	ctx := context.Background()
	pg := mustOpen(t)
	lite, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	catalogtest.IngestSample(t, lite)
	catalogtest.IngestSample(t, pg)

	walk := func(c cve.Catalog) []cve.Summary {
		var out []cve.Summary
		if err := c.Walk(ctx, "", func(s cve.Summary) error {
			out = append(out, s)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	summaries := walk(lite)
	if diff := gocmp.Diff(summaries, walk(pg)); diff != "" {
		t.Fatalf("Walk (-sqlite +postgres):\n%s", diff)
	}
	var ids []string
	for _, s := range summaries {
		ids = append(ids, s.CVEID)
	}
	want, err := lite.RecordsJSON(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pg.RecordsJSON(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ids) {
		t.Errorf("postgres has %d of %d records", len(got), len(ids))
	}
	for _, id := range ids {
		if string(want[id]) != string(got[id]) {
			t.Errorf("record %s differs:\nsqlite   %.200s\npostgres %.200s", id, want[id], got[id])
		}
	}
	ws, _ := lite.Stats(ctx)
	gs, _ := pg.Stats(ctx)
	if ws != gs {
		t.Errorf("Stats: sqlite %+v, postgres %+v", ws, gs)
	}

	// Searches: words and ids of the records, their prefixes, pairs.
	rng := rand.New(rand.NewPCG(1, 2))
	var searches []string
	for range 40 {
		rec, err := lite.Record(ctx, ids[rng.IntN(len(ids))])
		if err != nil {
			t.Fatal(err)
		}
		words := strings.Fields(deref(rec.Description))
		if len(words) == 0 {
			continue
		}
		w := words[rng.IntN(len(words))]
		searches = append(searches, w, rec.CVEID[:4+rng.IntN(len(rec.CVEID)-4)])
		if len(w) > 4 {
			searches = append(searches, w[:len(w)-2])
		}
		if i := rng.IntN(len(words)); i+1 < len(words) {
			searches = append(searches, words[i]+" "+words[i+1])
		}
	}
	sorts := []string{cve.SortPublished, cve.SortEPSS, cve.SortCVSS, cve.SortCVE, cve.SortFix, cve.SortKEV}
	var queries []cve.ListQuery
	for _, s := range sorts {
		for _, desc := range []bool{false, true} {
			queries = append(queries,
				cve.ListQuery{Sort: s, Desc: desc, Limit: 100},
				cve.ListQuery{Sort: s, Desc: desc, Limit: 37, KEV: ptr(true)},
				cve.ListQuery{Sort: s, Desc: desc, Limit: 41, Severities: []string{cve.SeverityCritical, cve.SeverityHigh}, Fix: ptr(true)},
				cve.ListQuery{Sort: s, Desc: desc, Limit: 23, EPSSMin: ptr(0.1), Years: []int{2023, 2024}},
			)
		}
	}
	for i, q := range searches {
		queries = append(queries, cve.ListQuery{Q: q, Sort: sorts[i%len(sorts)], Desc: i%2 == 0, Limit: 13})
	}
	// The first pages of each query, then all of it in pages of 1,000.
	for _, q := range queries {
		for _, q := range []cve.ListQuery{q, withLimit(q, 1000)} {
			pages := 3
			if q.Limit == 1000 {
				pages = 10
			}
			w := firstPages(t, lite, q, pages)
			g := firstPages(t, pg, q, pages)
			if diff := gocmp.Diff(w, g, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("List(%+v) (-sqlite +postgres):\n%s", q, diff)
			}
		}
	}
	t.Logf("compared %d records and %d queries (%d searches)", len(ids), len(queries), len(searches))
}

func withLimit(q cve.ListQuery, limit int) cve.ListQuery {
	q.Limit = limit
	return q
}

// firstPages returns the ids of the first n pages of q, each page followed
// by the position it ends at.
func firstPages(tb testing.TB, c cve.Catalog, q cve.ListQuery, n int) []string {
	tb.Helper()
	var ids []string
	for range n {
		page, err := c.List(context.Background(), q)
		if err != nil {
			tb.Fatalf("List(%+v): %v", q, err)
		}
		for _, s := range page.Rows {
			ids = append(ids, s.CVEID)
		}
		if page.Next == nil {
			return append(ids, "(end)")
		}
		q.After = page.Next
		ids = append(ids, fmt.Sprintf("(next %v %d)", q.After.Value, q.After.Key))
	}
	return ids
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestTextPostgresCannotHold stores strings with NUL bytes and invalid
// UTF-8, which PostgreSQL's text refuses: they are stored with U+FFFD in
// their place rather than fail the ingest or the sync.
func TestTextPostgresCannotHold(t *testing.T) {
	db := mustOpen(t)
	ctx := context.Background()
	bad := "HTTP 502: \x00\xff\xfe body"
	if err := db.PutSyncState(ctx, catalog.SyncState{Source: "nvd", Error: bad, ETag: "\x00"}); err != nil {
		t.Fatal(err)
	}
	s, err := db.SyncState(ctx, "nvd")
	if err != nil {
		t.Fatal(err)
	}
	if want := "HTTP 502: \uFFFD\uFFFD body"; s.Error != want || s.ETag != "\uFFFD" {
		t.Errorf("stored error %q, etag %q; want %q, %q", s.Error, s.ETag, want, "\uFFFD")
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	key, _ := cve.Key("CVE-2024-0001")
	f := &cve.Facts{CVEID: "CVE-2024-0001", Feed: "osv", Doc: "GHSA\x00x\xff", Description: "d\x00"}
	for _, want := range []catalog.Change{catalog.Added, catalog.Unchanged} {
		if got, err := tx.PutFacts(ctx, key, f); err != nil || got != want {
			t.Errorf("PutFacts = %v, %v; want %v", got, err, want)
		}
	}
	if _, err := tx.PutLifecycle(ctx, &cve.Lifecycle{Product: "x\x00", Cycle: "\xff"}); err != nil {
		t.Error(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
