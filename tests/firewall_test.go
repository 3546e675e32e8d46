package tests

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/router"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// The firewall allowlist end to end (issue 26): the app user learns 20
// digests (text and prepared); after a reload switches it to enforce the
// 20 pass, as text and prepared, and a 21st is refused with 1142 naming
// its digest id and the user; FIREWALL ALLOW on the admin port admits it
// at the session's next statement; a restart keeps the allowlist (from
// proxy.state_dir); FORGET takes digests away again. Meanwhile a user
// whose mode is off runs anything and is learnt nothing.

// fwStatements is the number of digests the app user learns.
const fwStatements = 20

// fwConfig is the shared topology's configuration with state_dir and the
// app user's firewall mode.
func fwConfig(stateDir, appMode string) string {
	o := sandbox.SluiceOptions{Listen: "127.0.0.1:0",
		ProxyKeys: []string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = "127.0.0.1:0"`, fmt.Sprintf("state_dir = %q", stateDir)}}
	fw := fmt.Sprintf("\n[firewall]\nmode = \"off\"\n\n[[firewall.user]]\nname = %q\nmode = %q\n", env.topo.Opts.AppUser, appMode)
	text := sandbox.ShardedSluiceConfig(o, env.topo.Auth, []sandbox.NamedTopology{{Name: "main", Topology: env.topo}}, fw)
	return text + "\n[admin]\nuser = \"admin\"\npassword = \"" + adminPassword + "\"\n"
}

// fwSluice starts sluice from the file at path; stop closes it (once,
// also at the end of the test).
func fwSluice(t *testing.T, path string) (srv *server.Server, stop func()) {
	t.Helper()
	cfg, err := conf.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	srv, err = server.New(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { _ = srv.Close() }) }
	t.Cleanup(stop)
	return srv, stop
}

// fwText and fwPrepared are statement i as text and as a prepared
// statement: the same digest.
func fwText(i int) string     { return fmt.Sprintf("SELECT %d + 1 AS fw_c%d", i, i) }
func fwPrepared(i int) string { return fmt.Sprintf("SELECT ? + 1 AS fw_c%d", i) }

// fwDigestID is the digest id sluice computes for sql.
func fwDigestID(sql string) string {
	return router.FormatDigestID(router.DigestID(router.New(0).Classify(sql).Digest))
}

// fwRun runs statement i on c, as text or prepared, and checks its answer.
func fwRun(c *sql.Conn, i int, prepared bool) error {
	var got int
	var err error
	if prepared {
		err = c.QueryRowContext(context.Background(), fwPrepared(i), i).Scan(&got)
	} else {
		err = c.QueryRowContext(context.Background(), fwText(i)).Scan(&got)
	}
	if err == nil && got != i+1 {
		err = fmt.Errorf("statement %d answered %d", i, got)
	}
	return err
}

// fwRefused checks that err is the firewall's 1142 for sql's digest and user.
func fwRefused(t *testing.T, err error, sql, user string) {
	t.Helper()
	id := fwDigestID(sql)
	want := fmt.Sprintf("sluice: firewall refused the statement with digest_id %s for user '%s': "+
		"it is not on the user's allowlist (FIREWALL ALLOW %s FOR '%s' on the admin port admits it)", id, user, id, user)
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1142 || string(me.SQLState[:]) != "42000" || me.Message != want {
		t.Fatalf("%s: got %v, want ERR 1142 (42000) %q", sql, err, want)
	}
}

// fwListed returns SHOW FIREWALL FOR user's rows by digest id.
func fwListed(t *testing.T, srv *server.Server, user string) map[string]map[string]string {
	t.Helper()
	q := fmt.Sprintf("SHOW FIREWALL FOR '%s'", user)
	out := map[string]map[string]string{}
	if text, errOut, err := adminCLI(t, srv, adminPassword, q); err != nil {
		t.Fatalf("%s: %v: %s", q, err, errOut)
	} else if text == "" {
		return out // an empty result: the client prints nothing
	}
	h, rows := adminRows(t, srv, q)
	for _, r := range rows {
		m := map[string]string{}
		for j, name := range h {
			m[name] = r[j]
		}
		out[m["digest_id"]] = m
	}
	return out
}

func TestFirewallLearnEnforceAllow(t *testing.T) {
	app := env.topo.Opts.AppUser
	other, otherPW := limitsUser(t, "fw_other")
	stateDir := t.TempDir()
	path := filepath.Join(t.TempDir(), "sluice.toml")
	writeConfig(t, path, fwConfig(stateDir, "learn"))
	srv, stop := fwSluice(t, path)

	var ids []string
	for i := range fwStatements + 2 {
		if a, b := fwDigestID(fwText(i)), fwDigestID(fwPrepared(i)); a != b || slices.Contains(ids, a) {
			t.Fatalf("statement %d: text digest_id %s, prepared %s: want one new digest for both", i, a, b)
		}
		ids = append(ids, fwDigestID(fwText(i)))
	}
	extra, extra2 := fwStatements, fwStatements+1 // the 21st and the 22nd

	// Learn: half as text, half prepared.
	c := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	for i := range fwStatements {
		if err := fwRun(c, i, i >= fwStatements/2); err != nil {
			t.Fatalf("learn mode: %v", err)
		}
	}
	listed := fwListed(t, srv, app)
	for i := range fwStatements {
		if m := listed[ids[i]]; m == nil || m["mode"] != "learn" || m["source"] != "learned" || m["hits"] != "1" || m["learned_at"] == "" {
			t.Errorf("SHOW FIREWALL: statement %d (%s): row %v, want learnt, mode learn, 1 hit", i, ids[i], m)
		}
	}
	if len(listed) != fwStatements {
		t.Errorf("SHOW FIREWALL lists %d digests for %s, want %d: %v", len(listed), app, fwStatements, listed)
	}
	if got := scrapeFrom(t, srv, "sluice_firewall_learned_digests"); got != fwStatements {
		t.Errorf("sluice_firewall_learned_digests = %v, want %d", got, fwStatements)
	}
	// Learning reaches the state file without waiting for a shutdown.
	stateFile := filepath.Join(stateDir, server.FirewallStateFile)
	pollUntil(t, "the learnt digests are in the state file", func() bool {
		data, err := os.ReadFile(stateFile)
		return err == nil && strings.Count(string(data), `"digest_id"`) == fwStatements
	})

	// The user whose mode is off runs the 21st; nothing is learnt for it.
	o := conn(t, userDB(t, srv, other, otherPW))
	if err := fwRun(o, extra, false); err != nil {
		t.Fatalf("user %s (mode off): %v", other, err)
	}

	// Enforce, by a reload.
	writeConfig(t, path, fwConfig(stateDir, "enforce"))
	if ch := mustReload(t, srv); !slices.Contains(ch, fmt.Sprintf(`firewall.user %q mode: "learn" -> "enforce"`, app)) {
		t.Fatalf("reload changes %v: no firewall mode change", ch)
	}
	for i := range fwStatements {
		for _, prepared := range []bool{false, true} {
			if err := fwRun(c, i, prepared); err != nil {
				t.Fatalf("enforce mode, learnt statement %d (prepared %v): %v", i, prepared, err)
			}
		}
	}
	fwRefused(t, fwRun(c, extra, false), fwText(extra), app)
	fwRefused(t, fwRun(c, extra, true), fwPrepared(extra), app)
	if got := scrapeFrom(t, srv, fmt.Sprintf("sluice_firewall_refused_total{user=%q}", app)); got != 2 {
		t.Errorf("sluice_firewall_refused_total{user=%q} = %v, want 2", app, got)
	}
	if err := fwRun(c, 0, false); err != nil {
		t.Fatalf("the session after a refusal: %v", err)
	}
	for i := range 3 {
		if err := fwRun(o, extra+i, i%2 == 1); err != nil {
			t.Fatalf("user %s (mode off) while %s enforces: %v", other, app, err)
		}
	}
	if l := fwListed(t, srv, other); len(l) != 0 {
		t.Errorf("user %s (mode off) has learnt digests: %v", other, l)
	}

	// Admin: bad input, then ALLOW the 21st: the same session runs it.
	ad := adminDB(t, srv, adminPassword)
	for _, tc := range []struct{ sql, want string }{
		{fmt.Sprintf("FIREWALL ALLOW 12ab FOR '%s'", app), "the digest id must be 16 hex digits"},
		{"FIREWALL ALLOW " + ids[extra], "expected FOR '<user>'"},
		{fmt.Sprintf("FIREWALL FORGET %s FOR '%s'", ids[extra], app), fmt.Sprintf("is not on the allowlist of '%s'", app)},
	} {
		if _, err := ad.ExecContext(ctxT(t), tc.sql); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.sql, err, tc.want)
		}
	}
	if _, err := ad.ExecContext(ctxT(t), fmt.Sprintf("FIREWALL ALLOW %s FOR '%s'", ids[extra], app)); err != nil {
		t.Fatalf("FIREWALL ALLOW: %v", err)
	}
	for _, prepared := range []bool{false, true} {
		if err := fwRun(c, extra, prepared); err != nil {
			t.Fatalf("the 21st statement after FIREWALL ALLOW (prepared %v): %v", prepared, err)
		}
	}
	if h, rows := adminRows(t, srv, "SHOW EVENTS"); !slices.ContainsFunc(rows, func(r []string) bool {
		m := map[string]string{}
		for j, name := range h {
			m[name] = r[j]
		}
		return m["kind"] == "firewall" && m["detail"] == fmt.Sprintf("allow %s for '%s'", ids[extra], app)
	}) {
		t.Errorf("SHOW EVENTS has no firewall row for the ALLOW: %v", rows)
	}
	fwRefused(t, fwRun(c, extra2, false), fwText(extra2), app)
	listed = fwListed(t, srv, app)
	if m := listed[ids[extra]]; m == nil || m["source"] != "admin" || m["mode"] != "enforce" || m["hits"] != "2" ||
		m["digest"] != router.New(0).Classify(fwText(extra)).Digest {
		t.Errorf("SHOW FIREWALL: the allowed digest's row %v, want source admin, mode enforce, 2 hits, its text", m)
	}
	if m := listed[ids[0]]; m == nil || m["hits"] != "4" {
		t.Errorf("SHOW FIREWALL: statement 0's row %v, want 4 hits (learnt; text, prepared and text again under enforce)", m)
	}

	// Restart: the allowlist comes back from state_dir.
	stop()
	srv, _ = fwSluice(t, path)
	c = conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	for i := range fwStatements + 1 {
		if err := fwRun(c, i, i%2 == 0); err != nil {
			t.Fatalf("after a restart, statement %d: %v", i, err)
		}
	}
	fwRefused(t, fwRun(c, extra2, true), fwPrepared(extra2), app)
	if l := fwListed(t, srv, app); len(l) != fwStatements+1 {
		t.Errorf("after a restart SHOW FIREWALL lists %d digests, want %d", len(l), fwStatements+1)
	}

	// FORGET one, then all: refused at the next statement.
	ad = adminDB(t, srv, adminPassword)
	if _, err := ad.ExecContext(ctxT(t), fmt.Sprintf("FIREWALL FORGET %s FOR '%s'", ids[extra], app)); err != nil {
		t.Fatalf("FIREWALL FORGET: %v", err)
	}
	fwRefused(t, fwRun(c, extra, false), fwText(extra), app)
	if err := fwRun(c, 1, false); err != nil {
		t.Fatalf("a digest FORGET left: %v", err)
	}
	if _, err := ad.ExecContext(ctxT(t), fmt.Sprintf("FIREWALL FORGET ALL FOR '%s'", app)); err != nil {
		t.Fatalf("FIREWALL FORGET ALL: %v", err)
	}
	fwRefused(t, fwRun(c, 1, false), fwText(1), app)
	if got := scrapeFrom(t, srv, "sluice_firewall_learned_digests"); got != 0 {
		t.Errorf("sluice_firewall_learned_digests = %v after FORGET ALL, want 0", got)
	}
	data, err := os.ReadFile(stateFile)
	if err != nil || strings.Contains(string(data), `"digest_id"`) {
		t.Errorf("the state file after FORGET ALL (%v): %s", err, data)
	}
}
