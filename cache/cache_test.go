package cache

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// refsOf takes the words of the counters of the given tables and the
// global one, as the data plane does before it sends a query.
func refsOf(c *Cache, tables ...string) []Ref {
	refs := []Ref{{C: c.V.Global(), W: c.V.Global().Load()}}
	for _, t := range tables {
		k := c.V.Of("db", t)
		refs = append(refs, Ref{C: k, W: k.Load()})
	}
	return refs
}

// fill leads a flight for key and finishes it with data read under refs.
func fill(t *testing.T, c *Cache, key string, data []byte, refs []Ref) bool {
	t.Helper()
	_, f, lead := c.Get([]byte(key), 0, true)
	if !lead {
		t.Fatalf("%s: expected to lead a flight", key)
	}
	return c.Finish(f, Entry{Data: data, Refs: refs, Expires: int64(time.Hour)})
}

func TestStoreRefusedWhenTableChangedBetweenSendAndStore(t *testing.T) {
	cases := []struct {
		name  string
		write func(k *Counter)
	}{
		{"write began and ended", func(k *Counter) { k.Begin(); k.End() }},
		{"write still in flight", func(k *Counter) { k.Begin() }},
		{"bumped from outside", func(k *Counter) { k.Bump() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := New(1<<20, 1<<20)
			refs := refsOf(c, "t") // the query is sent
			tc.write(c.V.Of("DB", "T"))
			if fill(t, c, "q", []byte("old"), refs) {
				t.Fatal("stored a result whose table changed while its query ran")
			}
			if a, _, _ := c.Get([]byte("q"), 1, false); a.Data != nil {
				t.Fatal("a refused store is served")
			}
			if s := c.Stats(); s.Refused != 1 || s.Stores != 0 {
				t.Fatalf("stats %+v, want 1 refused, 0 stores", s)
			}
		})
	}
}

func TestStoreRefusedWhileWriteInFlightAtSend(t *testing.T) {
	c := New(1<<20, 1<<20)
	k := c.V.Of("db", "t")
	k.Begin() // a transaction wrote t, not committed yet
	refs := refsOf(c, "t")
	if fill(t, c, "q", []byte("x"), refs) {
		t.Fatal("stored a result read while a write to its table was in flight")
	}
	k.End()
	refs = refsOf(c, "t")
	if !fill(t, c, "q", []byte("y"), refs) {
		t.Fatal("refused a result read with no write in flight")
	}
}

func TestLookupComparesVersions(t *testing.T) {
	c := New(1<<20, 1<<20)
	if !fill(t, c, "q", []byte("v1"), refsOf(c, "t", "u")) {
		t.Fatal("not stored")
	}
	if a, _, _ := c.Get([]byte("q"), 1, false); !bytes.Equal(a.Data, []byte("v1")) {
		t.Fatalf("hit %q, want v1", a.Data)
	}
	c.V.Of("db", "u").Begin() // another table the result read
	if a, _, _ := c.Get([]byte("q"), 1, false); a.Data != nil {
		t.Fatal("served an entry one of whose tables is being written")
	}
	if s := c.Stats(); s.Invalidations != 1 || s.Entries != 0 {
		t.Fatalf("stats %+v, want the entry invalidated and removed", s)
	}
	// The global counter invalidates everything.
	c.V.Of("db", "u").End()
	fill(t, c, "q", []byte("v2"), refsOf(c, "t"))
	c.V.Global().Begin()
	c.V.Global().End()
	if a, _, _ := c.Get([]byte("q"), 1, false); a.Data != nil {
		t.Fatal("served an entry after a global invalidation")
	}
}

func TestExpiry(t *testing.T) {
	c := New(1<<20, 1<<20)
	_, f, _ := c.Get([]byte("q"), 0, true)
	c.Finish(f, Entry{Data: []byte("x"), Refs: refsOf(c, "t"), Expires: 100})
	if a, _, _ := c.Get([]byte("q"), 99, false); a.Data == nil {
		t.Fatal("miss before expiry")
	}
	if a, _, _ := c.Get([]byte("q"), 100, false); a.Data != nil {
		t.Fatal("hit at expiry")
	}
}

