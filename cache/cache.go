package cache

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Cache is the result cache: stored answers by key, bounded by bytes with
// least-recently-used eviction, each valid while the version words it was
// stored with hold and its expiry has not passed. Its zero value is not
// usable: see New.
type Cache struct {
	// V are the tables' version counters every entry depends on.
	V Versions

	mu      sync.Mutex
	entries map[string]*entry
	// lru is the sentinel of the ring of entries, most recently used
	// first.
	lru     entry
	bytes   int64
	flights map[string]*Flight

	max, maxEntry atomic.Int64

	hits, misses, stores, refused, evictions, invalidations atomic.Uint64
	bytesNow                                                atomic.Int64
}

// entryOverhead is what an entry costs besides its key, its data and its
// refs: the struct, the map slot, the slices' headers.
const entryOverhead = 160

// entry is one stored answer. Everything but prev, next and hits is
// immutable once stored; those three are guarded by Cache.mu.
type entry struct {
	key     string
	data    []byte
	refs    []Ref
	expires int64
	sent    int64
	rows    int64
	size    int64
	digest  string
	tables  []string
	hits    uint64

	prev, next *entry
}

// New returns a cache holding at most maxMemory bytes, each entry at most
// maxEntry bytes; maxMemory 0 stores nothing (Get always misses).
func New(maxMemory, maxEntry int64) *Cache {
	c := &Cache{entries: make(map[string]*entry), flights: make(map[string]*Flight)}
	c.lru.prev, c.lru.next = &c.lru, &c.lru
	c.max.Store(maxMemory)
	c.maxEntry.Store(maxEntry)
	return c
}

// Enabled reports whether the cache may store anything.
func (c *Cache) Enabled() bool { return c != nil && c.max.Load() > 0 }

// SetLimits changes the memory bound and the entry bound (a reload),
// evicting what no longer fits.
func (c *Cache) SetLimits(maxMemory, maxEntry int64) {
	c.max.Store(maxMemory)
	c.maxEntry.Store(maxEntry)
	c.mu.Lock()
	c.evictTo(maxMemory)
	c.mu.Unlock()
}

// MaxEntry is the largest answer the cache stores, in bytes.
func (c *Cache) MaxEntry() int64 { return c.maxEntry.Load() }

// A Flight is a miss being filled: the session that leads it runs the
// query and calls Finish or Abandon; the others wait for it (Wait) and
// then look again.
type Flight struct {
	key  string
	done chan struct{}
}

// Wait blocks until f is over, ctx is done or max has passed; it reports
// whether f is over.
func (f *Flight) Wait(ctx context.Context, max time.Duration) bool {
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-f.done:
		return true
	case <-ctx.Done():
	case <-t.C:
	}
	return false
}

// Answer is a stored answer: its packets as sent, which the caller must
// not modify, and the rows of its result set.
type Answer struct {
	Data []byte
	Rows int64
}

// Get looks key up at now (monotonic nanoseconds), whatever the age of
// the entry: GetSince with no bound.
func (c *Cache) Get(key []byte, now int64, join bool) (a Answer, f *Flight, lead bool) {
	return c.GetSince(key, now, math.MinInt64, join)
}

// GetSince looks key up at now (monotonic nanoseconds), taking only an
// entry whose query was sent after since: a caller passes now less the
// cache_ttl in force, so a ttl lowered after an entry was stored bounds
// it too. A valid entry is a hit:
// a holds its answer. On a miss, lead
// says the caller now leads a flight f for the key (it must end it with
// Finish or Abandon), else f is another session's flight to wait for, or
// nil when join is false (the caller runs its own query and stores
// nothing). key may alias a buffer the caller reuses: a hit costs no
// allocation.
func (c *Cache) GetSince(key []byte, now, since int64, join bool) (a Answer, f *Flight, lead bool) {
	return c.get(key, now, since, join, true)
}

// Recheck is GetSince without joining a flight, for a caller that waited
// for another session's flight after its own miss: a hit counts, another
// miss does not (the statement missed once).
func (c *Cache) Recheck(key []byte, now, since int64) Answer {
	a, _, _ := c.get(key, now, since, false, false)
	return a
}

func (c *Cache) get(key []byte, now, since int64, join, countMiss bool) (a Answer, f *Flight, lead bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[string(key)]; e != nil {
		switch {
		case e.expires <= now || e.sent <= since:
			c.remove(e)
			c.evictions.Add(1)
		case !Stable(e.refs):
			c.remove(e)
			c.invalidations.Add(1)
		default:
			e.hits++
			c.touch(e)
			c.hits.Add(1)
			return Answer{Data: e.data, Rows: e.rows}, nil, false
		}
	}
	if countMiss {
		c.misses.Add(1)
	}
	if !join {
		return a, nil, false
	}
	if f := c.flights[string(key)]; f != nil {
		return a, f, false
	}
	f = &Flight{key: string(key), done: make(chan struct{})}
	c.flights[f.key] = f
	return a, f, true
}

// Entry is an answer offered for storing.
type Entry struct {
	// Data are the answer's packets as sent to the client; the cache
	// keeps the slice, which the caller must not modify afterwards.
	Data []byte
	// Rows counts the rows of its result set.
	Rows int64
	// Refs are the version words of every table the query read (and the
	// global counter), taken before the query was sent.
	Refs []Ref
	// Expires is when the answer stops being served (monotonic
	// nanoseconds).
	Expires int64
	// Sent is when the query was sent (monotonic nanoseconds): GetSince
	// compares it with the cache_ttl in force at the lookup.
	Sent int64
	// Digest and Tables describe the entry for SHOW CACHE.
	Digest string
	Tables []string
}

