package exposure

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/version"
)

// Index holds, for each product of the catalog (an ecosystem and a
// product name, see Key), the CVEs whose remediation names it and their
// atoms, with the fixed versions and affected ranges parsed once. It keeps
// of each atom only what matching needs, and shares what repeats across
// CVEs (the atoms' strings, versions parsed or not, ranges, a product's
// set of atoms) through its pool: the fixes of a Patch Tuesday or of a
// kernel erratum are one set for every CVE they fix.
//
// Its bulk, an entry per product of each CVE (millions at 300,000 CVEs),
// is kept in arrays of integers that the garbage collector need not scan:
// an entry names its CVE by slot in cves and its atoms by id in fixes, a
// table of integer rows (fixesTable), and the entries of each product,
// like the CVEs of each advisory, are runs of a few large arrays found by
// the key's hash (runs), not a slice and a string per key. A CVE keeps
// what ranks it (KEV, EPSS, CVSS, severity) and when the catalog last
// modified it, not its description.
type Index struct {
	mu       sync.RWMutex
	products runs[entry]     // by Key, each in CVE order
	slots    map[int64]int32 // by cve.Key: the CVE's slot in cves
	cves     []cveEntry      // by slot
	fixes    fixesTable      // by id, the entries' fixes
	// bare are the CVEs whose record names no product, by cve.Key, with
	// the time the catalog last modified it: read once, and again when
	// modified.
	bare map[int64]stamp
	// advisories are the slots of the CVEs whose atoms name an advisory
	// (GHSA, PYSEC, RUSTSEC, GO, DSA, ALSA ...), by the advisory's id in
	// upper case.
	advisories runs[int32]
	// built is true once a Refresh has completed.
	built bool
	// wanted is set by Want: a reader other than the agents' evaluation
	// asked for the index.
	wanted atomic.Bool
	// refresh serializes Refresh, the only user of pool and free.
	refresh sync.Mutex
	pool    pool
	// free are the slots of CVEs that an earlier Refresh dropped, whose
	// entries are gone: free to take.
	free []int32
	// unswept counts the slots dropped whose entries are still in
	// products: while it is 0, readers need not look at each entry's CVE.
	unswept int
}

// stamp is the time the catalog last modified a record, in Unix
// nanoseconds; 0 when the catalog gives none.
type stamp int64

func stampOf(t *time.Time) stamp {
	if t == nil || t.IsZero() {
		return 0
	}
	return stamp(t.UnixNano())
}

// time returns the stamp as a time, the zero time for none.
func (s stamp) time() time.Time {
	if s == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(s)).UTC()
}

// cveEntry is what the index knows of one CVE: no pointer, so that the
// collector does not look into the array that holds them.
type cveEntry struct {
	key        int64 // cve.Key of its id
	modified   stamp
	epss, cvss float64
	severity   uint8 // see severityCode
	flags      uint8
}

// The flags of a cveEntry.
const (
	hasEPSS uint8 = 1 << iota
	hasCVSS
	isKEV
	// dropped: the CVE left the index (removed from the catalog, or read
	// again into another slot); readers skip its entries until the
	// refresh that dropped it removes them.
	dropped
)

// severities are the severities a cveEntry codes as 1 to 5; 0 is none,
// and otherSeverity one the index does not know, which never compares
// equal, so that its CVE's risk is stored again at each refresh.
var severities = []string{cve.SeverityCritical, cve.SeverityHigh, cve.SeverityMedium, cve.SeverityLow, cve.SeverityNone}

const otherSeverity = 255

func severityCode(s string) uint8 {
	if s == "" {
		return 0
	}
	if i := slices.Index(severities, s); i >= 0 {
		return uint8(i + 1)
	}
	return otherSeverity
}

// setRisk keeps what ranks a CVE of r.
func (e *cveEntry) setRisk(r Risk) {
	e.flags &^= hasEPSS | hasCVSS | isKEV
	e.epss, e.cvss = 0, 0
	if r.EPSS != nil {
		e.flags |= hasEPSS
		e.epss = *r.EPSS
	}
	if r.CVSS != nil {
		e.flags |= hasCVSS
		e.cvss = *r.CVSS
	}
	if r.KEV {
		e.flags |= isKEV
	}
	e.severity = severityCode(r.Severity)
}

