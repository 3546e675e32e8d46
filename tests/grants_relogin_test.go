package tests

import (
	"database/sql"
	"fmt"
	"testing"
	"time"
)

// TestGrantsRoleAccountRelogin: an account holding a role besides its
// default one costs its first login two round trips of reads on the auth
// server (SELECT CURRENT_USER() and SHOW GRANTS; SET ROLE and SHOW GRANTS
// for the other role), and a second login within grants_ttl one: its first
// SHOW GRANTS answer is recognised and the grants already read are shared.
// The second login's session still knows the other role's grants. Counted
// by the auth server's Com_show_grants.
func TestGrantsRoleAccountRelogin(t *testing.T) {
	ctx := ctxT(t)
	grantsTable(t)
	root := mustRoot(t, env.topo.Auth)
	for _, q := range []string{"DROP ROLE IF EXISTS gk_r1", "DROP ROLE IF EXISTS gk_r2", "CREATE ROLE gk_r1", "CREATE ROLE gk_r2",
		"GRANT SELECT ON sluice_test.* TO gk_r1", "GRANT SELECT, INSERT, DELETE ON sluice_test.* TO gk_r2"} {
		mustExec(t, root, q)
	}
	t.Cleanup(func() {
		_, _ = root.Exec("DROP ROLE IF EXISTS gk_r1")
		_, _ = root.Exec("DROP ROLE IF EXISTS gk_r2")
	})
	// A name of its own per run: sluice keeps what it read of an account
	// for grants_ttl, past a DROP USER.
	name := fmt.Sprintf("gk_roles_%d", time.Now().UnixNano()%1e9)
	authAccount(t, name, "GRANT gk_r1 TO %[1]s", "GRANT gk_r2 TO %[1]s", "SET DEFAULT ROLE gk_r1 FOR %[1]s")

	showGrants := func() int {
		t.Helper()
		var name string
		var n int
		if err := root.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Com_show_grants'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// login opens a session through sluice and runs a statement on it, so
	// that the session took its grants.
	login := func() *sql.Conn {
		t.Helper()
		c, err := openAs(t, env.addr, name, "sluice_test").Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if got := answer(c, "SELECT COUNT(*) FROM sluice_test.g_land"); got != "ok" {
			t.Fatalf("SELECT as %s: %s", name, got)
		}
		return c
	}

	n0 := showGrants()
	login()
	n1 := showGrants()
	c := login()
	n2 := showGrants()
	if n1-n0 != 2 || n2-n1 != 1 {
		t.Fatalf("SHOW GRANTS run on the auth server: %d at the first login, %d at the second; want 2 and 1", n1-n0, n2-n1)
	}
	if got := answer(c, "INSERT INTO sluice_test.g_land VALUES (9101, 1)"); got == "ok" {
		t.Fatal("INSERT allowed with the default role, which lacks INSERT")
	}
	for _, q := range []string{"SET ROLE gk_r2", "INSERT INTO sluice_test.g_land VALUES (9101, 1)", "DELETE FROM sluice_test.g_land WHERE id = 9101"} {
		if got := answer(c, q); got != "ok" {
			t.Fatalf("%s after a second login: %s", q, got)
		}
	}
}
