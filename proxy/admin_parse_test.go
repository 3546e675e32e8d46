package proxy

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
		{"SWITCHOVER CLUSTER main TO '127.0.0.1:3307'", adminCommand{kind: adminSwitchover, limit: -1, cluster: "main", addr: "127.0.0.1:3307"}},
		{"FAILOVER CLUSTER db_1", adminCommand{kind: adminFailover, limit: -1, cluster: "db_1"}},
		{"RELOAD CONFIG", adminCommand{kind: adminReload, limit: -1}},
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
		{"SWITCHOVER main TO 'x'", "CLUSTER <name>"},
		{"SWITCHOVER CLUSTER main", "TO '<addr>'"},
		{"FAILOVER CLUSTER", "cluster name"},
		{"RELOAD", "CONFIG"},
		{"SHOW BACKENDS extra", `unexpected "extra"`},
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

func TestDigestStore(t *testing.T) {
	ds := newDigestStore()
	ds.record("SELECT ?", 2e6, 0, false, digestReplica)
	ds.record("SELECT ?", 4e6, 0, true, digestMaster)
	ds.record("UPDATE t SET a = ?", 1e6, 3, false, digestMaster)
	rows := ds.snapshot(-1)
	if len(rows) != 2 {
		t.Fatalf("got %d digests, want 2", len(rows))
	}
	sel := rows[0]
	if sel.digest != "SELECT ?" || sel.count != 2 || sel.total != 6e6 || sel.max != 4e6 || sel.errors != 1 ||
		digestRouteNames(sel.routes) != "master,replica" {
		t.Fatalf("SELECT ? row: %+v", sel)
	}
	if up := rows[1]; up.rows != 3 || up.count != 1 {
		t.Fatalf("UPDATE row: %+v", up)
	}
	if got := ds.snapshot(1); len(got) != 1 || got[0].digest != "SELECT ?" {
		t.Fatalf("LIMIT 1: %+v", got)
	}
}

func TestDigestStoreBounded(t *testing.T) {
	ds := newDigestStore()
	for i := range maxDigests + 10 {
		ds.record("SELECT "+strings.Repeat("x", i%50)+string(rune('a'+i%26))+itoa(i), 1, 0, false, digestMaster)
	}
	rows := ds.snapshot(-1)
	if len(rows) != maxDigests+1 {
		t.Fatalf("store holds %d digests, want %d plus the overflow row", len(rows), maxDigests)
	}
	for _, r := range rows {
		if r.digest == overflowDigest {
			if r.count != 10 {
				t.Fatalf("overflow row counts %d statements, want 10", r.count)
			}
			return
		}
	}
	t.Fatal("no overflow row")
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func TestDigestRecordAllocs(t *testing.T) {
	ds := newDigestStore()
	for _, d := range []string{"SELECT c FROM sbtest1 WHERE id = ?", ""} {
		ds.record(d, 1, 1, false, digestReplica)
		if n := testing.AllocsPerRun(1000, func() { ds.record(d, 1000, 1, false, digestReplica) }); n != 0 {
			t.Fatalf("record of known digest %q allocates %.1f times, want 0", d, n)
		}
	}
}

// TestDigestSameTextTwoStrings: two strings with one text (a plan evicted
// and classified again) count in one row.
func TestDigestSameTextTwoStrings(t *testing.T) {
	ds := newDigestStore()
	a := strings.Repeat("SELECT ?", 1)
	b := strings.Clone(a)
	ds.record(a, 1, 0, false, digestMaster)
	ds.record(b, 1, 0, false, digestMaster)
	if rows := ds.snapshot(-1); len(rows) != 1 || rows[0].count != 2 {
		t.Fatalf("two strings of one digest: %+v", rows)
	}
}

func BenchmarkDigestRecord(b *testing.B) {
	ds := newDigestStore()
	d := "SELECT c FROM sbtest1 WHERE id = ?"
	ds.record(d, 1, 1, false, digestReplica)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ds.record(d, 1000, 1, false, digestReplica)
		}
	})
}

func TestEventRing(t *testing.T) {
	var r eventRing
	for i := range maxEvents + 5 {
		r.add(adminEvent{kind: "backend_up", detail: itoa(i)})
	}
	l := r.list()
	if len(l) != maxEvents {
		t.Fatalf("ring holds %d events, want %d", len(l), maxEvents)
	}
	if l[0].detail != "5" || l[len(l)-1].detail != itoa(maxEvents+4) {
		t.Fatalf("ring order: first %s, last %s", l[0].detail, l[len(l)-1].detail)
	}
}
