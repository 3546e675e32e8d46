package auth

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
)

// v2sig is the version 2 signature, written out by hand for the expected
// headers below.
const v2sig = "\r\n\r\n\x00\r\nQUIT\n"

func TestProxyHeader(t *testing.T) {
	ap := netip.MustParseAddrPort
	var none netip.AddrPort
	cases := []struct {
		name     string
		version  int
		src, dst netip.AddrPort
		want     string
	}{
		{"v1 IPv4", 1, ap("127.0.0.2:40001"), ap("127.0.0.1:3306"), "PROXY TCP4 127.0.0.2 127.0.0.1 40001 3306\r\n"},
		{"v1 IPv6", 1, ap("[2001:db8::7]:65535"), ap("[::1]:1"), "PROXY TCP6 2001:db8::7 ::1 65535 1\r\n"},
		{"v1 IPv4 mapped into IPv6", 1, ap("[::ffff:10.1.2.3]:5000"), ap("[::ffff:10.0.0.1]:3306"), "PROXY TCP4 10.1.2.3 10.0.0.1 5000 3306\r\n"},
		{"v1 IPv4 next to IPv6", 1, ap("10.1.2.3:5000"), ap("[2001:db8::1]:3306"), "PROXY TCP6 ::ffff:10.1.2.3 2001:db8::1 5000 3306\r\n"},
		{"v1 zone dropped", 1, ap("[fe80::1%eth0]:5000"), ap("[fe80::2%eth0]:3306"), "PROXY TCP6 fe80::1 fe80::2 5000 3306\r\n"},
		{"v1 unknown client", 1, none, ap("127.0.0.1:3306"), "PROXY UNKNOWN\r\n"},
		{"v1 unknown local", 1, ap("127.0.0.2:1"), none, "PROXY UNKNOWN\r\n"},
		{"v2 IPv4", 2, ap("127.0.0.2:40001"), ap("127.0.0.1:3306"),
			v2sig + "\x21\x11\x00\x0c" + "\x7f\x00\x00\x02" + "\x7f\x00\x00\x01" + "\x9c\x41" + "\x0c\xea"},
		{"v2 IPv6", 2, ap("[2001:db8::7]:258"), ap("[::1]:3306"),
			v2sig + "\x21\x21\x00\x24" +
				"\x20\x01\x0d\xb8\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x07" +
				"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01" +
				"\x01\x02" + "\x0c\xea"},
		{"v2 IPv4 mapped into IPv6", 2, ap("[::ffff:10.1.2.3]:1"), ap("10.0.0.1:2"),
			v2sig + "\x21\x11\x00\x0c" + "\x0a\x01\x02\x03" + "\x0a\x00\x00\x01" + "\x00\x01" + "\x00\x02"},
		{"v2 unknown client", 2, none, ap("127.0.0.1:3306"), v2sig + "\x20\x00\x00\x00"},
	}
	for _, c := range cases {
		if got := string(proxyHeader(c.version, c.src, c.dst)); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

func TestAddrPort(t *testing.T) {
	cases := []struct {
		name string
		addr net.Addr
		want string
	}{
		{"IPv4 in 16 bytes", &net.TCPAddr{IP: net.ParseIP("127.0.0.2"), Port: 5}, "127.0.0.2:5"},
		{"IPv4 in 4 bytes", &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1).To4(), Port: 3306}, "10.0.0.1:3306"},
		{"IPv6", &net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 7}, "[2001:db8::1]:7"},
		{"unix socket", &net.UnixAddr{Name: "/tmp/sluice.sock", Net: "unix"}, "invalid AddrPort"},
		{"no IP", &net.TCPAddr{Port: 7}, "invalid AddrPort"},
		{"nil", nil, "invalid AddrPort"},
	}
	for _, c := range cases {
		if got := AddrPort(c.addr).String(); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
}

