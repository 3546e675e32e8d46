package rules

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/router"
)

const base = `
[auth]
address = "127.0.0.1:3310"

[[cluster]]
name = "main"
user = "sluice"
master = "127.0.0.1:3306"

[[cluster]]
name = "other"
user = "sluice"
master = "127.0.0.1:3406"
`

func compile(t testing.TB, doc string, prev *Set) *Set {
	t.Helper()
	cfg, err := conf.Parse([]byte(base + doc))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Compile(cfg, prev)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var classify = router.New(100)

// input is a statement of sql by user "app" in schema "shop" on cluster
// "main" from 10.1.2.3.
func input(sql string) *Input {
	return &Input{Plan: classify.Classify(sql), Text: []byte(sql), User: "app", Schema: "shop", Cluster: "main",
		Addr: netip.MustParseAddr("10.1.2.3")}
}

// names lists the rules d matched.
func names(s *Set, d Decision) string {
	var out []string
	for i := range s.Rules() {
		if d.matched[i/64]&(1<<(i%64)) != 0 {
			out = append(out, s.Rules()[i].Name)
		}
	}
	return strings.Join(out, ",")
}

// TestMatchEachField: a rule with one match field matches the statements
// for which that field holds and no others.
func TestMatchEachField(t *testing.T) {
	sel := "SELECT a FROM t WHERE id = 5"
	digest := classify.Classify(sel).Digest
	id := router.FormatDigestID(router.DigestID(digest))
	for _, tc := range []struct {
		name, rule string
		in         *Input
		want       bool
	}{
		{"digest text", `digest = "` + digest + `"`, input(sel), true},
		{"digest text, other literal", `digest = "` + digest + `"`, input("SELECT a FROM t WHERE id = 77"), true},
		{"digest text, other statement", `digest = "` + digest + `"`, input("SELECT b FROM t WHERE id = 5"), false},
		{"digest id", `digest = "` + id + `"`, input(sel), true},
		{"digest id 0x upper", `digest = "0x` + strings.ToUpper(id) + `"`, input(sel), true},
		{"digest id, other statement", `digest = "` + id + `"`, input("DELETE FROM t"), false},
		{"pattern", `pattern = "(?i)from\\s+t\\b"`, input(sel), true},
		{"pattern miss", `pattern = "^UPDATE"`, input(sel), false},
		{"user", `user = "app"`, input(sel), true},
		{"user miss", `user = "batch"`, input(sel), false},
		{"schema", `schema = "shop"`, input(sel), true},
		{"schema miss", `schema = "pay"`, input(sel), false},
		{"cidr", `client_address = "10.0.0.0/8"`, input(sel), true},
		{"cidr miss", `client_address = "192.168.0.0/16"`, input(sel), false},
		{"single address", `client_address = "10.1.2.3"`, input(sel), true},
		{"single address miss", `client_address = "10.1.2.4"`, input(sel), false},
		{"kind read", `kind = "read"`, input(sel), true},
		{"kind read, a write", `kind = "read"`, input("UPDATE t SET a = 1"), false},
		{"kind read, locking select", `kind = "read"`, input("SELECT a FROM t FOR UPDATE"), false},
		{"kind write", `kind = "write"`, input("INSERT INTO t VALUES (1)"), true},
		{"kind write, ddl", `kind = "write"`, input("CREATE TABLE x (a INT)"), true},
		{"kind ddl", `kind = "ddl"`, input("ALTER TABLE t ADD COLUMN b INT"), true},
		{"kind ddl, dml", `kind = "ddl"`, input("INSERT INTO t VALUES (1)"), false},
		{"kind use", `kind = "use"`, input("USE shop"), true},
		{"kind set", `kind = "set"`, input("SET NAMES utf8mb4"), true},
		{"kind txn", `kind = "txn"`, input("BEGIN"), true},
		{"cluster", `cluster = "main"`, input(sel), true},
		{"cluster miss", `cluster = "other"`, input(sel), false},
		{"every field", `user = "app"` + "\n" + `schema = "shop"` + "\n" + `kind = "read"` + "\n" + `client_address = "10.0.0.0/8"`, input(sel), true},
		{"every field but one", `user = "app"` + "\n" + `schema = "pay"` + "\n" + `kind = "read"`, input(sel), false},
		{"no field", ``, input(sel), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := compile(t, "[[rule]]\nname = \"r\"\nlog = true\n"+tc.rule+"\n", nil)
			d := s.Match(tc.in)
			if d.Matched() != tc.want || d.Log != tc.want {
				t.Errorf("matched %v (log %v), want %v", d.Matched(), d.Log, tc.want)
			}
		})
	}
}

