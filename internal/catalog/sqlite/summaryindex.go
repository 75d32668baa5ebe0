package sqlite

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
)

// summaryIndex holds the list columns of every record in memory (about
// 50 bytes a record), in key order, with the order of each sort key: List
// filters and sorts, and Walk streams, from it instead of the database for
// as long as the catalog keeps the data version it was read at. Its rows
// never change once built: a new index replaces it.
type summaryIndex struct {
	version int64
	rows    []indexRow
	// orders holds, for every sort column but key, the numbers of the
	// rows not rejected (the rows a list may show) in (value, key) order.
	orders map[string][]int32
	// strs are the severities and CVSS versions, each held once; a row
	// refers to them by number, 0 for NULL.
	strs []string

	// searches holds the rows matched by the last searches, by FTS5 query.
	mu       sync.Mutex
	searches map[string]rowSet
}

// maxSearches bounds the searches an index keeps: 128 sets of 300,000
// rows are under 5 MB.
const maxSearches = 128

// rowSet is a set of row numbers.
type rowSet []uint64

func newRowSet(n int) rowSet    { return make(rowSet, (n+63)/64) }
func (s rowSet) add(i int)      { s[i/64] |= 1 << (i % 64) }
func (s rowSet) has(i int) bool { return s[i/64]&(1<<(i%64)) != 0 }

// indexRow is a record's list columns, as stored: missing numbers as -1.
type indexRow struct {
	key       int64
	cvss      float64
	epss      float64
	published int64
	modified  int64
	severity  uint8
	cvssVer   uint8
	flags     uint8
}

const (
	rowRejected = 1 << iota
	rowKEV
	rowFix
)

// value is the row's value of a sort column, as catalog.SortValue gives it.
func (r *indexRow) value(col string) float64 {
	switch col {
	case "cvss":
		return r.cvss
	case "epss":
		return r.epss
	case "published":
		return float64(r.published)
	case "has_fix":
		return r.flag(rowFix)
	case "is_kev":
		return r.flag(rowKEV)
	}
	return float64(r.key)
}

// flag is 1 when the row has flag f, 0 otherwise.
func (r *indexRow) flag(f uint8) float64 {
	if r.flags&f != 0 {
		return 1
	}
	return 0
}

// summary returns the row as catalog.ScanSummary reads it.
func (x *summaryIndex) summary(r *indexRow) cve.Summary {
	return catalog.SummaryOf(cve.IDOfKey(r.key), x.str(r.severity), r.cvss, x.str(r.cvssVer), r.epss,
		r.flags&rowKEV != 0, r.flags&rowFix != 0, r.published, r.modified, r.flags&rowRejected != 0)
}

func (x *summaryIndex) str(i uint8) *string {
	if i == 0 {
		return nil
	}
	s := x.strs[i]
	return &s
}

// buildSummaryIndex reads the list columns of every record at the data
// version it is given, seen before it starts: two walks of covering
// indexes, one of every record and one of the records not rejected.
func buildSummaryIndex(ctx context.Context, d *DB, version int64) (*summaryIndex, error) {
	tx, err := d.db.Read.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM records`).Scan(&n); err != nil {
		return nil, err
	}
	x := &summaryIndex{version: version, rows: make([]indexRow, 0, n), strs: []string{""}}
	interned := map[string]uint8{}
	intern := func(s *string) (uint8, error) {
		if s == nil {
			return 0, nil
		}
		if i, ok := interned[*s]; ok {
			return i, nil
		}
		if len(x.strs) == math.MaxUint8+1 {
			return 0, fmt.Errorf("more than %d distinct severities and CVSS versions", math.MaxUint8)
		}
		i := uint8(len(x.strs))
		x.strs = append(x.strs, *s)
		interned[*s] = i
		return i, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT key, severity, cvss, cvss_version, epss, is_kev, has_fix, published, modified
		FROM records INDEXED BY records_summary ORDER BY key`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			r             indexRow
			sev, ver      *string
			isKEV, hasFix bool
		)
		if err := rows.Scan(&r.key, &sev, &r.cvss, &ver, &r.epss, &isKEV, &hasFix, &r.published, &r.modified); err != nil {
			return nil, err
		}
		if r.severity, err = intern(sev); err != nil {
			return nil, err
		}
		if r.cvssVer, err = intern(ver); err != nil {
			return nil, err
		}
		r.flags = rowRejected
		if isKEV {
			r.flags |= rowKEV
		}
		if hasFix {
			r.flags |= rowFix
		}
		x.rows = append(x.rows, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	// The records listed are those of the partial index of the key order.
	listed, err := catalog.QueryKeys(ctx, tx, `SELECT key FROM records INDEXED BY records_list_key WHERE rejected = 0 ORDER BY key`)
	if err != nil {
		return nil, err
	}
	i := 0
	for _, key := range listed {
		for i < len(x.rows) && x.rows[i].key < key {
			i++
		}
		if i == len(x.rows) || x.rows[i].key != key {
			return nil, fmt.Errorf("record %d is listed but not in the summary index", key)
		}
		x.rows[i].flags &^= rowRejected
	}
	x.orders = map[string][]int32{}
	for _, col := range catalog.SortColumns {
		if col == "key" {
			continue
		}
		order := make([]int32, 0, len(x.rows))
		for i := range x.rows {
			if x.rows[i].flags&rowRejected == 0 {
				order = append(order, int32(i))
			}
		}
		slices.SortFunc(order, func(a, b int32) int {
			// Rows are in key order: equal values keep it.
			return cmp.Or(cmp.Compare(x.rows[a].value(col), x.rows[b].value(col)), cmp.Compare(a, b))
		})
		x.orders[col] = order
	}
	return x, nil
}

