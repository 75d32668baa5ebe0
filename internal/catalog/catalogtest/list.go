package catalogtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
)

// testListPages pages through every filter, sort and direction with 7 rows
// a page and with one page, and compares both with the rows filtered and
// sorted here.
func testListPages(t *testing.T, open Open) {
	db := open(t)
	rows := GenRows(rand.New(rand.NewPCG(1, 2)), 500)
	PutRows(t, db, rows)

	filters := []struct {
		name string
		q    cve.ListQuery
	}{
		{"all", cve.ListQuery{}},
		{"severity", cve.ListQuery{Severities: []string{cve.SeverityCritical, cve.SeverityLow}}},
		{"severity none", cve.ListQuery{Severities: []string{cve.SeverityNone}}},
		{"kev", cve.ListQuery{KEV: ptr(true)}},
		{"not kev", cve.ListQuery{KEV: ptr(false)}},
		{"fix", cve.ListQuery{Fix: ptr(true)}},
		{"no fix", cve.ListQuery{Fix: ptr(false)}},
		{"epss", cve.ListQuery{EPSSMin: ptr(0.5)}},
		{"epss zero", cve.ListQuery{EPSSMin: ptr(0.0)}},
		{"year", cve.ListQuery{Years: []int{2021}}},
		{"years", cve.ListQuery{Years: []int{2021, 2023}}},
		{"everything", cve.ListQuery{Severities: []string{cve.SeverityHigh}, Fix: ptr(true), EPSSMin: ptr(0.1), Years: []int{2010, 2011, 2012, 2013, 2014, 2015, 2016, 2017, 2018, 2019, 2020}}},
		{"nothing matches", cve.ListQuery{KEV: ptr(true), Years: []int{1998}}},
	}
	sorts := []string{"", cve.SortPublished, cve.SortEPSS, cve.SortCVSS, cve.SortCVE, cve.SortFix, cve.SortKEV}
	for _, f := range filters {
		for _, s := range sorts {
			for _, desc := range []bool{true, false} {
				q := f.q
				q.Sort, q.Desc = s, desc
				t.Run(fmt.Sprintf("%s/%s/desc=%v", f.name, s, desc), func(t *testing.T) {
					want := wantList(rows, q)
					for _, limit := range []int{7, 1000} {
						q.Limit = limit
						got := PageAll(t, db, q, nil)
						if diff := gocmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
							t.Fatalf("limit %d: ids (-want +got):\n%s", limit, diff)
						}
					}
				})
			}
		}
	}
	t.Run("default limit", func(t *testing.T) {
		page, err := db.List(context.Background(), cve.ListQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Rows) != 50 || page.Next == nil {
			t.Errorf("first page without a limit: %d rows, next %v; want 50 rows and a next position", len(page.Rows), page.Next)
		}
	})
}

