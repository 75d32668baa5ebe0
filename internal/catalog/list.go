package catalog

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/patchline/patchline/internal/cve"
)

// The SQL of a list page, written once for both stores. Their tables,
// columns and indexes on (sort column, key) are alike; a ListDialect says
// what each says its own way: which records are listed (the condition of
// SQLite's partial indexes), full-text search (an FTS5 table, a tsvector
// column), whether a row-value condition (column, key) > (value, key) is
// one index seek (PostgreSQL) or two steps are (SQLite), how a position
// binds to the sort column's type, and planner hints.
//
// Both engines answer most lists from the summary index (summaryindex.go)
// and read them here only while it is built after a change.

// ListDialect is what the SQL of a list says in an engine's own way.
type ListDialect struct {
	// Listed is the condition of the records a list shows.
	Listed string
	// Search returns the engine's full-text query of the words of a
	// search, "" when nothing can match, or errs.ErrInvalid.
	Search func(text string) (string, error)
	// Match is the condition of the records that match a search, with %s
	// for the placeholder of the query Search returns.
	Match string
	// RowValueSeek is true when the engine seeks a condition (col, key) >
	// ($1, $2) on both columns of the index: a page after a position is
	// then one query. Otherwise it is two: the rows that tie with the
	// position's value and follow its key, then the rows beyond the value.
	RowValueSeek bool
	// Position binds a position in the order of col to the types of the
	// column and of key.
	Position func(col string, v float64, key int64, desc bool) (any, int64)
	// From is the FROM clause of a list in the order of col: the records
	// table, with the engine's planner hints. Sparse is true for a search
	// whose few matches are read by key rather than in col's order.
	From func(col string, sparse bool) string
}

// ListPlan is a list query turned into SQL pieces.
type ListPlan struct {
	SortKey string
	Col     string // sort column
	Desc    bool
	Limit   int
	// Match is the engine's query of the search, "" without one.
	Match string
	// Sparse says that the search matches few records: the engine sets it
	// (see ListDialect.From).
	Sparse bool
	// Empty says that no record can match.
	Empty bool
	After *cve.Position

	d     *ListDialect
	where []string // filters, with placeholders $1 … $len(args)
	args  []any
}

// ListStep is one of the queries that make a page.
type ListStep int

// The steps.
const (
	StepAll    ListStep = iota // a first page: no position
	StepTies                   // rows with the position's value, after its key
	StepBeyond                 // rows beyond the position's value
	StepAfter                  // rows after the position, in one query
)

// NewListPlan returns the plan of q in dialect d. It returns
// errs.ErrInvalid as ListOrder does and for a search of too many words.
func NewListPlan(q cve.ListQuery, d *ListDialect) (*ListPlan, error) {
	p := &ListPlan{Desc: q.Desc, After: q.After, d: d}
	var err error
	if p.SortKey, p.Col, p.Limit, err = ListOrder(q); err != nil {
		return nil, err
	}
	p.where = []string{d.Listed}
	if strings.TrimSpace(q.Q) != "" {
		if p.Match, err = d.Search(q.Q); err != nil {
			return nil, err
		}
		if p.Match == "" {
			p.Empty = true
			return p, nil
		}
		p.where = append(p.where, fmt.Sprintf(d.Match, p.arg(p.Match)))
	}
	if len(q.Severities) > 0 {
		p.where = append(p.where, "severity IN ("+p.argList(anys(q.Severities)...)+")")
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
		// The key range of the year alone: the key order seeks it, and
		// PostgreSQL's planner estimates it from the key's histogram (with
		// year = y too, it would take the two for independent and
		// underestimate).
		lo, hi := YearKeys(q.Years[0])
		p.where = append(p.where, "key >= "+p.arg(lo), "key < "+p.arg(hi))
	default:
		p.where = append(p.where, "year IN ("+p.argList(anys(q.Years)...)+")")
	}
	return p, nil
}

// arg adds a query argument and returns its placeholder.
func (p *ListPlan) arg(v any) string {
	p.args = append(p.args, v)
	return "$" + strconv.Itoa(len(p.args))
}

