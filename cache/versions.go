// Package cache holds sluice's result cache: the per-table version
// counters that keep it from serving a result older than a write sluice
// acknowledged, the store of result packets bounded by bytes (LRU), and
// the single flight that lets one backend query fill a key many sessions
// miss at once. It does no I/O and knows nothing of connections: the data
// plane decides what is cacheable, runs the query and hands the packets in.
//
// Every exported method of Versions, Counter and Cache is safe for
// concurrent use by any number of sessions, the admin port and an
// invalidator (a binlog tailer) at once.
package cache

import (
	"sync"
	"sync/atomic"
)

// A Counter is one table's version word: the low versionBits count
// changes, the bits above count the writes to the table in flight (begun,
// not yet ended). A result that read the table may be stored only if the
// word did not change from the moment its query was sent to the moment it
// is stored and no write was in flight then; a stored result is served
// only while the word still holds the value it was stored with.
type Counter struct {
	w atomic.Uint64
}

const (
	versionBits = 40
	// pendingOne is one write in flight.
	pendingOne = uint64(1) << versionBits
	// beginDelta and endDelta move the word at the start and the end of a
	// write: each changes the version, one adds a write in flight, the
	// other takes it away (1 - pendingOne, modulo 2^64).
	beginDelta = pendingOne + 1
	endDelta   = ^pendingOne + 2
)

// Begin marks a write to the table about to be forwarded: the version
// changes and the write counts as in flight until End.
func (c *Counter) Begin() { c.w.Add(beginDelta) }

// End marks a write begun with Begin as over (its statement's OK in
// autocommit, its transaction's COMMIT or ROLLBACK, or its connection
// gone): the version changes again.
func (c *Counter) End() { c.w.Add(endDelta) }

// Bump changes the version without a write in flight: a change sluice
// learnt of after the fact (the binlog) or a DDL.
func (c *Counter) Bump() { c.w.Add(1) }

// Load returns the version word.
func (c *Counter) Load() uint64 { return c.w.Load() }

// Pending reports how many writes the word counts in flight.
func Pending(w uint64) uint64 { return w >> versionBits }

// Ref is a counter and the word it held when a query was sent (or when
// its result was stored).
type Ref struct {
	C *Counter
	W uint64
}

// Stable reports whether every counter of refs still holds its word and
// none counts a write in flight: a result read under refs may be stored,
// and one stored under refs may be served.
func Stable(refs []Ref) bool {
	for i := range refs {
		w := refs[i].C.Load()
		if w != refs[i].W || Pending(w) != 0 {
			return false
		}
	}
	return true
}

// MaxTables bounds the tables Versions keeps a counter for; past it every
// further name shares the global counter, which is conservative: a write
// to any of them invalidates everything.
const MaxTables = 1 << 16

// Versions are the version counters of the tables sessions read and
// write, by schema and table name (compared without regard to case, so a
// server with lower_case_table_names = 1 is covered; on one without, two
// names that differ only in case merely share a counter), plus a global
// counter that every cached result also depends on: a write whose tables
// sluice cannot know for sure begins and ends on it.
type Versions struct {
	global Counter
	shards [versionShards]versionShard
	n      atomic.Int64
}

const versionShards = 16

type versionShard struct {
	mu sync.RWMutex
	m  map[tableKey]*Counter
}

type tableKey struct{ schema, table string }

// Global is the counter of writes whose tables are unknown.
func (v *Versions) Global() *Counter { return &v.global }

// Of returns the counter of schema.table, creating it on first use. Names
// already in lower case cost no allocation once the counter exists.
func (v *Versions) Of(schema, table string) *Counter {
	k := tableKey{lower(schema), lower(table)}
	sh := &v.shards[hashKey(k)%versionShards]
	sh.mu.RLock()
	c := sh.m[k]
	sh.mu.RUnlock()
	if c != nil {
		return c
	}
	if v.n.Load() >= MaxTables {
		return &v.global
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c = sh.m[k]; c == nil {
		if sh.m == nil {
			sh.m = make(map[tableKey]*Counter)
		}
		c = new(Counter)
		sh.m[k] = c
		v.n.Add(1)
	}
	return c
}

// Lookup returns the counter of schema.table, nil when none was made.
func (v *Versions) Lookup(schema, table string) *Counter {
	k := tableKey{lower(schema), lower(table)}
	sh := &v.shards[hashKey(k)%versionShards]
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	return sh.m[k]
}

// Tables returns how many tables have a counter.
func (v *Versions) Tables() int { return int(v.n.Load()) }

// hashKey is FNV-1a of the key's two names.
func hashKey(k tableKey) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(k.schema); i++ {
		h = (h ^ uint32(k.schema[i])) * 16777619
	}
	h = (h ^ '.') * 16777619
	for i := 0; i < len(k.table); i++ {
		h = (h ^ uint32(k.table[i])) * 16777619
	}
	return h
}

// lower returns s in ASCII lower case, allocating only when s has an
// upper-case letter.
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; 'A' <= c && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
