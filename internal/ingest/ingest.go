// Package ingest reads upstream locations with their feed parsers into a
// catalog store, in one transaction per run, and merges every CVE the run
// touched into its served record.
package ingest

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed"
	"github.com/patchline/patchline/internal/sample"
)

// Source is one SOURCE=LOCATION of an ingest run.
type Source struct {
	Parser   feed.Parser
	Location string
	// FS, when set, holds Location (a directory of an embedded tree, such
	// as the bundled sample) instead of the file system.
	FS fs.FS
	// Label, when set, names Location in the run's log (the bundled
	// sample's feeds are "sample:FEED").
	Label string
	// AsOf, when set, is the time of the source's data: the records whose
	// facts from it the run adds or changes carry it as the syncedAt of
	// its data source. Zero means the start of the run.
	AsOf time.Time
}

// Options tune a run.
type Options struct {
	// Client fetches http(s) locations; nil means a default client.
	Client *http.Client
	// Now is the clock of the run: modifiedAt of changed records and the
	// end-of-life test of releases. Nil means time.Now.
	Now func() time.Time
	// Progress, when set, receives a count of records read per source while
	// the run goes on.
	Progress func(source string, read int)
	// Rebuild lets a store that is a Rebuilder build the catalog of the run
	// apart from the live one, when it judges that faster (an ingest into
	// an empty catalog). The store must then be used by nothing else
	// during the run.
	Rebuild bool
}

// Rebuilder is a catalog.Store that can run an ingest transaction on a
// catalog built apart from the live one and installed at Commit, as
// atomically as Begin's. BeginRebuild returns Begin's transaction when it
// judges a rebuild no faster.
type Rebuilder interface {
	BeginRebuild(ctx context.Context) (catalog.Tx, error)
}

// jsonFactsTx is implemented by transactions that store and read facts as
// their JSON encoding, which a run then encodes and decodes on every core
// rather than in the transaction's goroutine.
type jsonFactsTx interface {
	// PutFactsJSON is PutFacts for the JSON encoding of facts of key,
	// feed and doc.
	PutFactsJSON(ctx context.Context, key int64, feed, doc string, body []byte) (catalog.Change, error)
	// FactsJSON returns the JSON encodings of the facts of each of keys
	// (ascending), in the order of Facts.
	FactsJSON(ctx context.Context, keys []int64) ([][][]byte, error)
}

// Rejection names one malformed record.
type Rejection struct {
	Source string
	Name   string
	Err    error
}

// MaxRejectionsKept bounds the rejections a Result names per source.
const MaxRejectionsKept = 5

// Result is what a run did.
type Result struct {
	Sources []catalog.SourceCount
	// Merged counts the records the run merged again; Changed those whose
	// content changed (or that are new); Removed those no source defines
	// any more.
	Merged, Changed, Removed int
	// Rejections names the first few malformed records of each source.
	Rejections []Rejection
}

// Run ingests sources into store in one transaction. A location that cannot
// be read fails the run and leaves the catalog as it was; a malformed record
// is counted, named and passed over.
func Run(ctx context.Context, store catalog.Store, sources []Source, opt Options) (Result, error) {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	started := opt.Now()
	var tx catalog.Tx
	var err error
	if rb, ok := store.(Rebuilder); ok && opt.Rebuild {
		tx, err = rb.BeginRebuild(ctx)
	} else {
		tx, err = store.Begin(ctx)
	}
	if err != nil {
		return Result{}, err
	}
	defer tx.Rollback()

	r := &run{ctx: ctx, store: store, tx: tx, touched: map[int64]uint64{}, opt: opt, sources: sources, started: started.UTC().Truncate(time.Second)}
	r.jsonTx, _ = tx.(jsonFactsTx)
	var res Result
	for i, src := range sources {
		r.current = sourceBit(i)
		count, rejections, err := r.source(src)
		res.Sources = append(res.Sources, count)
		res.Rejections = append(res.Rejections, rejections...)
		if err != nil {
			return res, fmt.Errorf("ingest %s %s: %w", src.Parser.Name, src.Location, err)
		}
	}
	if err := r.mergeTouched(&res); err != nil {
		return res, err
	}
	if err := tx.LogRun(ctx, catalog.Run{
		Started: started.Unix(), Finished: opt.Now().Unix(), Sources: res.Sources, Changed: res.Changed,
	}); err != nil {
		return res, err
	}
	if err := tx.Commit(); err != nil {
		return res, fmt.Errorf("commit ingest: %w", err)
	}
	return res, nil
}

type run struct {
	ctx    context.Context
	store  catalog.Store
	tx     catalog.Tx
	jsonTx jsonFactsTx // tx, when it is one; else nil
	opt    Options
	// sources are the run's sources; current is the bit of the one being
	// read, started the time of the run.
	sources []Source
	current uint64
	started time.Time
	// touched holds the keys whose facts the run added or changed, each
	// with the bits of the sources that did.
	touched           map[int64]uint64
	lifecyclesChanged uint64 // the bits of the sources that changed lifecycles
	// lastRuns are the times of the data of the newest committed run of
	// each feed, read once when a record first needs them.
	lastRunsOnce sync.Once
	lastRuns     map[string]time.Time
}