// TestMatchOrderAndContinue: the first matching rule decides; a rule with
// continue lets later ones add actions but not replace its own.
func TestMatchOrderAndContinue(t *testing.T) {
	s := compile(t, `
[[rule]]
name = "reports"
user = "report"
kind = "read"
route = "replica"

[[rule]]
name = "count-all"
log = true
continue = true

[[rule]]
name = "pin-app"
user = "app"
route = "master"
continue = true

[[rule]]
name = "deny-drop"
pattern = "(?i)^DROP"
error = true
error_code = 1045
error_message = "no drops here"

[[rule]]
name = "late-route"
route = "master"

[[rule]]
name = "never"
error = true
`, nil)
	sel := input("SELECT 1 FROM t")
	d := s.Match(sel)
	if got := names(s, d); got != "count-all,pin-app,late-route" {
		t.Errorf("SELECT by app matched %q", got)
	}
	if d.Route != RouteMaster || s.Rule(d.RouteRule).Name != "pin-app" || !d.Log || d.Err {
		t.Errorf("SELECT by app: %+v", d)
	}
	drop := input("DROP TABLE t")
	d = s.Match(drop)
	if got := names(s, d); got != "count-all,pin-app,deny-drop" {
		t.Errorf("DROP by app matched %q", got)
	}
	// pin-app's route came first: the later error does not replace it.
	if d.Err || d.Route != RouteMaster {
		t.Errorf("DROP by app: %+v", d)
	}
	drop.User = "dba"
	d = s.Match(drop)
	if got := names(s, d); got != "count-all,deny-drop" {
		t.Errorf("DROP by dba matched %q", got)
	}
	if !d.Err || d.ErrCode != 1045 || d.ErrMsg != "no drops here" || s.Rule(d.ErrRule).Name != "deny-drop" || d.Route != RouteNone {
		t.Errorf("DROP by dba: %+v", d)
	}
	rep := input("SELECT 1 FROM t")
	rep.User = "report"
	d = s.Match(rep)
	if got := names(s, d); got != "reports" || d.Route != RouteReplica || d.Log {
		t.Errorf("SELECT by report matched %q: %+v", got, d)
	}
}

// TestDefaultError: error = true without a code refuses with 1142.
func TestDefaultError(t *testing.T) {
	s := compile(t, "[[rule]]\nname = \"deny\"\nerror = true\n", nil)
	d := s.Match(input("SELECT 1"))
	if !d.Err || d.ErrCode != 1142 || d.ErrMsg != "" {
		t.Errorf("decision %+v", d)
	}
	if a := s.Rules()[0].Actions(); a != "error=1142" {
		t.Errorf("actions %q", a)
	}
}

// TestCountAndReload: Count adds a hit and the time to each matched rule;
// a Set compiled from a reload keeps the counters of rules it keeps by
// name and starts new ones at 0.
func TestCountAndReload(t *testing.T) {
	s := compile(t, "[[rule]]\nname = \"a\"\ncontinue = true\n[[rule]]\nname = \"b\"\nkind = \"write\"\n", nil)
	now := time.Unix(1700000000, 0)
	for range 3 {
		d := s.Match(input("SELECT 1"))
		s.Count(&d, now)
	}
	d := s.Match(input("DELETE FROM t"))
	s.Count(&d, now.Add(time.Second))
	a, b := &s.Rules()[0], &s.Rules()[1]
	if a.Hits() != 4 || b.Hits() != 1 || !b.LastHit().Equal(now.Add(time.Second)) || !a.LastHit().Equal(now.Add(time.Second)) {
		t.Errorf("hits a=%d b=%d last b %v", a.Hits(), b.Hits(), b.LastHit())
	}
	next := compile(t, "[[rule]]\nname = \"c\"\n[[rule]]\nname = \"a\"\n", s)
	if c, a2 := &next.Rules()[0], &next.Rules()[1]; c.Hits() != 0 || !c.LastHit().IsZero() || a2.Hits() != 4 {
		t.Errorf("after reload c=%d a=%d", c.Hits(), a2.Hits())
	}
}

// TestMatchAllocatesNothing: matching a statement no rule matches, and one
// they do, allocates nothing.
func TestMatchAllocatesNothing(t *testing.T) {
	s := compile(t, `
[[rule]]
name = "p"
pattern = "^UPDATE"
[[rule]]
name = "d"
digest = "0123456789abcdef"
[[rule]]
name = "c"
client_address = "192.168.0.0/16"
[[rule]]
name = "u"
user = "app"
log = true
`, nil)
	in := input("SELECT a FROM t WHERE id = 1")
	n := testing.AllocsPerRun(100, func() {
		d := s.Match(in)
		s.Count(&d, time.Time{})
	})
	if n != 0 {
		t.Errorf("%v allocs per match", n)
	}
}

// TestNilSet: a configuration without rules matches nothing.
func TestNilSet(t *testing.T) {
	var s *Set
	if d := s.Match(input("SELECT 1")); d.Matched() || s.Len() != 0 || s.NeedsAddr() {
		t.Errorf("nil set: %+v", d)
	}
}

