package auth

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
)

// No MySQL 8 server can run on this project's machines, so the
// caching_sha2_password exchanges of a MySQL 8 auth server are played by a
// scripted peer here; the MariaDB auth server paths are tested end to end in
// tests/.

// scriptedAuthServer accepts one connection, sends a caching_sha2 greeting
// and answers the handshake response with the packets in answers, reading
// one client packet after each answer that expects one. It reports what it
// received.
func scriptedAuthServer(t *testing.T, answers [][]byte, expectReply []bool) (string, <-chan [][]byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan [][]byte, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		c := protocol.NewConn(nc)
		c.LenientSeq = true
		g := &protocol.Greeting{ServerVersion: "8.0.40", ConnectionID: 9, Scramble: []byte("ABCDEFGHIJKLMNOPQRST"),
			Capabilities: protocol.BackendCapabilities | protocol.ClientConnectAttrs, Collation: 255,
			Status: protocol.StatusAutocommit, AuthPlugin: protocol.AuthCachingSHA2}
		_ = c.WritePacketFlush(g.Encode())
		var recv [][]byte
		p, err := c.ReadPacket()
		if err != nil {
			got <- recv
			return
		}
		recv = append(recv, append([]byte(nil), p...))
		for i, a := range answers {
			_ = c.WritePacketFlush(a)
			if expectReply[i] {
				p, err := c.ReadPacket()
				if err != nil {
					break
				}
				recv = append(recv, append([]byte(nil), p...))
			}
		}
		_ = c.WritePacketFlush(protocol.AppendOK(nil, protocol.OK{Status: protocol.StatusAutocommit}))
		got <- recv
	}()
	return ln.Addr().String(), got
}

// sha2Case is one caching_sha2_password exchange: the auth server's
// answers after the handshake response, whether each expects a client
// reply, and the client's replies.
type sha2Case struct {
	name        string
	answers     [][]byte
	expectReply []bool
	clientSends [][]byte
}

func TestRelayCachingSHA2FastAndFullAuth(t *testing.T) {
	cases := []sha2Case{
		{"fast path", [][]byte{{0x01, 0x03}}, []bool{false}, nil},
		{"full auth", [][]byte{{0x01, 0x04}}, []bool{true}, [][]byte{[]byte("secret\x00")}},
		// Without TLS the client asks for the server's RSA key (0x02) and
		// answers with the password encrypted under it.
		{"full auth with RSA key exchange", [][]byte{{0x01, 0x04}, append([]byte{0x01}, "-----BEGIN PUBLIC KEY-----\nMFkw...\n-----END PUBLIC KEY-----\n"...)},
			[]bool{true, true}, [][]byte{{0x02}, bytes.Repeat([]byte{0xa5}, 256)}},
	}
	for _, tc := range cases {
		for _, deferred := range []bool{false, true} {
			name := tc.name
			if deferred {
				name += " deferred"
			}
			t.Run(name, func(t *testing.T) { relayCachingSHA2(t, deferred, tc) })
		}
	}
}

