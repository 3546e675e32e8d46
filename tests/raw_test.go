package tests

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
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
