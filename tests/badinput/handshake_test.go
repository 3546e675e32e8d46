package badinput

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
)

// Garbage at every stage of the handshake: before the greeting is read, as
// the handshake response, after an auth switch, in the SSLRequest position
// and as the first command.

func TestGarbageBeforeGreetingIsRead(t *testing.T) {
	checkLeaks(t)
	// Bytes sent before the greeting is read, then EOF: a header with a
	// wrong sequence id gets ERR 1043; a header announcing 16 MiB that never
	// arrive is a clean close.
	for name, garbage := range map[string][]byte{
		"wrong-seq": []byte("\x10\x00\x00\x07garbage-garbage-garbage"),
		"huge":      []byte("\xff\xff\xff\x01garbage-garbage-garbage"),
		"http":      []byte("GET / HTTP/1.1\r\nHost: sluice\r\n\r\n"),
	} {
		t.Run(name, func(t *testing.T) {
			c := rawDial(t, env.addr)
			writeRaw(t, c, garbage)
			_ = c.NetConn().(*net.TCPConn).CloseWrite()
			readGreeting(t, c)
			if name == "huge" {
				requireClosed(t, c)
				return
			}
			readErr(t, c, protocol.ERHandshake.Code, "Bad handshake")
			requireClosed(t, c)
		})
	}
	requireServes(t, env.addr)
}

func TestGarbageAsHandshakeResponse(t *testing.T) {
	checkLeaks(t)
	for name, garbage := range map[string][]byte{
		"http":     []byte("\x00\x00\x00\x00GET / HTTP/1.1\r\nHost: sluice\r\n\r\n"),
		"short":    []byte("\x01\x02\x03"),
		"empty":    {},
		"no-41":    append([]byte{0x05, 0x80, 0x00, 0x00}, make([]byte, 40)...),
		"no-nul":   append(le32(clientCaps), append(make([]byte, 28), "user-without-end"...)...),
		"all-0xff": bytesOf(0xff, 300),
	} {
		t.Run(name, func(t *testing.T) {
			c := rawDial(t, env.addr)
			readGreeting(t, c)
			writeRaw(t, c, packet(1, garbage))
			readErr(t, c, protocol.ERHandshake.Code, "Bad handshake")
			requireClosed(t, c)
		})
	}
	requireServes(t, env.addr)
}

// forceAuthSwitch logs in as the app user offering plugin, which the auth
// server (mysql_native_password) answers with an auth switch request; it
// returns the connection with that request read.
func forceAuthSwitch(t *testing.T, plugin string) *protocol.Conn {
	t.Helper()
	c := rawDial(t, env.addr)
	h := appResponse(readGreeting(t, c))
	h.AuthPlugin = plugin
	h.AuthResponse = bytesOf(0x5a, 32)
	if err := c.WritePacketFlush(h.Encode()); err != nil {
		t.Fatal(err)
	}
	p := readPacket(t, c)
	if !protocol.IsAuthSwitch(p) {
		t.Fatalf("offering %s: want an auth switch request, got % x", plugin, p[:min(len(p), 32)])
	}
	name, _, err := protocol.ParseAuthSwitch(p)
	if err != nil || name != "mysql_native_password" {
		t.Fatalf("auth switch to %q, %v", name, err)
	}
	return c
}

func TestGarbageAfterAuthSwitch(t *testing.T) {
	checkLeaks(t)
	for _, plugin := range []string{"caching_sha2_password", "no_such_plugin\xff"} {
		t.Run(plugin+"/garbage-answer", func(t *testing.T) {
			c := forceAuthSwitch(t, plugin)
			// A well-framed answer that is no scramble: the auth server
			// refuses it.
			writeRaw(t, c, packet(3, []byte("\xfe\xff\x00garbage after the auth switch")))
			requireRefused(t, c)
			requireClosed(t, c)
		})
		t.Run(plugin+"/wrong-seq", func(t *testing.T) {
			c := forceAuthSwitch(t, plugin)
			writeRaw(t, c, packet(9, bytesOf(0x11, 20)))
			readErr(t, c, protocol.ERHandshake.Code, "Bad handshake", "out of order")
			requireClosed(t, c)
		})
		t.Run(plugin+"/unframed-then-eof", func(t *testing.T) {
			c := forceAuthSwitch(t, plugin)
			writeRaw(t, c, []byte{0x40, 0, 0, 3, 'x', 'y'})
			_ = c.NetConn().(*net.TCPConn).CloseWrite()
			requireClosed(t, c)
		})
	}
	requireServes(t, env.addr)
}

