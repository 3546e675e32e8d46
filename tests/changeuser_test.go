package tests

import (
	"strings"
	"testing"

	"github.com/sluice-proxy/sluice/protocol"
)

// rawChangeUser sends COM_CHANGE_USER with a stale answer, answers the auth
// switch sluice must send with the right password, and returns the final
// packet.
func rawChangeUser(t *testing.T, c *protocol.Conn, user, password, db string) []byte {
	t.Helper()
	caps := protocol.BackendCapabilities
	cu := &protocol.ChangeUser{User: user, AuthResponse: make([]byte, 20), Database: db,
		Collation: 45, AuthPlugin: protocol.AuthNativePassword}
	c.ResetSeq()
	c.LenientSeq = true
	if err := c.WritePacketFlush(cu.Encode(caps)); err != nil {
		t.Fatal(err)
	}
	p, err := c.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	if !protocol.IsAuthSwitch(p) {
		t.Fatalf("COM_CHANGE_USER answered % x, want an auth switch with a fresh scramble", p[:min(len(p), 16)])
	}
	plugin, scramble, err := protocol.ParseAuthSwitch(p)
	if err != nil || plugin != protocol.AuthNativePassword || len(scramble) != 20 {
		t.Fatalf("auth switch %q % x %v", plugin, scramble, err)
	}
	if err := c.WritePacketFlush(protocol.NativePasswordResponse(scramble, password)); err != nil {
		t.Fatal(err)
	}
	p, err = c.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), p...)
}