// Finish ends the flight f by storing e, if every version word of e.Refs
// still holds and no write to its tables is in flight (a write that began
// after the query was sent, or had not ended when it was sent, may be
// missing from the answer) and it fits; it reports whether it stored.
// Waiters of f look the key up again afterwards.
func (c *Cache) Finish(f *Flight, e Entry) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.land(f)
	size := int64(len(f.key)+len(e.Data)+len(e.Refs)*16) + entryOverhead
	max := c.max.Load()
	if size > max || int64(len(e.Data)) > c.maxEntry.Load() {
		return false
	}
	// Checked under the lock that lookups take: an invalidation that
	// happens after this check changes a word, so lookups will refuse
	// the entry.
	if !Stable(e.Refs) {
		c.refused.Add(1)
		return false
	}
	if old := c.entries[f.key]; old != nil {
		c.remove(old)
	}
	n := &entry{key: f.key, data: e.Data, refs: e.Refs, expires: e.Expires, sent: e.Sent, rows: e.Rows, size: size, digest: e.Digest, tables: e.Tables}
	c.entries[n.key] = n
	c.push(n)
	c.bytes += size
	c.evictTo(max)
	c.bytesNow.Store(c.bytes)
	c.stores.Add(1)
	return true
}

// Abandon ends the flight f without storing: its waiters run their own
// queries.
func (c *Cache) Abandon(f *Flight) {
	c.mu.Lock()
	c.land(f)
	c.mu.Unlock()
}

// land ends f; c.mu is held.
func (c *Cache) land(f *Flight) {
	if c.flights[f.key] == f {
		delete(c.flights, f.key)
	}
	close(f.done)
}

// Bump invalidates the entries that read schema.table: a change sluice
// learnt of after the fact (a binlog event).
func (c *Cache) Bump(schema, table string) {
	if k := c.V.Lookup(schema, table); k != nil {
		k.Bump()
	}
}

// Drop invalidates and removes the entries that read schema.table (a DDL
// on it, FLUSH CACHE schema.table); it returns how many it removed.
func (c *Cache) Drop(schema, table string) int {
	k := c.V.Lookup(schema, table)
	if k == nil {
		return 0
	}
	k.Bump()
	return c.removeWhere(func(e *entry) bool {
		return slices.ContainsFunc(e.refs, func(r Ref) bool { return r.C == k })
	})
}

// Invalidate is the callback of a change sluice learnt of after the fact
// (a binlog event of schema.table, ddl for a schema change): a row change
// bumps the table's counter, a DDL also drops its entries, and a DDL or
// change whose table is not named ("") flushes everything.
func (c *Cache) Invalidate(schema, table string, ddl bool) {
	switch {
	case table == "":
		c.Flush()
	case ddl:
		c.Drop(schema, table)
	default:
		c.Bump(schema, table)
	}
}

// Flush invalidates and removes every entry; it returns how many it
// removed.
func (c *Cache) Flush() int {
	c.V.global.Bump()
	return c.removeWhere(func(*entry) bool { return true })
}

func (c *Cache) removeWhere(match func(*entry) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for e := c.lru.next; e != &c.lru; {
		next := e.next
		if match(e) {
			c.remove(e)
			n++
		}
		e = next
	}
	c.invalidations.Add(uint64(n))
	return n
}

// evictTo removes least recently used entries until the cache holds at
// most max bytes; c.mu is held.
func (c *Cache) evictTo(max int64) {
	for c.bytes > max && c.lru.prev != &c.lru {
		c.remove(c.lru.prev)
		c.evictions.Add(1)
	}
	c.bytesNow.Store(c.bytes)
}

func (c *Cache) remove(e *entry) {
	delete(c.entries, e.key)
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	c.bytes -= e.size
	c.bytesNow.Store(c.bytes)
}

func (c *Cache) push(e *entry) {
	e.prev, e.next = &c.lru, c.lru.next
	c.lru.next.prev = e
	c.lru.next = e
}

func (c *Cache) touch(e *entry) {
	if c.lru.next == e {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	c.push(e)
}

// Stats are the cache's counters since it was made.
type Stats struct {
	Hits, Misses, Stores, Refused, Evictions, Invalidations uint64
	// Entries and Bytes are what it holds now; MaxMemory its bound;
	// Tables the tables with a version counter; Flights the misses
	// being filled.
	Entries, Flights int
	Bytes, MaxMemory int64
	Tables           int
}

// Stats returns the counters; Hits etc. are read without the lock.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	n, fl := len(c.entries), len(c.flights)
	c.mu.Unlock()
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Stores: c.stores.Load(), Refused: c.refused.Load(),
		Evictions: c.evictions.Load(), Invalidations: c.invalidations.Load(),
		Entries: n, Flights: fl, Bytes: c.bytesNow.Load(), MaxMemory: c.max.Load(), Tables: c.V.Tables()}
}

// EntryInfo describes one stored entry for SHOW CACHE.
type EntryInfo struct {
	Digest string
	Tables []string
	Bytes  int64
	Hits   uint64
	// TTL is how long it may still be served (at the now given).
	TTL time.Duration
}

// Top returns up to n entries, most hit first, at now.
func (c *Cache) Top(n int, now int64) []EntryInfo {
	c.mu.Lock()
	out := make([]EntryInfo, 0, len(c.entries))
	for e := c.lru.next; e != &c.lru; e = e.next {
		out = append(out, EntryInfo{Digest: e.digest, Tables: e.tables, Bytes: e.size, Hits: e.hits, TTL: time.Duration(e.expires - now)})
	}
	c.mu.Unlock()
	slices.SortStableFunc(out, func(a, b EntryInfo) int {
		switch {
		case a.Hits > b.Hits:
			return -1
		case a.Hits < b.Hits:
			return 1
		}
		return 0
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}
