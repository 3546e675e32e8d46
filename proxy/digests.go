package proxy

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// maxDigests bounds the digest store; statements of further digests are
// counted under overflowDigest, so a workload of ever new texts (literals
// the normalizer keeps, generated table names) cannot grow it without end.
const maxDigests = 5000

const overflowDigest = "(other digests: the store is full)"

// route bits of a digest: where its statements ran.
const (
	digestMaster uint32 = 1 << iota
	digestReplica
	digestShard
	digestScatter
)

var digestRouteBitNames = [...]string{"master", "replica", "shard", "scatter"}

// digestStats are one digest's counters, updated with atomics by every
// session that runs a statement of the digest.
type digestStats struct {
	digest string
	count  atomic.Uint64
	total  atomic.Int64 // nanoseconds
	max    atomic.Int64 // nanoseconds
	rows   atomic.Uint64
	errors atomic.Uint64
	routes atomic.Uint32
}

// digestStore counts statements by digest for SHOW QUERY DIGESTS. Record
// is called once per statement on the data path: for a digest already
// known it takes a read lock and does atomic adds, allocating nothing. It
// is safe for concurrent use.
type digestStore struct {
	mu sync.RWMutex
	m  map[string]*digestStats
	// byData finds the entry of a digest string by the address of its
	// bytes: plans are cached, so the same string comes back statement
	// after statement, and hashing one pointer is cheaper than hashing
	// the text. It holds at most maxDigestAliases strings (and keeps
	// them alive, so an address is never reused by another string).
	byData map[*byte]*digestStats
}

// maxDigestAliases bounds byData; past it the map starts afresh (plans
// evicted from the router's cache leave their strings here otherwise).
const maxDigestAliases = 4 * maxDigests

func newDigestStore() *digestStore {
	return &digestStore{m: make(map[string]*digestStats), byData: make(map[*byte]*digestStats)}
}

// record counts one statement of digest that took d, touched rows rows,
// failed when failed, and ran where route (route bits) says.
func (ds *digestStore) record(digest string, d time.Duration, rows uint64, failed bool, route uint32) {
	data := unsafe.StringData(digest)
	ds.mu.RLock()
	e := ds.byData[data]
	if data == nil {
		e = ds.m[digest] // "" has no bytes to point at
	}
	ds.mu.RUnlock()
	if e == nil {
		e = ds.insert(digest)
	}
	e.count.Add(1)
	e.total.Add(int64(d))
	for {
		m := e.max.Load()
		if int64(d) <= m || e.max.CompareAndSwap(m, int64(d)) {
			break
		}
	}
	if rows > 0 {
		e.rows.Add(rows)
	}
	if failed {
		e.errors.Add(1)
	}
	if route != 0 && e.routes.Load()&route != route {
		e.routes.Or(route)
	}
}

// insert adds digest's entry, or returns the overflow entry when the
// store is full.
func (ds *digestStore) insert(digest string) *digestStats {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	e := ds.lookupLocked(digest)
	if data := unsafe.StringData(digest); data != nil {
		if len(ds.byData) >= maxDigestAliases {
			clear(ds.byData)
		}
		ds.byData[data] = e
	}
	return e
}

// lookupLocked returns digest's entry by its text, adding it (or using
// the overflow entry) when missing. The caller holds mu.
func (ds *digestStore) lookupLocked(digest string) *digestStats {
	if e := ds.m[digest]; e != nil {
		return e
	}
	if len(ds.m) >= maxDigests {
		digest = overflowDigest
		if e := ds.m[digest]; e != nil {
			return e
		}
	}
	// The key is cloned: the caller's string may alias a buffer.
	digest = strings.Clone(digest)
	e := &digestStats{digest: digest}
	ds.m[digest] = e
	return e
}

// digestRow is a copy of one digest's counters.
type digestRow struct {
	digest              string
	count, rows, errors uint64
	total, max          time.Duration
	routes              uint32
}

// snapshot returns the digests by total time, largest first; limit < 0
// means all.
func (ds *digestStore) snapshot(limit int) []digestRow {
	ds.mu.RLock()
	out := make([]digestRow, 0, len(ds.m))
	for _, e := range ds.m {
		out = append(out, digestRow{digest: e.digest, count: e.count.Load(), rows: e.rows.Load(), errors: e.errors.Load(),
			total: time.Duration(e.total.Load()), max: time.Duration(e.max.Load()), routes: e.routes.Load()})
	}
	ds.mu.RUnlock()
	slices.SortFunc(out, func(a, b digestRow) int {
		if a.total != b.total {
			if a.total > b.total {
				return -1
			}
			return 1
		}
		return strings.Compare(a.digest, b.digest)
	})
	if limit >= 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// digestRouteNames spells route bits as "master,replica".
func digestRouteNames(r uint32) string {
	var b strings.Builder
	for i, n := range digestRouteBitNames {
		if r&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(n)
		}
	}
	return b.String()
}