func TestLRUByBytes(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 1000)
	per := int64(len("k0")+len(data)+2*16) + entryOverhead
	c := New(3*per, 1<<20) // room for three
	for i := range 3 {
		fill(t, c, fmt.Sprintf("k%d", i), data, refsOf(c, "t"))
	}
	if s := c.Stats(); s.Entries != 3 || s.Bytes != 3*per {
		t.Fatalf("stats %+v, want 3 entries of %d bytes", s, per)
	}
	c.Get([]byte("k0"), 1, false) // k0 is now the most recent: k1 goes first
	fill(t, c, "k3", data, refsOf(c, "t"))
	if a, _, _ := c.Get([]byte("k1"), 1, false); a.Data != nil {
		t.Fatal("k1, the least recently used, was kept")
	}
	for _, k := range []string{"k0", "k2", "k3"} {
		if a, _, _ := c.Get([]byte(k), 1, false); a.Data == nil {
			t.Fatalf("%s evicted", k)
		}
	}
	if s := c.Stats(); s.Evictions != 1 || s.Bytes > 3*per {
		t.Fatalf("stats %+v, want 1 eviction and at most %d bytes", s, 3*per)
	}
	// An answer bigger than max_entry is not stored; lowering the bound
	// evicts down to it.
	c.SetLimits(3*per, 10)
	if fill(t, c, "big", data, refsOf(c, "t")) {
		t.Fatal("stored an answer bigger than max_entry")
	}
	c.SetLimits(per, 1<<20)
	if s := c.Stats(); s.Entries != 1 || s.Bytes > per {
		t.Fatalf("after shrinking: %+v", s)
	}
}

func TestDropAndFlush(t *testing.T) {
	c := New(1<<20, 1<<20)
	fill(t, c, "t1", []byte("a"), refsOf(c, "t"))
	fill(t, c, "tu", []byte("b"), refsOf(c, "t", "u"))
	fill(t, c, "u1", []byte("c"), refsOf(c, "u"))
	if n := c.Drop("DB", "t"); n != 2 {
		t.Fatalf("Drop removed %d, want 2", n)
	}
	if a, _, _ := c.Get([]byte("u1"), 1, false); a.Data == nil {
		t.Fatal("Drop of t removed an entry of u only")
	}
	if n := c.Drop("db", "nosuch"); n != 0 {
		t.Fatalf("Drop of an unknown table removed %d", n)
	}
	if n := c.Flush(); n != 1 {
		t.Fatalf("Flush removed %d, want 1", n)
	}
	if s := c.Stats(); s.Entries != 0 || s.Bytes != 0 {
		t.Fatalf("after flush: %+v", s)
	}
}

// TestSingleFlight: concurrent misses of one key run one query; the
// others wait for its result. When it cannot be stored, each waiter runs
// its own.
func TestSingleFlight(t *testing.T) {
	for _, storable := range []bool{true, false} {
		t.Run(fmt.Sprint("storable=", storable), func(t *testing.T) {
			c := New(1<<20, 1<<20)
			var queries atomic.Int32
			release := make(chan struct{})
			var wg sync.WaitGroup
			var leaders atomic.Int32
			got := make([][]byte, 16)
			for i := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					a, f, lead := c.Get([]byte("q"), 1, true)
					if a.Data != nil {
						got[i] = a.Data
						return
					}
					if lead {
						leaders.Add(1)
						queries.Add(1)
						refs := refsOf(c, "t")
						<-release
						if !storable {
							c.V.Of("db", "t").Bump()
						}
						c.Finish(f, Entry{Data: []byte("r"), Refs: refs, Expires: int64(time.Hour)})
						got[i] = []byte("r")
						return
					}
					if !f.Wait(context.Background(), 10*time.Second) {
						t.Error("wait ended before the flight")
					}
					if a, _, _ := c.Get([]byte("q"), 1, false); a.Data != nil {
						got[i] = a.Data
						return
					}
					queries.Add(1) // its own query
					got[i] = []byte("r")
				}()
			}
			// Every goroutine has looked the key up once it waits or leads.
			deadline := time.Now().Add(10 * time.Second)
			for c.Stats().Misses < 16 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			close(release)
			wg.Wait()
			if leaders.Load() != 1 {
				t.Fatalf("%d leaders, want 1", leaders.Load())
			}
			want := int32(1)
			if !storable {
				want = 16
			}
			if queries.Load() != want {
				t.Fatalf("%d backend queries, want %d", queries.Load(), want)
			}
			for i, g := range got {
				if string(g) != "r" {
					t.Fatalf("goroutine %d got %q", i, g)
				}
			}
		})
	}
}

// TestRaceWritersAndReaders hammers the counters and the store from many
// goroutines (run with -race): a reader that finds an entry must find one
// stored while no write it depends on was in flight, with the value of
// the last write that ended before its query was sent.
func TestRaceWritersAndReaders(t *testing.T) {
	c := New(1<<16, 1<<10)
	var value atomic.Int64 // the "table": written under Begin/End
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var stale atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := c.V.Of("db", "t")
			for {
				select {
				case <-stop:
					return
				default:
				}
				k.Begin()
				value.Add(1)
				k.End()
			}
		}()
	}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				acked := value.Load() // writes acknowledged before this read
				a, f, lead := c.Get([]byte("q"), 1, true)
				if a.Data != nil {
					var v int64
					fmt.Sscan(string(a.Data), &v)
					if v < acked {
						stale.Add(1)
					}
					continue
				}
				if lead {
					refs := refsOf(c, "t")
					v := value.Load()
					c.Finish(f, Entry{Data: []byte(fmt.Sprint(v)), Refs: refs, Expires: int64(time.Hour)})
				} else {
					f.Wait(context.Background(), time.Second)
				}
			}
		}()
	}
	time.AfterFunc(500*time.Millisecond, func() { close(stop) })
	wg.Wait()
	if stale.Load() != 0 {
		t.Fatalf("%d reads older than an acknowledged write", stale.Load())
	}
	if s := c.Stats(); s.Hits == 0 && s.Stores == 0 {
		t.Logf("no hit under constant writes: %+v", s)
	}
}

