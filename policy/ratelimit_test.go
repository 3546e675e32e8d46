package policy

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/internal/mono"
)

const ms = int64(time.Millisecond)

// TestGCRABurstThenWait: after a quiet spell a bucket lets burst statements
// through at once; the next ones wait one interval more each.
func TestGCRABurstThenWait(t *testing.T) {
	p := NewRate(1000, 10, 1000, time.Second)
	var b Bucket
	now := int64(5 * time.Second)
	for i := range 10 {
		if wait, err := b.Take(now, p); wait != 0 || err != nil {
			t.Fatalf("statement %d of the burst: wait %v, err %v", i, wait, err)
		}
	}
	for i := 1; i <= 3; i++ {
		wait, err := b.Take(now, p)
		if err != nil || wait != int64(i)*ms {
			t.Fatalf("statement %d over the burst: wait %v, err %v; want %dms", i, time.Duration(wait), err, i)
		}
	}
	if b.waiting.Load() != 3 {
		t.Fatalf("waiting %d, want 3", b.waiting.Load())
	}
	for range 3 {
		b.Done()
	}
	// A second later the bucket is full again.
	now += int64(time.Second) + 3*ms
	for i := range 10 {
		if wait, err := b.Take(now, p); wait != 0 || err != nil {
			t.Fatalf("after a quiet second, statement %d: wait %v, err %v", i, wait, err)
		}
	}
}

// TestGCRARefusals: a statement is refused when max_queued wait already or
// its wait would pass queue_timeout; a refusal takes no slot.
func TestGCRARefusals(t *testing.T) {
	p := NewRate(1000, 1, 2, 5*time.Millisecond)
	var b Bucket
	now := int64(time.Second)
	if w, err := b.Take(now, p); w != 0 || err != nil {
		t.Fatalf("first: %v %v", w, err)
	}
	for i := 1; i <= 2; i++ {
		if w, err := b.Take(now, p); err != nil || w != int64(i)*ms {
			t.Fatalf("queued %d: %v %v", i, w, err)
		}
	}
	tat := b.tat.Load()
	if _, err := b.Take(now, p); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third waiter: %v, want ErrQueueFull", err)
	}
	if b.tat.Load() != tat || b.waiting.Load() != 2 {
		t.Fatalf("a refusal moved the bucket: tat %d -> %d, waiting %d", tat, b.tat.Load(), b.waiting.Load())
	}
	b.Done()
	b.Done()
	// Queue empty, but the next slot is 3ms out; with slots taken up to
	// 5ms the one after is past queue_timeout.
	for i := 3; i <= 5; i++ {
		w, err := b.Take(now, p)
		if err != nil || w != int64(i)*ms {
			t.Fatalf("slot %d: %v %v", i, w, err)
		}
		b.Done()
	}
	if _, err := b.Take(now, p); !errors.Is(err, ErrTooLong) {
		t.Fatalf("wait of 6ms with queue_timeout 5ms: %v, want ErrTooLong", err)
	}
	// No queue at all: everything over the rate is refused at once.
	q0 := NewRate(1000, 1, 0, time.Second)
	var c Bucket
	if _, err := c.Take(now, q0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Take(now, q0); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("max_queued 0: %v, want ErrQueueFull", err)
	}
}

// TestGCRASteadyRate: offered 10x the rate for 10 virtual seconds with
// refusals retried, a bucket admits rate x seconds (+ the burst).
func TestGCRASteadyRate(t *testing.T) {
	p := NewRate(1000, 50, 0, 0)
	var b Bucket
	start := int64(time.Hour)
	admitted := 0
	for now := start; now < start+10*int64(time.Second); now += 100 * int64(time.Microsecond) {
		if w, err := b.Take(now, p); err == nil && w == 0 {
			admitted++
		}
	}
	if admitted < 10000 || admitted > 10050 {
		t.Fatalf("admitted %d in 10s at 1000/s with burst 50", admitted)
	}
}

// TestGCRAConcurrent: sessions racing on one bucket at one instant get
// exactly burst immediate slots.
func TestGCRAConcurrent(t *testing.T) {
	p := NewRate(100, 500, 1<<30, time.Hour)
	var b Bucket
	now := int64(time.Minute)
	var immediate atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if w, err := b.Take(now, p); err == nil && w == 0 {
					immediate.Add(1)
				} else if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if immediate.Load() != 500 {
		t.Fatalf("%d immediate slots, want the burst of 500", immediate.Load())
	}
	if want := now + 1600*p.interval; b.tat.Load() != want {
		t.Fatalf("tat %d, want %d (one interval per statement)", b.tat.Load(), want)
	}
}

// BenchmarkGCRATake is the rate limit's cost for a statement that finds
// room.
func BenchmarkGCRATake(b *testing.B) {
	p := NewRate(1_000_000_0, 0, 0, 0)
	var g Bucket
	b.ReportAllocs()
	for b.Loop() {
		_, _ = g.Take(int64(mono.Now()), p)
	}
}