// testListSummaries checks the summary fields a page carries and the
// position it ends at.
func testListSummaries(t *testing.T, open Open) {
	db := open(t)
	rows := GenRows(rand.New(rand.NewPCG(11, 12)), 60)
	PutRows(t, db, rows)
	byID := map[string]catalog.Row{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	for _, sortKey := range []string{cve.SortPublished, cve.SortEPSS, cve.SortCVSS, cve.SortCVE, cve.SortFix, cve.SortKEV} {
		page, err := db.List(context.Background(), cve.ListQuery{Sort: sortKey, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Rows {
			if diff := gocmp.Diff(summaryOf(byID[s.CVEID]), s); diff != "" {
				t.Errorf("summary of %s (-want +got):\n%s", s.CVEID, diff)
			}
		}
		last := byID[page.Rows[len(page.Rows)-1].CVEID]
		want := cve.Position{Value: sortValueOf(last, sortKey), Key: last.Key}
		if page.Next == nil || *page.Next != want {
			t.Errorf("sort %s: next position %v, want %v", sortKey, page.Next, want)
		}
	}
}

// ListSearch checks full-text search on generated rows: every word must
// match a whole word, the last one also a prefix of three characters or
// more; ids match as phrases; nothing typed is read as query syntax.
func ListSearch(t *testing.T, open Open) {
	db := open(t)
	rows := GenRows(rand.New(rand.NewPCG(3, 4)), 600)
	PutRows(t, db, rows)
	listed := slices.DeleteFunc(slices.Clone(rows), func(r catalog.Row) bool { return r.Rejected })
	matching := func(words ...string) []catalog.Row { return matchingRows(rows, words...) }
	// withID returns the rows whose id starts with id.
	withID := func(id string) []catalog.Row {
		var out []catalog.Row
		for _, r := range rows {
			if strings.HasPrefix(r.ID, id) {
				out = append(out, r)
			}
		}
		return out
	}
	tests := []struct {
		name string
		q    string
		want []catalog.Row
	}{
		{"one word", "kernel", matching("kernel")},
		{"prefix", "kern", matching("kern")},
		{"only the last word is a prefix", "kernel overfl", matching("kernel", "overfl")},
		{"earlier words are whole", "servic kernel", nil},
		{"short words are whole", "sq", nil},
		{"two words are both required", "sql injection", matching("sql", "injection")},
		{"case", "KeRnEl", matching("kernel")},
		{"fts syntax is quoted", `kernel AND NOT "buffer`, nil},
		{"operators only", `* ( ) " - ^ : & | ! <-> '`, nil},
		{"column filter is text", `cve_id:kernel`, nil},
		{"near is text", `NEAR(kernel overflow)`, nil},
		{"tsquery syntax is text", `kernel:* & !buffer`, matching("kernel", "buffer")},
		{"quotes and backslashes", `'kernel' \buffer`, matching("kernel", "buffer")},
		{"id", listed[5].ID, withID(listed[5].ID)},
		{"lower-case id", strings.ToLower(listed[7].ID), withID(listed[7].ID)},
		{"id prefix", listed[9].ID[:12], withID(listed[9].ID[:12])},
		{"short id prefix is whole", "CVE-2008-41", nil},
		{"rejected ones are left out", rejectedID(rows), nil},
		{"no match", "zebra", nil},
		{"blank is no search", "   ", rows},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, q := range []cve.ListQuery{
				{Q: tt.q, Limit: 9, Desc: true},
				{Q: tt.q, Limit: 4, Sort: cve.SortKEV},
				{Q: tt.q, Limit: 5, Sort: cve.SortCVE, Fix: ptr(true)},
				{Q: tt.q, Limit: 6, Sort: cve.SortEPSS, Desc: true, EPSSMin: ptr(0.2)},
			} {
				got := PageAll(t, db, q, nil)
				want := wantList(tt.want, q)
				if diff := gocmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%+v: ids (-want +got):\n%s", q, diff)
				}
			}
		})
	}
}

// matchingRows returns the rows whose description has each of words, the
// last one as a prefix.
func matchingRows(rows []catalog.Row, words ...string) []catalog.Row {
	var out []catalog.Row
	for _, r := range rows {
		fields := strings.Fields(r.Description)
		if !slices.ContainsFunc(words, func(w string) bool {
			last := w == words[len(words)-1]
			return !slices.ContainsFunc(fields, func(f string) bool { return f == w || (last && strings.HasPrefix(f, w)) })
		}) {
			out = append(out, r)
		}
	}
	return out
}

func rejectedID(rows []catalog.Row) string {
	for _, r := range rows {
		if r.Rejected {
			return r.ID
		}
	}
	panic("no rejected row")
}

