package tests

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/sandbox"
)

// ipBindAddressNoPort is Linux's IP_BIND_ADDRESS_NO_PORT socket option.
const ipBindAddressNoPort = 24

// loopbackDialer dials from the loopback address local, as a client on that
// host would. The local port is picked at connect, as for a socket that
// was not bound, not at bind: a port picked at bind may not be one that
// any connection holds in TIME_WAIT, and a benchmark's thousands of logins
// would soon make that search the slowest part of a login.
func loopbackDialer(local string) *net.Dialer {
	return &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)},
		Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, ipBindAddressNoPort, 1)
			}); err != nil {
				return err
			}
			return serr
		}}
}

// loginFrom logs in to sluice at addr as user from the loopback address
// local and pings, returning the driver's error.
func loginFrom(ctx context.Context, addr, local, user, password string) error {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr = user, password, "tcp", addr
	c.Timeout, c.ReadTimeout, c.WriteTimeout = 5*time.Second, 30*time.Second, 30*time.Second
	d := loopbackDialer(local)
	c.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
	conn, err := mysql.NewConnector(c)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	return db.PingContext(ctx)
}

// wantDenied requires err to be the auth server's 1045 for user@host.
func wantDenied(t *testing.T, err error, what, user, host string) {
	t.Helper()
	want := fmt.Sprintf("Access denied for user '%s'@'%s'", user, host)
	if mysqlErrNumber(err) != 1045 || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: err = %v, want 1045 %q", what, err, want)
	}
}

