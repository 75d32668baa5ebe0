package catalog

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/patchline/patchline/internal/cve"
)

// summaryIndex holds the list columns of every record in memory, in key
// order, with the order of each sort key: List filters and sorts, and Walk
// streams, from it, on either engine, for as long as the catalog keeps the
// version it was read at (SummarySource.Version). Its rows never change
// once built: a new index replaces it (summaries.go).
//
// An order is a run of entries, one for each record a list may show (not
// rejected), each the record's row number and its filter columns packed
// in 32 bits: a list reads an order's entries one after the other and
// reads the row of an entry only for the few that pass its filters
// (summarylist.go). It costs 48 bytes a record for the row and 8 for its
// entry in each of the six orders: 96 bytes, 29 MB at 300,000 records.
type summaryIndex struct {
	version int64
	rows    []indexRow
	// orders holds the order of each sort column, "key" included.
	orders map[string]*order
	// strs are the severities and CVSS versions, each held once; a row
	// refers to them by number, 0 for NULL.
	strs []string
	// sevCode is the severity code of each string of strs (entryAttr).
	sevCode []uint32
	// cvssRange is the range of the CVSS scores of each severity code,
	// pubRange that of the publication times of each year code.
	cvssRange [sevCodes]valueRange
	pubRange  [yearCodes]valueRange
	// The numbers of listed records in KEV, with a fix, and of each
	// severity code.
	kevN, fixN int
	sevN       [sevCodes]int

	// searches holds the rows matched by the last searches, by full-text
	// query.
	mu       sync.Mutex
	searches map[string]*searchSet
}

// order is the order of a sort column: its entries in (value, key) order.
type order struct {
	col  string
	ents []entry
	// kev holds the positions of the entries of KEV records, ascending.
	kev []int32
}

// entry is a record in an order: its row number and entryAttr.
type entry struct {
	row  int32
	attr uint32
}

// The bits of an entry's attributes: whether the record is in KEV and has
// a fix, then a code of its severity, of its year and of its EPSS score.
// A code that cannot say (an eighteenth severity, a year out of range, an
// EPSS score in the bucket of the minimum asked) sends the filter to the
// row.
const (
	attrKEV = 1 << iota
	attrFix

	sevShift   = 2
	sevCodes   = 16 // 0 for none, sevOther for one without a code of its own
	sevOther   = sevCodes - 1
	yearShift  = 6
	yearCodes  = 1024 // 0 for a year out of [yearBase+1, yearBase+yearCodes)
	yearBase   = 1989
	epssShift  = 16
	epssBucket = 254 // EPSS scores in [0, 1) fall in buckets 1 to epssBucket
)

// valueRange is an inclusive range of values; empty when lo > hi.
type valueRange struct{ lo, hi float64 }

var emptyRange = valueRange{math.Inf(1), math.Inf(-1)}

func (r *valueRange) add(v float64) { r.lo, r.hi = min(r.lo, v), max(r.hi, v) }

// union returns the range that holds r and s.
func (r valueRange) union(s valueRange) valueRange {
	return valueRange{min(r.lo, s.lo), max(r.hi, s.hi)}
}

// maxSearches bounds the searches an index keeps: 128 sets of 300,000
// rows are under 5 MB.
const maxSearches = 128

// searchSet is the rows that match a search, and how many there are.
type searchSet struct {
	rows rowSet
	n    int
}

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
	// attr is the attributes of the row's entries, kept for a driver of
	// rows (a search) to make its entries without reading the columns
	// again; it takes the row's padding, no memory of its own.
	attr uint32
}

const (
	rowRejected = 1 << iota
	rowKEV
	rowFix
)

// value is the row's value of a sort column, the value of a position in
// its order: numbers as they are, times as Unix seconds, booleans as 0 or
// 1, missing values as -1.
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
func (r *indexRow) flag(f uint8) float64 { return boolValue(r.flags&f != 0) }

// boolValue is a boolean's value in a sort order.
func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// attr returns the entry attributes of row i.
func (x *summaryIndex) attr(i int) uint32 {
	r := &x.rows[i]
	a := x.sevCode[r.severity]<<sevShift | yearCode(cve.YearOfKey(r.key))<<yearShift | epssCode(r.epss)<<epssShift
	if r.flags&rowKEV != 0 {
		a |= attrKEV
	}
	if r.flags&rowFix != 0 {
		a |= attrFix
	}
	return a
}

// yearCode is the code of a year in entry attributes, 0 out of range.
func yearCode(y int) uint32 {
	if y <= yearBase || y >= yearBase+yearCodes {
		return 0
	}
	return uint32(y - yearBase)
}

// epssCode is the bucket of an EPSS score: 0 below 0 (none), epssBucket+1
// from 1 on, in between by steps of 1/epssBucket. It never decreases as
// the score grows, so that a score whose bucket is above (below) that of
// a minimum is above (below) the minimum.
func epssCode(e float64) uint32 {
	switch {
	case !(e >= 0):
		return 0
	case e >= 1:
		return epssBucket + 1
	}
	return 1 + uint32(e*epssBucket)
}

