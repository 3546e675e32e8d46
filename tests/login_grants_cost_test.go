package tests

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/tests/internal/sluicebin"
)

// TestLoginCostOfGrants measures what reading an account's grants at login
// costs (issue 23: login p50 through the auth server grows by at most one
// round trip). Two sluice processes of the same binary and configuration,
// but for [auth] enforce_grants = true and false, serve logins in
// interleaved rounds (the order rotating each round, against drift); in
// the same rounds the test times logins directly on the auth server,
// SELECT 1 on an open connection to it (the round trip the difference is
// expressed in), the very reads sluice makes on that open connection, and
// a direct login followed by those reads on the new connection (what the
// auth server's part of the difference is). Two accounts: the application's (its grants are read in
// one round trip: SELECT CURRENT_USER() and SHOW GRANTS together) and one
// holding a role besides its default one (its first login, and one once
// its grants are older than grants_ttl, cost one more: SET ROLE and SHOW
// GRANTS for that role; the other logins, the ones timed here, are
// recognised by their first answer and cost one). It only logs the
// figures: timings are not asserted.
func TestLoginCostOfGrants(t *testing.T) {
	const (
		rounds   = 25
		perRound = 20 // rounds*perRound samples per arm
	)
	root := mustRoot(t, env.topo.Auth)
	for _, q := range []string{
		"DROP USER IF EXISTS 'lc_roles'@'%'", "DROP ROLE IF EXISTS lc_r1", "DROP ROLE IF EXISTS lc_r2",
		"CREATE ROLE lc_r1", "CREATE ROLE lc_r2",
		"GRANT SELECT ON sluice_test.* TO lc_r1", "GRANT INSERT ON sluice_test.* TO lc_r2",
		"CREATE USER 'lc_roles'@'%' IDENTIFIED BY 'lc-roles-pw'",
		"GRANT SELECT ON sluice_test.* TO 'lc_roles'@'%'",
		"GRANT lc_r1 TO 'lc_roles'@'%'", "GRANT lc_r2 TO 'lc_roles'@'%'",
		"SET DEFAULT ROLE lc_r1 FOR 'lc_roles'@'%'",
	} {
		mustExec(t, root, q)
	}
	t.Cleanup(func() {
		for _, q := range []string{"DROP USER IF EXISTS 'lc_roles'@'%'", "DROP ROLE IF EXISTS lc_r1", "DROP ROLE IF EXISTS lc_r2"} {
			_, _ = root.Exec(q)
		}
	})

	bin := sluicebin.Build(t)
	start := func(enforce bool) string {
		cfg := env.topo.SluiceConfigWith(sandbox.SluiceOptions{Listen: "127.0.0.1:0",
			ProxyKeys: []string{`admin_listen = ""`, `metrics_listen = ""`},
			AuthKeys:  []string{fmt.Sprintf("enforce_grants = %v", enforce)}})
		return startSluiceProcess(t, bin, cfg).addr
	}
	on, off := start(true), start(false)
	auth := env.topo.Auth.Addr()

	o := env.topo.Opts
	for _, acct := range []struct {
		user, password string
		// reads are what sluice asks the auth server at a login with
		// enforce_grants, round trip by round trip.
		reads [][]string
	}{
		{o.AppUser, o.AppPassword, [][]string{{"SELECT CURRENT_USER()", "SHOW GRANTS"}}},
		{"lc_roles", "lc-roles-pw", [][]string{{"SELECT CURRENT_USER()", "SHOW GRANTS"}}},
	} {
		rtt := newRoundTripper(t, auth, acct.user, acct.password)
		arms := []*loginArm{
			{name: "sluice, enforce_grants = true", run: func() (time.Duration, error) { return timedLogin(on, acct.user, acct.password) }},
			{name: "sluice, enforce_grants = false", run: func() (time.Duration, error) { return timedLogin(off, acct.user, acct.password) }},
			{name: "auth server directly", run: func() (time.Duration, error) { return timedLogin(auth, acct.user, acct.password) }},
			{name: "SELECT 1 on the auth server", run: func() (time.Duration, error) { return rtt.rounds([]string{"SELECT 1"}) }},
			{name: fmt.Sprintf("the grants' reads, %d round trip(s)", len(acct.reads)), run: func() (time.Duration, error) { return rtt.rounds(acct.reads...) }},
			{name: "auth server directly, then the reads", run: func() (time.Duration, error) {
				return timedLogin(auth, acct.user, acct.password, acct.reads...)
			}},
		}
		for r := -1; r < rounds; r++ { // round -1 warms up and is not kept
			for k := range arms {
				a := arms[(k+r+1)%len(arms)]
				for range perRound {
					d, err := a.run()
					if err != nil {
						t.Fatalf("%s as %s: %v", a.name, acct.user, err)
					}
					if r >= 0 {
						a.samples = append(a.samples, d)
					}
				}
			}
		}
		rtt.close()
		var b strings.Builder
		for _, a := range arms {
			fmt.Fprintf(&b, "\n  %-36s p50 %8s  p90 %8s  (n %d)", a.name, a.pct(50), a.pct(90), len(a.samples))
		}
		grow, trip := arms[0].pct(50)-arms[1].pct(50), arms[3].pct(50)
		fresh := arms[5].pct(50) - arms[2].pct(50)
		t.Logf("login as %s:%s\n  enforce_grants = true adds %v to the login p50, %.2f SELECT 1 round trips;"+
			" the same reads add %v to a direct login (%v on a connection in use); the rest, %v, is sluice's own (CPU and wake-ups)",
			acct.user, b.String(), grow, float64(grow)/float64(trip), fresh, arms[4].pct(50), grow-fresh)
	}
}

