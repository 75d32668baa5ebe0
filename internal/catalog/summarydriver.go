package catalog

import (
	"cmp"
	"math/bits"
	"slices"
	"sort"

	"github.com/patchline/patchline/internal/cve"
)

// A list whose filters leave few rows reads them from a driver (the runs
// of the years or EPSS scores asked, or a search's matches) rather than
// walking its order, and sorts what it keeps.

// listDriver is what a list may read instead of its order: runs of an order
// (the entries of the years asked, those of the EPSS scores from
// epss_min on), or the rows a search matched; size is the number of its
// entries.
type listDriver struct {
	runs    [][]entry
	matched *searchSet
	size    int
}

// driver returns the smallest driver of q, nil without one.
func (x *summaryIndex) driver(q *cve.ListQuery, matched *searchSet) *listDriver {
	var best *listDriver
	consider := func(d *listDriver) {
		if best == nil || d.size < best.size {
			best = d
		}
	}
	if len(q.Years) > 0 {
		keys := x.orders["key"]
		d := &listDriver{}
		years := slices.Clone(q.Years)
		slices.Sort(years)
		for _, y := range slices.Compact(years) {
			klo, khi := yearKeys(y)
			r := x.keyRun(keys, run{0, len(keys.ents)}, klo, khi)
			d.runs = append(d.runs, keys.ents[r.lo:r.hi])
			d.size += r.hi - r.lo
		}
		consider(d)
	}
	if q.EPSSMin != nil {
		o := x.orders["epss"]
		lo := sort.Search(len(o.ents), func(i int) bool { return x.rows[o.ents[i].row].epss >= *q.EPSSMin })
		consider(&listDriver{runs: [][]entry{o.ents[lo:]}, size: len(o.ents) - lo})
	}
	if matched != nil {
		consider(&listDriver{matched: matched, size: matched.n})
	}
	if best == nil && EnumerateAlways {
		keys := x.orders["key"]
		consider(&listDriver{runs: [][]entry{keys.ents}, size: len(keys.ents)})
	}
	return best
}

// enumerate answers a list as list does, by reading every entry of the
// driver and keeping the first limit+1 rows that pass, in list order.
func (x *summaryIndex) enumerate(p *listPlan, q *cve.ListQuery, f *listFilter, d *listDriver) []int32 {
	e := &enumeration{x: x, p: p, q: q, f: f, best: make([]int32, 0, p.Limit+1)}
	for _, run := range d.runs {
		for _, en := range run {
			if f.may(en) {
				e.consider(en)
			}
		}
	}
	if d.matched != nil {
		for w, word := range d.matched.rows {
			for word != 0 {
				i := w*64 + bits.TrailingZeros64(word)
				word &= word - 1
				if r := &x.rows[i]; r.flags&rowRejected == 0 {
					if en := (entry{row: int32(i), attr: r.attr}); f.may(en) {
						e.consider(en)
					}
				}
			}
		}
	}
	return e.best
}

// enumeration is the rows an enumeration keeps: the first limit+1 in list
// order of those it has read.
type enumeration struct {
	x    *summaryIndex
	p    *listPlan
	q    *cve.ListQuery
	f    *listFilter
	best []int32
}

// consider keeps the row of e if it passes the filters and comes before
// one of the rows kept.
func (e *enumeration) consider(en entry) {
	x, p, best := e.x, e.p, e.best
	if !e.f.keep(en) {
		return
	}
	if len(best) == cap(best) && e.less(en.row, best[len(best)-1]) >= 0 {
		return // after every row kept so far
	}
	if e.q.After != nil {
		if c := x.compare(p, &x.rows[en.row], e.q.After); c == 0 || (c < 0) != p.Desc {
			return // not after the position
		}
	}
	at, _ := slices.BinarySearchFunc(best, en.row, e.less)
	if len(best) == cap(best) {
		best = best[:len(best)-1]
	}
	e.best = slices.Insert(best, at, en.row)
}

// less orders rows as the list does.
func (e *enumeration) less(a, b int32) int {
	ra, rb := &e.x.rows[a], &e.x.rows[b]
	c := cmp.Compare(ra.key, rb.key)
	if e.p.Col != "key" {
		c = cmp.Or(cmp.Compare(ra.value(e.p.Col), rb.value(e.p.Col)), c)
	}
	if e.p.Desc {
		return -c
	}
	return c
}
