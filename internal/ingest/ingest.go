// Package ingest reads upstream locations with their feed parsers into a
// catalog store, in one transaction per run, and merges every CVE the run
// touched into its served record.
package ingest

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed"
	"github.com/patchline/patchline/internal/merge"
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

// maxParallelFile is the size up to which a file is read into memory and
// parsed beside the others; a larger one is parsed as it is read, in turn.
const maxParallelFile = 32 << 20

// The files being parsed at a time, per core: at most filesPerCore, of at
// most bytesPerCore together. Parsing runs that far ahead of the store, so
// that the cores are kept busy when a file takes the store longer than its
// parse, as the large facts of OSV do.
const (
	filesPerCore = 32
	bytesPerCore = 16 << 20
)

// pipeline parses the files of a source on every core and hands what each
// gives to the sink in file order, as parsing them one after the other
// would: the store sees the same writes in the same order.
type pipeline struct {
	r      *run
	s      *sink
	parser feed.Parser
	window int // files queued at most
	budget int // bytes of the queued files at most
	bytes  int // of the queued files
	queue  []*parsedFile
	wg     sync.WaitGroup
}

// parsedFile is what the parser gave for one file.
type parsedFile struct {
	name   string
	size   int
	events recorder
	err    error
	done   chan struct{}
}

// file reads one file of the walk and starts parsing it.
func (p *pipeline) file(name string, in io.Reader) error {
	data, err := io.ReadAll(io.LimitReader(in, maxParallelFile+1))
	if err != nil {
		return err
	}
	if len(data) > maxParallelFile {
		// In turn: everything before it first.
		if err := p.drain(0); err != nil {
			return err
		}
		err := p.parser.Parse(p.r.ctx, name, io.MultiReader(bytes.NewReader(data), in), p.s)
		return p.s.fileDone(name, err)
	}
	// Hand over what is parsed already, then make room for data.
	for len(p.queue) > 0 && p.queue[0].parsed() {
		if err := p.next(); err != nil {
			return err
		}
	}
	for len(p.queue) > 0 && (len(p.queue) >= p.window || p.bytes+len(data) > p.budget) {
		if err := p.next(); err != nil {
			return err
		}
	}
	f := &parsedFile{name: name, size: len(data), done: make(chan struct{})}
	p.bytes += f.size
	if p.r.jsonTx != nil {
		f.events.encodeAs = p.parser.Name
	}
	p.queue = append(p.queue, f)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(f.done)
		f.err = p.parser.Parse(p.r.ctx, name, bytes.NewReader(data), &f.events)
	}()
	return nil
}

// drain hands the parsed files to the sink, in order, until at most keep
// are queued.
func (p *pipeline) drain(keep int) error {
	for len(p.queue) > keep {
		if err := p.next(); err != nil {
			return err
		}
	}
	return nil
}

// next hands the first queued file to the sink, once parsed.
func (p *pipeline) next() error {
	f := p.queue[0]
	p.queue = p.queue[1:]
	p.bytes -= f.size
	<-f.done
	if err := f.events.replay(p.s); err != nil {
		return err
	}
	return p.s.fileDone(f.name, f.err)
}

// parsed reports whether the parse of f is over.
func (f *parsedFile) parsed() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// wait waits for the parses still running after a failed walk.
func (p *pipeline) wait() {
	p.wg.Wait()
	p.queue = nil
}

// fileDone judges the end of the parse of one file: an error of the store
// or of reading fails the run; a file malformed as a whole is rejected.
func (s *sink) fileDone(name string, err error) error {
	switch {
	case s.fatal != nil:
		return s.fatal
	case err == nil:
		return nil
	case errors.Is(err, feed.ErrUnreadable), s.r.ctx.Err() != nil:
		return err
	}
	s.Reject(name, err)
	return nil
}

// recorder is a feed.Sink that keeps what it receives, to be replayed to
// the real sink in order.
type recorder struct {
	events []event
	// encodeAs, when set, is the feed name of the source: the recorder
	// then checks and encodes facts as the sink would, in the parse's
	// goroutine.
	encodeAs string
}

