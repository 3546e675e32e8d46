package tests

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/proxy"
)

// rawDial opens a raw protocol connection to addr.
func rawDial(t *testing.T, addr string) *protocol.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	return protocol.NewConn(nc)
}

// rawLogin opens a raw connection and logs in as the app user.
func rawLogin(t *testing.T, addr string) *protocol.Conn {
	t.Helper()
	c := rawDial(t, addr)
	_, err := protocol.ClientHandshake(c, protocol.ClientConfig{
		User: env.topo.Opts.AppUser, Password: env.topo.Opts.AppPassword,
		Capabilities: protocol.BackendCapabilities,
	})
	if err != nil {
		t.Fatalf("raw login: %v", err)
	}
	return c
}

// readErr reads one packet and requires it to be an ERR with code.
func readErr(t *testing.T, c *protocol.Conn, code uint16) *protocol.SQLError {
	t.Helper()
	c.LenientSeq = true
	p, err := c.ReadPacket()
	if err != nil {
		t.Fatalf("want ERR %d, got read error %v", code, err)
	}
	e, err := protocol.ParseErr(p)
	if err != nil {
		t.Fatalf("want ERR %d, got packet % x", code, p[:min(len(p), 16)])
	}
	if e.Code != code {
		t.Fatalf("got ERR %d %q, want %d", e.Code, e.Message, code)
	}
	return e
}

// requireClosed requires the server to close c (EOF or reset) before the
// deadline already set on it.
func requireClosed(t *testing.T, c *protocol.Conn) {
	t.Helper()
	c.LenientSeq = true
	for {
		_, err := c.ReadPacket()
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection still open at the deadline: %v", err)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
			return
		}
		t.Fatalf("unexpected error waiting for close: %v", err)
	}
}

// requireServes proves that a fresh client is served normally afterwards.
func requireServes(t *testing.T, addr string) {
	t.Helper()
	c := rawLogin(t, addr)
	c.ResetSeq()
	if err := c.WritePacketFlush(append([]byte{protocol.ComQuery}, "SELECT 1"...)); err != nil {
		t.Fatal(err)
	}
	if _, err := protocol.ReadResponse(c, protocol.ResponseResult); err != nil {
		t.Fatalf("next client not served: %v", err)
	}
}

// shortTimeoutProxy is a second sluice with small limits for the tests that
// need them.
func shortTimeoutProxy(t *testing.T) string {
	t.Helper()
	srv, err := startProxy(env.topo, `handshake_timeout = "1s"`, `max_allowed_packet = 1048576`)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.Addr().String()
}

func TestBadInputGarbageHandshakeResponse(t *testing.T) {
	c := rawDial(t, env.addr)
	if _, err := c.ReadPacket(); err != nil { // greeting
		t.Fatal(err)
	}
	garbage := []byte("\x00\x00\x00\x00GET / HTTP/1.1\r\nHost: sluice\r\n\r\n")
	if err := c.WritePacketFlush(garbage); err != nil {
		t.Fatal(err)
	}
	readErr(t, c, protocol.ErHandshake)
	requireClosed(t, c)
	requireServes(t, env.addr)
}

