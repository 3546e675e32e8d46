package admin

import (
	"errors"
	"strings"
	"testing"
)

func TestParseAdmin(t *testing.T) {
	cases := []struct {
		q    string
		want adminCommand
	}{
		{"HELP", adminCommand{kind: adminHelp, limit: -1}},
		{"  help ;; ", adminCommand{kind: adminHelp, limit: -1}},
		{"SHOW HELP", adminCommand{kind: adminHelp, limit: -1}},
		{"show backends;", adminCommand{kind: adminShowBackends, limit: -1}},
		{"Show Clusters", adminCommand{kind: adminShowClusters, limit: -1}},
		{"SHOW POOLS", adminCommand{kind: adminShowPools, limit: -1}},
		{"SHOW SESSIONS", adminCommand{kind: adminShowSessions, limit: -1}},
		{"SHOW PROCESSLIST", adminCommand{kind: adminShowSessions, limit: -1}},
		{"SHOW QUERY DIGESTS", adminCommand{kind: adminShowDigests, limit: -1}},
		{"show query digests limit 5;", adminCommand{kind: adminShowDigests, limit: 5}},
		{"SHOW RULES", adminCommand{kind: adminShowRules, limit: -1}},
		{"SHOW CACHE", adminCommand{kind: adminShowCache, limit: -1}},
		{"show cache limit 5", adminCommand{kind: adminShowCache, limit: 5}},
		{"FLUSH CACHE", adminCommand{kind: adminFlushCache, limit: -1}},
		{"FLUSH CACHE app.items;", adminCommand{kind: adminFlushCache, limit: -1, schema: "app", table: "items"}},
		{"FLUSH CACHE 'app.items'", adminCommand{kind: adminFlushCache, limit: -1, schema: "app", table: "items"}},
		{"show fleet", adminCommand{kind: adminShowFleet, limit: -1}},
		{"SHOW SHARDS", adminCommand{kind: adminShowShards, limit: -1}},
		{"SHOW EVENTS", adminCommand{kind: adminShowEvents, limit: -1}},
		{"SHOW CONFIG", adminCommand{kind: adminShowConfig, limit: -1}},
		{"SHOW VERSION", adminCommand{kind: adminShowVersion, limit: -1}},
		{"SET BACKEND '127.0.0.1:3307' OFFLINE", adminCommand{kind: adminSetOffline, limit: -1, addr: "127.0.0.1:3307"}},
		{`set backend "10.0.0.1:3306" online`, adminCommand{kind: adminSetOnline, limit: -1, addr: "10.0.0.1:3306"}},
		{"SET BACKEND 'h:1' WEIGHT 3", adminCommand{kind: adminSetWeight, limit: -1, addr: "h:1", weight: 3}},
		{"SET BACKEND 'x'' OR 1=1 --' OFFLINE", adminCommand{kind: adminSetOffline, limit: -1, addr: "x' OR 1=1 --"}},
		{"KILL 7", adminCommand{kind: adminKillConnection, limit: -1, id: 7}},
		{"KILL CONNECTION 8", adminCommand{kind: adminKillConnection, limit: -1, id: 8}},
		{"kill query 9;", adminCommand{kind: adminKillQuery, limit: -1, id: 9}},
		{"KILL QUERY 'sluice-3:42'", adminCommand{kind: adminKillQuery, limit: -1, id: 42, instance: "sluice-3"}},
		{"KILL 'db-proxy-1:6033:7'", adminCommand{kind: adminKillConnection, limit: -1, id: 7, instance: "db-proxy-1:6033"}},
		{"kill connection \"a:1\";", adminCommand{kind: adminKillConnection, limit: -1, id: 1, instance: "a"}},
		{"SHOW SESSIONS FLEET", adminCommand{kind: adminShowSessionsFleet, limit: -1}},
		{"show processlist fleet;", adminCommand{kind: adminShowSessionsFleet, limit: -1}},
		{"SWITCHOVER CLUSTER main TO '127.0.0.1:3307'", adminCommand{kind: adminSwitchover, limit: -1, cluster: "main", addr: "127.0.0.1:3307"}},
		{"FAILOVER CLUSTER db_1", adminCommand{kind: adminFailover, limit: -1, cluster: "db_1"}},
		{"RELOAD CONFIG", adminCommand{kind: adminReload, limit: -1}},
		{"flush privileges;", adminCommand{kind: adminFlushPrivileges, limit: -1}},
		{"SHOW FIREWALL", adminCommand{kind: adminShowFirewall, limit: -1}},
		{"show firewall for 'app'", adminCommand{kind: adminShowFirewall, limit: -1, user: "app"}},
		{"SHOW FIREWALL FOR app;", adminCommand{kind: adminShowFirewall, limit: -1, user: "app"}},
		{"FIREWALL ALLOW 0a1b2c3d4e5f6789 FOR 'app'", adminCommand{kind: adminFirewallAllow, limit: -1, user: "app", digest: 0x0a1b2c3d4e5f6789}},
		{"firewall allow abcdef0123456789 for \"a'b\"", adminCommand{kind: adminFirewallAllow, limit: -1, user: "a'b", digest: 0xabcdef0123456789}},
		{"FIREWALL ALLOW '0xABCDEF0123456789' FOR 'app'", adminCommand{kind: adminFirewallAllow, limit: -1, user: "app", digest: 0xabcdef0123456789}},
		{"FIREWALL ALLOW 1234567890123456 FOR 'app'", adminCommand{kind: adminFirewallAllow, limit: -1, user: "app", digest: 0x1234567890123456}},
		{"FIREWALL FORGET 0a1b2c3d4e5f6789 FOR 'app'", adminCommand{kind: adminFirewallForget, limit: -1, user: "app", digest: 0x0a1b2c3d4e5f6789}},
		{"FIREWALL FORGET ALL FOR 'app'", adminCommand{kind: adminFirewallForgetAll, limit: -1, user: "app"}},
	}
	for _, c := range cases {
		got, err := parseAdmin(c.q)
		if err != nil {
			t.Errorf("parseAdmin(%q): %v", c.q, err)
			continue
		}
		if got != c.want {
			t.Errorf("parseAdmin(%q) = %+v, want %+v", c.q, got, c.want)
		}
	}
}

