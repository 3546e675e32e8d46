package dataplane

import (
	"net"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/protocol"
)

// lentPipeConn lends a BackendConn over one end of a pipe from p, as a
// dialled one would be, and returns it with the pipe's other end.
func lentPipeConn(t *testing.T, p *Pool) (*BackendConn, net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	w := &watchedConn{Conn: a}
	bc := &BackendConn{Conn: protocol.NewConn(w), pool: p, wire: w}
	p.mu.Lock()
	p.open++
	p.lendLocked(bc)
	p.mu.Unlock()
	return bc, b
}

// TestCutReading: only a lent connection whose read from the backend has
// been pending long enough is cut; its read fails and it says why. One lent
// between statements (no read pending) is left alone.
func TestCutReading(t *testing.T) {
	p := newPool(&health.Backend{Address: "127.0.0.1:1", Role: health.RoleReplica}, 4)
	reading, _ := lentPipeConn(t, p)
	between, _ := lentPipeConn(t, p)
	failed := make(chan error, 1)
	go func() {
		_, err := reading.ReadPacket()
		failed <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for reading.wire.readSince.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the read never became pending")
		}
		time.Sleep(time.Millisecond)
	}
	if n := p.cutReading(time.Hour, cutStalled); n != 0 {
		t.Fatalf("cut %d connections whose read is pending for less than an hour", n)
	}
	if n := p.cutReading(0, cutDown); n != 1 {
		t.Fatalf("cut %d connections, want the one reading", n)
	}
	select {
	case err := <-failed:
		if err == nil {
			t.Fatal("the cut read succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cut read still blocks")
	}
	if why := reading.wire.cut.Load(); why != cutDown {
		t.Fatalf("cut reason %d, want cutDown", why)
	}
	if why := between.wire.cut.Load(); why != cutNone {
		t.Fatalf("the connection between statements was cut (%d)", why)
	}
	if reading.wire.readSince.Load() != 0 {
		t.Fatal("a finished read still counts as pending")
	}
}

func TestStallTick(t *testing.T) {
	for _, c := range []struct{ timeout, want time.Duration }{
		{time.Millisecond, 10 * time.Millisecond},
		{200 * time.Millisecond, 50 * time.Millisecond},
		{time.Second, 250 * time.Millisecond},
		{time.Minute, 250 * time.Millisecond},
	} {
		if got := stallTick(c.timeout); got != c.want {
			t.Errorf("stallTick(%v) = %v, want %v", c.timeout, got, c.want)
		}
	}
}
