package catalog

import (
	"cmp"
	"math"
	"slices"
	"sort"

	"github.com/patchline/patchline/internal/cve"
)

// How the summary index answers a list. The filters on the sort column
// itself (epss_min on epss, kev on kev, fix on fix, the years on cve, and
// the ranges of CVSS scores of the severities asked and of publication
// times of the years asked) and the position of a cursor narrow the
// order to a run of entries; a list walks that run in its direction,
// tests each entry's attributes against the other filters and stops at a
// page and one row. A list of KEV records walks the KEV entries of the
// run alone.
//
// A walk finds its page soon when the filters keep many records. When
// they keep few, a driver may hold fewer entries than the walk would
// read: the entries of the years asked (a run of the key order), those of
// the EPSS scores from epss_min on (a run of the EPSS order) or the rows
// a search matched. Then the walk is given four times the driver's size,
// and past that the list reads every entry of the driver instead and keeps
// the first rows of the page in list order as it finds them.

// EnumerateAlways makes every list read its driver, or every entry when
// it has none, rather than walk its order. Tests set it.
var EnumerateAlways = false

// walkPerDriver is how many entries a walk may read for each entry of the
// driver: reading the driver costs about four steps of a walk per entry.
const walkPerDriver = 4

// listFilter is the test of an entry against the filters of a list.
type listFilter struct {
	x          *summaryIndex
	q          *cve.ListQuery
	mask, want uint32 // of the KEV and fix bits
	sevs       *[sevCodes]bool
	years      *[yearCodes]bool
	epss       uint32 // the bucket of epss_min
	matched    rowSet // nil without a search
	// sevBits and yearBits have the bits of the severity and year codes
	// a record that passes may have: every code without the filter.
	sevBits  uint16
	yearBits [yearCodes / 64]uint64
}

func (x *summaryIndex) newFilter(q *cve.ListQuery, matched rowSet) *listFilter {
	f := &listFilter{x: x, q: q, matched: matched, sevBits: math.MaxUint16}
	for i := range f.yearBits {
		f.yearBits[i] = math.MaxUint64
	}
	if q.KEV != nil {
		f.mask |= attrKEV
		if *q.KEV {
			f.want |= attrKEV
		}
	}
	if q.Fix != nil {
		f.mask |= attrFix
		if *q.Fix {
			f.want |= attrFix
		}
	}
	if len(q.Severities) > 0 {
		f.sevs = new([sevCodes]bool)
		for i, s := range x.strs {
			if i > 0 && x.sevCode[i] != 0 && slices.Contains(q.Severities, s) {
				f.sevs[x.sevCode[i]] = true
			}
		}
		f.sevs[sevOther] = true // tested on the row
		f.sevBits = 0
		for c, ok := range f.sevs {
			if ok {
				f.sevBits |= 1 << c
			}
		}
	}
	if len(q.Years) > 0 {
		f.years = new([yearCodes]bool)
		for _, y := range q.Years {
			f.years[yearCode(y)] = true
		}
		f.years[0] = true // tested on the row
		f.yearBits = [yearCodes / 64]uint64{}
		for c, ok := range f.years {
			if ok {
				f.yearBits[c/64] |= 1 << (c % 64)
			}
		}
	}
	if q.EPSSMin != nil {
		f.epss = epssCode(*q.EPSSMin)
	}
	return f
}

// may is the quick test of an entry, on its attributes and the search
// alone: false when the record cannot pass the filters, true when it may,
// keep deciding. A list tests every entry it reads with it, and few
// with keep.
func (f *listFilter) may(e entry) bool {
	a := e.attr
	return a&f.mask == f.want && f.sevBits>>(a>>sevShift&(sevCodes-1))&1 != 0 &&
		f.yearBits[a>>(yearShift+6)&(yearCodes/64-1)]>>(a>>yearShift&63)&1 != 0 &&
		a>>epssShift >= f.epss && (f.matched == nil || f.matched.has(int(e.row)))
}

