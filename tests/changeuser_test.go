package tests

import (
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
