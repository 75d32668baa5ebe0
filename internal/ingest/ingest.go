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

// batchTx is implemented by transactions that store and read a run's
// facts and records many at a time, as their JSON encoding: a run then
// encodes and decodes facts on every core rather than in the transaction's
// goroutine, and a store across a network pays one round trip per batch
// rather than per fact.
type batchTx interface {
	// PutFactsJSON is PutFacts for each of facts, in order, saying what
	// it did to each; no two of facts share their key, feed and doc.
	PutFactsJSON(ctx context.Context, facts []catalog.EncodedFacts) ([]catalog.Change, error)
	// FactsJSON returns the JSON encodings of the facts of each of keys
	// (ascending), in the order of Facts.
	FactsJSON(ctx context.Context, keys []int64) ([][][]byte, error)
	// RecordStates is RecordState for each of keys (ascending).
	RecordStates(ctx context.Context, keys []int64) ([]catalog.RecordState, error)
	// PutRecords is PutRecord for each of rows, of distinct keys.
	PutRecords(ctx context.Context, rows []*catalog.Row) error
}

// factsBatch is the number of encoded facts a run stores at a time.
const factsBatch = 1024

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
	r.batch, _ = tx.(batchTx)
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
	ctx   context.Context
	store catalog.Store
	tx    catalog.Tx
	batch batchTx // tx, when it is one; else nil
	opt   Options
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
	// pending are the encoded facts not stored yet, pendingIDs their
	// keys, feeds and docs.
	pending    []catalog.EncodedFacts
	pendingIDs map[factsID]bool
}

// factsID names the facts of one CVE key, feed and doc.
type factsID struct {
	key       int64
	feed, doc string
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
	// The facts queued before these are stored first, in case they are
	// of the same key, feed and doc.
	if err := s.flush(); err != nil {
		return err
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

// encodedFacts queues facts that a parse checked and encoded, storing the
// queue when it is full.
func (s *sink) encodedFacts(e *catalog.EncodedFacts) error {
	if s.fatal != nil {
		return s.fatal
	}
	s.tick()
	id := factsID{e.Key, e.Feed, e.Doc}
	if s.pendingIDs[id] {
		if err := s.flush(); err != nil {
			return err
		}
	}
	if s.pendingIDs == nil {
		s.pendingIDs = map[factsID]bool{}
	}
	s.pendingIDs[id] = true
	s.pending = append(s.pending, *e)
	if len(s.pending) >= factsBatch {
		return s.flush()
	}
	return nil
}

// flush stores the queued encoded facts.
func (s *sink) flush() error {
	if s.fatal != nil || len(s.pending) == 0 {
		return s.fatal
	}
	changes, err := s.r.batch.PutFactsJSON(s.r.ctx, s.pending)
	if err != nil {
		s.fatal = fmt.Errorf("store facts of %s and after: %w", cve.IDOfKey(s.pending[0].Key), err)
		return s.fatal
	}
	for i, change := range changes {
		s.record(change)
		if change != catalog.Unchanged {
			s.r.touched[s.pending[i].Key] |= s.r.current
		}
	}
	s.pending = s.pending[:0]
	clear(s.pendingIDs)
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
	if err == nil {
		err = s.flush()
	}
	p.wait()
	count.Seconds = time.Since(start).Seconds()
	if r.opt.Progress != nil {
		r.opt.Progress(src.Parser.Name, count.Read)
	}
	return count, s.rejections, err
}