// TestRelayConnectSendsProxyHeader checks that the PROXY header is the
// first thing the auth server receives, before it has even greeted, and
// that without ProxyProtocol nothing at all precedes the handshake
// response.
func TestRelayConnectSendsProxyHeader(t *testing.T) {
	src := netip.MustParseAddrPort("192.0.2.10:51000")
	dst := netip.MustParseAddrPort("192.0.2.1:3306")
	for _, version := range []int{0, 1, 2} {
		want := []byte(nil)
		if version != 0 {
			want = proxyHeader(version, src, dst)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan []byte, 1)
		go func() {
			nc, err := ln.Accept()
			if err != nil {
				got <- nil
				return
			}
			defer nc.Close()
			_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
			head := make([]byte, len(want))
			if _, err := io.ReadFull(nc, head); err != nil {
				got <- nil
				return
			}
			g := &protocol.Greeting{ServerVersion: "10.11.0-MariaDB", ConnectionID: 3, Scramble: []byte("ABCDEFGHIJKLMNOPQRST"),
				Capabilities: protocol.BackendCapabilities, Collation: 45, Status: protocol.StatusAutocommit, AuthPlugin: "mysql_native_password"}
			c := protocol.NewConn(nc)
			_ = c.WritePacketFlush(g.Encode())
			// Whatever follows until sluice closes the connection.
			rest, _ := io.ReadAll(nc)
			got <- append(head, rest...)
		}()
		a, b := net.Pipe()
		r := &Relay{Address: ln.Addr().String(), DialTimeout: 2 * time.Second, ProxyProtocol: version}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		upstream, ag, err := r.connect(ctx, protocol.NewConn(a), Server{ClientAddr: src, LocalAddr: dst})
		cancel()
		if err != nil {
			t.Fatalf("version %d: connect: %v", version, err)
		}
		if ag.ConnectionID != 3 {
			t.Errorf("version %d: greeting's connection id %d, want 3", version, ag.ConnectionID)
		}
		closeUpstream(upstream)
		if g := <-got; !bytes.Equal(g, want) {
			t.Errorf("version %d: auth server received %q, want %q", version, g, want)
		}
		a.Close()
		b.Close()
		ln.Close()
	}
}

// TestRelayRefusalBeforeHandshakeResponse: an auth server that greets,
// then refuses the connection with an ERR and closes it with a reset
// without reading further (as MariaDB refuses a PROXY header from outside
// its proxy_protocol_networks) has its ERR reach the client, whether
// sluice's handshake response hit the reset or not.
func TestRelayRefusalBeforeHandshakeResponse(t *testing.T) {
	const msg = "Proxy header is not accepted from 127.0.0.1"
	for _, deferred := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		reset := make(chan struct{})
		go func() {
			defer close(reset)
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
			c := protocol.NewConn(nc)
			g := &protocol.Greeting{ServerVersion: "10.11.0-MariaDB", ConnectionID: 3, Scramble: []byte("ABCDEFGHIJKLMNOPQRST"),
				Capabilities: protocol.BackendCapabilities, Collation: 45, Status: protocol.StatusAutocommit, AuthPlugin: protocol.AuthNativePassword}
			_ = c.WritePacketFlush(g.Encode())
			// Like MariaDB, read a packet header's worth of the PROXY
			// header, refuse it and leave the rest unread: closing then
			// sends a reset.
			if _, err := io.ReadFull(nc, make([]byte, 4)); err != nil {
				_ = nc.Close()
				return
			}
			_ = c.WriteErr(protocol.NewError(1130, msg))
			_ = nc.(*net.TCPConn).SetLinger(0)
			_ = nc.Close()
		}()
		r := &Relay{Address: ln.Addr().String(), DialTimeout: 2 * time.Second, ProxyProtocol: 2, MaxPendingHandshakes: 1}
		if deferred {
			r.MaxPendingHandshakes = 0
		}
		a, b := net.Pipe()
		_ = a.SetDeadline(time.Now().Add(10 * time.Second))
		_ = b.SetDeadline(time.Now().Add(10 * time.Second))
		// The client's answer to the auth server's scramble (the second
		// packet it sends when deferred) leaves only once the auth server
		// has reset the connection, so sluice's write meets the reset.
		gated := &gatedConn{Conn: a, gate: reset, at: 1}
		if deferred {
			gated.at = 2
		}
		clientErr := make(chan error, 1)
		go func() {
			_, err := protocol.ClientHandshake(protocol.NewConn(gated), protocol.ClientConfig{User: "app", Password: "pw",
				Capabilities: protocol.BackendCapabilities})
			clientErr <- err
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, aerr := r.Authenticate(ctx, protocol.NewConn(b), Server{Capabilities: protocol.BackendCapabilities, Collation: 45,
			ClientAddr: netip.MustParseAddrPort("127.0.0.2:5000"), LocalAddr: netip.MustParseAddrPort("127.0.0.1:3306")})
		cancel()
		err = <-clientErr
		var se *protocol.SQLError
		if !errors.As(err, &se) || se.Code != 1130 || se.Message != msg {
			t.Errorf("deferred %v: client got %v (relay: %v), want the auth server's 1130", deferred, err, aerr)
		}
		if aerr == nil {
			t.Errorf("deferred %v: the login succeeded", deferred)
		}
		a.Close()
		b.Close()
		ln.Close()
	}
}

// gatedConn holds its at-th Write until gate is closed.
type gatedConn struct {
	net.Conn
	gate  <-chan struct{}
	at, n int
}

func (c *gatedConn) Write(p []byte) (int, error) {
	if c.n++; c.n == c.at {
		<-c.gate
	}
	return c.Conn.Write(p)
}