// keep reports whether the record of e passes the filters.
func (f *listFilter) keep(e entry) bool {
	if e.attr&f.mask != f.want {
		return false
	}
	if f.matched != nil && !f.matched.has(int(e.row)) {
		return false
	}
	if f.sevs != nil {
		c := e.attr >> sevShift & (sevCodes - 1)
		if !f.sevs[c] || c == sevOther && !slices.Contains(f.q.Severities, f.x.strs[f.x.rows[e.row].severity]) {
			return false
		}
	}
	if f.years != nil {
		c := e.attr >> yearShift & (yearCodes - 1)
		if !f.years[c] || c == 0 && !slices.Contains(f.q.Years, cve.YearOfKey(f.x.rows[e.row].key)) {
			return false
		}
	}
	if f.q.EPSSMin != nil {
		b := e.attr >> epssShift
		if b < f.epss || b == f.epss && !(f.x.rows[e.row].epss >= *f.q.EPSSMin) {
			return false
		}
	}
	return true
}

// list answers a query whose plan p is valid, with the rows matching the
// search in matched (nil without a search).
func (x *summaryIndex) list(p *listPlan, q *cve.ListQuery, matched *searchSet) cve.Page {
	var set rowSet
	if matched != nil {
		set = matched.rows
	}
	f := x.newFilter(q, set)
	o := x.orders[p.Col]
	lo, hi := x.bounds(o, p, q)
	if lo >= hi {
		return cve.Page{}
	}
	runs := x.yearRuns(o, q, lo, hi)
	// The positions the walk reads: those of the runs, or the KEV entries
	// among them.
	var kev [][]int32
	n := 0
	for _, r := range runs {
		if q.KEV != nil && *q.KEV {
			a, _ := slices.BinarySearch(o.kev, int32(r.lo))
			b, _ := slices.BinarySearch(o.kev, int32(r.hi))
			kev = append(kev, o.kev[a:b])
			n += b - a
		} else {
			n += r.hi - r.lo
		}
	}
	drive := x.driver(q, matched)
	budget := n
	switch {
	case EnumerateAlways:
		budget = 0
	case drive != nil && walkPerDriver*drive.size < n:
		budget = walkPerDriver * drive.size
		if x.walkEstimate(p, q, matched, drive.size) > budget {
			budget = 0 // the walk would not find a page within its budget
		}
	}
	w := walker{f: f, rows: make([]int32, 0, p.Limit+1), want: p.Limit + 1, budget: budget}
	for i := range runs {
		if p.Desc {
			i = len(runs) - 1 - i
		}
		var stopped bool
		if kev != nil {
			stopped = w.positions(o, kev[i], p.Desc)
		} else {
			stopped = w.run(o.ents[runs[i].lo:runs[i].hi], p.Desc)
		}
		if stopped {
			break
		}
	}
	rows := w.rows
	if w.exhausted && drive != nil {
		rows = x.enumerate(p, q, f, drive)
	}
	return x.page(p, rows)
}

// run is the run of positions [lo, hi) of an order.
type run struct{ lo, hi int }

// walker reads entries in list order and keeps the rows of those that
// pass the filters, until it holds want rows or has read budget entries.
// Its loops call no function value: a list may read thousands of entries.
type walker struct {
	f         *listFilter
	rows      []int32
	want      int
	budget    int
	exhausted bool // it stopped at its budget
}

// run reads ents in the list's direction; done says that the walk is
// done.
func (w *walker) run(ents []entry, desc bool) (done bool) {
	for k := range ents {
		i := k
		if desc {
			i = len(ents) - 1 - k
		}
		if w.budget == 0 {
			w.exhausted = true
			return true
		}
		w.budget--
		if e := ents[i]; w.f.may(e) && w.add(e) {
			return true
		}
	}
	return false
}