// walkBudget is the number of rows a list walks in its sort order before
// it scans the rows in key order instead: past it, the filters keep so few
// rows that reading them all in memory order, then sorting the few kept,
// costs less than the rest of a walk whose every step is a cache miss.
// Tests change it.
var walkBudget = 4096

// list answers a query whose plan p is valid, with the rows matching the
// search in matched (nil without a search).
func (x *summaryIndex) list(p *listPlan, q cve.ListQuery, matched rowSet) cve.Page {
	keep := x.filter(q, matched)
	order := x.orders[p.col]
	n := len(order)
	if order == nil {
		n = len(x.rows)
	}
	at := func(i int) *indexRow {
		if order == nil {
			return &x.rows[i]
		}
		return &x.rows[order[i]]
	}
	// The walk goes from i by step until it leaves [0, n).
	i, step := 0, 1
	if p.desc {
		i, step = n-1, -1
	}
	if q.After != nil {
		// In the ascending order, the first row at or beyond the position
		// (beyond it when ascending, since the position's own row is not
		// repeated); descending, the walk starts from the row before it.
		i = sort.Search(n, func(i int) bool {
			c := x.compare(p, at(i), q.After)
			return c > 0 || c == 0 && p.desc
		})
		if p.desc {
			i--
		}
	}
	var rows []*indexRow
	for steps := 0; i >= 0 && i < n && len(rows) <= p.limit; i, steps = i+step, steps+1 {
		if steps == walkBudget {
			return x.scan(p, q, keep)
		}
		if r := at(i); keep(r, i, order) {
			rows = append(rows, r)
		}
	}
	return x.page(p, rows)
}

// scan answers a list as list does, by reading every row of the years
// the query names (all rows without), in key order.
func (x *summaryIndex) scan(p *listPlan, q cve.ListQuery, keep func(*indexRow, int, []int32) bool) cve.Page {
	type span struct{ lo, hi int }
	spans := []span{{0, len(x.rows)}}
	if len(q.Years) > 0 {
		spans = spans[:0]
		years := slices.Clone(q.Years)
		slices.Sort(years)
		for _, y := range slices.Compact(years) {
			lo, _ := cve.Key(fmt.Sprintf("CVE-%04d-0000", y))
			hi, _ := cve.Key(fmt.Sprintf("CVE-%04d-0000", y+1))
			spans = append(spans, span{x.find(lo), x.find(hi)})
		}
	}
	// The first limit+1 rows kept, in list order, as they are found.
	less := func(a, b *indexRow) int {
		c := x.compare(p, a, &cve.Position{Value: b.value(p.col), Key: b.key})
		if p.desc {
			return -c
		}
		return c
	}
	best := make([]*indexRow, 0, p.limit+1)
	for _, sp := range spans {
		for i := sp.lo; i < sp.hi; i++ {
			r := &x.rows[i]
			if len(best) == cap(best) && less(r, best[len(best)-1]) >= 0 {
				continue // after every row kept so far
			}
			if !keep(r, i, nil) {
				continue
			}
			if q.After != nil {
				if c := x.compare(p, r, q.After); c == 0 || (c < 0) != p.desc {
					continue // not after the position
				}
			}
			at, _ := slices.BinarySearchFunc(best, r, less)
			if len(best) == cap(best) {
				best = best[:len(best)-1]
			}
			best = slices.Insert(best, at, r)
		}
	}
	return x.page(p, best)
}

// compare orders a row and a position ascending, as List orders rows.
func (x *summaryIndex) compare(p *listPlan, r *indexRow, pos *cve.Position) int {
	c := cmp.Compare(r.key, pos.Key)
	if p.col != "key" {
		c = cmp.Or(cmp.Compare(r.value(p.col), pos.Value), c)
	}
	return c
}

// find returns the number of the first row whose key is key or more.
func (x *summaryIndex) find(key int64) int {
	i, _ := slices.BinarySearchFunc(x.rows, key, func(r indexRow, k int64) int { return cmp.Compare(r.key, k) })
	return i
}

// page returns the page of rows, which are in list order and hold one
// row more than the page when more follow.
func (x *summaryIndex) page(p *listPlan, rows []*indexRow) cve.Page {
	var page cve.Page
	for _, r := range rows[:min(len(rows), p.limit)] {
		page.Rows = append(page.Rows, x.summary(r))
	}
	if len(rows) > p.limit {
		last := rows[p.limit-1]
		page.Next = &cve.Position{Value: catalog.SortValue(p.sortKey, page.Rows[p.limit-1], last.key), Key: last.key}
	}
	return page
}

