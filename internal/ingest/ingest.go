// Package ingest reads upstream locations with their feed parsers into a
// catalog store, in one transaction per run, and merges every CVE the run
// touched into its served record.
package ingest

import (
	"bytes"
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
	"sync"
	"sync/atomic"
	"time"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed"
	"github.com/patchline/patchline/internal/merge"
)

// Source is one SOURCE=LOCATION of an ingest run.
type Source struct {
	Parser   feed.Parser
	Location string
	// FS, when set, holds Location (a directory of an embedded tree, such
	// as the bundled sample) instead of the file system.
	FS fs.FS
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
	tx, err := store.Begin(ctx)
	if err != nil {
		return Result{}, err
	}
	defer tx.Rollback()

	r := &run{ctx: ctx, tx: tx, touched: map[int64]struct{}{}, opt: opt}
	var res Result
	for _, src := range sources {
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
	ctx               context.Context
	tx                catalog.Tx
	opt               Options
	touched           map[int64]struct{}
	lifecyclesChanged bool
}

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
		s.r.touched[key] = struct{}{}
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
		s.r.lifecyclesChanged = true
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
	count := catalog.SourceCount{Source: src.Parser.Name, Location: src.Location}
	s := &sink{r: r, parser: src.Parser, count: &count}
	walk := func(fn func(string, io.Reader) error) error {
		if src.FS != nil {
			return feed.WalkFS(r.ctx, src.FS, src.Location, src.Parser.Exts, fn)
		}
		return feed.Walk(r.ctx, r.opt.Client, src.Location, src.Parser.Exts, fn)
	}
	p := &pipeline{r: r, s: s, parser: src.Parser, window: 2 * runtime.GOMAXPROCS(0)}
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

// pipeline parses the files of a source on every core and hands what each
// gives to the sink in file order, as parsing them one after the other
// would: the store sees the same writes in the same order.
type pipeline struct {
	r      *run
	s      *sink
	parser feed.Parser
	window int
	queue  []*parsedFile
	wg     sync.WaitGroup
}

// parsedFile is what the parser gave for one file.
type parsedFile struct {
	name   string
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
	if err := p.drain(p.window - 1); err != nil {
		return err
	}
	f := &parsedFile{name: name, done: make(chan struct{})}
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
		f := p.queue[0]
		p.queue = p.queue[1:]
		<-f.done
		if err := f.events.replay(p.s); err != nil {
			return err
		}
		if err := p.s.fileDone(f.name, f.err); err != nil {
			return err
		}
	}
	return nil
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
}

// event is one call of a feed.Sink.
type event struct {
	facts     *cve.Facts
	lifecycle *cve.Lifecycle
	name      string // of a rejection
	err       error  // of a rejection
}

func (rec *recorder) Facts(f *cve.Facts) error {
	rec.events = append(rec.events, event{facts: f})
	return nil
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
	if r.lifecyclesChanged {
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
	for start := 0; start < len(keys); start += mergeChunk {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		if err := r.mergeChunk(keys[start:min(start+mergeChunk, len(keys))], opts, now, res); err != nil {
			return err
		}
	}
	return nil
}

// mergeChunk is the number of records merged between a read and a write of
// the transaction: their merging and encoding, the bulk of the work, runs
// on every core while the transaction waits.
const mergeChunk = 512

// merged is one record of a chunk: what the store holds, then what merging
// made of it.
type merged struct {
	key         int64
	facts       []cve.Facts
	oldHash     []byte
	oldModified int64
	exists      bool
	row         *catalog.Row // nil: no source defines the record
	err         error
}

// mergeChunk reads the facts of keys, merges and encodes them in parallel
// and writes the records in key order.
func (r *run) mergeChunk(keys []int64, opts merge.Options, now time.Time, res *Result) error {
	items := make([]merged, len(keys))
	for i, key := range keys {
		m := &items[i]
		m.key = key
		var err error
		if m.facts, err = r.tx.Facts(r.ctx, key); err != nil {
			return fmt.Errorf("merge %s: %w", cve.IDOfKey(key), err)
		}
		if m.oldHash, m.oldModified, m.exists, err = r.tx.RecordState(r.ctx, key); err != nil {
			return fmt.Errorf("merge %s: %w", cve.IDOfKey(key), err)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(items))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(items) {
					return
				}
				m := &items[i]
				rec, ok := merge.Record(cve.IDOfKey(m.key), m.facts, opts)
				m.facts = nil
				if ok {
					m.row, m.err = Encode(m.key, rec, m.oldHash, m.oldModified, m.exists, now)
				}
			}
		}()
	}
	wg.Wait()
	for i := range items {
		m := &items[i]
		if err := r.storeMerged(m, res); err != nil {
			return fmt.Errorf("merge %s: %w", cve.IDOfKey(m.key), err)
		}
	}
	return nil
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

// ContentHash hashes what a record says, leaving out its modification time
// and its EPSS score, which moves every day: a record's modifiedAt changes
// when its content changes, not when its EPSS score does.
func ContentHash(rec *cve.Record) ([]byte, error) {
	c := *rec
	c.EPSS = nil
	c.ModifiedAt = nil
	c.Links = nil
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
	hash, err := ContentHash(rec)
	if err != nil {
		return nil, err
	}
	modified := now
	if exists && string(hash) == string(oldHash) {
		modified = time.Unix(oldModified, 0).UTC()
	}
	rec.ModifiedAt = &modified
	rec.Links = nil
	body, err := json.Marshal(rec)
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
