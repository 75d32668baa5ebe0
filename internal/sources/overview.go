package sources

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/patchline/patchline/internal/cve"
)

// Overview is what the front page says about the catalog as a whole.
type Overview struct {
	// Records counts the served records, rejected ones included; Rejected
	// those rejected; WithFix those with a known fix; KEV those known to
	// be exploited.
	Records, Rejected, WithFix, KEV int
	// LatestKEV are the records added to the KEV catalog last, newest
	// first, with their fixes.
	LatestKEV []*cve.Record
	// ModifiedToday counts the records modified in the last 24 hours;
	// Modified are the newest of them, newest first.
	ModifiedToday int
	Modified      []cve.Summary
	// Sources are the catalog's sources.
	Sources []Source
}

// How many of the latest KEV additions and of the records modified in the
// last day an Overview shows.
const (
	LatestKEVShown = 10
	ModifiedShown  = 25
)

// OverviewAt returns the overview of the catalog as of now.
func (r *Reporter) OverviewAt(ctx context.Context, now time.Time) (*Overview, error) {
	c, err := r.cache.get(ctx, r.cat)
	if err != nil {
		return nil, err
	}
	srcs, err := r.sources(ctx, c, now)
	if err != nil {
		return nil, err
	}
	since := now.Add(-24 * time.Hour).Unix()
	o := &Overview{
		Records: c.stats.Records, Rejected: c.stats.Rejected, WithFix: c.withFix, KEV: c.kev,
		LatestKEV: c.latestKEV, Sources: srcs,
	}
	// c.modified is newest first: those since the cut come first.
	o.ModifiedToday = sort.Search(len(c.modified), func(i int) bool { return c.modified[i] < since })
	for _, s := range c.newest {
		if len(o.Modified) < min(ModifiedShown, o.ModifiedToday) {
			o.Modified = append(o.Modified, s)
		}
	}
	return o, nil
}

// counted is what a Reporter reads from the catalog's tables, at one
// generation.
type counted struct {
	gen     int64
	records []cve.SourceRecords
	ingests []cve.SourceIngest
	stats   cve.Stats
	withFix int
	kev     int
	// modified are the modification times (Unix seconds) of the records
	// modified within a day of the count, newest first; newest are the
	// newest of those records.
	modified  []int64
	newest    []cve.Summary
	latestKEV []*cve.Record
}

// count reads what a generation of the catalog says of its sources and
// records: a walk of every record's summary, and the bodies of the
// records known to be exploited.
func (r *Reporter) count(ctx context.Context, gen int64) (*counted, error) {
	c := &counted{gen: gen}
	var err error
	if c.records, err = r.cat.SourceRecords(ctx); err != nil {
		return nil, err
	}
	if c.ingests, err = r.cat.LastIngests(ctx); err != nil {
		return nil, err
	}
	if c.stats, err = r.cat.Stats(ctx); err != nil {
		return nil, err
	}
	since := r.opt.Now().Add(-24 * time.Hour)
	var kevIDs []string
	var recent []cve.Summary
	err = r.cat.Walk(ctx, "", func(s cve.Summary) error {
		if s.HasRemediation {
			c.withFix++
		}
		if s.IsKEV {
			c.kev++
			kevIDs = append(kevIDs, s.CVEID)
		}
		if s.ModifiedAt != nil && !s.ModifiedAt.Before(since) {
			c.modified = append(c.modified, s.ModifiedAt.Unix())
			recent = append(recent, s)
			if len(recent) > 4*ModifiedShown {
				recent = newestFirst(recent)[:ModifiedShown]
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count records: %w", err)
	}
	slices.SortFunc(c.modified, func(a, b int64) int { return cmp.Compare(b, a) })
	c.newest = newestFirst(recent)
	if len(c.newest) > ModifiedShown {
		c.newest = c.newest[:ModifiedShown]
	}
	if c.latestKEV, err = r.latestKEV(ctx, kevIDs); err != nil {
		return nil, err
	}
	return c, nil
}

// newestFirst sorts summaries by modification time, newest first, then by
// id.
func newestFirst(s []cve.Summary) []cve.Summary {
	slices.SortFunc(s, func(a, b cve.Summary) int {
		return cmp.Or(b.ModifiedAt.Compare(*a.ModifiedAt), cve.Compare(b.CVEID, a.CVEID))
	})
	return s
}

// latestKEV returns the records of ids added to KEV last, newest first.
func (r *Reporter) latestKEV(ctx context.Context, ids []string) ([]*cve.Record, error) {
	type added struct{ id, date string }
	var all []added
	for chunk := range slices.Chunk(ids, 500) {
		bodies, err := r.cat.RecordsJSON(ctx, chunk)
		if err != nil {
			return nil, fmt.Errorf("read known exploited records: %w", err)
		}
		for id, b := range bodies {
			var rec struct {
				KEV *struct {
					DateAdded string `json:"dateAdded"`
				} `json:"kev"`
			}
			if json.Unmarshal(b, &rec) == nil && rec.KEV != nil {
				all = append(all, added{id, rec.KEV.DateAdded})
			}
		}
	}
	slices.SortFunc(all, func(a, b added) int { return cmp.Or(cmp.Compare(b.date, a.date), cve.Compare(b.id, a.id)) })
	var out []*cve.Record
	for _, a := range all[:min(len(all), LatestKEVShown)] {
		rec, err := r.cat.Record(ctx, a.id)
		if err != nil {
			return nil, fmt.Errorf("read known exploited record %s: %w", a.id, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// cache keeps what count read for the generation it read it at. When the
// generation moves, the next call starts a count in the background and
// answers with the previous one until it is done; only the very first
// count is waited for.
type cache struct {
	count func(ctx context.Context, gen int64) (*counted, error)

	mu         sync.Mutex
	cur        *counted
	refreshing bool
	first      sync.Mutex // held by the first count
}

func newCache(count func(context.Context, int64) (*counted, error)) *cache {
	return &cache{count: count}
}

// refreshTimeout bounds a count in the background.
const refreshTimeout = 10 * time.Minute

func (c *cache) get(ctx context.Context, cat cve.SourceCatalog) (*counted, error) {
	gen, err := cat.Generation(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	cur := c.cur
	if cur != nil && cur.gen != gen && !c.refreshing {
		c.refreshing = true
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
			defer cancel()
			next, err := c.count(ctx, gen)
			c.mu.Lock()
			defer c.mu.Unlock()
			c.refreshing = false
			if err == nil && (c.cur == nil || c.cur.gen != gen) {
				c.cur = next
			}
		}()
	}
	c.mu.Unlock()
	if cur != nil {
		return cur, nil
	}
	c.first.Lock()
	defer c.first.Unlock()
	c.mu.Lock()
	cur = c.cur
	c.mu.Unlock()
	if cur != nil {
		return cur, nil
	}
	cur, err = c.count(ctx, gen)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.cur == nil {
		c.cur = cur
	}
	c.mu.Unlock()
	return cur, nil
}

// Warm counts the catalog unless a count is kept already: serve calls it at
// start, so that the first request does not wait for the count.
func (r *Reporter) Warm(ctx context.Context) error {
	_, err := r.cache.get(ctx, r.cat)
	return err
}

// Refresh counts the catalog again now, and keeps what it counted.
func (r *Reporter) Refresh(ctx context.Context) error {
	gen, err := r.cat.Generation(ctx)
	if err != nil {
		return err
	}
	cur, err := r.count(ctx, gen)
	if err != nil {
		return err
	}
	r.cache.mu.Lock()
	r.cache.cur = cur
	r.cache.mu.Unlock()
	return nil
}
