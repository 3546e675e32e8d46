package auth

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
)

// nativeAuthServer is a scripted mysql_native_password auth server: every
// connection gets a greeting with scramble, and the password "secret" for
// any user is OK, anything else ERR 1045. It counts the connections it
// accepted and those still open (closed by the peer or answered and then
// closed by the peer). The MariaDB auth server's paths are tested end to
// end in tests/; this peer lets the tests count auth-server connections.
type nativeAuthServer struct {
	addr     string
	scramble []byte
	accepted atomic.Int64
	open     atomic.Int64
}

func startNativeAuthServer(t *testing.T) *nativeAuthServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &nativeAuthServer{addr: ln.Addr().String(), scramble: []byte("abcdefghijklmnopqrst")}
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			s.open.Add(1)
			go s.serve(nc)
		}
	}()
	return s
}

func (s *nativeAuthServer) serve(nc net.Conn) {
	defer s.open.Add(-1)
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	c := protocol.NewConn(nc)
	c.LenientSeq = true
	g := &protocol.Greeting{ServerVersion: "10.11.0-MariaDB", ConnectionID: 7, Scramble: s.scramble,
		Capabilities: protocol.BackendCapabilities, Collation: 45, Status: protocol.StatusAutocommit,
		AuthPlugin: protocol.AuthNativePassword}
	if err := c.WritePacketFlush(g.Encode()); err != nil {
		return
	}
	p, err := c.ReadPacket()
	if err != nil {
		return
	}
	h, err := protocol.ParseHandshakeResponse(p)
	switch {
	case err != nil:
		_ = c.WriteErr(protocol.ERHandshake.New("Bad handshake"))
	case bytes.Equal(h.AuthResponse, protocol.NativePasswordResponse(s.scramble, "secret")):
		_ = c.WritePacketFlush(protocol.AppendOK(nil, protocol.OK{Status: protocol.StatusAutocommit}))
	default:
		_ = c.WriteErr(protocol.ERAccessDenied.New("Access denied for user '%s'@'localhost' (using password: YES)", h.User))
	}
	// Wait for the relay to hang up, as a server's connection lingers
	// until its client closes it.
	_, _ = c.ReadPacket()
}

// relayLogin runs r.Authenticate on one end of a pipe and returns the
// other end (the client's) and the outcome.
type loginResult struct {
	login *Login
	err   error
}

func relayLogin(t *testing.T, r *Relay) (*protocol.Conn, <-chan loginResult) {
	t.Helper()
	return relayLoginWithin(t, r, 20*time.Second)
}

// relayLoginWithin is relayLogin with a handshake deadline d from now (the
// pipe's own deadline stays 20s, so an ERR sent at the handshake deadline
// is still delivered).
func relayLoginWithin(t *testing.T, r *Relay, d time.Duration) (*protocol.Conn, <-chan loginResult) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	_ = a.SetDeadline(time.Now().Add(20 * time.Second))
	_ = b.SetDeadline(time.Now().Add(20 * time.Second))
	deadline := time.Now().Add(d)
	done := make(chan loginResult, 1)
	go func() {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		l, err := r.Authenticate(ctx, protocol.NewConn(b), Server{ConnectionID: 1, Capabilities: protocol.BackendCapabilities, Collation: 45})
		done <- loginResult{l, err}
	}()
	c := protocol.NewConn(a)
	c.LenientSeq = true
	return c, done
}