// sameRisk reports whether r ranks the CVE as e does.
func (e *cveEntry) sameRisk(r Risk) bool {
	var other cveEntry
	other.setRisk(r)
	const risk = hasEPSS | hasCVSS | isKEV
	return e.flags&risk == other.flags&risk && e.epss == other.epss && e.cvss == other.cvss &&
		e.severity == other.severity && e.severity != otherSeverity
}

// entry is one product of one CVE: the CVE's slot in Index.cves and the
// id of its atoms for the product in Index.fixes.
type entry struct {
	slot  int32
	fixes int32
}

// fixes are the atoms of a product, which the entries of every CVE with
// the same atoms for the product share: a set as fixesTable gives it.
type fixes struct {
	ecosystem string
	product   string
	arch      string // Windows: the architecture the product names, "" for any
	atoms     []*atom
}

// atom is what matching needs of a remediation atom, its versions parsed.
// The pool hands out one atom for equal ones: the fix of a Patch Tuesday
// is the same atom in the entries of every CVE it fixes.
type atom struct {
	id           uint32 // in the pool
	fixedVersion string // as the catalog gives it
	kb           string
	sourceURL    string // of a fixed version that does not parse only
	fixed        version.Version
	parsed       bool // fixed parsed
	rng          []bound
	rangeOK      bool // the affected range parsed
	eolFrom      string
	eoesFrom     string
}

// bound is one comparison of an affected range: "< 2.12.2", ">= 2.4".
type bound struct {
	op string
	v  version.Version
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{products: newRuns[entry](), slots: map[int64]int32{}, bare: map[int64]stamp{},
		advisories: newRuns[int32](), pool: pool{seed: maphash.MakeSeed()}}
}

// Built reports whether the index has been refreshed from the catalog at
// least once: before that it knows no CVE.
func (x *Index) Built() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.built
}

// Want records that a reader needs the index (a package query before the
// first build), so that a Service waiting for agents builds it now.
func (x *Index) Want() { x.wanted.Store(true) }

// Wanted reports whether Want was called.
func (x *Index) Wanted() bool { return x.wanted.Load() }

// Advisory returns the CVEs whose fixes an advisory gives (its id in any
// case: GHSA-…, PYSEC-…, RUSTSEC-…, GO-…, DSA-…, ALSA-…), in CVE id order,
// none for an advisory the index does not know.
func (x *Index) Advisory(id string) []string {
	x.mu.RLock()
	var keys []int64
	for _, slot := range x.advisories.get(strings.ToUpper(strings.TrimSpace(id))) {
		if e := &x.cves[slot]; e.flags&dropped == 0 {
			keys = append(keys, e.key)
		}
	}
	x.mu.RUnlock()
	slices.Sort(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, cve.IDOfKey(k))
	}
	return out
}

// Len returns the number of CVEs in the index.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.slots)
}

// Update is what Refresh changed.
type Update struct {
	// Keys are the product keys whose atoms changed: the agents holding
	// one of them must be evaluated again.
	Keys []string
	// Risks are the CVEs new to the index or read again, with their
	// description (Refresh only: RefreshTo hands them on).
	Risks []Risk
	// Scores are the CVEs of the index whose record did not change but
	// whose risk did (KEV, EPSS, CVSS or severity): their Description is
	// not read, and empty (Refresh only).
	Scores []Risk
	// Records is how many records were read again.
	Records int
}

// Refresh brings the index up to date with the catalog: it walks the
// summaries and reads again only the records that are new or modified
// since the index last saw them, and drops the CVEs the catalog no longer
// has or that no longer name a product. A record without a fix
// (hasRemediation false) is read too: it may name versions affected with
// no fix known.
func (x *Index) Refresh(ctx context.Context, cat cve.Catalog) (Update, error) {
	var risks, scores []Risk
	up, err := x.RefreshTo(ctx, cat, func(batch []Risk, scoresOnly bool) error {
		if scoresOnly {
			scores = append(scores, batch...)
		} else {
			risks = append(risks, batch...)
		}
		return nil
	})
	up.Risks, up.Scores = risks, scores
	return up, err
}

// riskBatch is the most risks RefreshTo holds before it hands them on.
const riskBatch = 1024

