package tests

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/router"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// Query rules end to end: each action (route to a replica, route to the
// master, refuse with the default and a configured error, log) matched by
// each field, through sluice against the sandbox, for text and prepared
// statements; hit counts in SHOW RULES and the metric; a reload.
//
// The actions that need a second cluster (route = "<cluster>", mirror) and
// timeout are tested in rules_actions_test.go.

// rulesConfig is the shared topology's configuration with clusterKeys in
// its cluster, rules appended, and the admin account.
func rulesConfig(clusterKeys []string, rules string) string {
	o := sandbox.SluiceOptions{Listen: "127.0.0.1:0",
		ProxyKeys:   []string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = "127.0.0.1:0"`},
		ClusterKeys: clusterKeys}
	text := sandbox.ShardedSluiceConfig(o, env.topo.Auth, []sandbox.NamedTopology{{Name: "main", Topology: env.topo}}, rules)
	return text + "\n[admin]\nuser = \"admin\"\npassword = \"" + adminPassword + "\"\n"
}

// rulesSluice starts sluice from a file holding text, logging at info
// level to the returned observer, once both replicas serve.
func rulesSluice(t *testing.T, text string) (*server.Server, string, *observer.ObservedLogs) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sluice.toml")
	writeConfig(t, path, text)
	cfg, err := conf.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	srv, err := server.New(cfg, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	pollUntil(t, "both replicas serve", func() bool {
		return scrapeFrom(t, srv, `sluice_cluster_serving_replicas{cluster="main"}`) == float64(len(env.topo.Replicas))
	})
	return srv, path, logs
}

// ruleCase is one statement sent ruleRuns times: what @@server_id says
// (its first column) or the error the client gets, and the rules it hits.
type ruleCase struct {
	name string
	sql  string
	args []any // set: a prepared statement (PREPARE, EXECUTE, CLOSE)
	// want is "master" or "replica"; "" when the statement is refused
	// with errCode and exactly errMsg.
	want    string
	errCode uint16
	errMsg  string
	hits    []string
}

const ruleRuns = 3

// runRuleCases sends each case's statement ruleRuns times on one session
// of srv and checks where it ran or how it was refused; it returns the
// hits each rule should have counted.
func runRuleCases(t *testing.T, srv *server.Server, cases []ruleCase) map[string]int {
	t.Helper()
	c := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	want := map[string]int{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for range ruleRuns {
				var id uint32
				var rest any
				dest := []any{&id}
				if strings.Contains(tc.sql, ",") {
					dest = append(dest, &rest)
				}
				err := c.QueryRowContext(ctxT(t), tc.sql, tc.args...).Scan(dest...)
				if tc.want == "" {
					var me *mysql.MySQLError
					if !errors.As(err, &me) || me.Number != tc.errCode || me.Message != tc.errMsg {
						t.Fatalf("%s: error %v, want %d %q", tc.sql, err, tc.errCode, tc.errMsg)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", tc.sql, err)
				}
				if got := where(id); got != tc.want {
					t.Fatalf("%s ran on the %s (server_id %d), want the %s", tc.sql, got, id, tc.want)
				}
			}
		})
		for _, r := range tc.hits {
			want[r] += ruleRuns
		}
	}
	return want
}

// where names the backend of a server_id.
func where(id uint32) string {
	switch {
	case id == env.masterID:
		return "master"
	case env.replicaIDs[id]:
		return "replica"
	}
	return "server " + strconv.Itoa(int(id))
}

// checkRuleHits checks that SHOW RULES and sluice_rule_hits_total give
// every rule of names the hits of want (0 when absent).
func checkRuleHits(t *testing.T, srv *server.Server, names []string, want map[string]int) {
	t.Helper()
	header, rows := adminRows(t, srv, "SHOW RULES")
	shown := column(t, header, rows, "name")
	if strings.Join(shown, ",") != strings.Join(names, ",") {
		t.Errorf("SHOW RULES lists %v, want %v in order", shown, names)
	}
	hits := column(t, header, rows, "hits")
	last := column(t, header, rows, "last_hit")
	for i, name := range shown {
		if hits[i] != strconv.Itoa(want[name]) {
			t.Errorf("SHOW RULES: rule %s has %s hits, want %d", name, hits[i], want[name])
		}
		if (last[i] == "") != (want[name] == 0) {
			t.Errorf("SHOW RULES: rule %s last hit %q with %d hits", name, last[i], want[name])
		}
		if got := scrapeFrom(t, srv, fmt.Sprintf(`sluice_rule_hits_total{rule=%q}`, name)); got != float64(want[name]) {
			t.Errorf("sluice_rule_hits_total{rule=%q} = %v, want %d", name, got, want[name])
		}
	}
}

// digestOf is the digest sluice computes for sql, and its id as SHOW QUERY
// DIGESTS prints it; the statement must be a read.
func digestOf(t *testing.T, sql string) (string, string) {
	p := router.New(0).Classify(sql)
	if p.Kind != router.KindRead {
		t.Fatalf("%s is a %s, not a read", sql, p.Kind)
	}
	return p.Digest, router.FormatDigestID(router.DigestID(p.Digest))
}

// TestRulesReplicaRouteAndRefusal: in a cluster whose consistency is
// "strong" (reads go to the master), rules route reads to a replica
// matched by pattern, digest text, digest id, user and schema, for text
// and prepared statements and after a continue; refuse with 1142 and with
// a configured error, matched by pattern and client address; log; and a
// write that a replica rule's pattern matches still lands on the master.
func TestRulesReplicaRouteAndRefusal(t *testing.T) {
	o := env.topo.Opts
	digest, _ := digestOf(t, "SELECT @@server_id, 1 + 1")
	_, digestID := digestOf(t, "SELECT @@server_id, 'x' AS byid")
	_, denyID := digestOf(t, "SELECT @@server_id /* deny-default */")
	rules := fmt.Sprintf(`
[[rule]]
name = "replica-pattern"
pattern = "to-replica"
kind = "read"
route = "replica"

[[rule]]
name = "replica-digest"
digest = %q
kind = "read"
route = "replica"

[[rule]]
name = "replica-digest-id"
digest = %q
kind = "read"
route = "replica"

[[rule]]
name = "replica-user-schema"
user = %q
schema = %q
pattern = "by-user"
kind = "read"
route = "replica"

[[rule]]
name = "replica-prepared"
pattern = "prepared"
kind = "read"
route = "replica"

[[rule]]
name = "deny-default"
pattern = "deny-default"
error = true

[[rule]]
name = "deny-custom"
client_address = "127.0.0.1"
pattern = "deny-custom"
error = true
error_code = 1227
error_message = "custom refusal by rule deny-custom"

[[rule]]
name = "log-cluster"
cluster = "main"
pattern = "logged"
log = true

[[rule]]
name = "tag-continue"
pattern = "cont"
log = true
continue = true

[[rule]]
name = "replica-cont"
pattern = "cont"
kind = "read"
route = "replica"
`, digest, digestID, o.AppUser, sandbox.TestDatabase)
	names := []string{"replica-pattern", "replica-digest", "replica-digest-id", "replica-user-schema", "replica-prepared",
		"deny-default", "deny-custom", "log-cluster", "tag-continue", "replica-cont"}
	srv, _, logs := rulesSluice(t, rulesConfig([]string{`consistency = "strong"`}, rules))

	defaultMsg := fmt.Sprintf("sluice: statement refused by query rule %q (digest_id %s)", "deny-default", denyID)
	_, preparedDenyID := digestOf(t, "SELECT @@server_id, ? /* deny-default */")
	cases := []ruleCase{
		{name: "no rule: strong consistency reads on the master", sql: "SELECT @@server_id /* plain */", want: "master"},
		{name: "route replica by pattern", sql: "SELECT @@server_id /* to-replica */", want: "replica", hits: []string{"replica-pattern"}},
		{name: "a sluice:master hint wins over a replica rule", sql: "/* sluice:master */ SELECT @@server_id /* to-replica */", want: "master", hits: []string{"replica-pattern"}},
		{name: "route replica by digest text", sql: "SELECT @@server_id, 1 + 1", want: "replica", hits: []string{"replica-digest"}},
		{name: "route replica by digest text, other literals", sql: "SELECT @@server_id, 2 + 40", want: "replica", hits: []string{"replica-digest"}},
		{name: "route replica by digest id", sql: "SELECT @@server_id, 'x' AS byid", want: "replica", hits: []string{"replica-digest-id"}},
		{name: "route replica by user and schema", sql: "SELECT @@server_id /* by-user */", want: "replica", hits: []string{"replica-user-schema"}},
		{name: "route replica, prepared", sql: "SELECT @@server_id, ? /* prepared */", args: []any{1}, want: "replica", hits: []string{"replica-prepared"}},
		{name: "refuse with 1142", sql: "SELECT @@server_id /* deny-default */", errCode: 1142, errMsg: defaultMsg, hits: []string{"deny-default"}},
		{name: "refuse a prepare with 1142", sql: "SELECT @@server_id, ? /* deny-default */", args: []any{1}, errCode: 1142,
			errMsg: strings.Replace(defaultMsg, denyID, preparedDenyID, 1), hits: []string{"deny-default"}},
		{name: "refuse with the configured error by client address", sql: "SELECT @@server_id /* deny-custom */", errCode: 1227,
			errMsg: "custom refusal by rule deny-custom", hits: []string{"deny-custom"}},
		{name: "log by cluster", sql: "SELECT @@server_id /* logged */", want: "master", hits: []string{"log-cluster"}},
		{name: "continue: log, then route replica", sql: "SELECT @@server_id /* cont */", want: "replica", hits: []string{"tag-continue", "replica-cont"}},
	}
	want := runRuleCases(t, srv, cases)

	t.Run("SHOW QUERY DIGESTS prints the digest_id the rule names", func(t *testing.T) {
		h, rows := adminRows(t, srv, "SHOW QUERY DIGESTS")
		byText, _ := digestOf(t, "SELECT @@server_id, 'x' AS byid")
		if m := rowWith(t, h, rows, "digest", byText); m["digest_id"] != digestID {
			t.Errorf("SHOW QUERY DIGESTS: %q has digest_id %q, the rule names %q", byText, m["digest_id"], digestID)
		}
	})

	t.Run("logged", func(t *testing.T) {
		for _, rule := range []string{"log-cluster", "tag-continue"} {
			n := logs.FilterMessage("query rule matched").FilterField(zap.String("rule", rule)).Len()
			if n != want[rule] {
				t.Errorf("rule %s logged %d statements, want %d", rule, n, want[rule])
			}
		}
		if n := logs.FilterMessage("query rule matched").Len(); n != want["log-cluster"]+want["tag-continue"] {
			t.Errorf("%d statements logged, want only those of the log rules", n)
		}
	})

	t.Run("a write a replica rule's pattern names lands on the master", func(t *testing.T) {
		c := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
		ctx := ctxT(t)
		for _, q := range []string{"DROP TABLE IF EXISTS rules_w", "CREATE TABLE rules_w (id INT AUTO_INCREMENT PRIMARY KEY, v INT)"} {
			if _, err := c.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		for i := range ruleRuns {
			if _, err := c.ExecContext(ctx, "INSERT INTO rules_w (v) VALUES (?) /* to-replica */", i); err != nil {
				t.Fatalf("insert: %v", err)
			}
			if _, err := c.ExecContext(ctx, fmt.Sprintf("INSERT INTO rules_w (v) VALUES (%d) /* to-replica */", i)); err != nil {
				t.Fatalf("insert: %v", err)
			}
		}
		direct, err := sql.Open("mysql", env.topo.Master.DSN(o.ServiceUser, o.ServicePassword, sandbox.TestDatabase))
		if err != nil {
			t.Fatal(err)
		}
		defer direct.Close()
		var n int
		if err := direct.QueryRowContext(ctx, "SELECT COUNT(*) FROM rules_w").Scan(&n); err != nil || n != 2*ruleRuns {
			t.Errorf("the master holds %d rows (%v), want %d", n, err, 2*ruleRuns)
		}
		if r := scrapeFrom(t, srv, `sluice_replica_write_refusals_total{cluster="main"}`); r != 0 {
			t.Errorf("%v writes reached a replica", r)
		}
	})
	checkRuleHits(t, srv, names, want)
}

// TestRulesMasterRouteAndReload: in a cluster with eventual consistency
// (reads go to replicas), rules route reads to the master matched by
// client address, kind and cluster, for text and prepared statements; a
// client address outside a rule's prefix is not matched; RELOAD CONFIG
// replaces the rules at the next statement, keeping the counters of the
// rules it keeps.
func TestRulesMasterRouteAndReload(t *testing.T) {
	rules := `
[[rule]]
name = "master-cidr"
client_address = "127.0.0.0/8"
pattern = "m-cidr"
route = "master"

[[rule]]
name = "master-cidr-miss"
client_address = "10.0.0.0/8"
pattern = "m-miss"
route = "master"

[[rule]]
name = "master-kind-cluster"
kind = "read"
cluster = "main"
pattern = "m-kind"
route = "master"

[[rule]]
name = "master-prepared"
pattern = "m-prep"
route = "master"
`
	srv, path, _ := rulesSluice(t, rulesConfig(nil, rules))
	cases := []ruleCase{
		{name: "no rule: reads on a replica", sql: "SELECT @@server_id /* plain */", want: "replica"},
		{name: "route master by client address", sql: "SELECT @@server_id /* m-cidr */", want: "master", hits: []string{"master-cidr"}},
		{name: "another client address is not matched", sql: "SELECT @@server_id /* m-miss */", want: "replica"},
		{name: "route master by kind and cluster", sql: "SELECT @@server_id /* m-kind */", want: "master", hits: []string{"master-kind-cluster"}},
		{name: "route master, prepared", sql: "SELECT @@server_id, ? /* m-prep */", args: []any{1}, want: "master", hits: []string{"master-prepared"}},
	}
	want := runRuleCases(t, srv, cases)
	checkRuleHits(t, srv, []string{"master-cidr", "master-cidr-miss", "master-kind-cluster", "master-prepared"}, want)

	// The reload drops master-cidr and refuses its statements instead.
	next := strings.Replace(rules, "name = \"master-cidr\"\nclient_address = \"127.0.0.0/8\"\npattern = \"m-cidr\"\nroute = \"master\"",
		"name = \"deny-reloaded\"\npattern = \"m-cidr\"\nerror = true\nerror_code = 1045\nerror_message = \"refused since the reload\"", 1)
	if next == rules {
		t.Fatal("the reload's rules are the same")
	}
	writeConfig(t, path, rulesConfig(nil, next))
	changes, err := srv.Reload()
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(changes, "\n")
	for _, w := range []string{`rule "master-cidr": removed`, `rule "deny-reloaded": added`} {
		if !strings.Contains(joined, w) || strings.Contains(joined, "needs restart") {
			t.Errorf("reload changes lack %q or need a restart:\n%s", w, joined)
		}
	}
	after := runRuleCases(t, srv, []ruleCase{
		{name: "refused after the reload", sql: "SELECT @@server_id /* m-cidr */", errCode: 1045, errMsg: "refused since the reload", hits: []string{"deny-reloaded"}},
		{name: "kept rule after the reload", sql: "SELECT @@server_id /* m-kind */", want: "master", hits: []string{"master-kind-cluster"}},
	})
	want2 := map[string]int{"deny-reloaded": after["deny-reloaded"], "master-kind-cluster": want["master-kind-cluster"] + after["master-kind-cluster"],
		"master-prepared": want["master-prepared"]}
	checkRuleHits(t, srv, []string{"deny-reloaded", "master-cidr-miss", "master-kind-cluster", "master-prepared"}, want2)
	if got := scrapeFrom(t, srv, `sluice_rule_hits_total{rule="master-cidr"}`); got != 0 {
		t.Errorf("the removed rule is still exported with %v hits", got)
	}

	// A file with a rule that could route writes to a replica is refused
	// and changes nothing.
	writeConfig(t, path, rulesConfig(nil, next+"\n[[rule]]\nname = \"unsafe\"\nroute = \"replica\"\n"))
	if _, err := srv.Reload(); err == nil || !strings.Contains(err.Error(), `rule[4] ("unsafe"): route = "replica" needs kind = "read"`) {
		t.Errorf("reload of an unsafe rule: %v", err)
	}
	checkRuleHits(t, srv, []string{"deny-reloaded", "master-cidr-miss", "master-kind-cluster", "master-prepared"}, want2)
}
