package evloop

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection, the accepted one
// wrapped by NewSockConn.
func tcpPair(t testing.TB) (wrapped, peer net.Conn) {
	t.Helper()
	c, peer := rawPair(t)
	wrapped = NewSockConn(c)
	if _, ok := wrapped.(*sockConn); !ok {
		t.Fatalf("NewSockConn(%T) did not wrap it", c)
	}
	t.Cleanup(func() { wrapped.Close(); peer.Close() })
	return wrapped, peer
}

// rawPair returns both ends of a loopback TCP connection: the accepted one
// and the dialled one.
func rawPair(t testing.TB) (accepted, dialled net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	dialled, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if accepted = <-ch; accepted == nil {
		t.Fatal("accept failed")
	}
	return accepted, dialled
}

func TestSockConnReadWrite(t *testing.T) {
	c, peer := tcpPair(t)
	if _, err := peer.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(c, buf, 5)
	if err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("Read = %q, %v; want hello", buf[:n], err)
	}
	if n, err := c.Write([]byte("world")); n != 5 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	n, err = io.ReadAtLeast(peer, buf, 5)
	if err != nil || string(buf[:n]) != "world" {
		t.Fatalf("peer read %q, %v; want world", buf[:n], err)
	}
	if n, err := c.Read(nil); n != 0 || err != nil {
		t.Fatalf("Read(nil) = %d, %v", n, err)
	}
}

// A write bigger than the socket buffers completes once the peer reads:
// the partial writes wait for room in the poller.
func TestSockConnLargeWrite(t *testing.T) {
	c, peer := tcpPair(t)
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(peer)
		got <- b
	}()
	n, err := c.Write(want)
	if n != len(want) || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(want))
	}
	c.(*sockConn).CloseWrite()
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("peer read %d bytes, not the %d written", len(b), len(want))
	}
}

func TestSockConnEOF(t *testing.T) {
	c, peer := tcpPair(t)
	peer.Close()
	if n, err := c.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Fatalf("Read after the peer closed = %d, %v; want 0, io.EOF", n, err)
	}
}

// A deadline ends a waiting Read with the same error net.TCPConn gives.
func TestSockConnDeadline(t *testing.T) {
	c, _ := tcpPair(t)
	if err := c.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 8))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past its deadline: %v; want a timeout", err)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "read" {
		t.Fatalf("error %#v: want a *net.OpError with Op read", err)
	}
}

// Close from another goroutine ends a waiting Read with net.ErrClosed (the
// stall watchdog and KILL close connections this way).
func TestSockConnCloseWhileReading(t *testing.T) {
	c, _ := tcpPair(t)
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 8))
		done <- err
	}()
	// Close once the Read waits in the poller; closing earlier is also
	// fine: the Read then fails at once with the same error.
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read on a closed connection: %v; want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read did not return after Close")
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write on a closed connection: %v; want net.ErrClosed", err)
	}
}

// A reset from the peer surfaces as the system error, wrapped as
// net.TCPConn wraps it.
func TestSockConnReset(t *testing.T) {
	c, peer := tcpPair(t)
	peer.(*net.TCPConn).SetLinger(0)
	peer.Close()
	_, err := c.Read(make([]byte, 8))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Read after a reset: %v; want ECONNRESET", err)
	}
	var se *os.SyscallError
	if !errors.As(err, &se) || se.Syscall != "read" {
		t.Fatalf("error %#v: want an *os.SyscallError of read", err)
	}
}

// Writes from several goroutines at once each arrive whole, as they do
// through net.TCPConn (a session's writer and a KILL may meet on a client).
func TestSockConnConcurrentWrites(t *testing.T) {
	c, peer := tcpPair(t)
	const writers, each, size = 8, 200, 4096
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := bytes.Repeat([]byte{byte('a' + w)}, size)
			for range each {
				if _, err := c.Write(msg); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	// Writes that clobber each other lose bytes: fail, not hang.
	_ = peer.SetReadDeadline(time.Now().Add(30 * time.Second))
	counts := make(map[byte]int)
	buf := make([]byte, size)
	for range writers * each {
		if _, err := io.ReadFull(peer, buf); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, bytes.Repeat(buf[:1], size)) {
			t.Fatalf("a %d-byte write arrived mixed with another: starts %q", size, buf[:8])
		}
		counts[buf[0]]++
	}
	wg.Wait()
	for w := range writers {
		if n := counts[byte('a'+w)]; n != each {
			t.Fatalf("writer %d: %d messages arrived, want %d", w, n, each)
		}
	}
}