// positions is run over the entries of o at positions.
func (w *walker) positions(o *order, positions []int32, desc bool) (done bool) {
	for k := range positions {
		i := k
		if desc {
			i = len(positions) - 1 - k
		}
		if w.budget == 0 {
			w.exhausted = true
			return true
		}
		w.budget--
		if e := o.ents[positions[i]]; w.f.may(e) && w.add(e) {
			return true
		}
	}
	return false
}

// add keeps the row of e when it passes the filters; done says that the
// walk holds the rows it wants.
func (w *walker) add(e entry) (done bool) {
	if w.f.keep(e) {
		w.rows = append(w.rows, e.row)
	}
	return len(w.rows) == w.want
}

// yearRuns returns the runs of [lo, hi) that hold the entries of the
// years of q, in order, when o orders the entries of each value by key
// (the key order itself, and the orders of KEV and fix, two values):
// [lo, hi) whole otherwise.
func (x *summaryIndex) yearRuns(o *order, q *cve.ListQuery, lo, hi int) []run {
	if len(q.Years) == 0 || o.col != "key" && o.col != "is_kev" && o.col != "has_fix" {
		return []run{{lo, hi}}
	}
	blocks := []run{{lo, hi}}
	if o.col != "key" {
		// The entries of 0, then those of 1.
		one := lo + sort.Search(hi-lo, func(i int) bool { return x.rows[o.ents[lo+i].row].value(o.col) >= 1 })
		blocks = []run{{lo, one}, {one, hi}}
	}
	years := slices.Clone(q.Years)
	slices.Sort(years)
	var runs []run
	for _, b := range blocks {
		for _, y := range slices.Compact(years) {
			klo, khi := yearKeys(y)
			r := x.keyRun(o, b, klo, khi)
			if r.lo < r.hi {
				runs = append(runs, r)
			}
		}
	}
	return runs
}

// walkEstimate returns how many entries a walk would read to find a page,
// were the filters that do not bound the walk independent of each other
// and of the order; size is that of the driver.
func (x *summaryIndex) walkEstimate(p *listPlan, q *cve.ListQuery, matched *searchSet, size int) int {
	n := float64(len(x.orders["key"].ents))
	sel := 1.0
	if q.KEV != nil && p.Col != "is_kev" {
		k := float64(x.kevN) / n
		if !*q.KEV {
			k = 1 - k
		}
		sel *= k
	}
	if q.Fix != nil && p.Col != "has_fix" {
		k := float64(x.fixN) / n
		if !*q.Fix {
			k = 1 - k
		}
		sel *= k
	}
	if len(q.Severities) > 0 && p.Col != "cvss" {
		m := 0
		for i, s := range x.strs {
			if c := x.sevCode[i]; i > 0 && c != 0 && slices.Contains(q.Severities, s) {
				m += x.sevN[c]
			}
		}
		sel *= float64(m) / n
	}
	switch {
	case len(q.Years) > 0 && p.Col != "key" && p.Col != "is_kev" && p.Col != "has_fix" && p.Col != "published":
		sel *= float64(size) / n // a driver no larger than the years' run
	case q.EPSSMin != nil && p.Col != "epss":
		sel *= float64(size) / n
	case matched != nil:
		sel *= float64(size) / n
	}
	if sel <= 0 {
		return math.MaxInt
	}
	return int(min(float64(p.Limit+1)/sel, math.MaxInt32))
}