func TestBadInputGarbageBeforeGreetingIsRead(t *testing.T) {
	nc, err := net.Dial("tcp", env.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	// Bytes that are not a packet at all: a huge length and junk.
	if _, err := nc.Write([]byte("\xff\xff\xff\x01garbage-garbage-garbage")); err != nil {
		t.Fatal(err)
	}
	_ = nc.(*net.TCPConn).CloseWrite()
	c := protocol.NewConn(nc)
	if _, err := c.ReadPacket(); err != nil { // greeting
		t.Fatal(err)
	}
	// Out of order and then EOF: an ERR or a close, nothing else.
	c.LenientSeq = true
	if p, err := c.ReadPacket(); err == nil && !protocol.IsErr(p) {
		t.Fatalf("got a non-ERR packet % x", p[:min(len(p), 16)])
	}
	requireServes(t, env.addr)
}

func TestBadInputTruncatedHandshakeClosedAfterTimeout(t *testing.T) {
	addr := shortTimeoutProxy(t)
	c := rawDial(t, addr)
	if _, err := c.ReadPacket(); err != nil {
		t.Fatal(err)
	}
	// A header announcing 100 bytes, then only 10, then silence.
	if _, err := c.NetConn().Write(append([]byte{100, 0, 0, 1}, make([]byte, 10)...)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(1*time.Second + 5*time.Second))
	requireClosed(t, c)
	requireServes(t, addr)
}

func TestBadInputTruncatedCommandThenEOF(t *testing.T) {
	c := rawLogin(t, env.addr)
	if _, err := c.NetConn().Write([]byte{50, 0, 0, 0, protocol.ComQuery, 'S', 'E'}); err != nil {
		t.Fatal(err)
	}
	_ = c.NetConn().(*net.TCPConn).CloseWrite()
	requireClosed(t, c)
	requireServes(t, env.addr)
}

func TestBadInputPacketOverMaxAllowedPacket(t *testing.T) {
	addr := shortTimeoutProxy(t)
	c := rawLogin(t, addr)
	c.ResetSeq()
	big := make([]byte, 2<<20)
	big[0] = protocol.ComQuery
	// Write in the background: sluice stops reading after the header.
	go func() { _ = c.WritePacketFlush(big) }()
	e := readErr(t, c, protocol.ErNetPacketTooLarge)
	if e.State != "08S01" {
		t.Fatalf("SQLSTATE %q", e.State)
	}
	requireClosed(t, c)
	requireServes(t, addr)
}

func TestBadInputUnknownCommandKeepsSession(t *testing.T) {
	c := rawLogin(t, env.addr)
	for _, cmd := range []byte{0x99, protocol.ComTableDump, protocol.ComBinlogDump} {
		c.ResetSeq()
		if err := c.WritePacketFlush([]byte{cmd, 1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		e := readErr(t, c, protocol.ErUnknownCommand)
		if want := protocol.CommandName(cmd); !contains(e.Message, want) {
			t.Fatalf("message %q does not name %s", e.Message, want)
		}
	}
	c.ResetSeq()
	c.LenientSeq = true
	if err := c.WritePacketFlush(append([]byte{protocol.ComQuery}, "SELECT 1"...)); err != nil {
		t.Fatal(err)
	}
	if _, err := protocol.ReadResponse(c, protocol.ResponseResult); err != nil {
		t.Fatalf("session unusable after unknown command: %v", err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestBadInputReplicaDown kills one replica: reads keep working on the
// other, the dead one leaves rotation, and it returns once restarted.
func TestBadInputReplicaDown(t *testing.T) {
	victim := env.topo.Replicas[0]
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if !victim.Running() {
			if err := victim.Start(ctx); err != nil {
				t.Errorf("restart %s: %v", victim.Name, err)
			}
		}
		waitBackendUp(t, env.srv, victim.Addr())
	})
	d := appDB(t, "", nil)
	ctx := ctxT(t)
	for range 6 {
		c, err := d.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		id := serverID(t, ctx, c, "")
		if id == victim.ServerID {
			t.Fatalf("read served by the killed replica %d", id)
		}
		c.Raw(func(any) error { return driverBadConn })
		c.Close()
	}
	// A session whose replica dies under it is retried elsewhere.
	if err := victim.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitBackendUp(t, env.srv, victim.Addr())
	seen := map[uint32]bool{}
	deadline := time.Now().Add(20 * time.Second)
	for !seen[victim.ServerID] && time.Now().Before(deadline) {
		c, err := d.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen[serverID(t, ctx, c, "")] = true
		c.Raw(func(any) error { return driverBadConn })
		c.Close()
	}
	if !seen[victim.ServerID] {
		t.Fatalf("restarted replica %d never served again (seen %v)", victim.ServerID, seen)
	}
	c := conn(t, d)
	if id := serverID(t, ctx, c, ""); id != victim.ServerID {
		// Make this session's replica the victim, then kill it.
		for id != victim.ServerID {
			c.Raw(func(any) error { return driverBadConn })
			c.Close()
			c = conn(t, d)
			id = serverID(t, ctx, c, "")
		}
	}
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	if id := serverID(t, ctx, c, ""); id == victim.ServerID || id == 0 {
		t.Fatalf("read after the replica died returned %d", id)
	}
}

// waitBackendUp polls until sluice considers addr up.
func waitBackendUp(t *testing.T, srv *proxy.Server, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, c := range srv.Topology().Current().Clusters {
			for _, b := range c.Backends() {
				if b.Address == addr && b.Up() {
					return
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("backend %s not up within 30s", addr)
}

var _ = os.Getenv