// event is one call of a feed.Sink.
type event struct {
	facts     *cve.Facts
	encoded   *encodedFacts
	lifecycle *cve.Lifecycle
	name      string // of a rejection
	err       error  // of a rejection
}

// encodedFacts are facts whose id the recorder checked, with their key and
// JSON encoding.
type encodedFacts struct {
	key       int64
	feed, doc string
	body      []byte
}

func (rec *recorder) Facts(f *cve.Facts) error {
	if rec.encodeAs != "" {
		if e := encodeFacts(f, rec.encodeAs); e != nil {
			rec.events = append(rec.events, event{encoded: e})
			return nil
		}
	}
	// Facts the sink rejects, or cannot encode, go to it as they came.
	rec.events = append(rec.events, event{facts: f})
	return nil
}

// encodeFacts does what sink.Facts does to f before storing it, and
// encodes it; nil when f is to be rejected or does not encode.
func encodeFacts(f *cve.Facts, feedName string) *encodedFacts {
	id, err := cve.ParseID(f.CVEID)
	if err != nil {
		return nil
	}
	key, ok := cve.Key(id)
	if !ok {
		return nil
	}
	f.CVEID = id
	if f.Feed == "" {
		f.Feed = feedName
	}
	body, err := json.Marshal(f)
	if err != nil {
		return nil
	}
	return &encodedFacts{key: key, feed: f.Feed, doc: f.Doc, body: body}
}

func (rec *recorder) Lifecycle(l *cve.Lifecycle) error {
	rec.events = append(rec.events, event{lifecycle: l})
	return nil
}

func (rec *recorder) Reject(name string, err error) {
	rec.events = append(rec.events, event{name: name, err: err})
}

// replay hands the recorded calls to s, stopping at an error of the store.
func (rec *recorder) replay(s *sink) error {
	for i, e := range rec.events {
		var err error
		switch {
		case e.encoded != nil:
			err = s.encodedFacts(e.encoded)
		case e.facts != nil:
			err = s.Facts(e.facts)
		case e.lifecycle != nil:
			err = s.Lifecycle(e.lifecycle)
		default:
			s.Reject(e.name, e.err)
		}
		rec.events[i] = event{}
		if err != nil {
			return err
		}
	}
	rec.events = nil
	return nil
}