// argList adds the arguments of vs and returns their placeholders,
// separated by commas.
func (p *ListPlan) argList(vs ...any) string {
	ph := make([]string, len(vs))
	for i, v := range vs {
		ph[i] = p.arg(v)
	}
	return strings.Join(ph, ", ")
}

// anys returns the elements of vs as values of type any.
func anys[T any](vs []T) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}

// Steps returns the steps of a page, in order.
func (p *ListPlan) Steps() []ListStep {
	switch {
	case p.After == nil:
		return []ListStep{StepAll}
	case p.Match != "" || p.d.RowValueSeek:
		// A search reads a page in one step: each step would gather the
		// matches of the search again, which costs more than walking ties.
		return []ListStep{StepAfter}
	case p.Col == "key":
		return []ListStep{StepBeyond}
	}
	return []ListStep{StepTies, StepBeyond}
}

// SQL returns the query of one step, of at most limit rows, with its
// arguments.
func (p *ListPlan) SQL(step ListStep, limit int) (string, []any) {
	q := &ListPlan{args: append([]any(nil), p.args...)}
	where := append([]string(nil), p.where...)
	dir, beyond := "ASC", ">"
	if p.Desc {
		dir, beyond = "DESC", "<"
	}
	order := p.Col + " " + dir
	if p.Col != "key" {
		order += ", key " + dir
	}
	switch step {
	case StepTies:
		v, key := p.d.Position(p.Col, p.After.Value, p.After.Key, p.Desc)
		where = append(where, p.Col+" = "+q.arg(v), "key "+beyond+" "+q.arg(key))
		order = "key " + dir
	case StepAfter:
		if p.Col == "key" {
			where = append(where, "key "+beyond+" "+q.arg(p.After.Key))
		} else {
			v, key := p.d.Position(p.Col, p.After.Value, p.After.Key, p.Desc)
			where = append(where, "("+p.Col+", key) "+beyond+" ("+q.arg(v)+", "+q.arg(key)+")")
		}
	case StepBeyond:
		if p.Col == "key" {
			where = append(where, "key "+beyond+" "+q.arg(p.After.Key))
		} else {
			v, _ := p.d.Position(p.Col, p.After.Value, p.After.Key, p.Desc)
			where = append(where, p.Col+" "+beyond+" "+q.arg(v))
		}
	}
	return "SELECT " + SummaryColumns + " FROM " + p.d.From(p.Col, p.Sparse) +
		" WHERE " + strings.Join(where, " AND ") +
		" ORDER BY " + order +
		" LIMIT " + strconv.Itoa(limit), q.args
}

// QueryFunc runs a query and returns its rows and the function that
// closes them.
type QueryFunc func(ctx context.Context, query string, args ...any) (Rows, func(), error)

// Read reads the page of p, a step a query, with query.
func (p *ListPlan) Read(ctx context.Context, query QueryFunc) (cve.Page, error) {
	var page cve.Page
	if p.Empty {
		return page, nil
	}
	var last cve.Position
	for _, step := range p.Steps() {
		more, err := p.readStep(ctx, query, step, &page, &last)
		if err != nil {
			return cve.Page{}, fmt.Errorf("list records: %w", err)
		}
		if more {
			page.Next = &last
			break
		}
	}
	return page, nil
}

// readStep appends the rows of one step to page, up to its limit, and
// says whether more follow; last is the position of the last row read.
func (p *ListPlan) readStep(ctx context.Context, query QueryFunc, step ListStep, page *cve.Page, last *cve.Position) (bool, error) {
	q, args := p.SQL(step, p.Limit+1-len(page.Rows))
	rows, closeRows, err := query(ctx, q, args...)
	if err != nil {
		return false, err
	}
	defer closeRows()
	for rows.Next() {
		s, key, err := ScanSummary(rows)
		if err != nil {
			return false, err
		}
		if len(page.Rows) == p.Limit {
			return true, nil // one row beyond the page: more follow
		}
		page.Rows = append(page.Rows, s)
		*last = cve.Position{Value: SortValue(p.SortKey, s, key), Key: key}
	}
	return false, rows.Err()
}
