package tests

import (
	"context"
	"database/sql"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
)

// nohashStatements are what every account runs through sluice in
// TestNoPasswordHashInOutput: its own grants and identity, reads and
// writes it may or may not do, statements the backends refuse, sluice's
// own answers, and a syntax error. None changes anything that stays.
var nohashStatements = []string{
	"SHOW GRANTS",
	"SHOW GRANTS FOR CURRENT_USER()",
	"SELECT CURRENT_USER(), USER(), SESSION_USER(), CURRENT_ROLE()",
	"SELECT id FROM nohash.t",
	"SELECT secret FROM nohash.t",
	"INSERT INTO nohash.t VALUES (1, 'dup')",
	"UPDATE nohash.t SET secret = secret WHERE id = 0",
	"DELETE FROM nohash.t WHERE id = 0",
	"CALL nohash.p()",
	"DROP TABLE nohash.nope",
	"SELECT * FROM nohash.missing",
	"SELEKT 1",
	"SET GLOBAL max_connections = @@global.max_connections",
	"SHOW PROCESSLIST",
	"KILL 4000000000",
	"SHOW GRANTS FOR 'nh_db'@'%'",
	"USE mysql",
	"SELECT 1",
}

// nohashTraffic drives every path of sluice that meets an account's
// grants: logins (with one session per account left open, for SHOW
// SESSIONS and for the reads of grants that expire), the statements above
// as text and prepared, SET ROLE, refused logins, a login to a schema the
// account may not use, COM_CHANGE_USER (accepted and refused), and a GRANT
// and a REVOKE on the auth server that reach an open session, which makes
// sluice read the grants again as its service account. It returns the
// open sessions.
func nohashTraffic(t *testing.T, ctx context.Context, p *hashSluice, taps *nohashTaps, accts []*nohashAccount) map[string]*sql.Conn {
	t.Helper()
	pollUntil(t, "a login through sluice", func() bool {
		d, err := sql.Open("mysql", dsn(p.addr, accts[0].user, accts[0].password, "", nil))
		if err != nil {
			return false
		}
		defer d.Close()
		return d.PingContext(ctx) == nil
	})
	sessions := map[string]*sql.Conn{}
	var ok *nohashAccount
	for _, a := range accts {
		if !a.login {
			continue
		}
		ok = a
		d := openTapped(t, "nohash-data", p.addr, a.user, a.password, "")
		c := conn(t, d)
		sessions[a.user] = c
		for _, q := range nohashStatements {
			_ = drain(t, c, q, false)
		}
		// The binary protocol: COM_STMT_PREPARE and EXECUTE.
		for _, q := range []string{"SELECT id FROM nohash.t WHERE id = ?", "SELECT secret FROM nohash.t WHERE id = ?", "SHOW GRANTS"} {
			rows, err := c.QueryContext(ctx, q, 1)
			if err == nil {
				for rows.Next() {
				}
				rows.Close()
			}
		}
		if got := value(t, c, "SELECT CURRENT_USER()"); got != a.user+"@"+a.host {
			t.Errorf("CURRENT_USER() of %s through sluice: %q", a.name(), got)
		}
	}
	role := sessions["nh_role"]
	for _, q := range []string{"SET ROLE nh_writer", "SHOW GRANTS", "INSERT INTO nohash.t VALUES (2, 'dup')", "SET ROLE NONE", "SHOW GRANTS", "SET ROLE nh_nosuch", "SET ROLE DEFAULT"} {
		_ = drain(t, role, q, false)
	}

	// Refused logins, each followed by one that succeeds, so the login
	// backoff does not start.
	for _, a := range accts {
		refusedLogin(t, ctx, p.addr, a.user, a.password+"-wrong", "")
		okLogin(t, ctx, p.addr, ok)
	}
	refusedLogin(t, ctx, p.addr, "nh_host", "nh-hostany-Xe1-pw", "") // the '%' account's password
	okLogin(t, ctx, p.addr, ok)
	refusedLogin(t, ctx, p.addr, "nh_ghost", "nh-ghost-pw", "")
	okLogin(t, ctx, p.addr, ok)
	refusedLogin(t, ctx, p.addr, "nh_none", "nh-none-Kq3-pw", "nohash") // 1044
	okLogin(t, ctx, p.addr, ok)

	nohashChangeUser(t, ctx, taps.data, p.addr, accts)
	okLogin(t, ctx, p.addr, ok)

	// A GRANT and a REVOKE reach the open session within grants_ttl:
	// sluice reads SHOW GRANTS FOR as its service account.
	root := mustRoot(t, env.topo.Auth)
	none := sessions["nh_none"]
	mustExec(t, root, "GRANT SELECT ON nohash.* TO 'nh_none'@'%'")
	pollUntil(t, "the GRANT to reach nh_none's session", func() bool {
		return drain(t, none, "SELECT COUNT(*) FROM nohash.t", false) == nil
	})
	mustExec(t, root, "REVOKE SELECT ON nohash.* FROM 'nh_none'@'%'")
	pollUntil(t, "the REVOKE to reach nh_none's session", func() bool {
		return mysqlErrNumber(drain(t, none, "SELECT COUNT(*) FROM nohash.t", false)) == 1142
	})
	// Every other session's grants expire too and are read again.
	for _, c := range sessions {
		_ = drain(t, c, "SHOW GRANTS", false)
	}
	return sessions
}

