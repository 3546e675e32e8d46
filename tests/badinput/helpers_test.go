package badinput

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/protocol"
)

// rawDeadline bounds every raw read and write of a test connection: a case
// that hangs fails at this deadline instead of hanging the package.
const rawDeadline = 20 * time.Second

// rawDial opens a raw protocol connection to addr with rawDeadline set.
func rawDial(t testing.TB, addr string) *protocol.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(rawDeadline))
	return protocol.NewConn(nc)
}

// readGreeting reads and decodes sluice's greeting on c.
func readGreeting(t testing.TB, c *protocol.Conn) *protocol.Greeting {
	t.Helper()
	p, err := c.ReadPacket()
	if err != nil {
		t.Fatalf("reading the greeting: %v", err)
	}
	g, err := protocol.ParseGreeting(p)
	if err != nil {
		t.Fatalf("greeting: %v", err)
	}
	return g
}

// clientCaps are the capabilities the raw test clients announce.
const clientCaps = protocol.ClientLongPassword | protocol.ClientLongFlag | protocol.ClientProtocol41 |
	protocol.ClientTransactions | protocol.ClientSecureConnection | protocol.ClientMultiResults |
	protocol.ClientPluginAuth | protocol.ClientPluginAuthLenencClientData | protocol.ClientConnectAttrs

// appResponse is a well-formed handshake response logging in as the app
// user over the scramble of g.
func appResponse(g *protocol.Greeting) *protocol.HandshakeResponse {
	o := env.topo.Opts
	return &protocol.HandshakeResponse{
		Capabilities:  clientCaps,
		MaxPacketSize: 1 << 24,
		Collation:     45,
		User:          o.AppUser,
		AuthResponse:  protocol.NativePasswordResponse(g.Scramble, o.AppPassword),
		AuthPlugin:    "mysql_native_password",
	}
}

// rawLogin opens a raw connection to addr and logs in as the app user.
func rawLogin(t testing.TB, addr string) *protocol.Conn {
	t.Helper()
	c := rawDial(t, addr)
	o := env.topo.Opts
	if _, err := protocol.ClientHandshake(c, protocol.ClientConfig{
		User: o.AppUser, Password: o.AppPassword, Capabilities: protocol.BackendCapabilities,
	}); err != nil {
		t.Fatalf("raw login: %v", err)
	}
	return c
}

// writeRaw writes bytes to c's socket unframed.
func writeRaw(t testing.TB, c *protocol.Conn, b []byte) {
	t.Helper()
	if _, err := c.NetConn().Write(b); err != nil {
		t.Fatalf("writing %d raw bytes: %v", len(b), err)
	}
}

// packet frames payload as one packet with sequence id seq.
func packet(seq byte, payload []byte) []byte {
	n := len(payload)
	return append([]byte{byte(n), byte(n >> 8), byte(n >> 16), seq}, payload...)
}

// readPacket reads one packet whatever its sequence id.
func readPacket(t testing.TB, c *protocol.Conn) []byte {
	t.Helper()
	c.LenientSeq = true
	p, err := c.ReadPacket()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return p
}

// readErr reads one packet and requires it to be an ERR with code whose
// message contains every one of words.
func readErr(t testing.TB, c *protocol.Conn, code uint16, words ...string) *protocol.SQLError {
	t.Helper()
	c.LenientSeq = true
	p, err := c.ReadPacket()
	if err != nil {
		t.Fatalf("want ERR %d, got read error %v", code, err)
	}
	return requireErr(t, p, code, words...)
}

// requireErr requires p to be an ERR with code whose message contains
// every one of words.
func requireErr(t testing.TB, p []byte, code uint16, words ...string) *protocol.SQLError {
	t.Helper()
	e, err := protocol.ParseErr(p)
	if err != nil {
		t.Fatalf("want ERR %d, got packet % x", code, p[:min(len(p), 32)])
	}
	if e.Code != code {
		t.Fatalf("got ERR %d %q, want %d", e.Code, e.Message, code)
	}
	for _, w := range words {
		if !strings.Contains(e.Message, w) {
			t.Fatalf("ERR %d %q does not name %q", e.Code, e.Message, w)
		}
	}
	return e
}

// requireClosed requires the server to close c (EOF or reset) before the
// deadline already set on it; packets before the close are skipped.
func requireClosed(t testing.TB, c *protocol.Conn) {
	t.Helper()
	c.LenientSeq = true
	for {
		_, err := c.ReadPacket()
		if err == nil {
			continue
		}
		if isClosed(err) {
			return
		}
		t.Fatalf("connection not closed: %v", err)
	}
}

// isClosed reports whether err is the peer closing the connection (as
// opposed to a local read deadline).
func isClosed(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// requireServes proves that sluice at addr serves the next client: a fresh
// go-sql-driver login and SELECT 1.
func requireServes(t testing.TB, addr string) {
	t.Helper()
	o := env.topo.Opts
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = o.AppUser, o.AppPassword, "tcp", addr
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 10*time.Second, 20*time.Second, 20*time.Second
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var one int
	if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("the next client is not served: SELECT 1 = %d, %v", one, err)
	}
}

// sqlConn is one go-sql-driver connection (one sluice session) to addr,
// closed at the end of the test.
func sqlConn(t testing.TB, addr string) *sql.Conn {
	t.Helper()
	o := env.topo.Opts
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = o.AppUser, o.AppPassword, "tcp", addr
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 10*time.Second, 20*time.Second, 20*time.Second
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c, err := db.Conn(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ctxT is a context bounded for one test step.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// leakMargin is how many goroutines above the baseline still count as
// "back": the runtime and the driver may keep one or two briefly.
const leakMargin = 3

// checkLeaks records the process's goroutine count now and, at the end of
// the test (after the test's own connections closed), requires it to come
// back within leakMargin. sluice runs in process, so its session and login
// goroutines are counted.
func checkLeaks(t testing.TB) {
	t.Helper()
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		n := waitGoroutines(base+leakMargin, 15*time.Second)
		if n > base+leakMargin {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("goroutines: %d at the start, still %d after the test:\n%s", base, n, buf)
		}
	})
}

// waitGoroutines polls until at most want goroutines run or d passes, and
// returns the last count.
func waitGoroutines(want int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		n := runtime.NumGoroutine()
		if n <= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openFDs counts the process's open file descriptors.
func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
