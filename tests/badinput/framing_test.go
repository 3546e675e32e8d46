package badinput

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
)

// A 0xFFFFFF-length header followed by a short body, during the handshake
// and as a command, then EOF or silence.
func TestMaxLengthHeaderShortBody(t *testing.T) {
	checkLeaks(t)
	hdr := func(seq byte) []byte { return []byte{0xff, 0xff, 0xff, seq} }
	t.Run("handshake/then-eof", func(t *testing.T) {
		c := rawDial(t, env.addr)
		readGreeting(t, c)
		writeRaw(t, c, append(hdr(1), bytesOf(0x33, 100)...))
		_ = c.NetConn().(*net.TCPConn).CloseWrite()
		requireClosed(t, c)
	})
	t.Run("handshake/then-silence", func(t *testing.T) {
		c := rawDial(t, env.addr)
		readGreeting(t, c)
		writeRaw(t, c, append(hdr(1), bytesOf(0x33, 100)...))
		start := time.Now()
		_ = c.SetDeadline(start.Add(handshakeTimeout + 15*time.Second))
		requireClosed(t, c)
		if d := time.Since(start); d < handshakeTimeout*9/10 {
			t.Fatalf("closed after %v, before handshake_timeout %v", d, handshakeTimeout)
		}
	})
	t.Run("command/then-eof", func(t *testing.T) {
		c := rawLogin(t, env.addr)
		writeRaw(t, c, append(hdr(0), append([]byte{protocol.ComQuery}, "SELECT 'short body'"...)...))
		_ = c.NetConn().(*net.TCPConn).CloseWrite()
		requireClosed(t, c)
	})
	requireServes(t, env.addr)
}

// vmRSS returns the process's resident set size in bytes (VmRSS of
// /proc/self/status).
func vmRSS(t testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			f := bytes.Fields(rest)
			kb, err := strconv.ParseInt(string(f[0]), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// rssPeak samples vmRSS until stop is called and returns the highest value.
func rssPeak(t testing.TB) (stop func() int64) {
	var (
		mu   sync.Mutex
		peak = vmRSS(t)
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				v := vmRSS(t)
				mu.Lock()
				peak = max(peak, v)
				mu.Unlock()
			}
		}
	}()
	return func() int64 {
		close(done)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return max(peak, vmRSS(t))
	}
}

// declaredPackets is what the chain of full packets in TestDeclaredGigabytePayload
// declares: 64 packets of 0xFFFFFF bytes, about 1 GiB.
const declaredPackets = 64

// sendChain writes a chain of declaredPackets full (0xFFFFFF) packets from
// sequence id seq, body bytes included, until a write fails (sluice closed
// the connection), and reports how many body bytes went out.
func sendChain(nc net.Conn, seq byte, first byte) int64 {
	w := bufio.NewWriterSize(nc, 64<<10)
	chunk := bytesOf(0x61, 1<<20)
	var sent int64
	for i := range declaredPackets {
		if _, err := w.Write([]byte{0xff, 0xff, 0xff, seq + byte(i)}); err != nil {
			return sent
		}
		for rest := protocol.MaxPayloadLen; rest > 0; {
			n := min(rest, len(chunk))
			b := chunk[:n]
			if i == 0 && rest == protocol.MaxPayloadLen {
				b = append([]byte{first}, chunk[:n-1]...)
			}
			m, err := w.Write(b)
			sent += int64(m)
			if err != nil {
				return sent
			}
			rest -= n
		}
	}
	_ = w.Flush()
	return sent
}

// heapAllocated is the process's cumulative heap allocation in bytes.
func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// memBound is what refusing a declared 1 GiB packet may cost: heap
// allocated while it arrives (sluice's read buffer grows with the bytes
// that arrive, up to max_allowed_packet, plus the test's own 1 MiB chunk)
// and RSS growth. A -race build's shadow memory multiplies RSS, not the
// heap, so its RSS bound is wider.
const memBound = 64 << 20