// TestProxyProtocolHostAccounts: with auth.proxy_protocol, the auth server
// (MariaDB with proxy_protocol_networks naming sluice's address) sees each
// client's own address, so two accounts 'pp'@'127.0.0.2' and
// 'pp'@'127.0.0.3' that differ only by host each let in only the client on
// their host, at login (direct and deferred) and at COM_CHANGE_USER, with
// PROXY header versions 1 and 2, with and without TLS to the auth server.
// Without the header both are refused: the auth server sees sluice's
// 127.0.0.1. RELOAD CONFIG switches it on. An auth server that does not
// list sluice refuses the header.
func TestProxyProtocolHostAccounts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topo, err := sandbox.Start(ctx, sandbox.Options{Replicas: -1, AuthProxyProtocolNetworks: "127.0.0.1/32", Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer topo.Stop()
	if err := topo.Auth.Exec(ctx,
		"CREATE USER 'pp'@'127.0.0.2' IDENTIFIED BY 'two'",
		"CREATE USER 'pp'@'127.0.0.3' IDENTIFIED BY 'three'"); err != nil {
		t.Fatal(err)
	}
	hosts := []struct{ addr, password string }{{"127.0.0.2", "two"}, {"127.0.0.3", "three"}}

	for _, c := range []struct {
		version       int
		deferred, tls bool
	}{{1, false, false}, {2, false, false}, {2, true, false}, {1, false, true}, {2, true, true}} {
		name := fmt.Sprintf("version %d", c.version)
		keys := []string{"proxy_protocol = true", fmt.Sprintf("proxy_protocol_version = %d", c.version)}
		if c.deferred {
			// Every login deferred: the auth server is reached after the
			// client's handshake response.
			name += " deferred"
			keys = append(keys, "max_pending_handshakes = 0")
		}
		if c.tls {
			// The header comes before the switch to TLS.
			name += " tls"
			keys = append(keys, `tls = "required"`)
		}
		t.Run(name, func(t *testing.T) {
			srv, err := startProxyWith(topo, sandbox.SluiceOptions{AuthKeys: keys})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			addr := srv.Addr().String()
			for i, h := range hosts {
				other := hosts[1-i]
				if err := loginFrom(ctx, addr, h.addr, "pp", h.password); err != nil {
					t.Errorf("from %s with its account's password: %v", h.addr, err)
				}
				wantDenied(t, loginFrom(ctx, addr, h.addr, "pp", other.password),
					"from "+h.addr+" with the password of 'pp'@'"+other.addr+"'", "pp", h.addr)
				changeUserFrom(t, addr, h.addr, other.addr, h.password, other.password)
			}
		})
	}

	t.Run("no header", func(t *testing.T) {
		srv, err := startProxyWith(topo, sandbox.SluiceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		for _, h := range hosts {
			wantDenied(t, loginFrom(ctx, srv.Addr().String(), h.addr, "pp", h.password),
				"from "+h.addr+" without the PROXY header", "pp", "127.0.0.1")
		}
	})

	t.Run("reload", func(t *testing.T) {
		o := sandbox.SluiceOptions{Listen: "127.0.0.1:0", ProxyKeys: []string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = ""`}}
		srv, path := reloadSluice(t, topo.SluiceConfigWith(o))
		wantDenied(t, loginFrom(ctx, srv.Addr().String(), "127.0.0.2", "pp", "two"), "before the reload", "pp", "127.0.0.1")
		o.AuthKeys = []string{"proxy_protocol = true"}
		writeConfig(t, path, topo.SluiceConfigWith(o))
		changes, err := srv.Reload()
		if err != nil || !strings.Contains(strings.Join(changes, "\n"), "auth.proxy_protocol") {
			t.Fatalf("Reload = %q, %v; want auth.proxy_protocol changed", changes, err)
		}
		if err := loginFrom(ctx, srv.Addr().String(), "127.0.0.2", "pp", "two"); err != nil {
			t.Errorf("after the reload switched proxy_protocol on: %v", err)
		}
	})

	t.Run("auth server without proxy_protocol_networks", func(t *testing.T) {
		for _, version := range []int{1, 2} {
			srv, err := startProxyWith(env.topo, sandbox.SluiceOptions{AuthKeys: []string{
				"proxy_protocol = true", fmt.Sprintf("proxy_protocol_version = %d", version)}})
			if err != nil {
				t.Fatal(err)
			}
			o := env.topo.Opts
			err = loginFrom(ctx, srv.Addr().String(), "127.0.0.2", o.AppUser, o.AppPassword)
			srv.Close()
			if mysqlErrNumber(err) != 1130 || !strings.Contains(err.Error(), "Proxy header is not accepted from 127.0.0.1") {
				t.Errorf("version %d: err = %v, want the auth server's 1130 refusing the header", version, err)
			}
		}
	})
}

// changeUserFrom logs in twice from the loopback address local as 'pp'
// with password and sends COM_CHANGE_USER to 'pp' on each session. The
// auth server, reached on a new connection that carries the PROXY header
// too, refuses 'pp'@local with otherPassword (the account of otherHost) and
// accepts password.
func changeUserFrom(t *testing.T, addr, local, otherHost, password, otherPassword string) {
	t.Helper()
	for _, c := range []struct {
		password string
		ok       bool
	}{{otherPassword, false}, {password, true}} {
		nc, err := loopbackDialer(local).Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
		pc := protocol.NewConn(nc)
		if _, err := protocol.ClientHandshake(pc, protocol.ClientConfig{User: "pp", Password: password,
			Capabilities: protocol.BackendCapabilities}); err != nil {
			nc.Close()
			t.Fatalf("login from %s: %v", local, err)
		}
		p := rawChangeUser(t, pc, "pp", c.password, "")
		nc.Close()
		switch {
		case c.ok && !protocol.IsOK(p):
			e, _ := protocol.ParseErr(p)
			t.Errorf("COM_CHANGE_USER from %s with its account's password: %v", local, e)
		case !c.ok:
			e, err := protocol.ParseErr(p)
			want := fmt.Sprintf("Access denied for user 'pp'@'%s'", local)
			if err != nil || e.Code != 1045 || !strings.Contains(e.Message, want) {
				t.Errorf("COM_CHANGE_USER from %s with the password of 'pp'@'%s': %v %v, want 1045 %q", local, otherHost, e, err, want)
			}
		}
	}
}

// BenchmarkLoginProxyProtocol measures a login through sluice from
// 127.0.0.2 against an auth server with proxy_protocol_networks, without
// and with the PROXY header (versions 1 and 2): the header is written
// before the greeting is read and adds no round trip. Run it with
// go test -run '^$' -bench BenchmarkLoginProxyProtocol ./tests.
func BenchmarkLoginProxyProtocol(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topo, err := sandbox.Start(ctx, sandbox.Options{Replicas: -1, AuthProxyProtocolNetworks: "127.0.0.1/32"})
	if err != nil {
		b.Fatal(err)
	}
	defer topo.Stop()
	// 'pp'@'%' matches with and without the header.
	if err := topo.Auth.Exec(ctx, "CREATE USER 'pp'@'%' IDENTIFIED BY 'pw'"); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		keys []string
	}{
		{"off", nil},
		{"v1", []string{"proxy_protocol = true", "proxy_protocol_version = 1"}},
		{"v2", []string{"proxy_protocol = true", "proxy_protocol_version = 2"}},
	} {
		srv, err := startProxyWith(topo, sandbox.SluiceOptions{AuthKeys: c.keys})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := loginFrom(ctx, srv.Addr().String(), "127.0.0.2", "pp", "pw"); err != nil {
					b.Fatal(err)
				}
			}
		})
		srv.Close()
	}
}
