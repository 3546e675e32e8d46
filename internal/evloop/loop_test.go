//go:build linux

package evloop

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"go.uber.org/zap"
)

// loopPair returns a Conn out of Go's poller (the accepted end) and
// its plain peer.
func loopPair(t testing.TB) (*Conn, net.Conn) {
	t.Helper()
	c, peer := rawPair(t)
	lc := NewConn(c)
	if err := lc.LeavePoller(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Close(); peer.Close() })
	return lc, peer
}

func startLoop(t testing.TB) *Loop {
	t.Helper()
	l, err := New(zap.NewNop(), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		done := make(chan struct{})
		go func() { l.Stop(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("event loop did not stop: a task is still running")
		}
	})
	return l
}

// echoTask serves c on l: it answers every read with the same bytes until
// EOF, and reports how it ended.
func echoTask(l *Loop, c *Conn, ended chan<- error) {
	l.Spawn(func(t *Task) {
		c.Bind(t)
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			if err != nil {
				ended <- err
				c.Close()
				return
			}
			if _, err := c.Write(buf[:n]); err != nil {
				ended <- err
				c.Close()
				return
			}
		}
	})
}

func TestLoopConnEcho(t *testing.T) {
	l := startLoop(t)
	c, peer := loopPair(t)
	ended := make(chan error, 1)
	echoTask(l, c, ended)
	buf := make([]byte, 64)
	for i := range 200 {
		msg := []byte{'q', byte(i), byte(i >> 8)}
		if _, err := peer.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(peer, buf[:3]); err != nil || !bytes.Equal(buf[:3], msg) {
			t.Fatalf("round trip %d: got %q, %v; want %q", i, buf[:3], err, msg)
		}
	}
	peer.Close()
	if err := <-ended; !errors.Is(err, io.EOF) {
		t.Fatalf("task ended with %v, want io.EOF when the peer closes", err)
	}
}

// A write bigger than the socket buffers waits on the loop for room.
func TestLoopConnLargeWrite(t *testing.T) {
	l := startLoop(t)
	c, peer := loopPair(t)
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB
	wrote := make(chan error, 1)
	l.Spawn(func(t *Task) {
		c.Bind(t)
		_, err := c.Write(want)
		c.Close()
		wrote <- err
	})
	got, err := io.ReadAll(peer)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("peer read %d bytes (%v), want %d", len(got), err, len(want))
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}

func TestLoopConnReadDeadline(t *testing.T) {
	l := startLoop(t)
	c, peer := loopPair(t)
	type result struct {
		err   error
		took  time.Duration
		after string
	}
	res := make(chan result, 1)
	l.Spawn(func(t *Task) {
		c.Bind(t)
		start := time.Now()
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := c.Read(make([]byte, 8))
		r := result{err: err, took: time.Since(start)}
		// The connection stays usable once the deadline is cleared.
		_ = c.SetReadDeadline(time.Time{})
		if _, err := c.Write([]byte("go")); err == nil {
			b := make([]byte, 2)
			if _, err := io.ReadFull(c, b); err == nil {
				r.after = string(b)
			}
		}
		res <- r
	})
	// The peer answers only once it has seen the task's "go".
	b := make([]byte, 2)
	if _, err := io.ReadFull(peer, b); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.Write([]byte("ok")); err != nil {
		t.Fatal(err)
	}
	r := <-res
	var ne net.Error
	if !errors.Is(r.err, os.ErrDeadlineExceeded) || !errors.As(r.err, &ne) || !ne.Timeout() {
		t.Fatalf("Read past its deadline = %v, want a timeout wrapping os.ErrDeadlineExceeded", r.err)
	}
	if r.took < 50*time.Millisecond {
		t.Fatalf("Read returned after %v, before its 50ms deadline", r.took)
	}
	if r.after != "ok" {
		t.Fatalf("after the deadline was cleared the task read %q, want ok", r.after)
	}
}

// A Close from another goroutine wakes a read waiting on the loop; the
// descriptor is closed once the read has returned.
func TestLoopConnCloseWakesRead(t *testing.T) {
	l := startLoop(t)
	c, _ := loopPair(t)
	parked := make(chan struct{})
	res := make(chan error, 1)
	l.Spawn(func(t *Task) {
		c.Bind(t)
		close(parked)
		_, err := c.Read(make([]byte, 8))
		res <- err
	})
	<-parked
	waitFor(t, "the read to wait on the loop", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.ops == 1 && c.loop == l
	})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-res:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read = %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake the read waiting on the loop")
	}
	c.mu.Lock()
	closed, reg := c.fdClosed, c.loop
	c.mu.Unlock()
	if !closed || reg != nil {
		t.Fatalf("after the read returned: descriptor closed %v, still registered on %p", closed, reg)
	}
	if err := c.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close = %v, want net.ErrClosed", err)
	}
}