func TestParseAdminErrors(t *testing.T) {
	cases := []struct {
		q, mention string
	}{
		{"", "empty command"},
		{";", "empty command"},
		{"   ;  ", "empty command"},
		{"DROP TABLE x", "valid commands: SHOW BACKENDS"},
		{"SHOW TABLES", "valid commands"},
		{"SHOW QUERY", "DIGESTS"},
		{"SHOW QUERY DIGESTS LIMIT", "a number for LIMIT"},
		{"SHOW QUERY DIGESTS LIMIT -1", "unexpected '-'"},
		{"SHOW QUERY DIGESTS LIMIT 99999999999999999999", "out of range"},
		{"SET BACKEND 127.0.0.1 OFFLINE", "unexpected '.'"},
		{"SET BACKEND main OFFLINE", "quoted string"},
		{"SET BACKEND 'x' OR 1=1 -- OFFLINE", "unexpected '='"},
		{"SET BACKEND 'x' OR 1 OFFLINE", "OFFLINE, ONLINE or WEIGHT"},
		{"SET BACKEND 'x'' OR 1=1 --", "unterminated string"},
		{"SET BACKEND 'x' WEIGHT 0", "between 1 and"},
		{"SET BACKEND 'x' WEIGHT 2000000", "out of range"},
		{"SET BACKEND 'x", "unterminated string"},
		{"SET BACKEND 'x' OFFLINE; DROP TABLE t", "unexpected ';'"},
		{"KILL", "session id"},
		{"KILL 5000000000", "out of range"},
		{"KILL QUERY abc", "session id"},
		{"KILL 12abc", "bad number"},
		{"KILL QUERY 'sluice-3'", "'<instance>:<id>'"},
		{"KILL QUERY ':5'", "'<instance>:<id>'"},
		{"KILL QUERY 'sluice-3:'", `bad session id ""`},
		{"KILL 'sluice-3:x1'", `bad session id "x1"`},
		{"KILL 'sluice-3:5000000000'", `bad session id "5000000000"`},
		{"KILL 'a:1' 2", `unexpected "2"`},
		{"SHOW SESSIONS FLEET x", `unexpected "x"`},
		{"SHOW QUERY DIGESTS LIMIT 5x", "bad number"},
		{"SHOW FIREWALL FOR", "a user name after SHOW FIREWALL FOR"},
		{"SHOW FIREWALL FOR ''", "must have 1 to 128 characters"},
		{"SHOW FIREWALL 'app'", `unexpected "app"`},
		{"FIREWALL", "ALLOW <digest id> or FORGET"},
		{"FIREWALL DROP 0a1b2c3d4e5f6789 FOR 'app'", "ALLOW <digest id> or FORGET"},
		{"FIREWALL ALLOW FOR 'app'", `the digest id must be 16 hex digits, the digest_id of SHOW QUERY DIGESTS (got "FOR")`},
		{"FIREWALL ALLOW 0a1b2c FOR 'app'", `16 hex digits`},
		{"FIREWALL ALLOW 0a1b2c3d4e5f678g FOR 'app'", `16 hex digits`},
		{"FIREWALL ALLOW 0a1b2c3d4e5f6789", "FOR '<user>'"},
		{"FIREWALL ALLOW 0a1b2c3d4e5f6789 FOR", "a user name after FIREWALL"},
		{"FIREWALL FORGET ALL 'app'", "FOR '<user>'"},
		{"FIREWALL FORGET ALL FOR 'app' 'bob'", `unexpected "bob"`},
		{"FIREWALL ALLOW 0a1b2c3d4e5f6789 FOR '" + strings.Repeat("u", 129) + "'", "1 to 128 characters"},
		{"SWITCHOVER main TO 'x'", "CLUSTER <name>"},
		{"SWITCHOVER CLUSTER main", "TO '<addr>'"},
		{"FAILOVER CLUSTER", "cluster name"},
		{"RELOAD", "CONFIG"},
		{"SHOW BACKENDS extra", `unexpected "extra"`},
		{"FLUSH CACHE items", `FLUSH CACHE takes schema.table, not "items"`},
		{"FLUSH CACHE a.b.c", `FLUSH CACHE takes schema.table`},
		{"FLUSH CACHE 5", `schema.table after FLUSH CACHE`},
		{"SELECT 1", "valid commands"},
		{strings.Repeat("x", 1<<20), "valid commands"},
	}
	for _, c := range cases {
		_, err := parseAdmin(c.q)
		if err == nil {
			t.Errorf("parseAdmin(%.40q) succeeded, want an error mentioning %q", c.q, c.mention)
			continue
		}
		if !errors.Is(err, errAdminSyntax) || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("parseAdmin(%.40q) = %.200v, want errAdminSyntax mentioning %q", c.q, err, c.mention)
		}
	}
}

func FuzzParseAdmin(f *testing.F) {
	for _, s := range []string{"SHOW BACKENDS", "SET BACKEND 'a''b' WEIGHT 3", "KILL QUERY 1;", "'", "\"\"\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		cmd, err := parseAdmin(q)
		if err == nil && cmd.kind == 0 {
			t.Fatalf("parseAdmin(%q) gave no command and no error", q)
		}
	})
}
