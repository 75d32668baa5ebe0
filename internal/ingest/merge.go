package ingest

import (
	"context"
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
			if err := r.storeChunk(c, res); err != nil {
				return err
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
	var states []catalog.RecordState
	if r.batch != nil {
		var err error
		if bodies, err = r.batch.FactsJSON(r.ctx, keys); err != nil {
			return nil, fmt.Errorf("merge: read facts: %w", err)
		}
		if states, err = r.batch.RecordStates(r.ctx, keys); err != nil {
			return nil, fmt.Errorf("merge: read records: %w", err)
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
			st := states[i]
			m.oldHash, m.oldModified, m.exists = st.Hash, st.Modified, st.Exists
		} else {
			if m.facts, err = r.tx.Facts(r.ctx, key); err != nil {
				return nil, fmt.Errorf("merge %s: %w", cve.IDOfKey(key), err)
			}
			if m.oldHash, m.oldModified, m.exists, err = r.tx.RecordState(r.ctx, key); err != nil {
				return nil, fmt.Errorf("merge %s: %w", cve.IDOfKey(key), err)
			}
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

// storeChunk writes the merged records of a chunk, and removes those no
// source defines any more.
func (r *run) storeChunk(c *chunk, res *Result) error {
	rows := make([]*catalog.Row, 0, len(c.items))
	for i := range c.items {
		m := &c.items[i]
		if m.err != nil {
			return fmt.Errorf("merge %s: %w", cve.IDOfKey(m.key), m.err)
		}
		if m.row == nil {
			if m.exists {
				res.Removed++
				if err := r.tx.DeleteRecord(r.ctx, m.key); err != nil {
					return fmt.Errorf("merge %s: %w", cve.IDOfKey(m.key), err)
				}
			}
			continue
		}
		res.Merged++
		if !m.exists || string(m.row.Hash) != string(m.oldHash) {
			res.Changed++
		}
		rows = append(rows, m.row)
	}
	c.items = nil
	if r.batch != nil {
		return r.batch.PutRecords(r.ctx, rows)
	}
	for _, row := range rows {
		if err := r.tx.PutRecord(r.ctx, row); err != nil {
			return fmt.Errorf("merge %s: %w", row.ID, err)
		}
	}
	return nil
}