// A detached task blocks on something else while the loop serves its
// other tasks, then comes back and uses its sockets on the loop again.
func TestLoopTaskDetach(t *testing.T) {
	l := startLoop(t)
	a, peerA := loopPair(t)
	b, peerB := loopPair(t)
	release := make(chan struct{})
	res := make(chan string, 1)
	l.Spawn(func(t *Task) {
		a.Bind(t)
		if !t.Detach() {
			res <- "detach did nothing on a loop"
			return
		}
		<-release // would hold the whole loop if it ran there
		t.Attach()
		if !t.attached {
			res <- "not attached after attach"
			return
		}
		buf := make([]byte, 5)
		if _, err := io.ReadFull(a, buf); err != nil {
			res <- err.Error()
			return
		}
		res <- string(buf)
	})
	ended := make(chan error, 1)
	echoTask(l, b, ended)
	if _, err := peerB.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	_ = peerB.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(peerB, buf); err != nil {
		t.Fatalf("the loop did not serve another task while one was detached: %v", err)
	}
	close(release)
	if _, err := peerA.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if got := <-res; got != "hello" {
		t.Fatalf("detached task: %s", got)
	}
	peerB.Close()
	<-ended
}

// Off a loop (no task, or a detached one) a Conn waits in ppoll on
// its caller's thread, with the same deadlines and Close.
func TestLoopConnOffLoop(t *testing.T) {
	c, peer := loopPair(t)
	buf := make([]byte, 4)
	got := make(chan error, 1)
	go func() {
		_, err := io.ReadFull(c, buf)
		got <- err
	}()
	waitFor(t, "the read to wait", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.ops == 1
	})
	if _, err := peer.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil || string(buf) != "late" {
		t.Fatalf("Read = %q, %v", buf, err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past its deadline = %v", err)
	}
	_ = c.SetReadDeadline(time.Time{})
	res := make(chan error, 1)
	go func() {
		_, err := c.Read(buf)
		res <- err
	}()
	waitFor(t, "the read to wait", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.ops == 1
	})
	c.Close()
	select {
	case err := <-res:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read = %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake a read waiting in ppoll")
	}
}

// A task that panics ends; the loop goes on serving the others.
func TestLoopTaskPanic(t *testing.T) {
	l := startLoop(t)
	l.Spawn(func(*Task) { panic("boom") })
	c, peer := loopPair(t)
	ended := make(chan error, 1)
	echoTask(l, c, ended)
	if _, err := peer.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(peer, b); err != nil {
		t.Fatalf("the loop stopped serving after a task panicked: %v", err)
	}
	peer.Close()
	<-ended
}

// waitFor polls cond until it holds, failing the test after 5 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A read that filled its buffer left bytes in the socket whose edge has
// been spent: the read after the task's next write must read them at once,
// not wait for more (a client that pipelines two commands).
func TestLoopConnPipelinedInput(t *testing.T) {
	l := startLoop(t)
	c, peer := loopPair(t)
	res := make(chan string, 1)
	l.Spawn(func(t *Task) {
		c.Bind(t)
		var got []byte
		buf := make([]byte, 16)
		for len(got) < 100 {
			n, err := c.Read(buf)
			if err != nil {
				res <- err.Error()
				return
			}
			got = append(got, buf[:n]...)
			// An answer between the reads, as to the first command.
			if _, err := c.Write([]byte{'.'}); err != nil {
				res <- err.Error()
				return
			}
		}
		res <- string(got)
	})
	want := bytes.Repeat([]byte("0123456789"), 10)
	if _, err := peer.Write(want); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-res:
		if got != string(want) {
			t.Fatalf("task read %q, want the 100 bytes sent", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the task waited for bytes that were already in its socket")
	}
}

// Only GOMAXPROCS-1 loops of the process sleep holding a processor; the
// rest of the process keeps one.
func TestTakeProcessor(t *testing.T) {
	free := int32(runtime.GOMAXPROCS(0)-1) - rawLoops.Load()
	taken := int32(0)
	for takeProcessor() {
		taken++
		if taken > 1024 {
			break
		}
	}
	rawLoops.Add(-taken)
	if taken != max(free, 0) {
		t.Fatalf("takeProcessor granted %d loops, want %d (GOMAXPROCS %d)", taken, max(free, 0), runtime.GOMAXPROCS(0))
	}
}