// testSearchText checks how search cuts and folds real text: words are runs
// of letters and digits, compared without case and diacritics; a word of
// several tokens is a phrase within the id or the description, never
// across both.
func testSearchText(t *testing.T, open Open) {
	db := open(t)
	texts := []struct{ id, desc string }{
		{"CVE-2021-44228", "Apache Log4j2 JNDI features do not protect against attacker-controlled LDAP endpoints."},
		{"CVE-2021-45046", "Log4j 2.15.0 was an incomplete fix; see CVE-2021-44228."},
		{"CVE-2024-3094", "Malicious code in xz-utils 5.6.0 (liblzma)."},
		{"CVE-2023-1000", "Le café crème du résumé: naïve parsing in Zürich, ÉCOLE."},
		{"CVE-2023-1001", "Buffer overflow in foo_bar.c via a crafted request to /api/v1?x=1&y=2"},
		{"CVE-2022-0001", "Remote code execution by user@example.com"},
	}
	var rows []catalog.Row
	for i, x := range texts {
		key, _ := cve.Key(x.id)
		rows = append(rows, catalog.Row{Key: key, ID: x.id, CVSS: -1, EPSS: -1, Published: int64(1_600_000_000 + i),
			Modified: 1_700_000_000, Hash: []byte{1}, Body: []byte(`{}`), Description: x.desc})
	}
	PutRows(t, db, rows)
	tests := []struct {
		q    string
		want []string
	}{
		{"log4j", []string{"CVE-2021-44228", "CVE-2021-45046"}},
		{"log4j2", []string{"CVE-2021-44228"}},
		{"LOG4J2 jndi", []string{"CVE-2021-44228"}},
		{"CVE-2021-44228", []string{"CVE-2021-44228", "CVE-2021-45046"}},
		{"CVE-2021-4422", []string{"CVE-2021-44228", "CVE-2021-45046"}},
		{"cve-2021-44", nil},
		{"2021-44228 apache", []string{"CVE-2021-44228"}},
		{"44228 log4j", []string{"CVE-2021-44228", "CVE-2021-45046"}},
		{"44228-apache", nil},
		{"xz-utils", []string{"CVE-2024-3094"}},
		{"utils-xz", nil},
		{"liblzma", []string{"CVE-2024-3094"}},
		{"(liblzma).", []string{"CVE-2024-3094"}},
		{"5.6.0", []string{"CVE-2024-3094"}},
		{"5.6", []string{"CVE-2024-3094"}},
		{"6.0 xz", []string{"CVE-2024-3094"}},
		{"2.15.0", []string{"CVE-2021-45046"}},
		{"cafe", []string{"CVE-2023-1000"}},
		{"CAFÉ CRÈME", []string{"CVE-2023-1000"}},
		{"zurich naive", []string{"CVE-2023-1000"}},
		{"resume", []string{"CVE-2023-1000"}},
		{"école", []string{"CVE-2023-1000"}},
		{"foo_bar", []string{"CVE-2023-1001"}},
		{"foo_bar.c", []string{"CVE-2023-1001"}},
		{"bar.c", []string{"CVE-2023-1001"}},
		{"/api/v1", []string{"CVE-2023-1001"}},
		{"x=1&y=2", []string{"CVE-2023-1001"}},
		{"overflow crafted", []string{"CVE-2023-1001"}},
		{`"buffer`, []string{"CVE-2023-1001"}},
		{"buffer -overflow", []string{"CVE-2023-1001"}},
		{"buffer OR remote", nil},
		{"remote:*", []string{"CVE-2022-0001"}},
		{"'remote'", []string{"CVE-2022-0001"}},
		{"user@example.com", []string{"CVE-2022-0001"}},
		{"example.com", []string{"CVE-2022-0001"}},
		{"exam", []string{"CVE-2022-0001"}},
		{"ex", nil},
		{"!!! ???", nil},
	}
	for _, tt := range tests {
		t.Run(tt.q, func(t *testing.T) {
			got := PageAll(t, db, cve.ListQuery{Q: tt.q, Sort: cve.SortCVE, Limit: 100}, nil)
			slices.Sort(tt.want)
			slices.SortFunc(got, cve.Compare)
			if diff := gocmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("q=%q: ids (-want +got):\n%s", tt.q, diff)
			}
		})
	}
}

// testListStableUnderChanges pages through a list while other rows are
// added, changed and deleted between pages: every row that stays put comes
// exactly once, in order.
func testListStableUnderChanges(t *testing.T, open Open) {
	db := open(t)
	rng := rand.New(rand.NewPCG(5, 6))
	rows := GenRows(rng, 800)
	stable, moving := rows[:600], rows[600:]
	PutRows(t, db, stable)
	for _, sortKey := range []string{cve.SortEPSS, cve.SortKEV} {
		t.Run(sortKey, func(t *testing.T) {
			q := cve.ListQuery{Sort: sortKey, Desc: true, Limit: 7}
			want := wantList(stable, q)
			i := 0
			got := PageAll(t, db, q, func() {
				// Each step adds a row, then changes or deletes an earlier one.
				if i >= len(moving) {
					return
				}
				PutRows(t, db, moving[i:i+1])
				if i > 0 {
					prev := moving[i-1]
					if i%2 == 0 {
						deleteRows(t, db, prev.Key)
					} else {
						prev.EPSS = rng.Float64()
						prev.IsKEV = !prev.IsKEV
						PutRows(t, db, []catalog.Row{prev})
					}
				}
				i++
			})
			movingIDs := map[string]bool{}
			for _, r := range moving {
				movingIDs[r.ID] = true
			}
			got = slices.DeleteFunc(got, func(id string) bool { return movingIDs[id] })
			if diff := gocmp.Diff(want, got); diff != "" {
				t.Errorf("ids of the unchanged rows (-want +got):\n%s", diff)
			}
		})
	}
}

// testListInvalid checks the queries List refuses.
func testListInvalid(t *testing.T, open Open) {
	db := open(t)
	for _, q := range []cve.ListQuery{
		{Sort: "severity"},
		{Sort: "key; DROP TABLE records"},
		{Severities: []string{"high"}},
		{Severities: []string{"HIGH", "x' OR '1'='1"}},
		{Limit: maxListLimit + 1},
		{Limit: -1},
		{EPSSMin: ptr(math.NaN())},
		{Q: strings.Repeat("a ", maxSearchTerms+1)},
	} {
		if _, err := db.List(context.Background(), q); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("List(%+v) error = %v, want ErrInvalid", q, err)
		}
	}
	if _, err := db.List(context.Background(), cve.ListQuery{Limit: maxListLimit, Q: strings.Repeat("a ", maxSearchTerms)}); err != nil {
		t.Errorf("List at the limits: %v", err)
	}
}

