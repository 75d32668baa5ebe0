package sqlite

import (
	"container/list"
	"sync"
)

// RecordCacheBytes bounds the record bodies the catalog keeps in memory:
// enough for the few thousand records most lookups ask for, small beside
// the serving memory budget.
const RecordCacheBytes = 32 << 20

// recordCache keeps the most recently read record bodies, least recently
// used out first, up to a number of bytes. Every body in it was read at
// its data version or later: a change to the catalog empties it at the
// first lookup that sees the new version, so that it never answers with a
// body older than the last commit.
type recordCache struct {
	mu      sync.Mutex
	max     int
	size    int
	version int64
	lru     list.List // of *cachedRecord, most recent first
	byKey   map[int64]*list.Element
}

type cachedRecord struct {
	key  int64
	body []byte
}

// cacheOverhead is what a cached body costs beyond its bytes: the list
// element, the map entry and the record header, roughly.
const cacheOverhead = 128

func newRecordCache(maxBytes int) *recordCache {
	return &recordCache{max: maxBytes, byKey: map[int64]*list.Element{}}
}

// get returns the body of key if the cache holds it at version.
func (c *recordCache) get(key, version int64) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if version != c.version {
		c.reset(version)
		return nil, false
	}
	e, ok := c.byKey[key]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(e)
	return e.Value.(*cachedRecord).body, true
}

// put adds the body of key, read after version was seen. A body read
// under an older version than the cache's is dropped: it may predate a
// commit another lookup has already seen.
func (c *recordCache) put(key, version int64, body []byte) {
	cost := len(body) + cacheOverhead
	if cost > c.max/16 {
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
	c.byKey[key] = c.lru.PushFront(&cachedRecord{key: key, body: body})
	c.size += cost
	for c.size > c.max {
		last := c.lru.Back()
		r := c.lru.Remove(last).(*cachedRecord)
		delete(c.byKey, r.key)
		c.size -= len(r.body) + cacheOverhead
	}
}

// reset empties the cache for a new data version.
func (c *recordCache) reset(version int64) {
	c.version = version
	c.lru.Init()
	clear(c.byKey)
	c.size = 0
}
