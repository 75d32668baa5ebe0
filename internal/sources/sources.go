// Package sources tells what the catalog knows and how fresh it is: for
// each data source behind the records (each OSV database and CSAF provider
// on its own), its license and upstream, the records it contributed to,
// when Patchline last took in its data and how old that data is; and, for
// the front page, the catalog's counts, its latest known-exploited
// additions and the records modified in the last day.
//
// What it reads from the catalog's tables is kept until an ingest run
// commits (cve.SourceCatalog's Generation), and refreshed in the
// background meanwhile; the sync states, a few rows, are read at each
// call.
package sources

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/sample"
)

// Upstream is what Patchline knows of an ingest source by itself.
type Upstream struct {
	Feed    string // ingest source name
	Title   string
	License string // of the data; OSV databases and CSAF providers name their own
	URL     string // the upstream's own address, empty when it has none
}

// upstreams are the ingest sources in the order the catalog lists them,
// as the README's table of sources names them.
var upstreams = []Upstream{
	{"cvelist", "CVE List V5", "CVE Terms of Use", "https://github.com/CVEProject/cvelistV5"},
	{"nvd", "NVD API 2.0", "public domain", "https://services.nvd.nist.gov/rest/json/cves/2.0"},
	{"kev", "CISA KEV", "CC0-1.0", "https://www.cisa.gov/sites/default/files/feeds/known_exploited_vulnerabilities.json"},
	{"epss", "FIRST EPSS", "FIRST EPSS terms (attribution)", "https://epss.empiricalsecurity.com/epss_scores-current.csv.gz"},
	{"osv", "OSV databases", "per database", "https://osv-vulnerabilities.storage.googleapis.com"},
	{"debian", "Debian security tracker", "Debian", "https://security-tracker.debian.org/tracker/data/json"},
	{"msrc", "Microsoft MSRC", "Microsoft Terms of Use", "https://api.msrc.microsoft.com/cvrf/v3.0"},
	{"csaf", "vendor CSAF 2.0", "per document", ""},
	{"eol", "endoflife.date", "MIT", "https://endoflife.date"},
}

func upstreamOf(feed string) (Upstream, int) {
	for i, u := range upstreams {
		if u.Feed == feed {
			return u, i
		}
	}
	return Upstream{Feed: feed, Title: feed}, len(upstreams)
}

// Freshness grades how old a source's data is.
type Freshness string

// The grades, shown green, amber and red.
const (
	Fresh Freshness = "fresh" // taken in within FreshFor, last attempt good
	Aging Freshness = "aging" // older, or the last attempt failed, but within StaleAfter
	Stale Freshness = "stale" // never taken in, or older than StaleAfter
)

// Source is one data source of the catalog, as GET /api/v1/sources and the
// pages show it.
type Source struct {
	// Name is the data source's name as records' dataSources give it:
	// cvelist, nvd, kev, epss, osv:GHSA, debian, msrc, csaf:Red Hat, eol.
	Name string `json:"name"`
	// Feed is the ingest and sync source it comes through: osv for the
	// OSV databases, csaf for the CSAF providers.
	Feed    string  `json:"feed"`
	Title   string  `json:"title"`
	License string  `json:"license"`
	URL     *string `json:"url"`
	// Records counts the served records with facts from the source; nil
	// for eol, which annotates the fixes of the others.
	Records *int `json:"records"`
	// Origin says how its data came in: sync, ingest, bundled (the
	// bundled sample) or none.
	Origin string `json:"origin"`
	// Location is what the newest ingest run of the feed read.
	Location *string `json:"location"`
	// BundledFrom is the date of the bundled sample's data, when the
	// source's data is the sample's.
	BundledFrom *string `json:"bundledFrom"`
	// LastSuccessAt is the start of the newest successful sync or ingest
	// of the feed.
	LastSuccessAt *time.Time `json:"lastSuccessAt"`
	// LastAttemptAt is the start of its newest sync attempt.
	LastAttemptAt *time.Time `json:"lastAttemptAt"`
	// UpstreamModifiedAt is the upstream's own newest change as the last
	// sync saw it: its Last-Modified, release or newest record time; for
	// the bundled sample, the sample's date.
	UpstreamModifiedAt *time.Time `json:"upstreamModifiedAt"`
	// DataAsOf is the time of the data: LastSuccessAt, or the sample's
	// date. StaleSeconds is its age.
	DataAsOf     *time.Time `json:"dataAsOf"`
	StaleSeconds *int64     `json:"staleSeconds"`
	Freshness    Freshness  `json:"freshness"`
	// Error is why the last sync attempt failed, nil when it did not;
	// Failures counts the failed attempts in a row.
	Error    *string `json:"error"`
	Failures int     `json:"failures"`
}