// mergeTouched merges again every record the run touched, and every record
// with remediation when lifecycles changed (their eol annotations may).
func (r *run) mergeTouched(res *Result) error {
	keys := make([]int64, 0, len(r.touched))
	for k := range r.touched {
		keys = append(keys, k)
	}
	if r.lifecyclesChanged != 0 {
		withAtoms, err := r.tx.KeysWithAtoms(r.ctx)
		if err != nil {
			return err
		}
		keys = append(keys, withAtoms...)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	lifecycles, err := r.tx.Lifecycles(r.ctx)
	if err != nil {
		return err
	}
	now := r.opt.Now().UTC().Truncate(time.Second)
	opts := merge.Options{Lifecycles: merge.NewLifecycleTable(lifecycles), Now: now}
	return r.mergeKeys(keys, opts, now, res)
}

// syncTimes returns, for the sources of the bits, the time of their data by
// feed: the latest when several sources of a run read one feed. "eol"
// stands for the sources that changed lifecycles.
func (r *run) syncTimes(bits uint64) map[string]time.Time {
	out := map[string]time.Time{}
	add := func(feed string, i int) {
		t := r.sources[i].AsOf
		if t.IsZero() {
			t = r.started
		}
		if t.After(out[feed]) {
			out[feed] = t.UTC()
		}
	}
	for i, src := range r.sources {
		if bits&sourceBit(i) != 0 {
			add(src.Parser.Name, i)
		}
		if r.lifecyclesChanged&sourceBit(i) != 0 {
			add("eol", i)
		}
	}
	return out
}

// mergeChunk is the number of records read, merged or written at a time.
const mergeChunk = 512

// mergeDepth is the number of chunks being merged while the transaction
// reads the next one and writes the previous ones.
const mergeDepth = 2

// merged is one record of a chunk: what the store holds, then what merging
// made of it.
type merged struct {
	key         int64
	facts       []cve.Facts
	bodies      [][]byte // the facts still encoded, when the store gave them so
	oldHash     []byte
	oldModified int64
	exists      bool
	// synced are the times of the data of the feeds the run changed for
	// this record; oldSources the dataSources of the stored record (or
	// its body), when there is one.
	synced     map[string]time.Time
	oldSources []byte
	row        *catalog.Row // nil: no source defines the record
	err        error
}

// chunk is a run of records merged together.
type chunk struct {
	items []merged
	left  atomic.Int64 // items not merged yet
	done  chan struct{}
}

// mergeKeys merges the records of keys (ascending) in chunks: the
// transaction's goroutine reads a chunk's facts and states and writes the
// records of the chunks merged before it, while every core decodes, merges
// and encodes the chunks in between.
func (r *run) mergeKeys(keys []int64, opts merge.Options, now time.Time, res *Result) error {
	type job struct {
		m *merged
		c *chunk
	}
	jobs := make(chan job, mergeChunk)
	defer close(jobs)
	for range runtime.GOMAXPROCS(0) {
		go func() {
			for j := range jobs {
				mergeOne(j.m, opts, now, r.lastRunTimes)
				if j.c.left.Add(-1) == 0 {
					close(j.c.done)
				}
			}
		}()
	}
	var pending []*chunk
	flush := func(keep int) error {
		for len(pending) > keep {
			c := pending[0]
			pending = pending[1:]
			<-c.done
			for i := range c.items {
				m := &c.items[i]
				if err := r.storeMerged(m, res); err != nil {
					return fmt.Errorf("merge %s: %w", cve.IDOfKey(m.key), err)
				}
				c.items[i] = merged{}
			}
		}
		return nil
	}
	// On an error, the chunks still queued are merged before jobs closes.
	defer func() {
		for _, c := range pending {
			<-c.done
		}
	}()
	for start := 0; start < len(keys); start += mergeChunk {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		c, err := r.readChunk(keys[start:min(start+mergeChunk, len(keys))])
		if err != nil {
			return err
		}
		pending = append(pending, c)
		for i := range c.items {
			jobs <- job{&c.items[i], c}
		}
		if err := flush(mergeDepth); err != nil {
			return err
		}
	}
	return flush(0)
}

// readChunk reads the facts and states of the records of keys.
func (r *run) readChunk(keys []int64) (*chunk, error) {
	c := &chunk{items: make([]merged, len(keys)), done: make(chan struct{})}
	c.left.Store(int64(len(keys)))
	var bodies [][][]byte
	if r.jsonTx != nil {
		var err error
		if bodies, err = r.jsonTx.FactsJSON(r.ctx, keys); err != nil {
			return nil, fmt.Errorf("merge: read facts: %w", err)
		}
	}
	var existing []int64
	for i, key := range keys {
		m := &c.items[i]
		m.key = key
		m.synced = r.syncTimes(r.touched[key])
		var err error
		if bodies != nil {
			m.bodies = bodies[i]
		} else if m.facts, err = r.tx.Facts(r.ctx, key); err != nil {
			return nil, fmt.Errorf("merge %s: %w", cve.IDOfKey(key), err)
		}
		if m.oldHash, m.oldModified, m.exists, err = r.tx.RecordState(r.ctx, key); err != nil {
			return nil, fmt.Errorf("merge %s: %w", cve.IDOfKey(key), err)
		}
		if m.exists {
			existing = append(existing, key)
		}
	}
	if len(existing) > 0 {
		// The stored records keep the sync times of the sources the run
		// did not change.
		old, err := r.oldSources(existing)
		if err != nil {
			return nil, fmt.Errorf("merge: read records: %w", err)
		}
		for i := range c.items {
			c.items[i].oldSources = old[c.items[i].key]
		}
	}
	return c, nil
}

// sourcesTx is implemented by transactions that read the dataSources of
// the stored records themselves.
type sourcesTx interface {
	// RecordSourcesJSON returns the dataSources of the stored records of
	// keys, as JSON arrays by key.
	RecordSourcesJSON(ctx context.Context, keys []int64) (map[int64][]byte, error)
}

// oldSources returns the dataSources of the stored records of keys, or
// their whole bodies when the transaction cannot read them alone (the
// catalog as committed holds them: the run has not written them yet).
func (r *run) oldSources(keys []int64) (map[int64][]byte, error) {
	if st, ok := r.tx.(sourcesTx); ok {
		return st.RecordSourcesJSON(r.ctx, keys)
	}
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = cve.IDOfKey(k)
	}
	bodies, err := r.store.RecordsJSON(r.ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[int64][]byte, len(bodies))
	for id, b := range bodies {
		if k, ok := cve.Key(id); ok {
			out[k] = b
		}
	}
	return out, nil
}