// clientGreeting reads the greeting on client c.
func clientGreeting(t *testing.T, c *protocol.Conn) *protocol.Greeting {
	t.Helper()
	p, err := c.ReadPacket()
	if err != nil {
		t.Fatalf("reading the greeting: %v", err)
	}
	g, err := protocol.ParseGreeting(p)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// nativeResponse is a handshake response for user u answering scramble
// with password.
func nativeResponse(caps uint32, scramble []byte, password string) []byte {
	h := &protocol.HandshakeResponse{Capabilities: caps, MaxPacketSize: 1 << 24, Collation: 45, User: "u",
		AuthResponse: protocol.NativePasswordResponse(scramble, password), AuthPlugin: protocol.AuthNativePassword}
	return h.Encode()
}

// deferredLogin plays a client on the deferred path: it checks the greeting
// carries sluice's own scramble, answers it, takes the auth switch to the
// auth server's scramble and answers that with password; before is the
// auth server's accepted count before the login started. The packet that
// follows (ERR, or on success the final OK of Authenticate's caller) is
// left to the caller.
func deferredLogin(t *testing.T, c *protocol.Conn, srv *nativeAuthServer, before int64, password string) {
	t.Helper()
	g := clientGreeting(t, c)
	if bytes.Equal(g.Scramble, srv.scramble) || g.AuthPlugin != protocol.AuthNativePassword || len(g.Scramble) != 20 {
		t.Fatalf("deferred greeting: scramble %q plugin %q, want sluice's own 20-byte scramble and mysql_native_password", g.Scramble, g.AuthPlugin)
	}
	if n := srv.accepted.Load(); n != before {
		t.Fatalf("a deferred login connected to the auth server before its client answered")
	}
	if err := c.WritePacketFlush(nativeResponse(protocol.BackendCapabilities, g.Scramble, password)); err != nil {
		t.Fatal(err)
	}
	p, err := c.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	plugin, data, err := protocol.ParseAuthSwitch(p)
	if err != nil || plugin != protocol.AuthNativePassword || !bytes.Equal(data, srv.scramble) {
		t.Fatalf("got %q (%v), want an auth switch carrying the auth server's scramble", p, err)
	}
	if n := srv.accepted.Load(); n != before+1 {
		t.Fatalf("auth server accepted %d connections for one deferred login, want 1", n-before)
	}
	if err := c.WritePacketFlush(protocol.NativePasswordResponse(data, password)); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds or 10s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRelayDefersBeyondPendingHandshakes: with two silent clients holding
// the two pending slots (each with an auth-server connection), the next
// login is deferred: it opens no auth-server connection until its client
// answers, then logs in through an auth switch; a wrong password there is
// the auth server's 1045. When the silent clients hang up, their slots and
// auth-server connections are released at once.
func TestRelayDefersBeyondPendingHandshakes(t *testing.T) {
	srv := startNativeAuthServer(t)
	r := &Relay{Address: srv.addr, DialTimeout: 2 * time.Second, MaxPendingHandshakes: 2}

	var silent []*protocol.Conn
	var silentDone []<-chan loginResult
	for range 2 {
		c, done := relayLogin(t, r)
		if g := clientGreeting(t, c); !bytes.Equal(g.Scramble, srv.scramble) {
			t.Fatalf("below max_pending_handshakes the greeting has scramble %q, want the auth server's", g.Scramble)
		}
		silent, silentDone = append(silent, c), append(silentDone, done)
	}
	if r.PendingHandshakes() != 2 || srv.open.Load() != 2 {
		t.Fatalf("pending %d, auth-server connections %d; want 2 and 2", r.PendingHandshakes(), srv.open.Load())
	}

	before := srv.accepted.Load()
	c, done := relayLogin(t, r)
	deferredLogin(t, c, srv, before, "secret")
	res := <-done
	if res.err != nil || res.login.User != "u" {
		t.Fatalf("deferred login: %+v, %v", res.login, res.err)
	}

	before = srv.accepted.Load()
	c, done = relayLogin(t, r)
	deferredLogin(t, c, srv, before, "wrong")
	p, err := c.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	if e, perr := protocol.ParseErr(p); perr != nil || e.Code != protocol.ERAccessDenied.Code || !strings.Contains(e.Message, "Access denied for user 'u'") {
		t.Fatalf("wrong password on the deferred path: %q (%v), want the auth server's 1045", p, perr)
	}
	if res := <-done; !errors.Is(res.err, ErrAccessDenied) {
		t.Fatalf("wrong password: err %v, want ErrAccessDenied", res.err)
	}
	if r.PendingHandshakes() != 2 {
		t.Fatalf("deferred logins changed the pending count to %d", r.PendingHandshakes())
	}

	for i, c := range silent {
		c.Close()
		if res := <-silentDone[i]; res.err == nil {
			t.Fatalf("silent client %d logged in", i)
		}
	}
	if n := r.PendingHandshakes(); n != 0 {
		t.Fatalf("%d handshakes still pending after their clients hung up", n)
	}
	waitFor(t, "the auth server to see every relay connection closed", func() bool { return srv.open.Load() == 0 })

	// The slots are free again: the next login takes the direct path.
	c, done = relayLogin(t, r)
	g := clientGreeting(t, c)
	if !bytes.Equal(g.Scramble, srv.scramble) {
		t.Fatalf("after the silent clients left, the greeting has scramble %q, want the auth server's", g.Scramble)
	}
	if err := c.WritePacketFlush(nativeResponse(protocol.BackendCapabilities, g.Scramble, "secret")); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.err != nil {
		t.Fatalf("direct login: %v", res.err)
	}
}

// TestRelayDeferredRefusesClientWithoutPluginAuth: on the deferred path a
// client that cannot take an auth switch gets ERR 1251 naming the reason,
// and no auth-server connection is opened for it.
func TestRelayDeferredRefusesClientWithoutPluginAuth(t *testing.T) {
	srv := startNativeAuthServer(t)
	r := &Relay{Address: srv.addr, DialTimeout: 2 * time.Second, MaxPendingHandshakes: 0}
	c, done := relayLogin(t, r)
	g := clientGreeting(t, c)
	if err := c.WritePacketFlush(nativeResponse(protocol.BackendCapabilities&^protocol.ClientPluginAuth, g.Scramble, "secret")); err != nil {
		t.Fatal(err)
	}
	p, err := c.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	e, perr := protocol.ParseErr(p)
	if perr != nil || e.Code != protocol.ERNotSupportedAuthMode.Code || !strings.Contains(e.Message, "max_pending_handshakes") ||
		!strings.Contains(e.Message, "CLIENT_PLUGIN_AUTH") {
		t.Fatalf("got %q (%v), want ERR 1251 naming max_pending_handshakes and CLIENT_PLUGIN_AUTH", p, perr)
	}
	if res := <-done; !errors.Is(res.err, ErrHandshake) {
		t.Fatalf("err %v, want ErrHandshake", res.err)
	}
	if n := srv.accepted.Load(); n != 0 {
		t.Fatalf("the auth server got %d connections for a refused client", n)
	}
}

// TestRelayDirectPathReleasesOnClientError: a client that sends garbage
// instead of its handshake response frees its pending slot and its
// auth-server connection when the login fails.
func TestRelayDirectPathReleasesOnClientError(t *testing.T) {
	srv := startNativeAuthServer(t)
	r := &Relay{Address: srv.addr, DialTimeout: 2 * time.Second, MaxPendingHandshakes: 4}
	c, done := relayLogin(t, r)
	clientGreeting(t, c)
	if err := c.WritePacketFlush([]byte("garbage")); err != nil {
		t.Fatal(err)
	}
	if p, err := c.ReadPacket(); err != nil || !protocol.IsErr(p) {
		t.Fatalf("garbage handshake response: got %q, %v; want ERR", p, err)
	}
	if res := <-done; !errors.Is(res.err, ErrHandshake) {
		t.Fatalf("err %v, want ErrHandshake", res.err)
	}
	if n := r.PendingHandshakes(); n != 0 {
		t.Fatalf("%d handshakes pending after the failed login", n)
	}
	waitFor(t, "the auth server to see the relay connection closed", func() bool { return srv.open.Load() == 0 })
}
