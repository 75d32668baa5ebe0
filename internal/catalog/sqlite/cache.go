package sqlite

import "sync"

// RecordCacheBytes bounds the record bodies the catalog keeps in memory:
// enough for the few thousand records most lookups ask for, small beside
// the serving memory budget.
const RecordCacheBytes = 32 << 20

// recordCache keeps record bodies in one arena of a fixed size, written
// in turn from its start to its end and again: a body put overwrites the
// oldest ones. Every body in it was read at its data version or later: a
// change to the catalog empties it at the first lookup that sees the new
// version, so that it never answers with a body older than the last
// commit.
//
// The arena is mapped apart from the Go heap (offheap_unix.go), once: the
// collector lets the heap grow to twice what is live before it runs, so
// that 32 MiB of bodies on the heap would cost up to 64 MiB of the
// process's memory, and each body put and pushed out would be garbage.
// Off it, the cache costs what it holds, and nothing more as bodies come
// and go. Bodies are copied out under the read lock.
type recordCache struct {
	mu      sync.RWMutex
	max     int
	version int64
	arena   []byte // allocated at the first put
	next    int    // where the next body goes in arena
	byKey   map[int64]span
	// order are the spans of byKey by where they are in arena, from next
	// on: the oldest first, the ones a put overwrites.
	order []keySpan
}

// span is where a body is in the arena.
type span struct{ at, n int }

type keySpan struct {
	key int64
	span
}

func newRecordCache(maxBytes int) *recordCache {
	return &recordCache{max: maxBytes, byKey: map[int64]span{}}
}

// appendTo appends the body of key to dst if the cache holds it at
// version.
func (c *recordCache) appendTo(dst []byte, key, version int64) ([]byte, bool) {
	c.mu.RLock()
	if version != c.version {
		c.mu.RUnlock()
		c.mu.Lock()
		if version > c.version {
			c.reset(version)
		}
		c.mu.Unlock()
		return dst, false
	}
	defer c.mu.RUnlock()
	s, ok := c.byKey[key]
	if !ok {
		return dst, false
	}
	return append(dst, c.arena[s.at:s.at+s.n]...), true
}

// put adds a copy of the body of key, read after version was seen. A body
// read under an older version than the cache's is dropped: it may predate
// a commit another lookup has already seen.
func (c *recordCache) put(key, version int64, body []byte) {
	n := len(body)
	if n > c.max/16 {
		return // a single outsized record would push out many
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if version != c.version {
		if version < c.version {
			return
		}
		c.reset(version)
	}
	if _, ok := c.byKey[key]; ok {
		return
	}
	if c.arena == nil {
		if c.arena = allocArena(c.max); c.arena == nil {
			return // no memory for it: the cache is an optimisation
		}
	}
	if c.next+n > len(c.arena) {
		c.evict(len(c.arena)) // the bodies at the end, then from the start
		c.next = 0
	}
	c.evict(c.next + n)
	copy(c.arena[c.next:], body)
	s := span{at: c.next, n: n}
	c.byKey[key] = s
	c.order = append(c.order, keySpan{key, s})
	c.next += n
}

// evict drops the bodies that start from next up to end: the oldest, at
// the front of order.
func (c *recordCache) evict(end int) {
	i := 0
	for i < len(c.order) && c.order[i].at >= c.next && c.order[i].at < end {
		delete(c.byKey, c.order[i].key)
		i++
	}
	c.order = c.order[i:]
	if cap(c.order) > 2*len(c.order)+64 {
		c.order = append([]keySpan(nil), c.order...) // let go of the front
	}
}

// reset empties the cache for a new data version.
func (c *recordCache) reset(version int64) {
	c.version = version
	clear(c.byKey)
	c.order = nil
	c.next = 0
}

// empty empties the cache and frees its arena.
func (c *recordCache) empty() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reset(c.version)
	freeArena(c.arena)
	c.arena = nil
}