// mergeOne decodes the facts of m, merges and encodes its record.
func mergeOne(m *merged, opts merge.Options, now time.Time, lastRuns func() map[string]time.Time) {
	if m.bodies != nil {
		m.facts = make([]cve.Facts, len(m.bodies))
		for i, b := range m.bodies {
			if err := decodeFacts(b, &m.facts[i]); err != nil {
				m.err = fmt.Errorf("decode facts: %w", err)
				return
			}
		}
		m.bodies = nil
	}
	rec, ok := merge.Record(cve.IDOfKey(m.key), m.facts, opts)
	m.facts = nil
	if ok {
		stampSources(rec, m.synced, m.oldSources, lastRuns)
		m.oldSources = nil
		m.row, m.err = Encode(m.key, rec, m.oldHash, m.oldModified, m.exists, now)
	}
}

// storeMerged writes one merged record, or removes it when no source
// defines it any more.
func (r *run) storeMerged(m *merged, res *Result) error {
	if m.err != nil {
		return m.err
	}
	if m.row == nil {
		if m.exists {
			res.Removed++
			return r.tx.DeleteRecord(r.ctx, m.key)
		}
		return nil
	}
	res.Merged++
	if !m.exists || string(m.row.Hash) != string(m.oldHash) {
		res.Changed++
	}
	return r.tx.PutRecord(r.ctx, m.row)
}

// Markers of the two members of a record's content encoding that its body
// fills in. The members around them are top-level ones: no member before
// them in a record has members of these names, and within a string a
// quote is escaped.
var (
	epssNull     = []byte(`"epss":null,"kev":`)
	modifiedNull = []byte(`"modifiedAt":null,"dataSources":`)
	// dataSourcesMember starts the last member of a record.
	dataSourcesMember = []byte(`"dataSources":`)
)

// fillBody returns the encoding of rec from the encoding of its content:
// with rec's EPSS score and modification time in place of their nulls, and
// its data sources with their sync times.
func fillBody(content []byte, rec *cve.Record) ([]byte, error) {
	i := bytes.Index(content, epssNull)
	j := bytes.Index(content, modifiedNull)
	if i < 0 || j < i {
		// Not the shape this expects: encode the body whole.
		c := *rec
		c.Links = nil
		return json.Marshal(&c)
	}
	epss, err := json.Marshal(rec.EPSS)
	if err != nil {
		return nil, err
	}
	mod, err := json.Marshal(rec.ModifiedAt)
	if err != nil {
		return nil, err
	}
	sources, err := json.Marshal(rec.DataSources)
	if err != nil {
		return nil, err
	}
	body := make([]byte, 0, len(content)+len(epss)+len(mod)+len(sources))
	body = append(body, content[:i+len(`"epss":`)]...)
	body = append(body, epss...)
	body = append(body, content[i+len(`"epss":null`):j+len(`"modifiedAt":`)]...)
	body = append(body, mod...)
	// dataSources is the last member of the content: Links is nil.
	body = append(body, content[j+len(`"modifiedAt":null`):j+len(modifiedNull)]...)
	body = append(body, sources...)
	body = append(body, '}')
	return body, nil
}

