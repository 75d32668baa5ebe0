package catalogtest

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
)

// listWords are the words of generated descriptions.
var listWords = []string{"overflow", "buffer", "injection", "sql", "remote", "kernel", "log4j", "jndi", "path", "traversal", "denial", "service", "crafted", "request"}

// GenRows returns n random served rows with many ties on every sort column,
// clusters of neighbouring ids, some rejected ones, and descriptions of a
// few words from a small vocabulary separated by spaces.
func GenRows(rng *rand.Rand, n int) []catalog.Row {
	sevs := []string{cve.SeverityCritical, cve.SeverityHigh, cve.SeverityMedium, cve.SeverityLow, cve.SeverityNone, ""}
	versions := []string{"2.0", "3.x", "4.0"}
	seen := map[int64]bool{}
	var out []catalog.Row
	for len(out) < n {
		year := 1999 + rng.IntN(27)
		seq := rng.IntN(60000)
		if rng.IntN(3) == 0 {
			seq = 1000 + rng.IntN(20) // cluster: CVE-YYYY-1000x
		}
		id := fmt.Sprintf("CVE-%04d-%04d", year, seq)
		key, ok := cve.Key(id)
		if !ok || seen[key] {
			continue
		}
		seen[key] = true
		r := catalog.Row{Key: key, ID: id, CVSS: -1, EPSS: -1, Published: -1, Modified: int64(1_700_000_000 + rng.IntN(1000))}
		if s := sevs[rng.IntN(len(sevs))]; s != "" {
			r.Severity = &s
			r.CVSS = float64(rng.IntN(11)) // ties
			v := versions[rng.IntN(len(versions))]
			r.CVSSVersion = &v
		}
		if rng.IntN(4) != 0 {
			r.EPSS = float64(rng.IntN(50)) / 49
		}
		if rng.IntN(5) != 0 {
			r.Published = time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC).Unix() + int64(rng.IntN(40))*86400
		}
		r.IsKEV = rng.IntN(10) == 0
		r.HasFix = rng.IntN(2) == 0
		r.Rejected = rng.IntN(20) == 0
		var desc []string
		for range 1 + rng.IntN(4) {
			desc = append(desc, listWords[rng.IntN(len(listWords))])
		}
		r.Description = strings.Join(desc, " ")
		r.Body = []byte(`{"cveId":"` + id + `","description":"` + r.Description + `"}`)
		r.Hash = []byte{1}
		out = append(out, r)
	}
	return out
}

// PutRows stores rows in one transaction.
func PutRows(tb testing.TB, s catalog.Store, rows []catalog.Row) {
	tb.Helper()
	ctx := context.Background()
	tx, err := s.Begin(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback()
	for i := range rows {
		if err := tx.PutRecord(ctx, &rows[i]); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
}

// deleteRows deletes the records of keys in one transaction.
func deleteRows(tb testing.TB, s catalog.Store, keys ...int64) {
	tb.Helper()
	ctx := context.Background()
	tx, err := s.Begin(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback()
	for _, k := range keys {
		if err := tx.DeleteRecord(ctx, k); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
}

// sortValueOf is the sort value of a row as List orders it.
func sortValueOf(r catalog.Row, sortKey string) float64 {
	switch sortKey {
	case cve.SortEPSS:
		return r.EPSS
	case cve.SortCVSS:
		return r.CVSS
	case cve.SortFix:
		return boolValue(r.HasFix)
	case cve.SortKEV:
		return boolValue(r.IsKEV)
	case cve.SortCVE:
		return float64(r.Key)
	}
	return float64(r.Published)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// wantList filters and orders rows as List should, ignoring q.Q's matching
// (the caller passes rows that already match it).
func wantList(rows []catalog.Row, q cve.ListQuery) []string {
	var sel []catalog.Row
	for _, r := range rows {
		switch {
		case r.Rejected:
		case len(q.Severities) > 0 && (r.Severity == nil || !slices.Contains(q.Severities, *r.Severity)):
		case q.KEV != nil && r.IsKEV != *q.KEV:
		case q.Fix != nil && r.HasFix != *q.Fix:
		case q.EPSSMin != nil && r.EPSS < *q.EPSSMin:
		case len(q.Years) > 0 && !slices.Contains(q.Years, cve.YearOfKey(r.Key)):
		default:
			sel = append(sel, r)
		}
	}
	sortKey := cmp.Or(q.Sort, cve.SortPublished)
	slices.SortFunc(sel, func(a, b catalog.Row) int {
		c := cmp.Or(cmp.Compare(sortValueOf(a, sortKey), sortValueOf(b, sortKey)), cmp.Compare(a.Key, b.Key))
		if q.Desc {
			return -c
		}
		return c
	})
	ids := make([]string, len(sel))
	for i, r := range sel {
		ids[i] = r.ID
	}
	return ids
}

// PageAll pages through q with q.Limit rows a page and returns every id,
// calling between (when set) between pages. It checks that no page is
// longer than the limit and that only the last one is short.
func PageAll(tb testing.TB, c interface {
	List(context.Context, cve.ListQuery) (cve.Page, error)
}, q cve.ListQuery, between func()) []string {
	tb.Helper()
	var ids []string
	for pages := 0; ; pages++ {
		if pages > 10000 {
			tb.Fatal("paging does not end")
		}
		page, err := c.List(context.Background(), q)
		if err != nil {
			tb.Fatalf("List(%+v): %v", q, err)
		}
		if len(page.Rows) > q.Limit {
			tb.Fatalf("page of %d rows, limit %d", len(page.Rows), q.Limit)
		}
		for _, s := range page.Rows {
			ids = append(ids, s.CVEID)
		}
		if page.Next == nil {
			return ids
		}
		if len(page.Rows) != q.Limit {
			tb.Fatalf("short page of %d rows (limit %d) with a next position", len(page.Rows), q.Limit)
		}
		q.After = page.Next
		if between != nil {
			between()
		}
	}
}

func ptr[T any](v T) *T { return &v }
