package tests

import (
	"context"
	"database/sql"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// fromLoopback2 is a go-sql-driver network name that dials from 127.0.0.2
// (the whole of 127/8 is loopback on Linux): a second client address.
const fromLoopback2 = "tcp-from-127.0.0.2"

var registerLoopback2 sync.Once

func dialFromLoopback2() {
	registerLoopback2.Do(func() {
		mysql.RegisterDialContext(fromLoopback2, func(ctx context.Context, addr string) (net.Conn, error) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
			return d.DialContext(ctx, "tcp", addr)
		})
	})
}

// backoffSluice starts a sluice with an admin password and the login backoff
// settings in proxyKeys.
func backoffSluice(t *testing.T, proxyKeys ...string) *server.Server {
	t.Helper()
	o := sandbox.SluiceOptions{Listen: "127.0.0.1:0",
		ProxyKeys: append([]string{`metrics_listen = ""`, `admin_listen = "127.0.0.1:0"`}, proxyKeys...)}
	text := env.topo.SluiceConfigWith(o) + "\n[admin]\npassword = \"" + adminPassword + "\"\n"
	cfg, err := conf.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// loginOnce opens one connection to addr as user with password (from
// 127.0.0.2 when net is fromLoopback2) and returns the login's error.
func loginOnce(t *testing.T, addr, user, password, network string) error {
	t.Helper()
	d, err := sql.Open("mysql", dsn(addr, user, password, "", func(c *mysql.Config) {
		if network != "" {
			c.Net = network
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := d.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.PingContext(ctx)
}

// TestLoginBackoff: after login_failures_before_backoff wrong passwords
// from 127.0.0.1, the next login from there, even with the right password,
// is refused with ERR 1129 naming the address and the wait, on the client
// port and on the admin port alike, until the backoff has passed; then the
// right password works again. Logins from 127.0.0.2 are unaffected
// meanwhile.
func TestLoginBackoff(t *testing.T) {
	dialFromLoopback2()
	// Long enough that the checks made during the backoff (six logins)
	// finish inside it on a loaded machine under -race.
	const backoff = 6 * time.Second
	srv := backoffSluice(t, "login_failures_before_backoff = 3", `login_backoff = "6s"`, `login_backoff_max = "24s"`)
	addr, admin := srv.Addr().String(), srv.AdminAddr().String()
	o := env.topo.Opts

	var lastFailure time.Time
	for i := range 3 {
		lastFailure = time.Now()
		if err := loginOnce(t, addr, o.AppUser, "wrong", ""); mysqlErrNumber(err) != 1045 {
			t.Fatalf("wrong password %d: %v, want 1045", i+1, err)
		}
	}
	refused := func(err error, where string) {
		t.Helper()
		me, ok := err.(*mysql.MySQLError)
		if !ok || me.Number != protocol.ERHostIsBlocked.Code || !strings.Contains(me.Message, "too many failed logins from 127.0.0.1") ||
			!strings.Contains(me.Message, "retry in ") {
			t.Fatalf("%s during the backoff: %v, want ERR 1129 naming 127.0.0.1 and the wait", where, err)
		}
	}
	refused(loginOnce(t, addr, o.AppUser, o.AppPassword, ""), "right password on the client port")
	refused(loginOnce(t, admin, "admin", adminPassword, ""), "right password on the admin port")
	if err := loginOnce(t, addr, o.AppUser, o.AppPassword, fromLoopback2); err != nil {
		t.Fatalf("login from 127.0.0.2 during 127.0.0.1's backoff: %v", err)
	}
	if err := loginOnce(t, admin, "admin", adminPassword, fromLoopback2); err != nil {
		t.Fatalf("admin login from 127.0.0.2 during 127.0.0.1's backoff: %v", err)
	}

	// Refused until the backoff has passed, then served.
	deadline := time.Now().Add(backoff + 20*time.Second)
	for {
		err := loginOnce(t, addr, o.AppUser, o.AppPassword, "")
		if err == nil {
			break
		}
		refused(err, "right password")
		if time.Now().After(deadline) {
			t.Fatalf("still refused %v after the last failure", time.Since(lastFailure))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if waited := time.Since(lastFailure); waited < backoff {
		t.Fatalf("served %v after the last failure, before the %v backoff ended", waited, backoff)
	}
	// The success forgot the address: failures count from one again.
	if err := loginOnce(t, addr, o.AppUser, "wrong", ""); mysqlErrNumber(err) != 1045 {
		t.Fatalf("wrong password after the backoff: %v, want 1045", err)
	}
	if err := loginOnce(t, addr, o.AppUser, o.AppPassword, ""); err != nil {
		t.Fatalf("right password after one new failure: %v", err)
	}
}

// TestLoginBackoffAdminFailures: wrong admin passwords count as well, and
// put the address in backoff on the client port too.
func TestLoginBackoffAdminFailures(t *testing.T) {
	srv := backoffSluice(t, "login_failures_before_backoff = 2", `login_backoff = "30s"`, `login_backoff_max = "30s"`)
	for i := range 2 {
		if err := loginOnce(t, srv.AdminAddr().String(), "admin", "wrong", ""); mysqlErrNumber(err) != 1045 {
			t.Fatalf("wrong admin password %d: %v, want 1045", i+1, err)
		}
	}
	if err := loginOnce(t, srv.AdminAddr().String(), "admin", adminPassword, ""); mysqlErrNumber(err) != protocol.ERHostIsBlocked.Code {
		t.Fatalf("admin login in backoff: %v, want 1129", err)
	}
	if err := loginOnce(t, srv.Addr().String(), env.topo.Opts.AppUser, env.topo.Opts.AppPassword, ""); mysqlErrNumber(err) != protocol.ERHostIsBlocked.Code {
		t.Fatalf("client login in backoff: %v, want 1129", err)
	}
	// The mariadb client reports the refusal too.
	_, errOut, err := adminCLI(t, srv, adminPassword, "SHOW VERSION")
	if err == nil || !strings.Contains(errOut, "1129") || !strings.Contains(errOut, "too many failed logins") {
		t.Fatalf("mariadb client in backoff: %v: %s", err, errOut)
	}
}

// TestLoginBackoffOff: login_failures_before_backoff = 0 never refuses.
func TestLoginBackoffOff(t *testing.T) {
	srv := backoffSluice(t, "login_failures_before_backoff = 0")
	for i := range 8 {
		if err := loginOnce(t, srv.Addr().String(), env.topo.Opts.AppUser, "wrong", ""); mysqlErrNumber(err) != 1045 {
			t.Fatalf("wrong password %d: %v, want 1045", i+1, err)
		}
	}
	if err := loginOnce(t, srv.Addr().String(), env.topo.Opts.AppUser, env.topo.Opts.AppPassword, ""); err != nil {
		t.Fatalf("right password with the backoff off: %v", err)
	}
}
