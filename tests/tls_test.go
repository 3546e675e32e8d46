package tests

import (
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/sandbox"
)

var registerTLS sync.Once

// tlsDSNName registers (once) the driver TLS config trusting the sandbox CA.
func tlsDSNName(t *testing.T) string {
	t.Helper()
	registerTLS.Do(func() {
		pem, err := os.ReadFile(env.topo.TLS.CA)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		if err := mysql.RegisterTLSConfig("sandbox", &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}); err != nil {
			t.Fatal(err)
		}
	})
	return "sandbox"
}

// tlsProxy starts a sluice that offers TLS to clients, with the auth and
// backend legs in the given modes.
func tlsProxy(t *testing.T, requireTLS bool, authTLS, backendTLS string) string {
	t.Helper()
	f := env.topo.TLS
	o := sandbox.SluiceOptions{
		ProxyKeys:   []string{fmt.Sprintf("tls_cert = %q", f.Cert), fmt.Sprintf("tls_key = %q", f.Key), fmt.Sprintf("require_tls = %v", requireTLS)},
		AuthKeys:    []string{fmt.Sprintf("tls = %q", authTLS), fmt.Sprintf("tls_ca = %q", f.CA)},
		ClusterKeys: []string{fmt.Sprintf("tls = %q", backendTLS), fmt.Sprintf("tls_ca = %q", f.CA)},
	}
	srv, err := startProxyWith(env.topo, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.Addr().String()
}

func openAt(t *testing.T, addr, password string, mod func(*mysql.Config)) *sql.DB {
	t.Helper()
	d, err := sql.Open("mysql", dsn(addr, env.topo.Opts.AppUser, password, "", mod))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func sslAccepts(t *testing.T, s *sandbox.Server) int64 {
	return globalStatus(t, mustRoot(t, s), "Ssl_accepts")
}

// TestTLSEverywhere: a client on TLS (verified against the CA), the auth
// server leg on TLS, and data connections on TLS.
func TestTLSEverywhere(t *testing.T) {
	addr := tlsProxy(t, false, "required", "required")
	name := tlsDSNName(t)
	authBefore := sslAccepts(t, env.topo.Auth)
	d := openAt(t, addr, env.topo.Opts.AppPassword, func(c *mysql.Config) { c.TLSConfig = name })
	c := conn(t, d)
	ctx := ctxT(t)
	var vname, cipher string
	if err := c.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&vname, &cipher); err != nil {
		t.Fatal(err)
	}
	if cipher == "" {
		t.Fatal("the data connection to the replica is not on TLS")
	}
	if err := c.QueryRowContext(ctx, "/* sluice:master */ SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&vname, &cipher); err != nil || cipher == "" {
		t.Fatalf("the data connection to the master is not on TLS: %q %v", cipher, err)
	}
	if id := serverID(t, ctx, c, ""); !env.replicaIDs[id] {
		t.Fatalf("read on %d, want a replica", id)
	}
	if sslAccepts(t, env.topo.Auth) <= authBefore {
		t.Fatal("the auth server saw no TLS handshake")
	}
	// Wrong password over TLS: the auth server's 1045.
	err := openAt(t, addr, "wrong", func(c *mysql.Config) { c.TLSConfig = name }).PingContext(ctx)
	if mysqlErrNumber(err) != 1045 {
		t.Fatalf("wrong password over TLS: %v, want 1045", err)
	}
}

// TestTLSClientOnlyAuthLegPlain: the client's leg on TLS while the auth
// server leg is plain still authenticates (sequence ids differ per leg).
func TestTLSClientOnlyAuthLegPlain(t *testing.T) {
	addr := tlsProxy(t, false, "off", "off")
	d := openAt(t, addr, env.topo.Opts.AppPassword, func(c *mysql.Config) { c.TLSConfig = tlsDSNName(t) })
	var one int
	if err := d.QueryRowContext(ctxT(t), "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	// And a plain client on the same listener.
	if err := openAt(t, addr, env.topo.Opts.AppPassword, nil).PingContext(ctxT(t)); err != nil {
		t.Fatalf("plain client on a TLS-optional listener: %v", err)
	}
}

func TestTLSRequired(t *testing.T) {
	addr := tlsProxy(t, true, "off", "off")
	err := openAt(t, addr, env.topo.Opts.AppPassword, nil).PingContext(ctxT(t))
	if mysqlErrNumber(err) != 3159 || !strings.Contains(err.Error(), "require_tls") {
		t.Fatalf("plain client with require_tls: %v, want 3159 naming require_tls", err)
	}
	if err := openAt(t, addr, env.topo.Opts.AppPassword, func(c *mysql.Config) { c.TLSConfig = tlsDSNName(t) }).PingContext(ctxT(t)); err != nil {
		t.Fatalf("TLS client with require_tls: %v", err)
	}
	// The mariadb CLI with ssl-mode REQUIRED-like options, verifying the CA.
	host, port, _ := net.SplitHostPort(addr)
	out, errOut, err := runCLI(t, "--no-defaults", "-h"+host, "-P"+port, "-u"+env.topo.Opts.AppUser, "-p"+env.topo.Opts.AppPassword,
		"--ssl", "--ssl-ca="+env.topo.TLS.CA, "--ssl-verify-server-cert", "-N", "-B", "-e", "SHOW SESSION STATUS LIKE 'Ssl_version'")
	if err != nil || out == "" {
		t.Fatalf("mariadb --ssl through sluice: %v %s", err, errOut)
	}
}