func TestChangeUserReauthenticatesAndResets(t *testing.T) {
	ctx := ctxT(t)
	if err := env.topo.Auth.Exec(ctx, "CREATE USER 'other'@'%' IDENTIFIED BY 'other-pw'", "GRANT ALL ON *.* TO 'other'@'%'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.topo.Auth.Exec(ctxT(t), "DROP USER IF EXISTS 'other'@'%'") })
	c := rawLogin(t, env.addr)
	def := rawValue(t, c, "SELECT @@sql_mode")
	if _, err := rawQuery(t, c, "SET SESSION sql_mode = 'ANSI'"); err != nil {
		t.Fatal(err)
	}
	if _, err := rawQuery(t, c, "SET @u = 7"); err != nil {
		t.Fatal(err)
	}
	ok := rawPrepare(t, c, "SELECT 1")
	if p := rawChangeUser(t, c, "other", "other-pw", "sluice_test"); !protocol.IsOK(p) {
		e, _ := protocol.ParseErr(p)
		t.Fatalf("change user: %v", e)
	}
	if got := rawValue(t, c, "SELECT DATABASE()"); got != "sluice_test" {
		t.Fatalf("schema after change user = %q", got)
	}
	if got := rawValue(t, c, "SELECT @@sql_mode"); got != def {
		t.Fatalf("sql_mode after change user = %q, want the default %q", got, def)
	}
	if got := rawValue(t, c, "SELECT @u"); got != "NULL" {
		t.Fatalf("@u survived change user: %q", got)
	}
	c.ResetSeq()
	if err := c.WritePacketFlush(executePacket(ok.StatementID, 0, false)); err != nil {
		t.Fatal(err)
	}
	readErr(t, c, 1243) // statements die with the old session
	// Back to the app user.
	if p := rawChangeUser(t, c, env.topo.Opts.AppUser, env.topo.Opts.AppPassword, ""); !protocol.IsOK(p) {
		t.Fatalf("change back: % x", p)
	}
	if got := rawValue(t, c, "SELECT 3"); got != "3" {
		t.Fatalf("after changing back: %q", got)
	}
}

func TestChangeUserWrongPasswordClosesConnection(t *testing.T) {
	c := rawLogin(t, env.addr)
	p := rawChangeUser(t, c, env.topo.Opts.AppUser, "wrong", "")
	e, err := protocol.ParseErr(p)
	if err != nil || e.Code != 1045 {
		t.Fatalf("change user with a wrong password: % x (%v), want ERR 1045", p, e)
	}
	requireClosed(t, c)
	requireServes(t, env.addr)
}

func TestChangeUserUnknownSchema(t *testing.T) {
	c := rawLogin(t, env.addr)
	p := rawChangeUser(t, c, env.topo.Opts.AppUser, env.topo.Opts.AppPassword, "no_such_db")
	if e, err := protocol.ParseErr(p); err != nil || e.Code != 1049 {
		t.Fatalf("change user to an unknown schema: % x, want ERR 1049", p)
	}
	requireClosed(t, c)
}

// TestMySQL8ClientPluginsSwitchToNative: a client that starts with
// caching_sha2_password or sha256_password (MySQL 8 client libraries do)
// is switched by the MariaDB auth server to mysql_native_password, through
// sluice's relay, and logs in.
func TestMySQL8ClientPluginsSwitchToNative(t *testing.T) {
	for _, plugin := range []string{protocol.AuthCachingSHA2, protocol.AuthSHA256} {
		t.Run(plugin, func(t *testing.T) {
			c := rawDial(t, env.addr)
			p, err := c.ReadPacket()
			if err != nil {
				t.Fatal(err)
			}
			g, err := protocol.ParseGreeting(p)
			if err != nil {
				t.Fatal(err)
			}
			first := protocol.CachingSHA2Response(g.Scramble, env.topo.Opts.AppPassword)
			if plugin == protocol.AuthSHA256 {
				first = []byte{1} // "send me your public key"
			}
			hr := &protocol.HandshakeResponse{
				Capabilities: protocol.BackendCapabilities, MaxPacketSize: 1 << 24, Collation: 45,
				User: env.topo.Opts.AppUser, AuthResponse: first, AuthPlugin: plugin,
			}
			if err := c.WritePacketFlush(hr.Encode()); err != nil {
				t.Fatal(err)
			}
			p, err = c.ReadPacket()
			if err != nil {
				t.Fatal(err)
			}
			name, scramble, err := protocol.ParseAuthSwitch(p)
			if err != nil || name != protocol.AuthNativePassword {
				t.Fatalf("want an auth switch to mysql_native_password, got % x", p[:min(len(p), 24)])
			}
			if err := c.WritePacketFlush(protocol.NativePasswordResponse(scramble, env.topo.Opts.AppPassword)); err != nil {
				t.Fatal(err)
			}
			if p, err = c.ReadPacket(); err != nil || !protocol.IsOK(p) {
				t.Fatalf("after the switch: % x %v", p, err)
			}
			if got := rawValue(t, c, "SELECT 1"); got != "1" {
				t.Fatalf("SELECT 1 = %q", got)
			}
		})
	}
}

// TestChangeUserToAdminRefused: COM_CHANGE_USER to the name of sluice's
// [admin] user is refused on the data port with 1045 and closes the
// connection, as a direct login with that name is, even when the auth
// server has an account of that name and the password is right (issue 19).
func TestChangeUserToAdminRefused(t *testing.T) {
	ctx := ctxT(t)
	if err := env.topo.Auth.Exec(ctx, "CREATE OR REPLACE USER 'sl_admin'@'%' IDENTIFIED BY 'sl-admin-pw'", "GRANT ALL ON *.* TO 'sl_admin'@'%'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.topo.Auth.Exec(ctxT(t), "DROP USER IF EXISTS 'sl_admin'@'%'") })
	srv := adminSluice(t, "sl_admin")
	c := rawLogin(t, srv.Addr().String())
	p := rawChangeUser(t, c, "sl_admin", "sl-admin-pw", "")
	e, err := protocol.ParseErr(p)
	if err != nil || e.Code != 1045 || !strings.Contains(e.Message, "admin") {
		t.Fatalf("change user to the admin user on the data port: % x (%v), want ERR 1045 naming the admin port", p, e)
	}
	requireClosed(t, c)
	requireServes(t, srv.Addr().String())
}
