package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math"
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
// The summary index answers when it holds the catalog as it is now; the
// database otherwise, with the SQL of catalog.ListPlan. A page after a
// position is read there in two steps, each one index seek: the rows that
// tie with the position's sort value and follow it by key, then the rows
// beyond that value. (SQLite seeks a row-value condition (col, key) <
// (?, ?) on col alone, which would make a page deep inside a long run of
// ties, such as every non-KEV record, cost the length of the run.)
func (d *DB) List(ctx context.Context, q cve.ListQuery) (cve.Page, error) {
	p, err := catalog.NewListPlan(q, &dialect)
	if err != nil {
		return cve.Page{}, err
	}
	if p.Empty {
		return cve.Page{}, nil
	}
	if page, ok, err := d.summaries.List(ctx, p, q); ok || err != nil {
		return page, err
	}
	tx, err := d.db.Read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return cve.Page{}, fmt.Errorf("list records: %w", err)
	}
	defer tx.Rollback()
	if p.Match != "" {
		// A search that matches few rows reads them by key and sorts them;
		// one that matches many walks the sort index until the page is full.
		var n int
		err := tx.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT rowid FROM records_fts WHERE records_fts MATCH ? LIMIT ?)`,
			p.Match, sparseSearch+1).Scan(&n)
		if err != nil {
			return cve.Page{}, fmt.Errorf("list records: search: %w", err)
		}
		p.Sparse = n <= sparseSearch
	}
	return p.Read(ctx, func(ctx context.Context, query string, args ...any) (catalog.Rows, func(), error) {
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return nil, nil, err
		}
		return rows, func() { rows.Close() }, nil
	})
}

// dialect is SQLite's list SQL: the listed records are those of the
// partial list indexes, each list reads the index of its order (or none
// for a search of few matches), and a position is two steps.
var dialect = catalog.ListDialect{
	Listed: "rejected = 0",
	Search: ftsQuery,
	Match:  "key IN (SELECT rowid FROM records_fts WHERE records_fts MATCH %s)",
	Position: func(col string, v float64, key int64, _ bool) (any, int64) {
		return positionArg(col, v), key
	},
	From: func(col string, sparse bool) string {
		if sparse {
			return "records NOT INDEXED"
		}
		return "records INDEXED BY " + listIndex(col)
	},
}

// searchKeys returns the keys of the records that match an FTS5 query.
func (d *DB) searchKeys(ctx context.Context, match string) ([]int64, error) {
	return catalog.QueryKeys(ctx, d.db.Read, `SELECT rowid FROM records_fts WHERE records_fts MATCH ?`, match)
}

// sparseSearch is the number of matches up to which a search reads its
// matches by key and sorts them rather than walking a sort index until the
// page is full (which, for rare matches, walks most of the index). Tests
// change it.
var sparseSearch = 1000

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