// stampSources sets the syncedAt of each data source of rec: the time of
// its feed's data in synced when the run changed it, else the time the
// stored record's dataSources old (or its body) give it, else the time of
// the newest run of its feed that lastRuns gives.
func stampSources(rec *cve.Record, synced map[string]time.Time, old []byte, lastRuns func() map[string]time.Time) {
	var prev []cve.DataSource
	if i := bytes.LastIndex(old, dataSourcesMember); i >= 0 {
		// dataSources is the last member of a stored record.
		old = bytes.TrimSuffix(bytes.TrimSpace(old[i+len(dataSourcesMember):]), []byte("}"))
	}
	_ = json.Unmarshal(old, &prev) // a record without them stamps none
	for i := range rec.DataSources {
		ds := &rec.DataSources[i]
		feed, _, _ := strings.Cut(ds.Name, ":")
		if t, ok := synced[feed]; ok {
			ds.SyncedAt = &t
			continue
		}
		for _, p := range prev {
			if p.Name == ds.Name && p.SyncedAt != nil {
				t := p.SyncedAt.UTC()
				ds.SyncedAt = &t
				break
			}
		}
		if ds.SyncedAt == nil {
			if t, ok := lastRuns()[feed]; ok {
				t = t.UTC()
				ds.SyncedAt = &t
			}
		}
	}
}

// ContentHash hashes what a record says, leaving out its modification time,
// its EPSS score, which moves every day, and the sync times of its sources:
// a record's modifiedAt changes when its content changes, not when its
// EPSS score does or a source's data is taken in again.
func ContentHash(rec *cve.Record) ([]byte, error) {
	c := *rec
	c.EPSS = nil
	c.ModifiedAt = nil
	c.Links = nil
	c.DataSources = unstamped(rec.DataSources)
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	return sum[:], nil
}

// Encode returns the stored row of rec. Its modifiedAt is kept from the
// stored record when the content hash is unchanged and set to now otherwise.
func Encode(key int64, rec *cve.Record, oldHash []byte, oldModified int64, exists bool, now time.Time) (*catalog.Row, error) {
	// One encoding serves both: the content (EPSS and modifiedAt null, as
	// ContentHash hashes it), and the body, the content with the two
	// filled in.
	epss, sources := rec.EPSS, rec.DataSources
	rec.EPSS, rec.ModifiedAt, rec.Links, rec.DataSources = nil, nil, nil, unstamped(sources)
	content, err := json.Marshal(rec)
	rec.EPSS, rec.DataSources = epss, sources
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(content)
	hash := sum[:]
	modified := now
	if exists && string(hash) == string(oldHash) {
		modified = time.Unix(oldModified, 0).UTC()
	}
	rec.ModifiedAt = &modified
	body, err := fillBody(content, rec)
	if err != nil {
		return nil, err
	}
	row := &catalog.Row{
		Key:       key,
		ID:        rec.CVEID,
		Rejected:  rec.State == cve.StateRejected,
		Severity:  rec.Severity,
		CVSS:      -1,
		EPSS:      -1,
		IsKEV:     rec.KEV != nil,
		HasFix:    rec.Remediation.Available,
		Published: -1,
		Modified:  modified.Unix(),
		Hash:      hash,
		Body:      body,
	}
	if rec.CVSS != nil {
		row.CVSS = rec.CVSS.Score
		v := cve.SummaryVersion(rec.CVSS.Version)
		row.CVSSVersion = &v
	}
	if rec.EPSS != nil {
		row.EPSS = rec.EPSS.Score
	}
	if rec.PublishedAt != nil {
		row.Published = rec.PublishedAt.Unix()
	}
	if rec.Description != nil {
		row.Description = *rec.Description
	}
	return row, nil
}

// unstamped returns sources without their sync times (sources itself when
// none has one).
func unstamped(sources []cve.DataSource) []cve.DataSource {
	if !slices.ContainsFunc(sources, func(d cve.DataSource) bool { return d.SyncedAt != nil }) {
		return sources
	}
	out := slices.Clone(sources)
	for i := range out {
		out[i].SyncedAt = nil
	}
	return out
}
