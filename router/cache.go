package router

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// maxShards caps the number of shards of one cache level. Sharding only spreads lock
// traffic; 64 read-mostly shards are plenty for the cores a proxy runs on.
const maxShards = 64

// minShardEntries keeps shards from becoming so small that eviction is mostly noise.
const minShardEntries = 16

// evictSample is how many entries an eviction inspects before it gives up looking for one
// that has not been used since the last sweep.
const evictSample = 8

// cache is a bounded map from an exact key to an immutable value, safe for concurrent use.
//
// It is split into shards chosen by a seeded hash of the key; each shard is a plain map
// under a sync.RWMutex, keyed by that hash (so a lookup hashes the text once, not twice)
// and checked against the entry's own key. Two texts of one 64-bit hash share a slot: the
// later one replaces the earlier, which is then a miss like any evicted text. A lookup takes the read lock, so concurrent hits on one shard do not
// serialize, and costs no allocation. Each entry carries a "used" bit, set (once) by lookups.
// When a shard is full, an insert evicts with a sampled second-chance sweep: it looks at up
// to evictSample entries from a random position of the map (Go randomizes where iteration
// starts), removes the first whose bit is clear and clears the bits of those it passes; if
// all sampled entries were used, it removes the first one. Frequently repeated statements
// thus tend to stay while one-off texts churn, without any bookkeeping on the hit path
// beyond one atomic load.
//
// Values are never replaced in place: readers use a value after releasing the lock, so an
// entry's value is written once, before the entry is published.
type cache[V any] struct {
	seed   maphash.Seed
	mask   uint64
	shards []cacheShard[V]
}

type cacheShard[V any] struct {
	mu    sync.RWMutex
	m     map[uint64]*cacheEntry[V]
	limit int
	_     [64]byte // keep neighbouring shards' locks off one cache line
}

type cacheEntry[V any] struct {
	key  string // the map's key, so a lookup can hand out the cache's copy
	val  V
	used atomic.Bool
}

// newCache returns a cache holding at most entries values, or nil when entries < 1.
func newCache[V any](entries int) *cache[V] {
	if entries < 1 {
		return nil
	}
	n := 1
	for n*2 <= maxShards && n*2*minShardEntries <= entries {
		n *= 2
	}
	c := &cache[V]{seed: maphash.MakeSeed(), mask: uint64(n - 1), shards: make([]cacheShard[V], n)}
	for i := range c.shards {
		limit := entries / n
		if i < entries%n {
			limit++
		}
		c.shards[i].limit = limit
		c.shards[i].m = make(map[uint64]*cacheEntry[V], limit)
	}
	return c
}

// get returns the value stored under key. It does not allocate.
func (c *cache[V]) get(key string) (V, bool) {
	h := maphash.String(c.seed, key)
	s := &c.shards[h&c.mask]
	s.mu.RLock()
	e := s.m[h]
	s.mu.RUnlock()
	if e != nil && e.key != key {
		e = nil
	}
	return e.load()
}

// getBytes is get for a key held in a byte slice. It does not allocate.
func (c *cache[V]) getBytes(key []byte) (V, bool) {
	h := maphash.Bytes(c.seed, key)
	s := &c.shards[h&c.mask]
	s.mu.RLock()
	e := s.m[h]
	s.mu.RUnlock()
	if e != nil && e.key != string(key) { // no allocation for this conversion
		e = nil
	}
	return e.load()
}

func (e *cacheEntry[V]) load() (V, bool) {
	if e == nil {
		var zero V
		return zero, false
	}
	if !e.used.Load() {
		e.used.Store(true)
	}
	return e.val, true
}

// put stores val under key unless the key is already present (concurrent misses on one
// text compute equal values, so the first one stays). The caller must own key: the cache
// keeps it.
func (c *cache[V]) put(key string, val V) {
	h := maphash.String(c.seed, key)
	s := &c.shards[h&c.mask]
	e := &cacheEntry[V]{key: key, val: val}
	s.mu.Lock()
	if old, ok := s.m[h]; !ok || old.key != key {
		if !ok && len(s.m) >= s.limit {
			s.evictLocked()
		}
		s.m[h] = e
	}
	s.mu.Unlock()
}

// evictLocked removes one entry; s.mu must be held for writing.
func (s *cacheShard[V]) evictLocked() {
	var first uint64
	seen := 0
	for k, e := range s.m {
		if seen == 0 {
			first = k
		}
		if !e.used.Load() {
			delete(s.m, k)
			return
		}
		e.used.Store(false)
		if seen++; seen == evictSample {
			break
		}
	}
	if seen > 0 {
		delete(s.m, first)
	}
}

// len reports how many entries the cache holds.
func (c *cache[V]) len() int {
	if c == nil {
		return 0
	}
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}

// getBytesKey is getBytes that also returns the cache's own copy of the key.
func (c *cache[V]) getBytesKey(key []byte) (V, string, bool) {
	h := maphash.Bytes(c.seed, key)
	s := &c.shards[h&c.mask]
	s.mu.RLock()
	e := s.m[h]
	s.mu.RUnlock()
	if e != nil && e.key != string(key) {
		e = nil
	}
	v, ok := e.load()
	if !ok {
		return v, "", false
	}
	return v, e.key, true
}