func TestGarbageInSSLRequestPosition(t *testing.T) {
	checkLeaks(t)
	// sluice without TLS: an SSLRequest-shaped packet is refused by name.
	t.Run("ssl-request-without-tls", func(t *testing.T) {
		c := rawDial(t, env.addr)
		readGreeting(t, c)
		req := append(le32(clientCaps|protocol.ClientSSL), bytesOf(0xee, 28)...)
		writeRaw(t, c, packet(1, req))
		readErr(t, c, protocol.ERHandshake.Code, "Bad handshake", "TLS")
		requireClosed(t, c)
	})
	// A TLS ClientHello where the SSLRequest belongs: its record header
	// reads as a packet with a wrong sequence id.
	t.Run("client-hello-instead", func(t *testing.T) {
		c := rawDial(t, env.addr)
		readGreeting(t, c)
		writeRaw(t, c, append([]byte{0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03, 0x03}, bytesOf(0x42, 160)...))
		readErr(t, c, protocol.ERHandshake.Code, "Bad handshake", "out of order")
		requireClosed(t, c)
	})
	// sluice with TLS: garbage after the SSLRequest, where the TLS
	// handshake should start, closes the connection.
	tf := env.topo.TLS
	srv, err := startProxy(env.topo, fmt.Sprintf("tls_cert = %q", tf.Cert), fmt.Sprintf("tls_key = %q", tf.Key),
		fmt.Sprintf(`handshake_timeout = "%s"`, handshakeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	addr := srv.Addr().String()
	for name, garbage := range map[string][]byte{
		"garbage-then-eof":   []byte("this is not a TLS ClientHello\r\n"),
		"tls-alert-then-eof": {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28},
	} {
		t.Run(name, func(t *testing.T) {
			c := rawDial(t, addr)
			g := readGreeting(t, c)
			if g.Capabilities&protocol.ClientSSL == 0 {
				t.Fatal("sluice with tls_cert does not offer TLS")
			}
			writeRaw(t, c, packet(1, protocol.SSLRequest(clientCaps|protocol.ClientSSL, 1<<24, 45)))
			writeRaw(t, c, garbage)
			_ = c.NetConn().(*net.TCPConn).CloseWrite()
			requireClosed(t, c)
		})
	}
	t.Run("ssl-request-then-silence", func(t *testing.T) {
		c := rawDial(t, addr)
		readGreeting(t, c)
		writeRaw(t, c, packet(1, protocol.SSLRequest(clientCaps|protocol.ClientSSL, 1<<24, 45)))
		_ = c.SetDeadline(time.Now().Add(handshakeTimeout + 10*time.Second))
		requireClosed(t, c)
	})
	requireServes(t, addr)
	requireServes(t, env.addr)
}

func TestGarbageAsFirstCommand(t *testing.T) {
	checkLeaks(t)
	c := rawLogin(t, env.addr)
	for _, tc := range []struct {
		name string
		cmd  []byte
		code uint16
		word string
	}{
		{"unknown-command", []byte{0x99, 1, 2, 3}, protocol.ERUnknownCommand.Code, "0x99"},
		{"http", []byte("GET / HTTP/1.1\r\n\r\n"), protocol.ERUnknownCommand.Code, ""},
		{"all-0xff", bytesOf(0xff, 64), protocol.ERUnknownCommand.Code, ""},
		{"query-of-garbage", append([]byte{protocol.ComQuery}, "\x01\x02 garbage \xfe\xff"...), 1064, ""},
		{"execute-unknown-stmt", append([]byte{protocol.ComStmtExecute}, bytesOf(0xab, 30)...), protocol.ERUnknownStmtHandler.Code, ""},
		{"execute-truncated", []byte{protocol.ComStmtExecute, 1}, protocol.ERUnknownStmtHandler.Code, "COM_STMT_EXECUTE"},
		{"init-db-garbage", append([]byte{protocol.ComInitDB}, "\xff\xfe\x00"...), 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.ResetSeq()
			if err := c.WritePacketFlush(tc.cmd); err != nil {
				t.Fatal(err)
			}
			p := readPacket(t, c)
			if !protocol.IsErr(p) {
				t.Fatalf("want ERR, got % x", p[:min(len(p), 16)])
			}
			if tc.code != 0 {
				e := requireErr(t, p, tc.code)
				if tc.word != "" && !containsFold(e.Message, tc.word) {
					t.Fatalf("ERR %d %q does not name %q", e.Code, e.Message, tc.word)
				}
			}
			requireSelect1(t, c)
		})
	}
	requireServes(t, env.addr)
}

// requireRefused reads the auth server's refusal of a login, relayed by
// sluice: ERR 1045 (access denied) or 1043 (bad handshake).
func requireRefused(t testing.TB, c *protocol.Conn) {
	t.Helper()
	p := readPacket(t, c)
	e, err := protocol.ParseErr(p)
	if err != nil {
		t.Fatalf("want ERR 1045 or 1043, got % x", p[:min(len(p), 32)])
	}
	if e.Code != protocol.ERAccessDenied.Code && e.Code != protocol.ERHandshake.Code {
		t.Fatalf("got ERR %d %q, want 1045 or 1043", e.Code, e.Message)
	}
}

// requireSelect1 requires the raw session c to answer SELECT 1.
func requireSelect1(t testing.TB, c *protocol.Conn) {
	t.Helper()
	c.ResetSeq()
	c.LenientSeq = false
	if err := c.WritePacketFlush(append([]byte{protocol.ComQuery}, "SELECT 1"...)); err != nil {
		t.Fatal(err)
	}
	if _, err := protocol.ReadResponse(c, protocol.ResponseResult); err != nil {
		t.Fatalf("session unusable afterwards: SELECT 1: %v", err)
	}
}

// Packets with wrong sequence ids.

func TestWrongSequenceIDHandshakeResponse(t *testing.T) {
	checkLeaks(t)
	for _, seq := range []byte{0, 2, 255} {
		t.Run(fmt.Sprint(seq), func(t *testing.T) {
			c := rawDial(t, env.addr)
			h := appResponse(readGreeting(t, c))
			writeRaw(t, c, packet(seq, h.Encode()))
			readErr(t, c, protocol.ERHandshake.Code, "Bad handshake", "out of order")
			requireClosed(t, c)
		})
	}
	requireServes(t, env.addr)
}

func TestWrongSequenceIDCommand(t *testing.T) {
	checkLeaks(t)
	c := rawLogin(t, env.addr)
	writeRaw(t, c, packet(3, append([]byte{protocol.ComQuery}, "SELECT 1"...)))
	readErr(t, c, protocol.ERNetPacketsOutOfOrder.Code, "out of order")
	requireClosed(t, c)
	requireServes(t, env.addr)
}

func le32(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }

func bytesOf(b byte, n int) []byte {
	s := make([]byte, n)
	for i := range s {
		s[i] = b
	}
	return s
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
