package dataplane

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/health"
)

// TestPoolServesWaitersInOrder: with the pool full, borrowers get the
// connection in the order they asked for it, and one that comes while
// others wait queues behind them instead of taking what comes back first.
func TestPoolServesWaitersInOrder(t *testing.T) {
	p := newPool(&health.Backend{Address: "127.0.0.1:1", Role: health.RoleMaster}, 1)
	p.waitTimeout = 10 * time.Second
	bc, _ := lentPipeConn(t, p)
	queued := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.waiters)
	}
	waitQueued := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); queued() != n; {
			if time.Now().After(deadline) {
				t.Fatalf("%d borrowers queued, want %d", queued(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	const n = 5
	order := make(chan int, n+1)
	borrow := func(i int) {
		got, err := p.Get(context.Background(), poolKey{}, false, nil)
		if err != nil {
			t.Errorf("borrower %d: %v", i, err)
			order <- -1
			return
		}
		order <- i
		p.Put(got)
	}
	for i := range n {
		go borrow(i)
		waitQueued(i + 1)
	}
	p.Put(bc)
	// Comes while the five still wait (the first is only being woken).
	go borrow(n)
	for want := range n + 1 {
		select {
		case got := <-order:
			if got != want {
				t.Fatalf("borrower %d got the connection in turn %d", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("turn %d never came", want)
		}
	}
	if q := queued(); q != 0 {
		t.Fatalf("%d borrowers still queued", q)
	}
}

// TestPoolWaiterTimeoutPassesTurnOn: a borrower that gives up while first
// in the queue leaves it, and the next one still gets the connection.
func TestPoolWaiterTimeoutPassesTurnOn(t *testing.T) {
	p := newPool(&health.Backend{Address: "127.0.0.1:1", Role: health.RoleMaster}, 1)
	p.waitTimeout = 10 * time.Second
	bc, _ := lentPipeConn(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := p.Get(ctx, poolKey{}, false, nil)
		first <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; {
		p.mu.Lock()
		n := len(p.waiters)
		p.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first borrower never queued")
		}
		time.Sleep(time.Millisecond)
	}
	second := make(chan error, 1)
	go func() {
		got, err := p.Get(context.Background(), poolKey{}, false, nil)
		if err == nil {
			p.Put(got)
		}
		second <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; {
		p.mu.Lock()
		n := len(p.waiters)
		p.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second borrower never queued")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-first; err == nil {
		t.Fatal("the cancelled borrower got a connection")
	}
	p.Put(bc)
	select {
	case err := <-second:
		if err != nil {
			t.Fatalf("second borrower: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second borrower never got the connection")
	}
}