// bounds returns the run [lo, hi) of the entries of o that the filters
// on its column and the cursor of q leave.
func (x *summaryIndex) bounds(o *order, p *listPlan, q *cve.ListQuery) (lo, hi int) {
	r := whole
	switch o.col {
	case "epss":
		if q.EPSSMin != nil {
			r.lo = *q.EPSSMin
		}
	case "is_kev":
		if q.KEV != nil {
			r.lo, r.hi = boolValue(*q.KEV), boolValue(*q.KEV)
		}
	case "has_fix":
		if q.Fix != nil {
			r.lo, r.hi = boolValue(*q.Fix), boolValue(*q.Fix)
		}
	case "cvss":
		if len(q.Severities) > 0 {
			r = x.sevRange(q.Severities)
		}
	case "published":
		if len(q.Years) > 0 {
			r = x.yearRange(q.Years)
		}
	}
	value := func(i int) float64 { return x.rows[o.ents[i].row].value(o.col) }
	lo = sort.Search(len(o.ents), func(i int) bool { return value(i) >= r.lo })
	hi = sort.Search(len(o.ents), func(i int) bool { return value(i) > r.hi })
	if q.After != nil {
		// Ascending, the first entry beyond the position; descending, the
		// walk goes down from the entry before it.
		i := sort.Search(len(o.ents), func(i int) bool {
			c := x.compare(p, &x.rows[o.ents[i].row], q.After)
			return c > 0 || c == 0 && p.Desc
		})
		if p.Desc {
			hi = min(hi, i)
		} else {
			lo = max(lo, i)
		}
	}
	return lo, hi
}

// keyRun returns the run of the entries of b, a run of o in key order,
// whose keys are in [klo, khi).
func (x *summaryIndex) keyRun(o *order, b run, klo, khi int64) run {
	key := func(i int) int64 { return x.rows[o.ents[b.lo+i].row].key }
	return run{b.lo + sort.Search(b.hi-b.lo, func(i int) bool { return key(i) >= klo }),
		b.lo + sort.Search(b.hi-b.lo, func(i int) bool { return key(i) >= khi })}
}

// whole is the range of every value.
var whole = valueRange{math.Inf(-1), math.Inf(1)}

// sevRange returns the range of the CVSS scores of the severities, whole
// when one has no code of its own.
func (x *summaryIndex) sevRange(sevs []string) valueRange {
	r := emptyRange
	for i, t := range x.strs {
		if i == 0 || !slices.Contains(sevs, t) {
			continue
		}
		switch c := x.sevCode[i]; c {
		case 0: // a CVSS version, no severity
		case sevOther:
			return whole
		default:
			r = r.union(x.cvssRange[c])
		}
	}
	return r
}

// yearRange returns the range of the publication times of the records of
// the years, whole when one has no code.
func (x *summaryIndex) yearRange(years []int) valueRange {
	r := emptyRange
	for _, y := range years {
		c := yearCode(y)
		if c == 0 {
			return whole
		}
		r = r.union(x.pubRange[c])
	}
	return r
}

// compare orders a row and a position ascending, as List orders rows.
func (x *summaryIndex) compare(p *listPlan, r *indexRow, pos *cve.Position) int {
	c := cmp.Compare(r.key, pos.Key)
	if p.Col != "key" {
		c = cmp.Or(cmp.Compare(r.value(p.Col), pos.Value), c)
	}
	return c
}

// page returns the page of rows, which are in list order and hold one
// row more than the page when more follow.
func (x *summaryIndex) page(p *listPlan, rows []int32) cve.Page {
	n := min(len(rows), p.Limit)
	if n == 0 {
		return cve.Page{}
	}
	page := cve.Page{Rows: x.summarize(make([]cve.Summary, 0, n), n, func(i int) int { return int(rows[i]) })}
	if len(rows) > p.Limit {
		last := &x.rows[rows[p.Limit-1]]
		page.Next = &cve.Position{Value: last.value(p.Col), Key: last.key}
	}
	return page
}

// search returns the rows that match a full-text query, from the searches the
// index keeps or by asking keys for the keys of the matching records.
func (x *summaryIndex) search(match string, keys func() ([]int64, error)) (*searchSet, error) {
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
	set = &searchSet{rows: newRowSet(len(x.rows))}
	i := 0
	for _, k := range ks {
		for i < len(x.rows) && x.rows[i].key < k {
			i++
		}
		if i < len(x.rows) && x.rows[i].key == k {
			set.rows.add(i)
			set.n++
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.searches == nil {
		x.searches = map[string]*searchSet{}
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