// value is the one value q answers on c.
func value(t *testing.T, c *sql.Conn, q string) string {
	t.Helper()
	var v string
	if err := c.QueryRowContext(ctxT(t), q).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

// refusedLogin logs in through the data tap and requires a refusal.
func refusedLogin(t *testing.T, ctx context.Context, addr, user, password, db string) {
	t.Helper()
	d := openTapped(t, "nohash-data", addr, user, password, db)
	defer d.Close()
	err := d.PingContext(ctx)
	if n := mysqlErrNumber(err); n != 1045 && n != 1044 {
		t.Fatalf("login as %s (schema %q) through sluice: %v, want a refusal", user, db, err)
	}
}

// okLogin logs in as a and runs SHOW GRANTS on a new session.
func okLogin(t *testing.T, ctx context.Context, addr string, a *nohashAccount) {
	t.Helper()
	d := openTapped(t, "nohash-data", addr, a.user, a.password, "")
	defer d.Close()
	drain(t, d, "SHOW GRANTS", true)
}

// nohashChangeUser logs in as nh_db on a raw connection, changes to
// nh_admin (accepted) and reads its grants, then changes to nh_role with a
// wrong password (refused; sluice closes the connection).
func nohashChangeUser(t *testing.T, ctx context.Context, tp *tap, addr string, accts []*nohashAccount) {
	t.Helper()
	pw := map[string]string{}
	for _, a := range accts {
		pw[a.user] = a.password
	}
	nc, err := tp.dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	c := protocol.NewConn(nc)
	if _, err := protocol.ClientHandshake(c, protocol.ClientConfig{User: "nh_db", Password: pw["nh_db"], Capabilities: protocol.BackendCapabilities}); err != nil {
		t.Fatalf("raw login as nh_db: %v", err)
	}
	if _, err := rawQuery(t, c, "SHOW GRANTS"); err != nil {
		t.Fatalf("SHOW GRANTS as nh_db: %v", err)
	}
	if p := rawChangeUser(t, c, "nh_admin", pw["nh_admin"], "nohash"); !protocol.IsOK(p) {
		e, _ := protocol.ParseErr(p)
		t.Fatalf("COM_CHANGE_USER to nh_admin: %v", e)
	}
	if got := rawValue(t, c, "SELECT CURRENT_USER()"); got != "nh_admin@%" {
		t.Errorf("CURRENT_USER() after COM_CHANGE_USER: %q", got)
	}
	if _, err := rawQuery(t, c, "SHOW GRANTS"); err != nil {
		t.Fatalf("SHOW GRANTS after COM_CHANGE_USER: %v", err)
	}
	if p := rawChangeUser(t, c, "nh_role", "wrong", ""); !protocol.IsErr(p) {
		t.Fatalf("COM_CHANGE_USER with a wrong password: % x, want ERR", p[:min(len(p), 16)])
	}
	requireClosed(t, c)
}

// nohashAdmin runs the admin port's commands through the admin tap: a
// refused admin login, SHOW SESSIONS while the sessions are open, SHOW
// CONFIG, RELOAD CONFIG and FLUSH PRIVILEGES (after which every session
// reads its grants again), and the other SHOW commands.
func nohashAdmin(t *testing.T, p *hashSluice, adminPW string, sessions map[string]*sql.Conn) {
	t.Helper()
	bad := openTapped(t, "nohash-admin", p.admin, "admin", adminPW+"-wrong", "")
	if err := bad.PingContext(ctxT(t)); mysqlErrNumber(err) != 1045 {
		t.Fatalf("admin login with a wrong password: %v, want 1045", err)
	}
	adm := openTapped(t, "nohash-admin", p.admin, "admin", adminPW, "")
	for _, q := range []string{"SHOW SESSIONS", "SHOW CONFIG", "SHOW QUERY DIGESTS", "RELOAD CONFIG", "FLUSH PRIVILEGES"} {
		drain(t, adm, q, true)
	}
	for name, c := range sessions {
		if err := drain(t, c, "SHOW GRANTS", false); err != nil {
			t.Errorf("SHOW GRANTS of %s after FLUSH PRIVILEGES: %v", name, err)
		}
	}
	for _, q := range []string{"SHOW EVENTS", "SHOW BACKENDS", "SHOW CLUSTERS", "SHOW POOLS", "SHOW SHARDS", "SHOW VERSION", "SHOW SESSIONS", "SHOW CONFIG"} {
		drain(t, adm, q, true)
	}
}

// nohashMetrics scrapes /metrics, /readyz and /healthz through the
// metrics tap.
func nohashMetrics(t *testing.T, p *hashSluice, taps *nohashTaps) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		// Plain bytes on the wire, for the search.
		DisableCompression: true,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return taps.metrics.dial(ctx, addr)
		},
	}}
	for _, path := range []string{"/metrics", "/readyz", "/healthz"} {
		resp, err := client.Get("http://" + p.met + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", path, resp.Status)
		}
	}
}

// nohashBackoff fails logins in a row until sluice's login backoff refuses
// the address, the last thing the test does on the data port.
func nohashBackoff(t *testing.T, ctx context.Context, addr string) {
	t.Helper()
	for i := 0; ; i++ {
		d := openTapped(t, "nohash-data", addr, "nh_db", "nh-db-wrong", "")
		err := d.PingContext(ctx)
		d.Close()
		if mysqlErrNumber(err) == protocol.ERHostIsBlocked.Code {
			return
		}
		if i == 20 {
			t.Fatalf("20 failed logins in a row and no backoff: %v", err)
		}
	}
}