// RefreshTo is Refresh, but it hands the risks it finds to put as it
// goes, a batch at a time, rather than in the Update: those of Risks with
// scoresOnly false, those of Scores with scoresOnly true. So a first
// build holds the descriptions of a few records at a time, not of the
// whole catalog. An error of put ends the refresh.
func (x *Index) RefreshTo(ctx context.Context, cat cve.Catalog, put func(risks []Risk, scoresOnly bool) error) (Update, error) {
	x.refresh.Lock()
	defer x.refresh.Unlock()
	r := refresh{x: x, changed: map[string]bool{}, put: put}
	err := cat.Walk(ctx, "", func(s cve.Summary) error { return r.visit(ctx, cat, s) })
	if err == nil {
		err = r.flush()
	}
	if err != nil {
		// What was read stays: the next refresh goes on from it.
		x.mu.Lock()
		x.sweep(r.drop, r.changed)
		x.mu.Unlock()
		return r.up, fmt.Errorf("refresh exposure index: %w", err)
	}
	if !slices.IsSorted(r.seen) {
		slices.Sort(r.seen) // Walk promises CVE order; a search needs it
	}
	x.mu.Lock()
	for key := range x.bare {
		if _, found := slices.BinarySearch(r.seen, key); !found {
			delete(x.bare, key)
		}
	}
	for key, slot := range x.slots {
		if _, found := slices.BinarySearch(r.seen, key); !found {
			r.drop = append(r.drop, x.dropSlot(key, slot))
		}
	}
	x.sweep(r.drop, r.changed)
	if r.inserted || len(r.drop) > 0 {
		x.compact()
	}
	x.built = true
	x.mu.Unlock()
	for k := range r.changed {
		r.up.Keys = append(r.up.Keys, k)
	}
	sort.Strings(r.up.Keys)
	return r.up, nil
}

// refresh is the state of one Refresh.
type refresh struct {
	x       *Index
	up      Update
	changed map[string]bool
	// seen are the keys of the catalog's CVEs, in the order of the walk:
	// CVE order.
	seen     []int64
	drop     []int32 // the slots dropped
	inserted bool
	// risks and scores wait for put.
	risks, scores []Risk
	put           func(risks []Risk, scoresOnly bool) error
}

// flush hands the risks and scores found so far to put.
func (r *refresh) flush() error {
	if len(r.risks) > 0 {
		if err := r.put(r.risks, false); err != nil {
			return err
		}
		r.risks = r.risks[:0]
	}
	if len(r.scores) > 0 {
		if err := r.put(r.scores, true); err != nil {
			return err
		}
		r.scores = r.scores[:0]
	}
	return nil
}

// visit brings the index up to date with one summary of the walk.
func (r *refresh) visit(ctx context.Context, cat cve.Catalog, s cve.Summary) error {
	x := r.x
	key, ok := cve.Key(s.CVEID)
	if !ok {
		return nil // not a canonical id: no CVE of the catalog
	}
	r.seen = append(r.seen, key)
	modified := stampOf(s.ModifiedAt)
	seenBefore := func(m stamp) bool { return s.ModifiedAt != nil && modified <= m }
	risk := riskOf(s)
	x.mu.RLock()
	slot, held := x.slots[key]
	var old cveEntry
	if held {
		old = x.cves[slot]
	}
	bareAt, bare := x.bare[key]
	x.mu.RUnlock()
	if !held && bare && seenBefore(bareAt) {
		return nil
	}
	if held && seenBefore(old.modified) {
		if !old.sameRisk(risk) {
			x.mu.Lock()
			x.cves[slot].setRisk(risk)
			x.mu.Unlock()
			r.scores = append(r.scores, risk)
			if len(r.scores) >= riskBatch {
				return r.flush()
			}
		}
		return nil
	}
	rec, err := cat.Record(ctx, s.CVEID)
	if errors.Is(err, errs.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", s.CVEID, err)
	}
	r.up.Records++
	products := x.productsOf(rec)
	advisories := advisoriesOf(rec)
	if rec.Description != nil {
		risk.Description = *rec.Description
	}
	if !r.keep(key, slot, held, modified, risk, products, advisories) {
		return nil
	}
	r.risks = append(r.risks, risk)
	if len(r.risks) >= riskBatch {
		return r.flush()
	}
	return nil
}

