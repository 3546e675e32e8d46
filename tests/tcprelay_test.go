package tests

import (
	"io"
	"net"
	"sync"
	"testing"
)

// tcpRelay forwards connections from a loopback port of its own to target, so a test can
// put a network path between sluice (or a failover caller) and one server and cut it while
// every other path stays up. It is safe for concurrent use; Cut and Close may be called more
// than once.
type tcpRelay struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// newTCPRelay starts a relay to target on 127.0.0.1:0; the test's cleanup closes it.
func newTCPRelay(t testing.TB, target string) *tcpRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &tcpRelay{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(r.Close)
	return r
}

// Addr is the address to connect to instead of target.
func (r *tcpRelay) Addr() string { return r.ln.Addr().String() }

func (r *tcpRelay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		if !r.track(c) {
			c.Close()
			continue
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer r.untrack(c)
			up, err := net.Dial("tcp", r.target)
			if err != nil {
				return
			}
			if !r.track(up) {
				up.Close()
				return
			}
			defer r.untrack(up)
			done := make(chan struct{}, 2)
			go func() { io.Copy(up, c); done <- struct{}{} }()
			go func() { io.Copy(c, up); done <- struct{}{} }()
			<-done // one side ended: end both
			c.Close()
			up.Close()
			<-done
		}()
	}
}

func (r *tcpRelay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cut {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *tcpRelay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	c.Close()
}

// Cut drops every relayed connection and refuses new ones, as a partition would (the port
// keeps accepting and closes at once, like a firewall that rejects).
func (r *tcpRelay) Cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = true
	for c := range r.conns {
		c.Close()
	}
}

// Close cuts the relay, stops listening and waits for its goroutines.
func (r *tcpRelay) Close() {
	r.Cut()
	r.ln.Close()
	r.wg.Wait()
}