func TestVersionsBounded(t *testing.T) {
	var v Versions
	a := v.Of("Db", "T")
	if v.Of("db", "t") != a || v.Lookup("DB", "t") != a {
		t.Fatal("names differing in case must share a counter")
	}
	if v.Lookup("db", "other") != nil {
		t.Fatal("Lookup created a counter")
	}
	if v.Of("db", "other") == a {
		t.Fatal("two tables share a counter")
	}
}

func TestGetHitAllocatesNothing(t *testing.T) {
	c := New(1<<20, 1<<20)
	fill(t, c, "SELECT 1", []byte("x"), refsOf(c, "t"))
	key := []byte("SELECT 1")
	if n := testing.AllocsPerRun(100, func() {
		if a, _, _ := c.Get(key, 1, true); a.Data == nil {
			t.Fatal("miss")
		}
	}); n != 0 {
		t.Fatalf("a hit allocates %v times", n)
	}
	k := c.V.Of("db", "t")
	if n := testing.AllocsPerRun(100, func() { _ = c.V.Of("db", "t"); k.Begin(); k.End() }); n != 0 {
		t.Fatalf("a write's counter allocates %v times", n)
	}
}

// TestInvalidate: the binlog callback bumps on a row change (the entry
// is refused at its next lookup), drops on DDL and flushes without a
// table.
func TestInvalidate(t *testing.T) {
	c := New(1<<20, 1<<20)
	fill(t, c, "t", []byte("a"), refsOf(c, "t"))
	fill(t, c, "u", []byte("b"), refsOf(c, "u"))
	c.Invalidate("db", "t", false)
	if s := c.Stats(); s.Entries != 2 {
		t.Fatalf("a row change removed entries at once: %+v", s)
	}
	if a, _, _ := c.Get([]byte("t"), 1, false); a.Data != nil {
		t.Fatal("served an entry of a table a binlog event changed")
	}
	c.Invalidate("DB", "U", true)
	if s := c.Stats(); s.Entries != 0 {
		t.Fatalf("DDL left entries: %+v", s)
	}
	fill(t, c, "t", []byte("a"), refsOf(c, "t"))
	c.Invalidate("db", "", true)
	if a, _, _ := c.Get([]byte("t"), 1, false); a.Data != nil {
		t.Fatal("a change without a table left an entry")
	}
}

// TestGetSinceBoundsAge: an entry whose query was sent at or before since
// is not served, though its expiry is later (a cache_ttl lowered by a
// reload after it was stored).
func TestGetSinceBoundsAge(t *testing.T) {
	c := New(1<<20, 1<<20)
	_, f, _ := c.Get([]byte("q"), 0, true)
	c.Finish(f, Entry{Data: []byte("x"), Refs: refsOf(c, "t"), Sent: 10, Expires: 1000})
	if a, _, _ := c.GetSince([]byte("q"), 50, 9, false); a.Data == nil {
		t.Fatal("an entry sent after since was not served")
	}
	if a, _, _ := c.GetSince([]byte("q"), 50, 10, false); a.Data != nil {
		t.Fatal("an entry sent at since was served")
	}
	if a, _, _ := c.Get([]byte("q"), 50, false); a.Data != nil {
		t.Fatal("an entry refused for its age stayed stored")
	}
}

// TestRecheckCountsNoMiss: a waiter's look-up after another session's
// flight counts a hit, never a second miss.
func TestRecheckCountsNoMiss(t *testing.T) {
	c := New(1<<20, 1<<20)
	_, f, _ := c.Get([]byte("q"), 0, true)
	if a := c.Recheck([]byte("q"), 1, math.MinInt64); a.Data != nil {
		t.Fatal("a flight's key answered before it landed")
	}
	c.Finish(f, Entry{Data: []byte("x"), Refs: refsOf(c, "t"), Expires: 1000})
	if a := c.Recheck([]byte("q"), 1, math.MinInt64); a.Data == nil {
		t.Fatal("the landed answer was not served")
	}
	if st := c.Stats(); st.Misses != 1 || st.Hits != 1 {
		t.Fatalf("%d misses and %d hits, want 1 and 1", st.Misses, st.Hits)
	}
}
