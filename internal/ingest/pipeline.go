package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed"
)

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
	if p.r.batch != nil {
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
	encoded   *catalog.EncodedFacts
	lifecycle *cve.Lifecycle
	name      string // of a rejection
	err       error  // of a rejection
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
func encodeFacts(f *cve.Facts, feedName string) *catalog.EncodedFacts {
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
	return &catalog.EncodedFacts{Key: key, Feed: f.Feed, Doc: f.Doc, Body: body}
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
