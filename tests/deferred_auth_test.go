package tests

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/sandbox"
)

// deferredProxy starts a sluice whose every login is deferred
// (auth.max_pending_handshakes = 0), offering TLS to clients and using TLS
// towards the auth server.
func deferredProxy(t *testing.T) string {
	t.Helper()
	f := env.topo.TLS
	srv, err := startProxyWith(env.topo, sandbox.SluiceOptions{
		ProxyKeys: []string{fmt.Sprintf("tls_cert = %q", f.Cert), fmt.Sprintf("tls_key = %q", f.Key)},
		AuthKeys:  []string{"max_pending_handshakes = 0", `tls = "required"`, fmt.Sprintf("tls_ca = %q", f.CA)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.Addr().String()
}

// TestDeferredLogin: with every login deferred (sluice greets with its own
// scramble and asks the client, by an auth switch, to answer the auth
// server's), real clients log in, query, fail with the auth server's 1045 on
// a wrong password, log in over TLS, and change user afterwards.
func TestDeferredLogin(t *testing.T) {
	addr := deferredProxy(t)
	pw := env.topo.Opts.AppPassword
	host, port, _ := net.SplitHostPort(addr)

	t.Run("raw client sees sluice's scramble then an auth switch", func(t *testing.T) {
		for _, plugin := range []string{protocol.AuthNativePassword, protocol.AuthCachingSHA2} {
			c := rawDial(t, addr)
			p, err := c.ReadPacket()
			if err != nil {
				t.Fatal(err)
			}
			g, err := protocol.ParseGreeting(p)
			if err != nil || g.AuthPlugin != protocol.AuthNativePassword || len(g.Scramble) != 20 {
				t.Fatalf("greeting %+v %v", g, err)
			}
			first := protocol.NativePasswordResponse(g.Scramble, pw)
			if plugin == protocol.AuthCachingSHA2 { // a MySQL 8 client library
				first = protocol.CachingSHA2Response(g.Scramble, pw)
			}
			hr := &protocol.HandshakeResponse{Capabilities: protocol.BackendCapabilities, MaxPacketSize: 1 << 24, Collation: 45,
				User: env.topo.Opts.AppUser, AuthResponse: first, AuthPlugin: plugin}
			if err := c.WritePacketFlush(hr.Encode()); err != nil {
				t.Fatal(err)
			}
			if p, err = c.ReadPacket(); err != nil {
				t.Fatal(err)
			}
			name, scramble, err := protocol.ParseAuthSwitch(p)
			if err != nil || name != protocol.AuthNativePassword || len(scramble) != 20 || bytes.Equal(scramble, g.Scramble) {
				t.Fatalf("%s: got % x, want an auth switch to the auth server's mysql_native_password scramble", plugin, p[:min(len(p), 24)])
			}
			if err := c.WritePacketFlush(protocol.NativePasswordResponse(scramble, pw)); err != nil {
				t.Fatal(err)
			}
			if p, err = c.ReadPacket(); err != nil || !protocol.IsOK(p) {
				t.Fatalf("%s: after the switch: % x %v", plugin, p, err)
			}
			if got := rawValue(t, c, "SELECT 1"); got != "1" {
				t.Fatalf("SELECT 1 = %q", got)
			}
		}
	})

	t.Run("go-sql-driver", func(t *testing.T) {
		d := openAt(t, addr, pw, nil)
		c := conn(t, d)
		if id := serverID(t, ctxT(t), c, ""); !env.replicaIDs[id] {
			t.Fatalf("read on %d, want a replica", id)
		}
		err := openAt(t, addr, "wrong", nil).PingContext(ctxT(t))
		if mysqlErrNumber(err) != 1045 {
			t.Fatalf("wrong password: %v, want the auth server's 1045", err)
		}
	})

	t.Run("go-sql-driver over TLS", func(t *testing.T) {
		name := tlsDSNName(t)
		authBefore := sslAccepts(t, env.topo.Auth)
		d := openAt(t, addr, pw, func(c *mysql.Config) { c.TLSConfig = name; c.DBName = "sluice_test" })
		var db string
		if err := d.QueryRowContext(ctxT(t), "SELECT DATABASE()").Scan(&db); err != nil || db != "sluice_test" {
			t.Fatalf("SELECT DATABASE() over TLS = %q, %v", db, err)
		}
		if sslAccepts(t, env.topo.Auth) <= authBefore {
			t.Fatal("the auth server saw no TLS handshake")
		}
		err := openAt(t, addr, "wrong", func(c *mysql.Config) { c.TLSConfig = name }).PingContext(ctxT(t))
		if mysqlErrNumber(err) != 1045 {
			t.Fatalf("wrong password over TLS: %v, want 1045", err)
		}
	})

	t.Run("mariadb CLI", func(t *testing.T) {
		base := []string{"--no-defaults", "-h" + host, "-P" + port, "-u" + env.topo.Opts.AppUser, "-N", "-B"}
		out, errOut, err := runCLI(t, append(base, "--skip-ssl", "-p"+pw, "-e", "SELECT 40 + 2")...)
		if err != nil || out != "42" {
			t.Fatalf("mariadb: %q %v %s", out, err, errOut)
		}
		_, errOut, err = runCLI(t, append(base, "--skip-ssl", "-pwrong", "-e", "SELECT 1")...)
		if err == nil || !strings.Contains(errOut, "ERROR 1045") {
			t.Fatalf("wrong password: err=%v stderr=%q, want ERROR 1045", err, errOut)
		}
		out, errOut, err = runCLI(t, append(base, "-p"+pw, "--ssl", "--ssl-ca="+env.topo.TLS.CA, "--ssl-verify-server-cert",
			"-e", "SELECT 6 * 7")...)
		if err != nil || out != "42" {
			t.Fatalf("mariadb --ssl: %q %v %s", out, err, errOut)
		}
	})

	t.Run("COM_CHANGE_USER afterwards", func(t *testing.T) {
		c := rawLogin(t, addr)
		if p := rawChangeUser(t, c, env.topo.Opts.AppUser, pw, "sluice_test"); !protocol.IsOK(p) {
			e, _ := protocol.ParseErr(p)
			t.Fatalf("change user: % x %v", p, e)
		}
		if got := rawValue(t, c, "SELECT DATABASE()"); got != "sluice_test" {
			t.Fatalf("schema after change user = %q", got)
		}
	})

	t.Run("client without CLIENT_PLUGIN_AUTH gets 1251", func(t *testing.T) {
		c := rawDial(t, addr)
		p, err := c.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		g, err := protocol.ParseGreeting(p)
		if err != nil {
			t.Fatal(err)
		}
		hr := &protocol.HandshakeResponse{Capabilities: protocol.BackendCapabilities &^ protocol.ClientPluginAuth, MaxPacketSize: 1 << 24,
			Collation: 45, User: env.topo.Opts.AppUser, AuthResponse: protocol.NativePasswordResponse(g.Scramble, pw)}
		if err := c.WritePacketFlush(hr.Encode()); err != nil {
			t.Fatal(err)
		}
		if e := readErr(t, c, protocol.ERNotSupportedAuthMode.Code); !strings.Contains(e.Message, "max_pending_handshakes") {
			t.Fatalf("1251 message %q does not name auth.max_pending_handshakes", e.Message)
		}
		requireClosed(t, c)
		requireServes(t, addr)
	})
}