// buildSummaryIndex reads the list columns of every record at the version
// it is given, seen before it starts, in one snapshot.
func buildSummaryIndex(ctx context.Context, src *SummarySource, version int64) (*summaryIndex, error) {
	tx, err := src.Begin(ctx)
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
	rows, err := tx.QueryContext(ctx, src.Rows)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var sevs []uint8
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
		if r.severity != 0 && !slices.Contains(sevs, r.severity) {
			sevs = append(sevs, r.severity)
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
	listed, err := QueryKeys(ctx, tx, src.Listed)
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
	x.sevCode = make([]uint32, len(x.strs))
	for i, s := range sevs {
		x.sevCode[s] = uint32(min(i+1, sevOther))
	}
	x.sortOrders()
	return x, nil
}

// sortOrders makes the order of every sort column and the ranges of
// values of the severity and year codes.
func (x *summaryIndex) sortOrders() {
	for i := range x.cvssRange {
		x.cvssRange[i] = emptyRange
	}
	for i := range x.pubRange {
		x.pubRange[i] = emptyRange
	}
	keyOrder := &order{col: "key"}
	for i := range x.rows {
		r := &x.rows[i]
		if r.flags&rowRejected != 0 {
			continue
		}
		a := x.attr(i)
		r.attr = a
		keyOrder.ents = append(keyOrder.ents, entry{row: int32(i), attr: a})
		x.cvssRange[a>>sevShift&(sevCodes-1)].add(r.cvss)
		x.sevN[a>>sevShift&(sevCodes-1)]++
		x.kevN += int(a & attrKEV)
		x.fixN += int(a & attrFix >> 1)
		x.pubRange[a>>yearShift&(yearCodes-1)].add(float64(r.published))
	}
	x.orders = map[string]*order{"key": keyOrder}
	// Each order is sorted on a copy of its values beside the entries, so
	// that a comparison reads neither a row nor its column by name.
	type sortEntry struct {
		v float64
		e entry
	}
	sorted := make([]sortEntry, len(keyOrder.ents))
	for _, col := range sortColumns {
		if col == "key" {
			continue
		}
		for i, e := range keyOrder.ents {
			sorted[i] = sortEntry{x.rows[e.row].value(col), e}
		}
		slices.SortFunc(sorted, func(a, b sortEntry) int {
			// Rows are in key order: equal values keep it.
			return cmp.Or(cmp.Compare(a.v, b.v), cmp.Compare(a.e.row, b.e.row))
		})
		o := &order{col: col, ents: make([]entry, len(sorted))}
		for i := range sorted {
			o.ents[i] = sorted[i].e
		}
		x.orders[col] = o
	}
	for _, o := range x.orders {
		for i, e := range o.ents {
			if e.attr&attrKEV != 0 {
				o.kev = append(o.kev, int32(i))
			}
		}
	}
}

// find returns the number of the first row whose key is key or more.
func (x *summaryIndex) find(key int64) int {
	i, _ := slices.BinarySearchFunc(x.rows, key, func(r indexRow, k int64) int { return cmp.Compare(r.key, k) })
	return i
}

// summaryValues are the numbers and times of a summary, allocated a page
// or a run of rows at a time.
type summaryValues struct {
	cvss, epss          float64
	published, modified time.Time
}

// summarize appends the summaries of n rows, the i-th that of row
// rowAt(i), to dst: missing numbers left out, times from Unix seconds.
// Their numbers, times and ids are allocated once for all, their strings
// shared with the index.
func (x *summaryIndex) summarize(dst []cve.Summary, n int, rowAt func(int) int) []cve.Summary {
	// The rows are copied first, in a loop whose reads do not wait for
	// each other: the rows of a page lie far apart, and their reads from
	// memory then overlap rather than follow one another.
	rows := make([]indexRow, n)
	for i := range rows {
		rows[i] = x.rows[rowAt(i)]
	}
	vals := make([]summaryValues, n)
	ids := make([]byte, 0, 16*n)
	for i := range rows {
		ids = cve.AppendIDOfKey(ids, rows[i].key)
	}
	all := string(ids)
	start := 0
	for i := range rows {
		r := &rows[i]
		v := &vals[i]
		end := start + idLen(all[start:])
		s := cve.Summary{CVEID: all[start:end], Severity: x.str(r.severity), CVSSVersion: x.str(r.cvssVer),
			IsKEV: r.flags&rowKEV != 0, HasRemediation: r.flags&rowFix != 0, Rejected: r.flags&rowRejected != 0}
		start = end
		if r.cvss >= 0 {
			v.cvss = r.cvss
			s.CVSS = &v.cvss
		}
		if r.epss >= 0 {
			v.epss = r.epss
			s.EPSS = &v.epss
		}
		if r.published >= 0 {
			v.published = time.Unix(r.published, 0).UTC()
			s.PublishedAt = &v.published
		}
		v.modified = time.Unix(r.modified, 0).UTC()
		s.ModifiedAt = &v.modified
		dst = append(dst, s)
	}
	return dst
}

// idLen returns the length of the CVE id at the start of s, which ids
// follow without a separator: "CVE-", four digits of year, '-', and at
// least four digits of sequence, up to the next "C".
func idLen(s string) int {
	n := 13
	for n < len(s) && s[n] != 'C' {
		n++
	}
	return n
}

// str returns string i of strs, nil for 0. The string is shared: callers
// read it, never change it.
func (x *summaryIndex) str(i uint8) *string {
	if i == 0 {
		return nil
	}
	return &x.strs[i]
}

// walkChunk is the number of rows a walk summarizes at a time.
const walkChunk = 512

// walk calls fn for every row after the key from, in key order.
func (x *summaryIndex) walk(ctx context.Context, from int64, fn func(cve.Summary) error) error {
	buf := make([]cve.Summary, 0, walkChunk)
	for i := x.find(from + 1); i < len(x.rows); i += walkChunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(walkChunk, len(x.rows)-i)
		buf = x.summarize(buf[:0], n, func(j int) int { return i + j })
		for j := range buf {
			if err := fn(buf[j]); err != nil {
				return err
			}
		}
	}
	return nil
}
