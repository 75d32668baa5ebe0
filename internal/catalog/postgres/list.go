package postgres

import (
	"context"
	"math"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
)

// List implements cve.Catalog. Rejected records are left out. Rows are
// ordered by the sort column, then by CVE id, both in the direction of q;
// missing values sort lowest. It returns errs.ErrInvalid for a sort key,
// severity or limit it does not know and for a search of too many words.
//
// The summary index answers when it holds the catalog as it is now.
// Otherwise a page is one query of catalog.ListPlan: a page after a
// position adds the row-value condition (column, key) > (value, key) (<
// when descending), which a B-tree index on (column, key) answers with one
// seek to the position and a scan in order from there, wherever the
// position lies, ties included.
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
	return p.Read(ctx, func(ctx context.Context, query string, args ...any) (catalog.Rows, func(), error) {
		rows, err := d.pool.Query(ctx, query, args...)
		if err != nil {
			return nil, nil, err
		}
		return rows, rows.Close, nil
	})
}

// dialect is PostgreSQL's list SQL: full-text search on the tsvector
// column, a position in one row-value seek.
var dialect = catalog.ListDialect{
	Listed:       "NOT rejected",
	Search:       searchQuery,
	Match:        "search @@ %s::tsquery",
	RowValueSeek: true,
	Position:     positionArgs,
	From:         func(string, bool) string { return "records" },
}

// searchKeys returns the keys of the records that match a tsquery.
func (d *DB) searchKeys(ctx context.Context, match string) ([]int64, error) {
	return catalog.QueryKeys(ctx, d.SQLReads.DB, `SELECT key FROM records WHERE search @@ $1::tsquery`, match)
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