// Options tune a Reporter.
type Options struct {
	// Feeds are listed even before their first sync or ingest: the
	// sources a background sync follows.
	Feeds []string
	// FreshFor is the age up to which data is fresh; 0 means 6 h.
	FreshFor time.Duration
	// StaleAfter is the age beyond which data is stale; 0 means 48 h.
	StaleAfter time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Catalog is what a Reporter reads.
type Catalog interface {
	cve.Catalog
	cve.SourceCatalog
	catalog.SyncStates
}

// Reporter reports on the sources of a catalog.
type Reporter struct {
	cat   Catalog
	opt   Options
	cache *cache
}

// New returns the Reporter of cat.
func New(cat Catalog, opt Options) *Reporter {
	if opt.FreshFor <= 0 {
		opt.FreshFor = 6 * time.Hour
	}
	if opt.StaleAfter <= 0 {
		opt.StaleAfter = 48 * time.Hour
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	r := &Reporter{cat: cat, opt: opt}
	r.cache = newCache(r.count)
	return r
}

// Sources returns every source of the catalog, in the order of the
// catalog's table of sources, then by name.
func (r *Reporter) Sources(ctx context.Context) ([]Source, error) {
	return r.SourcesAt(ctx, r.opt.Now())
}

// SourcesAt is Sources with the ages of the data as of now.
func (r *Reporter) SourcesAt(ctx context.Context, now time.Time) ([]Source, error) {
	c, err := r.cache.get(ctx, r.cat)
	if err != nil {
		return nil, err
	}
	return r.sources(ctx, c, now)
}

func (r *Reporter) sources(ctx context.Context, c *counted, now time.Time) ([]Source, error) {
	states, err := r.cat.ListSyncStates(ctx)
	if err != nil {
		return nil, err
	}
	byFeed := map[string]catalog.SyncState{}
	for _, s := range states {
		byFeed[s.Source] = s
	}
	ingests := map[string]cve.SourceIngest{}
	for _, in := range c.ingests {
		ingests[in.Source] = in
	}
	// The data sources of each feed: those with records, else the feed
	// itself when anything is known of it.
	names := map[string][]cve.SourceRecords{}
	for _, sr := range c.records {
		feed, _, _ := strings.Cut(sr.Name, ":")
		names[feed] = append(names[feed], sr)
	}
	feeds := slices.Clone(r.opt.Feeds)
	for f := range names {
		feeds = append(feeds, f)
	}
	for f := range byFeed {
		feeds = append(feeds, f)
	}
	for f := range ingests {
		feeds = append(feeds, f)
	}
	slices.SortFunc(feeds, func(a, b string) int {
		_, ia := upstreamOf(a)
		_, ib := upstreamOf(b)
		if ia != ib {
			return ia - ib
		}
		return strings.Compare(a, b)
	})
	feeds = slices.Compact(feeds)
	var out []Source
	for _, feed := range feeds {
		rows := names[feed]
		if len(rows) == 0 {
			rows = []cve.SourceRecords{{Name: feed}}
		}
		for _, sr := range rows {
			out = append(out, r.source(feed, sr, feed != "eol", byFeed[feed], ingests[feed], now))
		}
	}
	return out, nil
}

// source assembles what is known of one data source of feed.
func (r *Reporter) source(feed string, sr cve.SourceRecords, counted bool, st catalog.SyncState, in cve.SourceIngest, now time.Time) Source {
	up, _ := upstreamOf(feed)
	s := Source{Name: sr.Name, Feed: feed, Title: up.Title, License: up.License, Origin: "none", Failures: st.Failures}
	if _, db, ok := strings.Cut(sr.Name, ":"); ok {
		s.Title = db + " (" + up.Title + ")"
	}
	if sr.License != "" {
		s.License = sr.License
	}
	if up.URL != "" {
		u := up.URL
		s.URL = &u
	}
	if counted {
		n := sr.Records
		s.Records = &n
	}
	if st.Error != "" {
		e := st.Error
		s.Error = &e
	}
	s.LastAttemptAt = timePtr(st.LastAttempt)
	success := st.LastSuccess
	if !st.LastSuccess.IsZero() {
		s.Origin = "sync"
		s.UpstreamModifiedAt = timePtr(upstreamModified(st))
	}
	if !in.Started.IsZero() {
		loc := in.Location
		s.Location = &loc
		// A sync's own run is dated by the sync state.
		if !strings.HasPrefix(in.Location, catalog.SyncLabel) && in.Started.After(success) {
			success = in.Started
			s.Origin = "ingest"
			s.UpstreamModifiedAt = nil
			if f, ok := strings.CutPrefix(in.Location, sample.Label); ok {
				if d, ok := sample.Date(f); ok {
					s.Origin = "bundled"
					day := d.Format(time.DateOnly)
					s.BundledFrom = &day
					s.UpstreamModifiedAt = &d
				}
			}
		}
	}
	s.LastSuccessAt = timePtr(success)
	s.DataAsOf = s.LastSuccessAt
	if s.BundledFrom != nil {
		s.DataAsOf = s.UpstreamModifiedAt
	}
	s.Freshness = Stale
	if s.DataAsOf != nil {
		age := now.Sub(*s.DataAsOf)
		sec := int64(max(age, 0) / time.Second)
		s.StaleSeconds = &sec
		switch {
		case age <= r.opt.FreshFor && s.Error == nil:
			s.Freshness = Fresh
		case age <= r.opt.StaleAfter:
			s.Freshness = Aging
		}
	}
	return s
}

// upstreamModified reads the upstream's newest change from a sync state:
// a cursor that is a time (the CVE List's release, the NVD's timestamp,
// MSRC's newest document), the newest time in a cursor of parts (OSV's
// ecosystems, endoflife.date's products), or the document's Last-Modified.
func upstreamModified(st catalog.SyncState) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, st.Cursor); err == nil {
		return t.UTC()
	}
	var parts map[string]struct {
		Modified     string `json:"modified"`
		LastModified string `json:"lastModified"`
	}
	var newest time.Time
	if json.Unmarshal([]byte(st.Cursor), &parts) == nil {
		for _, p := range parts {
			t, err := time.Parse(time.RFC3339Nano, p.Modified)
			if err != nil {
				t, err = http.ParseTime(p.LastModified)
			}
			if err == nil && t.After(newest) {
				newest = t
			}
		}
	}
	if newest.IsZero() {
		if t, err := http.ParseTime(st.LastModified); err == nil {
			newest = t
		}
	}
	return newest.UTC()
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// SourceAt returns one source by name with the age of its data as of now;
// ok is false when the catalog has no source of that name.
func (r *Reporter) SourceAt(ctx context.Context, name string, now time.Time) (s Source, ok bool, err error) {
	list, err := r.SourcesAt(ctx, now)
	if err != nil {
		return Source{}, false, err
	}
	for _, s := range list {
		if s.Name == name {
			return s, true, nil
		}
	}
	return Source{}, false, nil
}

// Now returns the Reporter's clock, to the second.
func (r *Reporter) Now() time.Time { return r.opt.Now().UTC().Truncate(time.Second) }

// DataText says where the source's data comes from and how old it is:
// "bundled, from 2025-08-25", "synced 2 hours ago", "never taken in".
func (s Source) DataText(now time.Time) string {
	switch {
	case s.BundledFrom != nil:
		return "bundled, from " + *s.BundledFrom
	case s.Origin == "sync" && s.LastSuccessAt != nil:
		return "synced " + Ago(now, *s.LastSuccessAt)
	case s.Origin == "ingest" && s.LastSuccessAt != nil:
		return "ingested " + Ago(now, *s.LastSuccessAt)
	}
	return "never taken in"
}

// UpstreamText says how long ago the upstream last changed, as the last
// sync saw it; empty when unknown or bundled.
func (s Source) UpstreamText(now time.Time) string {
	if s.UpstreamModifiedAt == nil || s.BundledFrom != nil {
		return ""
	}
	return "changed " + Ago(now, *s.UpstreamModifiedAt)
}

// Ago says how long before now t was, in the largest whole unit.
func Ago(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return plural(int(d/time.Minute), "minute") + " ago"
	case d < 48*time.Hour:
		return plural(int(d/time.Hour), "hour") + " ago"
	}
	return plural(int(d/(24*time.Hour)), "day") + " ago"
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}