// lastRunTimes returns the time of the data of the newest run of each feed
// that the catalog holds: the sample's date for the bundled sample, else
// the run's start. A record that gains a source without this run changing
// that source's facts (an EPSS score kept until another source describes
// the CVE) takes its syncedAt from there.
func (r *run) lastRunTimes() map[string]time.Time {
	r.lastRunsOnce.Do(func() {
		r.lastRuns = map[string]time.Time{}
		sc, ok := r.store.(cve.SourceCatalog)
		if !ok {
			return
		}
		runs, err := sc.LastIngests(r.ctx)
		if err != nil {
			return // the records then lack the time, as before the log had it
		}
		for _, in := range runs {
			t := in.Started
			if f, ok := strings.CutPrefix(in.Location, sample.Label); ok {
				if d, ok := sample.Date(f); ok {
					t = d
				}
			}
			r.lastRuns[in.Source] = t
		}
	})
	return r.lastRuns
}

// sourceBit is the bit of the i-th source of a run in the touched sets;
// sources past the 64th share the last bit.
func sourceBit(i int) uint64 { return 1 << min(i, 63) }

// sink receives one source's records.
type sink struct {
	r          *run
	parser     feed.Parser
	count      *catalog.SourceCount
	read       atomic.Int64
	rejections []Rejection
	// fatal is an error of the store: it fails the run, unlike a
	// malformed record.
	fatal error
}

func (s *sink) Facts(f *cve.Facts) error {
	if s.fatal != nil {
		return s.fatal
	}
	s.tick()
	id, err := cve.ParseID(f.CVEID)
	if err != nil {
		s.Reject(f.CVEID, err)
		return nil
	}
	key, ok := cve.Key(id)
	if !ok {
		s.Reject(id, fmt.Errorf("sequence number out of range"))
		return nil
	}
	f.CVEID = id
	if f.Feed == "" {
		f.Feed = s.parser.Name
	}
	change, err := s.r.tx.PutFacts(s.r.ctx, key, f)
	if err != nil {
		s.fatal = fmt.Errorf("store facts of %s: %w", id, err)
		return s.fatal
	}
	s.record(change)
	if change != catalog.Unchanged {
		s.r.touched[key] |= s.r.current
	}
	return nil
}

// encodedFacts stores facts that a parse checked and encoded.
func (s *sink) encodedFacts(e *encodedFacts) error {
	if s.fatal != nil {
		return s.fatal
	}
	s.tick()
	change, err := s.r.jsonTx.PutFactsJSON(s.r.ctx, e.key, e.feed, e.doc, e.body)
	if err != nil {
		s.fatal = fmt.Errorf("store facts of %s: %w", cve.IDOfKey(e.key), err)
		return s.fatal
	}
	s.record(change)
	if change != catalog.Unchanged {
		s.r.touched[e.key] |= s.r.current
	}
	return nil
}

func (s *sink) Lifecycle(l *cve.Lifecycle) error {
	if s.fatal != nil {
		return s.fatal
	}
	s.tick()
	if l.Product == "" || l.Cycle == "" {
		s.Reject(l.Product+" "+l.Cycle, fmt.Errorf("lifecycle without product or cycle"))
		return nil
	}
	change, err := s.r.tx.PutLifecycle(s.r.ctx, l)
	if err != nil {
		s.fatal = fmt.Errorf("store lifecycle %s %s: %w", l.Product, l.Cycle, err)
		return s.fatal
	}
	s.record(change)
	if change != catalog.Unchanged {
		s.r.lifecyclesChanged |= s.r.current
	}
	return nil
}

func (s *sink) Reject(name string, err error) {
	s.tick()
	s.count.Rejected++
	if len(s.rejections) < MaxRejectionsKept {
		s.rejections = append(s.rejections, Rejection{Source: s.parser.Name, Name: name, Err: err})
	}
}

func (s *sink) tick() {
	n := s.read.Add(1)
	s.count.Read = int(n)
	if s.r.opt.Progress != nil && n%1000 == 0 {
		s.r.opt.Progress(s.parser.Name, int(n))
	}
}

func (s *sink) record(c catalog.Change) {
	switch c {
	case catalog.Added:
		s.count.Added++
	case catalog.Changed:
		s.count.Changed++
	default:
		s.count.Unchanged++
	}
}

func (r *run) source(src Source) (catalog.SourceCount, []Rejection, error) {
	start := time.Now()
	count := catalog.SourceCount{Source: src.Parser.Name, Location: cmp.Or(src.Label, src.Location)}
	s := &sink{r: r, parser: src.Parser, count: &count}
	walk := func(fn func(string, io.Reader) error) error {
		if src.FS != nil {
			return feed.WalkFS(r.ctx, src.FS, src.Location, src.Parser.Exts, fn)
		}
		return feed.Walk(r.ctx, r.opt.Client, src.Location, src.Parser.Exts, fn)
	}
	n := runtime.GOMAXPROCS(0)
	p := &pipeline{r: r, s: s, parser: src.Parser, window: filesPerCore * n, budget: bytesPerCore * n}
	err := walk(p.file)
	if err == nil {
		err = p.drain(0)
	}
	p.wait()
	count.Seconds = time.Since(start).Seconds()
	if r.opt.Progress != nil {
		r.opt.Progress(src.Parser.Name, count.Read)
	}
	return count, s.rejections, err
}