// NewSockConn leaves what is not a TCP connection alone.
func TestSockConnOnlyTCP(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := NewSockConn(a); got != a {
		t.Fatalf("NewSockConn(pipe) = %T; want the pipe itself", got)
	}
}

func TestSockConnNoAllocs(t *testing.T) {
	c, peer := tcpPair(t)
	msg, buf := []byte("ping"), make([]byte, 16)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(peer, buf[:4]); err != nil {
			t.Fatal(err)
		}
		if _, err := peer.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf[:4]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per round trip through sockConn; want 0", allocs)
	}
}

// BenchmarkLoopbackRoundTrip is one request and answer over loopback TCP,
// the proxy's end through net.TCPConn or through sockConn. The gap between
// the two shows little on an idle machine; it is the runtime's syscall
// hand-off on a machine whose cores are busy (see sockConn).
func BenchmarkLoopbackRoundTrip(b *testing.B) {
	for _, wrap := range []bool{false, true} {
		name := "net.TCPConn"
		if wrap {
			name = "sockConn"
		}
		b.Run(name, func(b *testing.B) {
			c, peer := tcpPair(b)
			if !wrap {
				c = c.(*sockConn).TCPConn
			}
			go func() {
				buf := make([]byte, 64)
				for {
					n, err := peer.Read(buf)
					if err != nil {
						return
					}
					if _, err := peer.Write(buf[:n]); err != nil {
						return
					}
				}
			}()
			msg, buf := []byte("SELECT c FROM sbtest1 WHERE id=42"), make([]byte, 64)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := c.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf[:len(msg)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSockConnReadAfterWriteYields checks that a Read following a Write lets
// the other runnable goroutines go before it reads: here the goroutine that
// answers is one of them, so on one processor the read finds the answer
// instead of finding nothing, while a Read that follows a Read does not
// yield and finds nothing. (The scheduler takes the yielding goroutine
// first from its global queue once in 61 turns, for fairness, so a few
// rounds may still find nothing; without the yield every round does.)
func TestSockConnReadAfterWriteYields(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	c, peer := tcpPair(t)
	sc := c.(*sockConn)
	buf := make([]byte, 16)
	const rounds = 40
	for i := range rounds {
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		answered := make(chan error, 1)
		go func() {
			b := make([]byte, 4)
			if _, err := io.ReadFull(peer, b); err != nil {
				answered <- err
				return
			}
			_, err := peer.Write([]byte("pong"))
			answered <- err
		}()
		if _, err := io.ReadFull(c, buf[:4]); err != nil || string(buf[:4]) != "pong" {
			t.Fatalf("round %d: Read = %q, %v; want pong", i, buf[:4], err)
		}
		if err := <-answered; err != nil {
			t.Fatal(err)
		}
	}
	if sc.emptyReads > rounds/10 {
		t.Fatalf("%d of %d reads after a write found nothing; want at most %d (the read yields to the answering goroutine first)", sc.emptyReads, rounds, rounds/10)
	}
	sc.emptyReads = 0
	// A read after a read does not yield: the peer's goroutine runs only
	// once this one parks.
	go func() { _, _ = peer.Write([]byte("more")) }()
	if _, err := io.ReadFull(c, buf[:4]); err != nil || string(buf[:4]) != "more" {
		t.Fatalf("Read = %q, %v; want more", buf[:4], err)
	}
	if sc.emptyReads != 1 {
		t.Fatalf("a read after a read found nothing %d times; want 1", sc.emptyReads)
	}
}
