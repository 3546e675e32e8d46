package observe

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// MaxDigests bounds the digest store; statements of further digests are
// counted under overflowDigest, so a workload of ever new texts (literals
// the normalizer keeps, generated table names) cannot grow it without end.
const MaxDigests = 5000

const overflowDigest = "(other digests: the store is full)"

// Route bits of a digest: where its statements ran.
const (
	DigestMaster uint32 = 1 << iota
	DigestReplica
	DigestShard
	DigestScatter
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

// Digests counts statements by digest for SHOW QUERY DIGESTS. Record
// is called once per statement on the data path: for a digest already
// known it takes a read lock and does atomic adds, allocating nothing. It
// is safe for concurrent use.
type Digests struct {
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
const maxDigestAliases = 4 * MaxDigests

// NewDigests returns an empty digest store.
func NewDigests() *Digests {
	return &Digests{m: make(map[string]*digestStats), byData: make(map[*byte]*digestStats)}
}

// Record counts one statement of digest that took d, touched rows rows,
// failed when failed, and ran where route (route bits) says.
func (ds *Digests) Record(digest string, d time.Duration, rows uint64, failed bool, route uint32) {
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
func (ds *Digests) insert(digest string) *digestStats {
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
func (ds *Digests) lookupLocked(digest string) *digestStats {
	if e := ds.m[digest]; e != nil {
		return e
	}
	if len(ds.m) >= MaxDigests {
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

// DigestRow is a copy of one digest's counters.
type DigestRow struct {
	Digest              string
	Count, Rows, Errors uint64
	Total, Max          time.Duration
	Routes              uint32
}

// Snapshot returns the digests by total time, largest first; limit < 0
// means all.
func (ds *Digests) Snapshot(limit int) []DigestRow {
	ds.mu.RLock()
	out := make([]DigestRow, 0, len(ds.m))
	for _, e := range ds.m {
		out = append(out, DigestRow{Digest: e.digest, Count: e.count.Load(), Rows: e.rows.Load(), Errors: e.errors.Load(),
			Total: time.Duration(e.total.Load()), Max: time.Duration(e.max.Load()), Routes: e.routes.Load()})
	}
	ds.mu.RUnlock()
	slices.SortFunc(out, func(a, b DigestRow) int {
		if a.Total != b.Total {
			if a.Total > b.Total {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Digest, b.Digest)
	})
	if limit >= 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// DigestRouteNames spells route bits as "master,replica".
func DigestRouteNames(r uint32) string {
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