// BenchmarkMatch matches a point select against rules that do not match
// it, one per match field, and against one that does.
func BenchmarkMatch(b *testing.B) {
	miss := `
[[rule]]
name = "user"
user = "nobody"
[[rule]]
name = "digest"
digest = "select c from sbtest2 where id = ?"
[[rule]]
name = "id"
digest = "0123456789abcdef"
[[rule]]
name = "cidr"
client_address = "192.168.0.0/16"
[[rule]]
name = "kind"
kind = "ddl"
[[rule]]
name = "pattern"
pattern = "(?i)^UPDATE sbtest2"
`
	for _, bc := range []struct{ name, rules string }{
		{"6-rules-no-match", miss},
		{"6-rules-then-match", miss + "[[rule]]\nname = \"hit\"\nkind = \"read\"\nroute = \"replica\"\n"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg, err := conf.Parse([]byte(base + bc.rules))
			if err != nil {
				b.Fatal(err)
			}
			s, err := Compile(cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			in := input("SELECT c FROM sbtest1 WHERE id=5012")
			b.ReportAllocs()
			for b.Loop() {
				d := s.Match(in)
				if d.Matched() {
					s.Count(&d, time.Time{})
				}
			}
		})
	}
}

// TestNewActions: route to another cluster, timeout and mirror compile
// with the cluster's index, are spelled in Actions, and Match keeps the
// first rule's of each as continue adds later rules' actions.
func TestNewActions(t *testing.T) {
	s := compile(t, `
[[rule]]
name = "away"
kind = "read"
route = "other"
timeout = "2s"
continue = true

[[rule]]
name = "copy"
kind = "write"
mirror = "other"
timeout = "500ms"
continue = true

[[rule]]
name = "later"
timeout = "9s"
mirror = "other"
`, nil)
	rs := s.Rules()
	if r := rs[0]; r.Route != RouteCluster || r.RouteTo != "other" || r.RouteToIdx != 1 || r.Timeout != 2*time.Second {
		t.Errorf("rule away compiled as %+v", r)
	}
	if r := rs[1]; r.Mirror != "other" || r.MirrorIdx != 1 || r.Route != RouteNone {
		t.Errorf("rule copy compiled as %+v", r)
	}
	for i, want := range []string{"route=other,timeout=2s,continue", "timeout=500ms,mirror=other,continue", "timeout=9s,mirror=other"} {
		if got := rs[i].Actions(); got != want {
			t.Errorf("rule %s: Actions %q, want %q", rs[i].Name, got, want)
		}
	}
	for _, tc := range []struct {
		sql     string
		matched string
		route   Route
		timeout time.Duration
		mirror  string // the rule whose mirror applies
	}{
		{"SELECT a FROM t", "away,later", RouteCluster, 2 * time.Second, "later"},
		{"UPDATE t SET a = 1", "copy,later", RouteNone, 500 * time.Millisecond, "copy"},
		{"BEGIN", "later", RouteNone, 9 * time.Second, "later"},
	} {
		d := s.Match(input(tc.sql))
		if got := names(s, d); got != tc.matched {
			t.Errorf("%s: matched %q, want %q", tc.sql, got, tc.matched)
		}
		if d.Route != tc.route || d.Timeout != tc.timeout {
			t.Errorf("%s: route %v timeout %v, want %v %v", tc.sql, d.Route, d.Timeout, tc.route, tc.timeout)
		}
		if !d.Mirror || s.Rule(d.MirrorRule).Name != tc.mirror {
			t.Errorf("%s: mirror %v rule %d, want rule %s", tc.sql, d.Mirror, d.MirrorRule, tc.mirror)
		}
		if d.Route == RouteCluster && s.Rule(d.RouteRule).RouteToIdx != 1 {
			t.Errorf("%s: routed by rule %d", tc.sql, d.RouteRule)
		}
	}
}

// TestCacheTTL: the first cache_ttl of the matching rules is the
// decision's, also through continue; a non-matching rule's is not.
func TestCacheTTL(t *testing.T) {
	s := compile(t, `
[[rule]]
name = "count"
continue = true

[[rule]]
name = "catalog"
pattern = "FROM catalog"
kind = "read"
cache_ttl = "5s"
continue = true

[[rule]]
name = "all-reads"
kind = "read"
cache_ttl = "1s"
`, nil)
	if d := s.Match(input("SELECT * FROM catalog WHERE id = 1")); d.CacheTTL != 5*time.Second || names(s, d) != "count,catalog,all-reads" {
		t.Errorf("catalog read: cache_ttl %v, matched %s", d.CacheTTL, names(s, d))
	}
	if d := s.Match(input("SELECT * FROM orders")); d.CacheTTL != time.Second {
		t.Errorf("other read: cache_ttl %v, want 1s", d.CacheTTL)
	}
	if d := s.Match(input("UPDATE catalog SET a = 1")); d.CacheTTL != 0 {
		t.Errorf("write: cache_ttl %v, want none", d.CacheTTL)
	}
	if a := s.Rules()[1].Actions(); a != "continue,cache_ttl=5s" {
		t.Errorf("actions %q", a)
	}
}