// keep puts a CVE read again into the index, in place of the one in slot
// when held, and reports whether the index holds it: not when it names no
// product.
func (r *refresh) keep(key int64, slot int32, held bool, modified stamp, risk Risk, products []int32, advisories []string) bool {
	x := r.x
	x.mu.Lock()
	defer x.mu.Unlock()
	if held {
		r.drop = append(r.drop, x.dropSlot(key, slot))
	}
	if len(products) == 0 {
		x.bare[key] = modified
		return false
	}
	delete(x.bare, key)
	e := cveEntry{key: key, modified: modified}
	e.setRisk(risk)
	for _, k := range x.insert(e, products, advisories) {
		r.changed[k] = true
	}
	r.inserted = true
	return true
}

// addFixes gives f an id in x.fixes and returns it; ok is false for a
// set the table cannot hold (see fixesTable.add).
func (x *Index) addFixes(f fixes) (id int32, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.fixes.add(f)
}

// dropSlot takes a CVE out of the index, and returns its slot, whose
// entries sweep removes; the caller holds mu.
func (x *Index) dropSlot(key int64, slot int32) int32 {
	x.cves[slot].flags |= dropped
	delete(x.slots, key)
	x.unswept++
	return slot
}

// insert adds a CVE under the keys of its products, each list of entries
// kept in CVE order, and returns those keys; the caller holds mu and
// refresh.
func (x *Index) insert(e cveEntry, products []int32, advisories []string) []string {
	var slot int32
	if n := len(x.free); n > 0 {
		slot, x.free = x.free[n-1], x.free[:n-1]
		x.cves[slot] = e
	} else {
		slot = int32(len(x.cves))
		x.cves = append(x.cves, e)
	}
	x.slots[e.key] = slot
	var keys []string
	for _, id := range products {
		en := entry{slot: slot, fixes: id}
		fx := x.fixes.get(id)
		pkeys := productKeys(fx.ecosystem, fx.product)
		for _, k := range pkeys {
			if slices.Contains(keys, k) {
				continue // the same key of two products: one entry each still
			}
			keys = append(keys, k)
		}
		for _, k := range pkeys {
			x.products.insert(k, en, func(list []entry) int {
				// A build walks the catalog in CVE order: the new entry
				// goes last, but for a CVE added or changed since.
				at := len(list)
				if at > 0 && x.cves[list[at-1].slot].key > e.key {
					at, _ = slices.BinarySearchFunc(list, e.key, func(a entry, key int64) int { return cmp.Compare(x.cves[a.slot].key, key) })
				}
				return at
			})
		}
	}
	for _, a := range advisories {
		x.advisories.insert(a, slot, func(list []int32) int { return len(list) })
	}
	return keys
}

// sweep removes the entries of the dropped slots, marks the keys they were
// under as changed, and frees the slots; the caller holds mu and refresh.
// It goes once over every entry, whatever the number of slots.
func (x *Index) sweep(drop []int32, changed map[string]bool) {
	if len(drop) == 0 {
		return
	}
	x.products.filter(func(en entry) bool { return x.cves[en.slot].flags&dropped == 0 },
		func(k string) { changed[k] = true })
	x.advisories.filter(func(slot int32) bool { return x.cves[slot].flags&dropped == 0 }, nil)
	for _, slot := range drop {
		x.cves[slot] = cveEntry{flags: dropped}
	}
	x.free = append(x.free, drop...)
	x.unswept = 0
}

// compact gives back the room that inserts left in the products' and
// advisories' lists and at the end of cves; the caller holds mu.
func (x *Index) compact() {
	x.products.compact()
	x.advisories.compact()
	x.cves = slices.Clip(x.cves)
}

// cveID returns the id of the CVE of an entry; the caller holds mu.
func (x *Index) cveID(en entry) string { return cve.IDOfKey(x.cves[en.slot].key) }

func riskOf(s cve.Summary) Risk {
	r := Risk{CVEID: s.CVEID, KEV: s.IsKEV, EPSS: s.EPSS, CVSS: s.CVSS}
	if s.Severity != nil {
		r.Severity = *s.Severity
	}
	return r
}