// loginArm is one kind of timed operation of TestLoginCostOfGrants and its
// samples.
type loginArm struct {
	name    string
	run     func() (time.Duration, error)
	samples []time.Duration
}

// pct is the p-th percentile of the arm's samples.
func (a *loginArm) pct(p int) time.Duration {
	s := slices.Clone(a.samples)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)].Round(time.Microsecond)
}

// timedLogin times one login at addr from the TCP connect to the final OK
// (the raw protocol, mysql_native_password), and then reads (round trips
// as roundTripper.rounds sends them) on the new connection, which it then
// closes.
func timedLogin(addr, user, password string, reads ...[]string) (time.Duration, error) {
	start := time.Now()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	_ = nc.SetDeadline(start.Add(10 * time.Second))
	c := protocol.NewConn(nc)
	if _, err := protocol.ClientHandshake(c, protocol.ClientConfig{User: user, Password: password,
		Capabilities: protocol.BackendCapabilities}); err != nil {
		return 0, err
	}
	if len(reads) > 0 {
		c.LenientSeq = true
		if _, err := (&roundTripper{nc: nc, c: c}).rounds(reads...); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// roundTripper times statements on one open connection to the auth
// server.
type roundTripper struct {
	nc net.Conn
	c  *protocol.Conn
}

func newRoundTripper(t *testing.T, addr, user, password string) *roundTripper {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := protocol.NewConn(nc)
	if _, err := protocol.ClientHandshake(c, protocol.ClientConfig{User: user, Password: password,
		Capabilities: protocol.BackendCapabilities}); err != nil {
		nc.Close()
		t.Fatal(err)
	}
	// Answers to statements sent together restart their sequence.
	c.LenientSeq = true
	return &roundTripper{nc: nc, c: c}
}

// rounds times round trips one after the other: each sends its
// statements together, then reads their answers.
func (r *roundTripper) rounds(trips ...[]string) (time.Duration, error) {
	start := time.Now()
	_ = r.nc.SetDeadline(start.Add(10 * time.Second))
	for _, texts := range trips {
		for _, q := range texts {
			r.c.ResetSeq()
			if err := r.c.WritePacket(append([]byte{protocol.ComQuery}, q...)); err != nil {
				return 0, err
			}
		}
		if err := r.c.Flush(); err != nil {
			return 0, err
		}
		for range texts {
			if _, err := protocol.ReadResponse(r.c, protocol.ResponseResult); err != nil {
				return 0, err
			}
		}
	}
	return time.Since(start), nil
}

func (r *roundTripper) close() { r.nc.Close() }