// refuseGigabyte sends a chain declaring about 1 GiB on c (sequence ids
// from seq, first payload byte first), requires the refusal check(c), and
// requires sluice's memory to stay far below the declared size.
func refuseGigabyte(t *testing.T, c *protocol.Conn, seq, first byte, check func(*protocol.Conn)) {
	t.Helper()
	stop := rssPeak(t)
	rssBefore, heapBefore := vmRSS(t), heapAllocated()
	done := make(chan int64, 1)
	go func() { done <- sendChain(c.NetConn(), seq, first) }()
	check(c)
	requireClosed(t, c)
	sent := <-done
	heap := heapAllocated() - heapBefore
	rss := stop() - rssBefore
	t.Logf("declared %d MiB, sent %d MiB before the refusal; heap allocated %d MiB, RSS %d MiB before, peak +%d MiB (race %v)",
		declaredPackets*protocol.MaxPayloadLen>>20, sent>>20, heap>>20, rssBefore>>20, rss>>20, raceEnabled)
	if heap > memBound {
		t.Fatalf("%d MiB allocated for a declared 1 GiB packet (bound %d MiB)", heap>>20, memBound>>20)
	}
	rssBound := int64(memBound)
	if raceEnabled {
		rssBound *= 4
	}
	if rss > rssBound {
		t.Fatalf("RSS grew by %d MiB for a declared 1 GiB packet (bound %d MiB)", rss>>20, rssBound>>20)
	}
	if sent >= declaredPackets*protocol.MaxPayloadLen {
		t.Fatal("the whole declared gigabyte was accepted")
	}
}

// A chain of 0xFFFFFF packets declaring about 1 GiB is refused with ERR
// 1153 (as a command) or 1043 (as the handshake response) once it passes
// max_allowed_packet (16 MiB here), without sluice allocating anything near
// the declared size.
func TestDeclaredGigabytePayload(t *testing.T) {
	checkLeaks(t)
	t.Run("command", func(t *testing.T) {
		refuseGigabyte(t, rawLogin(t, env.addr), 0, protocol.ComQuery, func(c *protocol.Conn) {
			e := readErr(t, c, protocol.ERNetPacketTooLarge.Code, "max_allowed_packet")
			if e.State != "08S01" {
				t.Fatalf("SQLSTATE %q, want 08S01", e.State)
			}
		})
	})
	t.Run("handshake", func(t *testing.T) {
		// A sluice of its own whose handshake_timeout the upload cannot
		// outlast: the shared one's 2 s can pass before 16 MiB have arrived
		// on a loaded machine under -race, and the timeout then closes the
		// connection without the refusal this case is about.
		srv, err := startProxy(env.topo, `handshake_timeout = "60s"`, fmt.Sprintf(`max_allowed_packet = %d`, maxPacket))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		c := rawDial(t, srv.Addr().String())
		readGreeting(t, c)
		refuseGigabyte(t, c, 1, 0x05, func(c *protocol.Conn) {
			readErr(t, c, protocol.ERHandshake.Code, "Bad handshake", "max_allowed_packet")
		})
	})
	requireServes(t, env.addr)
}

// A truncated command then EOF closes the session.
func TestTruncatedCommandThenEOF(t *testing.T) {
	checkLeaks(t)
	c := rawLogin(t, env.addr)
	writeRaw(t, c, []byte{50, 0, 0, 0, protocol.ComQuery, 'S', 'E'})
	_ = c.NetConn().(*net.TCPConn).CloseWrite()
	requireClosed(t, c)
	requireServes(t, env.addr)
}

// An unknown command gets ERR 1047 naming it and leaves the session usable.
func TestUnknownCommandKeepsSession(t *testing.T) {
	checkLeaks(t)
	c := rawLogin(t, env.addr)
	for _, cmd := range []byte{0x99, protocol.ComTableDump, protocol.ComBinlogDump} {
		c.ResetSeq()
		if err := c.WritePacketFlush([]byte{cmd, 1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		readErr(t, c, protocol.ERUnknownCommand.Code, protocol.CommandName(cmd))
		requireSelect1(t, c)
	}
	requireServes(t, env.addr)
}
