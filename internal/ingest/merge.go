package ingest

import (
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/merge"
)

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
	return r.mergeKeys(keys, opts, now, res)
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
	row         *catalog.Row // nil: no source defines the record
	err         error
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
				mergeOne(j.m, opts, now)
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
	for i, key := range keys {
		m := &c.items[i]
		m.key = key
		var err error
		if bodies != nil {
			m.bodies = bodies[i]
		} else if m.facts, err = r.tx.Facts(r.ctx, key); err != nil {
			return nil, fmt.Errorf("merge %s: %w", cve.IDOfKey(key), err)
		}
		if m.oldHash, m.oldModified, m.exists, err = r.tx.RecordState(r.ctx, key); err != nil {
			return nil, fmt.Errorf("merge %s: %w", cve.IDOfKey(key), err)
		}
	}
	return c, nil
}

// mergeOne decodes the facts of m, merges and encodes its record.
func mergeOne(m *merged, opts merge.Options, now time.Time) {
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
