package shard

import (
	"sync"
	"testing"
	"time"
)

func TestIDLayout(t *testing.T) {
	g := NewIDGenerator(5)
	before := time.Now().Add(-time.Millisecond)
	id := g.Next(200)
	if id <= 0 {
		t.Fatalf("id %d not positive", id)
	}
	if s, ok := ShardOfID(id); !ok || s != 200 {
		t.Fatalf("ShardOfID = %d, %v; want 200, true", s, ok)
	}
	if n := IDNode(id); n != 5 {
		t.Fatalf("IDNode = %d, want 5", n)
	}
	if ts := IDTime(id); ts.Before(before) || ts.After(time.Now().Add(time.Millisecond)) {
		t.Fatalf("IDTime = %v, want about now", ts)
	}
	if _, ok := ShardOfID(g.NextPlain()); ok {
		t.Fatal("a plain id claims a shard")
	}
	if _, ok := ShardOfID(12345); ok {
		t.Fatal("a small number of version 0 claims a shard")
	}
}

func TestIDSequenceAndClock(t *testing.T) {
	g := NewIDGenerator(1)
	clock := int64(1000)
	slept := 0
	g.now = func() int64 { return clock }
	g.sleep = func(time.Duration) { slept++; clock++ }
	var last int64
	for i := range 3 * (idMaxSeq + 1) {
		id := g.Next(3)
		if id <= last {
			t.Fatalf("id %d: %d not above %d", i, id, last)
		}
		last = id
	}
	if slept != 2 {
		t.Fatalf("waited %d times for the next millisecond, want 2", slept)
	}
	// The clock goes back: ids keep increasing and stay unique.
	clock -= 100
	for i := range 2 * (idMaxSeq + 1) {
		id := g.Next(3)
		if id <= last {
			t.Fatalf("after clock went back, id %d: %d not above %d", i, id, last)
		}
		last = id
	}
	if slept != 2 {
		t.Fatalf("waited for a clock that went back")
	}
}

func TestIDConcurrentUnique(t *testing.T) {
	g := NewIDGenerator(7)
	const workers, each = 4, 2000
	out := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var prev int64
			for i := range each {
				id := g.Next(i % 256)
				if id <= prev {
					t.Errorf("worker %d: id %d not above %d", w, id, prev)
					return
				}
				prev = id
				out[w] = append(out[w], id)
			}
		}()
	}
	wg.Wait()
	seen := make(map[int64]bool, workers*each)
	for _, ids := range out {
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("duplicate id %d", id)
			}
			seen[id] = true
		}
	}
}
