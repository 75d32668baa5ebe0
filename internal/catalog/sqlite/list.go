package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
)

// integerColumns are the sort columns that hold integers.
var integerColumns = map[string]bool{"published": true, "has_fix": true, "is_kev": true, "key": true}

// List implements cve.Catalog. Rejected records are left out. Rows are
// ordered by the sort column, then by CVE id, both in the direction of q;
// missing values sort lowest. It returns errs.ErrInvalid for a sort key,
// severity or limit it does not know and for a search of too many words.
//
// A page after a position is read in two steps, each one index seek: the
// rows that tie with the position's sort value and follow it by key, then
// the rows beyond that value. (SQLite seeks a row-value condition
// (col, key) < (?, ?) on col alone, which would make a page deep inside a
// long run of ties, such as every non-KEV record, cost the length of the
// run.) A search reads a page in one step instead: each step would gather
// the matches of the search again, which costs more than walking ties.
func (d *DB) List(ctx context.Context, q cve.ListQuery) (cve.Page, error) {
	p, err := newListPlan(q)
	if err != nil {
		return cve.Page{}, err
	}
	if p.empty {
		return cve.Page{}, nil
	}
	if page, ok, err := d.listIndexed(ctx, p, q); ok || err != nil {
		return page, err
	}
	tx, err := d.db.Read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return cve.Page{}, fmt.Errorf("list records: %w", err)
	}
	defer tx.Rollback()
	if p.match != "" {
		// A search that matches few rows reads them by key and sorts them;
		// one that matches many walks the sort index until the page is full.
		var n int
		err := tx.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT rowid FROM records_fts WHERE records_fts MATCH ? LIMIT ?)`,
			p.match, sparseSearch+1).Scan(&n)
		if err != nil {
			return cve.Page{}, fmt.Errorf("list records: search: %w", err)
		}
		p.sparse = n <= sparseSearch
	}
	var page cve.Page
	limit := p.limit
	steps := []listStep{stepAll}
	switch {
	case q.After == nil:
	case p.match != "":
		steps = []listStep{stepAfter}
	case p.col == "key":
		steps = []listStep{stepBeyond}
	default:
		steps = []listStep{stepTies, stepBeyond}
	}
	var last cve.Position
	for _, step := range steps {
		query, args := p.sql(step, limit+1-len(page.Rows))
		more, err := func() (bool, error) {
			rows, err := tx.QueryContext(ctx, query, args...)
			if err != nil {
				return false, err
			}
			defer rows.Close()
			for rows.Next() {
				s, key, err := catalog.ScanSummary(rows)
				if err != nil {
					return false, err
				}
				if len(page.Rows) == limit {
					return true, nil // one row beyond the page: more follow
				}
				page.Rows = append(page.Rows, s)
				last = cve.Position{Value: catalog.SortValue(p.sortKey, s, key), Key: key}
			}
			return false, rows.Err()
		}()
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

// listIndexed answers a list from the summary index, when it holds the
// catalog as it is now; ok is false when it does not.
func (d *DB) listIndexed(ctx context.Context, p *listPlan, q cve.ListQuery) (page cve.Page, ok bool, err error) {
	if q.After != nil && math.IsNaN(q.After.Value) {
		return page, false, nil // what the database makes of it is its own
	}
	x, err := d.summaryIndex(ctx)
	if x == nil || err != nil {
		return page, false, err
	}
	var matched *searchSet
	if p.match != "" {
		matched, err = x.search(p.match, func() ([]int64, error) {
			keys, err := d.searchKeys(ctx, p.match)
			if err != nil {
				return nil, fmt.Errorf("list records: search: %w", err)
			}
			// The search must have read the catalog the index holds.
			v, err := d.db.DataVersion(ctx)
			if err != nil {
				return nil, err
			}
			if v != x.version {
				return nil, errStale
			}
			return keys, nil
		})
		if errors.Is(err, errStale) {
			return page, false, nil
		}
		if err != nil {
			return page, false, err
		}
	}
	return x.list(p, &q, matched), true, nil
}

// errStale says that the catalog changed while the summary index was read.
var errStale = errors.New("the catalog changed")

// searchKeys returns the keys of the records that match an FTS5 query.
func (d *DB) searchKeys(ctx context.Context, match string) ([]int64, error) {
	return catalog.QueryKeys(ctx, d.db.Read, `SELECT rowid FROM records_fts WHERE records_fts MATCH ?`, match)
}

// sparseSearch is the number of matches up to which a search reads its
// matches by key and sorts them rather than walking a sort index until the
// page is full (which, for rare matches, walks most of the index). Tests
// change it.
var sparseSearch = 1000

// listPlan is a ListQuery turned into SQL pieces.
type listPlan struct {
	sortKey string
	col     string // sort column
	desc    bool
	limit   int
	where   []string // filters, rejected = 0 first
	args    []any
	match   string // FTS5 query, "" without q
	sparse  bool   // read the search matches by key
	after   *cve.Position
	empty   bool // nothing can match
}

// listStep is one of the queries that make a page.
type listStep int

const (
	stepAll    listStep = iota // a first page: no position
	stepTies                   // rows with the position's value, after its key
	stepBeyond                 // rows beyond the position's value
	stepAfter                  // rows after the position, in one query
)

func newListPlan(q cve.ListQuery) (*listPlan, error) {
	p := &listPlan{desc: q.Desc, after: q.After}
	var err error
	if p.sortKey, p.col, p.limit, err = catalog.ListOrder(q); err != nil {
		return nil, err
	}
	p.where = []string{"rejected = 0"}
	if strings.TrimSpace(q.Q) != "" {
		match, err := ftsQuery(q.Q)
		if err != nil {
			return nil, err
		}
		if match == "" {
			p.empty = true
			return p, nil
		}
		p.match = match
		p.where = append(p.where, "key IN (SELECT rowid FROM records_fts WHERE records_fts MATCH ?)")
		p.args = append(p.args, match)
	}
	if len(q.Severities) > 0 {
		for _, s := range q.Severities {
			p.args = append(p.args, s)
		}
		p.where = append(p.where, "severity IN ("+placeholders(len(q.Severities))+")")
	}
	if q.KEV != nil {
		p.where = append(p.where, "is_kev = ?")
		p.args = append(p.args, *q.KEV)
	}
	if q.Fix != nil {
		p.where = append(p.where, "has_fix = ?")
		p.args = append(p.args, *q.Fix)
	}
	if q.EPSSMin != nil {
		p.where = append(p.where, "epss >= ?")
		p.args = append(p.args, *q.EPSSMin)
	}
	switch len(q.Years) {
	case 0:
	case 1:
		// A key range as well, which the key order can seek.
		y := q.Years[0]
		lo, hi := catalog.YearKeys(y)
		p.where = append(p.where, "year = ?", "key >= ?", "key < ?")
		p.args = append(p.args, y, lo, hi)
	default:
		p.where = append(p.where, "year IN ("+placeholders(len(q.Years))+")")
		for _, y := range q.Years {
			p.args = append(p.args, y)
		}
	}
	return p, nil
}

// sql returns the query of one step with its arguments.
func (p *listPlan) sql(step listStep, limit int) (string, []any) {
	where := slices.Clone(p.where)
	args := slices.Clone(p.args)
	dir, beyond := "ASC", ">"
	if p.desc {
		dir, beyond = "DESC", "<"
	}
	order := p.col + " " + dir
	if p.col != "key" {
		order += ", key " + dir
	}
	switch step {
	case stepTies:
		where = append(where, p.col+" = ?", "key "+beyond+" ?")
		args = append(args, positionArg(p.col, p.after.Value), p.after.Key)
		order = "key " + dir
	case stepAfter:
		if p.col == "key" {
			where = append(where, "key "+beyond+" ?")
			args = append(args, p.after.Key)
		} else {
			where = append(where, "("+p.col+", key) "+beyond+" (?, ?)")
			args = append(args, positionArg(p.col, p.after.Value), p.after.Key)
		}
	case stepBeyond:
		if p.col == "key" {
			where = append(where, "key "+beyond+" ?")
			args = append(args, p.after.Key)
		} else {
			where = append(where, p.col+" "+beyond+" ?")
			args = append(args, positionArg(p.col, p.after.Value))
		}
	}
	index := "INDEXED BY " + listIndex(p.col)
	if p.sparse {
		index = "NOT INDEXED"
	}
	return "SELECT " + catalog.SummaryColumns + " FROM records " + index +
		" WHERE " + strings.Join(where, " AND ") +
		" ORDER BY " + order +
		" LIMIT " + strconv.Itoa(limit), args
}

// listIndex names the index of migrations/002_list_indexes.sql that orders
// rows by col.
func listIndex(col string) string { return "records_list_" + col }

// positionArg binds a position value to the type of its column, so that an
// integer column is compared with an integer.
func positionArg(col string, v float64) any {
	if integerColumns[col] && v == math.Trunc(v) && math.Abs(v) < 1<<53 {
		return int64(v)
	}
	return v
}

func placeholders(n int) string {
	return "?" + strings.Repeat(", ?", n-1)
}

// ftsQuery turns free text into an FTS5 query that matches rows holding
// every word of it, the last word also as a prefix, as a search box does
// ("log4j" finds "log4j2", "CVE-2021-4422" finds CVE-2021-44228): each
// word becomes a quoted string, so that no character the user types is read
// as FTS5 query syntax. Words without a letter or a digit are dropped (the
// tokenizer would find nothing in them); an empty result means nothing can
// match.
func ftsQuery(text string) (string, error) {
	words, err := catalog.SearchWords(text)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for i, w := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('"')
		b.WriteString(strings.ReplaceAll(w, `"`, `""`))
		b.WriteByte('"')
		if i == len(words)-1 && lastTokenLen(w) >= minPrefix {
			b.WriteByte('*')
		}
	}
	return b.String(), nil
}

// minPrefix is the length from which the last token of a word also
// matches as a prefix: shorter prefixes match too much to be useful.
const minPrefix = 3

// lastTokenLen returns the number of letters and digits at the end of the
// last token of w.
func lastTokenLen(w string) int {
	n := 0
	rs := []rune(w)
	i := len(rs) - 1
	for i >= 0 && !catalog.IsTokenRune(rs[i]) {
		i--
	}
	for ; i >= 0 && catalog.IsTokenRune(rs[i]); i-- {
		n++
	}
	return n
}