// filter returns the test of a row (at position i of order) against the
// filters of q and the search matches.
func (x *summaryIndex) filter(q cve.ListQuery, matched rowSet) func(r *indexRow, i int, order []int32) bool {
	var sevs [math.MaxUint8 + 1]bool
	for _, s := range q.Severities {
		for i, t := range x.strs[1:] {
			if s == t {
				sevs[i+1] = true
			}
		}
	}
	return func(r *indexRow, i int, order []int32) bool {
		if r.flags&rowRejected != 0 {
			return false
		}
		if matched != nil {
			n := i
			if order != nil {
				n = int(order[i])
			}
			if !matched.has(n) {
				return false
			}
		}
		if len(q.Severities) > 0 && !sevs[r.severity] {
			return false
		}
		if q.KEV != nil && *q.KEV != (r.flags&rowKEV != 0) {
			return false
		}
		if q.Fix != nil && *q.Fix != (r.flags&rowFix != 0) {
			return false
		}
		if q.EPSSMin != nil && !(r.epss >= *q.EPSSMin) {
			return false
		}
		if len(q.Years) > 0 && !slices.Contains(q.Years, cve.YearOfKey(r.key)) {
			return false
		}
		return true
	}
}

// search returns the rows that match an FTS5 query, from the searches the
// index keeps or by asking keys for the keys of the matching records.
func (x *summaryIndex) search(match string, keys func() ([]int64, error)) (rowSet, error) {
	x.mu.Lock()
	set, ok := x.searches[match]
	x.mu.Unlock()
	if ok {
		return set, nil
	}
	ks, err := keys()
	if err != nil {
		return nil, err
	}
	if !slices.IsSorted(ks) {
		slices.Sort(ks)
	}
	set = newRowSet(len(x.rows))
	i := 0
	for _, k := range ks {
		for i < len(x.rows) && x.rows[i].key < k {
			i++
		}
		if i < len(x.rows) && x.rows[i].key == k {
			set.add(i)
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.searches == nil {
		x.searches = map[string]rowSet{}
	}
	if len(x.searches) >= maxSearches {
		for m := range x.searches { // any one
			delete(x.searches, m)
			break
		}
	}
	x.searches[match] = set
	return set, nil
}

// walk calls fn for every row after the key from, in key order.
func (x *summaryIndex) walk(ctx context.Context, from int64, fn func(cve.Summary) error) error {
	i := x.find(from + 1)
	for n := 0; i < len(x.rows); i, n = i+1, n+1 {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if err := fn(x.summary(&x.rows[i])); err != nil {
			return err
		}
	}
	return nil
}

// summaries keeps the catalog's summary index, building a new one in the
// background when the catalog has changed since the last.
type summaries struct {
	d      *DB
	ctx    context.Context // of the builds; cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	cur      *summaryIndex
	building bool
	retry    time.Time // no build before, after a failed one
}

// retryBuild is how long a failed build waits before the next.
const retryBuild = 30 * time.Second

func newSummaries(d *DB) *summaries {
	ctx, cancel := context.WithCancel(context.Background())
	return &summaries{d: d, ctx: ctx, cancel: cancel}
}

// Ways of keeping the summary index (tests choose).
const (
	indexInBackground = iota // build after a change, read the database meanwhile
	indexInline              // build after a change before answering
	indexOff                 // always read the database
)

// summaryIndexMode is how every catalog keeps its summary index.
var summaryIndexMode = indexInBackground

// at returns the index at version, or nil when there is none yet; then
// it starts building one, unless a build is under way.
func (s *summaries) at(ctx context.Context, version int64) (*summaryIndex, error) {
	if summaryIndexMode == indexInline {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.cur == nil || s.cur.version != version {
			x, err := buildSummaryIndex(ctx, s.d, version)
			if err != nil {
				return nil, err
			}
			s.cur = x
		}
		return s.cur, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.cur.version == version {
		return s.cur, nil
	}
	if s.building || time.Now().Before(s.retry) || s.ctx.Err() != nil {
		return nil, nil
	}
	s.building = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		start := time.Now()
		// The version is taken again: a commit may have come since.
		x, err := func() (*summaryIndex, error) {
			v, err := s.d.db.DataVersion(s.ctx)
			if err != nil {
				return nil, err
			}
			return buildSummaryIndex(s.ctx, s.d, v)
		}()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.building = false
		if err != nil {
			if s.ctx.Err() == nil {
				slog.Warn("catalog summary index: build failed; lists are read from the database", "err", err)
				s.retry = time.Now().Add(retryBuild)
			}
			return
		}
		s.cur = x
		slog.Debug("catalog summary index built", "records", len(x.rows), "took", time.Since(start))
	}()
	return nil, nil
}

// close stops a build under way and waits for it.
func (s *summaries) close() {
	s.cancel()
	s.wg.Wait()
}