// relayCachingSHA2 logs a client in through a Relay against the scripted
// caching_sha2 auth server. With deferred, the Relay has no pending slot:
// the client gets sluice's own scramble, then an auth switch to the auth
// server's, and its answer to that reaches the auth server.
func relayCachingSHA2(t *testing.T, deferred bool, tc sha2Case) {
	attrs := protocol.AppendLenEncString(protocol.AppendLenEncString(nil, []byte("_client_name")), []byte("libtest"))
	authScramble := []byte("ABCDEFGHIJKLMNOPQRST")
	addr, got := scriptedAuthServer(t, tc.answers, tc.expectReply)
	r := &Relay{Address: addr, DialTimeout: 2 * time.Second, MaxPendingHandshakes: 1}
	if deferred {
		r.MaxPendingHandshakes = 0
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	_ = a.SetDeadline(time.Now().Add(10 * time.Second))
	_ = b.SetDeadline(time.Now().Add(10 * time.Second))
	clientDone := make(chan [][]byte, 1)
	go func() { // the application's client library
		c := protocol.NewConn(a)
		c.LenientSeq = true
		var recv [][]byte
		p, err := c.ReadPacket()
		if err != nil {
			clientDone <- nil
			return
		}
		g, _ := protocol.ParseGreeting(p)
		if deferred == bytes.Equal(g.Scramble, authScramble) || deferred != (g.AuthPlugin == protocol.AuthNativePassword) {
			t.Errorf("deferred %v: greeting scramble %q plugin %q", deferred, g.Scramble, g.AuthPlugin)
		}
		hr := &protocol.HandshakeResponse{Capabilities: protocol.BackendCapabilities | protocol.ClientConnectAttrs | protocol.ClientConnectWithDB,
			MaxPacketSize: 1 << 24, Collation: 45, Database: "appdb", Attributes: attrs,
			User: "u", AuthResponse: protocol.CachingSHA2Response(g.Scramble, "secret"), AuthPlugin: protocol.AuthCachingSHA2}
		_ = c.WritePacketFlush(hr.Encode())
		if deferred {
			// The auth switch to the auth server's plugin and
			// scramble comes first.
			p, err := c.ReadPacket()
			if err != nil {
				clientDone <- nil
				return
			}
			plugin, data, err := protocol.ParseAuthSwitch(p)
			if err != nil || plugin != protocol.AuthCachingSHA2 || !bytes.Equal(data, authScramble) {
				t.Errorf("deferred: got %q (%v), want an auth switch to caching_sha2_password over the auth server's scramble", p, err)
			}
			_ = c.WritePacketFlush(protocol.CachingSHA2Response(data, "secret"))
		}
		sent := 0
		for i := range tc.answers {
			p, err := c.ReadPacket()
			if err != nil {
				break
			}
			recv = append(recv, append([]byte(nil), p...))
			if tc.expectReply[i] {
				_ = c.WritePacketFlush(tc.clientSends[sent])
				sent++
			}
		}
		p, err = c.ReadPacket()
		if err == nil {
			recv = append(recv, append([]byte(nil), p...))
		}
		clientDone <- recv
	}()
	login, err := r.Authenticate(context.Background(), protocol.NewConn(b), Server{ConnectionID: 1,
		Capabilities: protocol.BackendCapabilities | protocol.ClientConnectAttrs | protocol.ClientConnectWithDB, Collation: 45})
	if err != nil {
		t.Fatal(err)
	}
	if login.User != "u" || login.Database != "appdb" || !bytes.Equal(login.Attributes, attrs) {
		t.Fatalf("login %+v", login)
	}
	// The proxy sends the final OK itself.
	bc := protocol.NewConn(b)
	seq := 2 + 2*len(tc.answers)
	if deferred {
		seq += 2
	}
	bc.SetSeq(byte(seq))
	_ = bc.WritePacketFlush(protocol.AppendOK(nil, protocol.OK{}))
	clientGot := <-clientDone
	serverGot := <-got
	for i, want := range tc.answers {
		if i >= len(clientGot) || !bytes.Equal(clientGot[i], want) {
			t.Fatalf("client got %q, want the auth server's %q relayed unchanged", clientGot, tc.answers)
		}
	}
	fwd, err := protocol.ParseHandshakeResponse(serverGot[0])
	if err != nil {
		t.Fatal(err)
	}
	// Attributes pass on; the schema does not (the auth server
	// holds users, not the application's schemas).
	if !bytes.Equal(fwd.Attributes, attrs) || fwd.Database != "" || fwd.Capabilities&protocol.ClientConnectWithDB != 0 {
		t.Fatalf("forwarded response: attrs %q db %q caps %#x", fwd.Attributes, fwd.Database, fwd.Capabilities)
	}
	if fwd.AuthPlugin != protocol.AuthCachingSHA2 || !bytes.Equal(fwd.AuthResponse, protocol.CachingSHA2Response(authScramble, "secret")) {
		t.Fatalf("forwarded auth data %x for plugin %q, want the answer over the auth server's scramble", fwd.AuthResponse, fwd.AuthPlugin)
	}
	if r.PendingHandshakes() != 0 {
		t.Fatalf("%d handshakes still counted pending after the login", r.PendingHandshakes())
	}
	if len(serverGot) != 1+len(tc.clientSends) {
		t.Fatalf("auth server got %d packets, want %d", len(serverGot), 1+len(tc.clientSends))
	}
	for i, want := range tc.clientSends {
		if !bytes.Equal(serverGot[1+i], want) {
			t.Fatalf("auth server got %q, want the client's %q", serverGot[1+i], want)
		}
	}
}
