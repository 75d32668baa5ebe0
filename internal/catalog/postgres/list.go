package postgres

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
)

// List implements cve.Catalog. Rejected records are left out. Rows are
// ordered by the sort column, then by CVE id, both in the direction of q;
// missing values sort lowest. It returns errs.ErrInvalid for a sort key,
// severity or limit it does not know and for a search of too many words.
//
// A page is one query. A page after a position adds the row-value condition
// (column, key) > (value, key) (< when descending), which a B-tree index on
// (column, key) answers with one seek to the position and a scan in order
// from there, wherever the position lies, ties included.
func (d *DB) List(ctx context.Context, q cve.ListQuery) (cve.Page, error) {
	p, err := newListPlan(q)
	if err != nil {
		return cve.Page{}, err
	}
	if p.empty {
		return cve.Page{}, nil
	}
	query, args := p.sql()
	rows, err := d.pool.Query(ctx, query, args...)
	if err != nil {
		return cve.Page{}, fmt.Errorf("list records: %w", err)
	}
	defer rows.Close()
	var page cve.Page
	var last cve.Position
	for rows.Next() {
		s, key, err := catalog.ScanSummary(rows)
		if err != nil {
			return cve.Page{}, fmt.Errorf("list records: %w", err)
		}
		if len(page.Rows) == p.limit {
			page.Next = &last // one row beyond the page: more follow
			break
		}
		page.Rows = append(page.Rows, s)
		last = cve.Position{Value: catalog.SortValue(p.sortKey, s, key), Key: key}
	}
	if err := rows.Err(); err != nil {
		return cve.Page{}, fmt.Errorf("list records: %w", err)
	}
	return page, nil
}

// listPlan is a ListQuery turned into SQL pieces.
type listPlan struct {
	sortKey string
	col     string // sort column
	desc    bool
	limit   int
	where   []string // filters, NOT rejected first
	args    []any
	after   *cve.Position
	empty   bool // nothing can match
}

func newListPlan(q cve.ListQuery) (*listPlan, error) {
	p := &listPlan{desc: q.Desc, after: q.After}
	var err error
	if p.sortKey, p.col, p.limit, err = catalog.ListOrder(q); err != nil {
		return nil, err
	}
	p.where = []string{"NOT rejected"}
	if strings.TrimSpace(q.Q) != "" {
		tsq, err := searchQuery(q.Q)
		if err != nil {
			return nil, err
		}
		if tsq == "" {
			p.empty = true
			return p, nil
		}
		p.where = append(p.where, "search @@ "+p.arg(tsq)+"::tsquery")
	}
	if len(q.Severities) > 0 {
		p.where = append(p.where, "severity = ANY("+p.arg(q.Severities)+")")
	}
	if q.KEV != nil {
		p.where = append(p.where, "is_kev = "+p.arg(*q.KEV))
	}
	if q.Fix != nil {
		p.where = append(p.where, "has_fix = "+p.arg(*q.Fix))
	}
	if q.EPSSMin != nil {
		p.where = append(p.where, "epss >= "+p.arg(*q.EPSSMin))
	}
	switch len(q.Years) {
	case 0:
	case 1:
		// The key range of the year alone: the key order can seek it, and
		// the planner estimates it from the key's histogram (with year = y
		// too, it would take the two for independent and underestimate).
		lo, hi := catalog.YearKeys(q.Years[0])
		p.where = append(p.where, "key >= "+p.arg(lo), "key < "+p.arg(hi))
	default:
		years := make([]int32, len(q.Years))
		for i, y := range q.Years {
			years[i] = int32(y)
		}
		p.where = append(p.where, "year = ANY("+p.arg(years)+")")
	}
	if p.after != nil {
		p.where = append(p.where, p.afterCondition())
	}
	return p, nil
}

// arg adds a query argument and returns its placeholder.
func (p *listPlan) arg(v any) string {
	p.args = append(p.args, v)
	return "$" + strconv.Itoa(len(p.args))
}

// afterCondition is the condition of the rows that follow p.after.
func (p *listPlan) afterCondition() string {
	beyond := ">"
	if p.desc {
		beyond = "<"
	}
	if p.col == "key" {
		return "key " + beyond + " " + p.arg(p.after.Key)
	}
	v, key := positionArgs(p.col, p.after.Value, p.after.Key, p.desc)
	return "(" + p.col + ", key) " + beyond + " (" + p.arg(v) + ", " + p.arg(key) + ")"
}

// sql returns the query of a page with its arguments. It reads one row
// beyond the page, to tell whether more follow.
func (p *listPlan) sql() (string, []any) {
	dir := "ASC"
	if p.desc {
		dir = "DESC"
	}
	order := p.col + " " + dir
	if p.col != "key" {
		order += ", key " + dir
	}
	return "SELECT " + catalog.SummaryColumns + " FROM records" +
		" WHERE " + strings.Join(p.where, " AND ") +
		" ORDER BY " + order +
		" LIMIT " + strconv.Itoa(p.limit+1), p.args
}

// positionArgs binds a position to the types of the sort column and key.
// A position value the column cannot hold exactly (a cursor the list did
// not make) becomes a position of the column's type that the same rows
// follow, so that the comparison stays one the index answers. NaN is
// followed by no row, as on SQLite, where it binds as NULL.
func positionArgs(col string, v float64, key int64, desc bool) (any, int64) {
	// last and first are the positions that no row and every row follow,
	// in the list's direction; keys are never MinInt64 or MaxInt64.
	last, first := int64(math.MaxInt64), int64(math.MinInt64)
	if desc {
		last, first = first, last
	}
	switch col {
	case "epss", "cvss":
		if math.IsNaN(v) {
			return math.Copysign(math.Inf(1), float64(last)), last
		}
		return v, key
	case "has_fix", "is_kev":
		switch {
		case v == 0 || v == 1:
			return v == 1, key
		case math.IsNaN(v):
			return !desc, last
		case v < 0:
			// Every row follows ascending, none descending.
			return false, math.MinInt64
		case v > 1:
			// No row follows ascending, every row descending.
			return true, math.MaxInt64
		}
		// Between false and true: ascending, the true rows follow;
		// descending, the false ones.
		return desc, last
	}
	// published: bigint.
	switch {
	case v == math.Trunc(v) && v >= math.MinInt64 && v < math.MaxInt64:
		return int64(v), key
	case math.IsNaN(v):
		return last, last
	case !desc:
		// The rows beyond v are those from ceil(v) on.
		return clampInt(math.Ceil(v)), first
	}
	// The rows beyond v are those up to floor(v).
	return clampInt(math.Floor(v)), first
}

// clampInt converts v to the nearest int64.
func clampInt(v float64) int64 {
	switch {
	case v >= math.MaxInt64:
		return math.MaxInt64
	case v <= math.MinInt64:
		return math.MinInt64
	}
	return int64(v)
}