// testListOddPositions lists after positions that no page ends at, as a
// cursor made by hand carries: the rows beyond them come, and no error.
func testListOddPositions(t *testing.T, open Open) {
	db := open(t)
	rows := GenRows(rand.New(rand.NewPCG(9, 10)), 200)
	PutRows(t, db, rows)
	values := []float64{-2, -1, -0.5, 0, 0.25, 0.5, 1, 1.5, 7.5, 1e6 + 0.5, 1.3e9 + 0.5, 1e300, -1e300, math.Inf(1), math.Inf(-1), math.NaN()}
	for _, sortKey := range []string{cve.SortPublished, cve.SortEPSS, cve.SortCVSS, cve.SortFix, cve.SortKEV} {
		for _, desc := range []bool{false, true} {
			for _, v := range values {
				q := cve.ListQuery{Sort: sortKey, Desc: desc, Limit: 1000, After: &cve.Position{Value: v, Key: 2021_000_000_001_000}}
				page, err := db.List(context.Background(), q)
				if err != nil {
					t.Errorf("List(%s desc=%v after %v): %v", sortKey, desc, v, err)
					continue
				}
				var want []string
				for _, id := range wantList(rows, cve.ListQuery{Sort: sortKey, Desc: desc}) {
					k, _ := cve.Key(id)
					r := rows[slices.IndexFunc(rows, func(r catalog.Row) bool { return r.Key == k })]
					sv := sortValueOf(r, sortKey)
					beyond := sv > v || sv == v && k > q.After.Key
					if desc {
						beyond = sv < v || sv == v && k < q.After.Key
					}
					if beyond {
						want = append(want, id)
					}
				}
				var got []string
				for _, s := range page.Rows {
					got = append(got, s.CVEID)
				}
				if diff := gocmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("sort %s desc=%v after %v: ids (-want +got):\n%s", sortKey, desc, v, diff)
				}
			}
		}
	}
}

// RunIndexScan runs the suite with every list of the summary index read
// by a scan of its rows rather than a walk of its orders.
func RunIndexScan(t *testing.T, open Open) {
	old := catalog.EnumerateAlways
	catalog.EnumerateAlways = true
	t.Cleanup(func() { catalog.EnumerateAlways = old })
	Run(t, open)
}

// testListRandom asks random queries of every filter, search, sort,
// direction and page size, page after page, and compares the pages with
// the rows filtered and sorted here: the walks of the summary index, their
// budgets and its drivers against a plain sort.
func testListRandom(t *testing.T, open Open) {
	db := open(t)
	rows := GenRows(rand.New(rand.NewPCG(5, 6)), 3000)
	PutRows(t, db, rows)
	rng := rand.New(rand.NewPCG(7, 8))
	sorts := []string{cve.SortPublished, cve.SortEPSS, cve.SortCVSS, cve.SortCVE, cve.SortFix, cve.SortKEV}
	sevs := []string{cve.SeverityCritical, cve.SeverityHigh, cve.SeverityMedium, cve.SeverityLow, cve.SeverityNone}
	words := []string{"overflow", "kernel", "log4j", "denial service", "jndi"}
	for i := range 100 {
		q := cve.ListQuery{Sort: sorts[rng.IntN(len(sorts))], Desc: rng.IntN(2) == 0, Limit: 20 + rng.IntN(60)}
		if rng.IntN(3) == 0 {
			for range 1 + rng.IntN(2) {
				q.Severities = append(q.Severities, sevs[rng.IntN(len(sevs))])
			}
		}
		if rng.IntN(3) == 0 {
			q.KEV = ptr(rng.IntN(2) == 0)
		}
		if rng.IntN(3) == 0 {
			q.Fix = ptr(rng.IntN(2) == 0)
		}
		if rng.IntN(3) == 0 {
			q.EPSSMin = ptr(float64(rng.IntN(50)) / 49)
		}
		if rng.IntN(3) == 0 {
			for range 1 + rng.IntN(3) {
				q.Years = append(q.Years, 1998+rng.IntN(30))
			}
		}
		searched := rows
		if rng.IntN(4) == 0 {
			q.Q = words[rng.IntN(len(words))]
			searched = matchingRows(rows, strings.Fields(q.Q)...)
		}
		want := wantList(searched, q)
		got := PageAll(t, db, q, nil)
		if diff := gocmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("query %d %+v: ids (-want +got):\n%s", i, q, diff)
		}
	}
}
