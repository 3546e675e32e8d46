package conf

import (
	"strings"
	"testing"
)

// TestRulesParse: a [[rule]] with every key decodes into Rules in file
// order.
func TestRulesParse(t *testing.T) {
	c := mustParse(t, base+`
[[rule]]
name = "first"
digest = "select ? from t"
pattern = "^SELECT"
user = "app"
schema = "shop"
client_address = "10.0.0.0/8"
kind = "read"
cluster = "main"
route = "replica"
log = true
continue = true

[[rule]]
name = "deny"
error = true
error_code = 1045
error_message = "no"
`)
	if len(c.Rules) != 2 || c.Rules[0].Name != "first" || c.Rules[1].Name != "deny" {
		t.Fatalf("rules %+v", c.Rules)
	}
	want := Rule{Name: "first", Digest: "select ? from t", Pattern: "^SELECT", User: "app", Schema: "shop",
		ClientAddress: "10.0.0.0/8", Kind: "read", Cluster: "main", Route: "replica", Log: true, Continue: true}
	if c.Rules[0] != want {
		t.Errorf("rule 0 %+v, want %+v", c.Rules[0], want)
	}
	if r := c.Rules[1]; !r.Error || r.ErrorCode != 1045 || r.ErrorMessage != "no" {
		t.Errorf("rule 1 %+v", r)
	}
}

// TestRulesValidation: each mistake in a [[rule]] is reported naming the
// rule and the key, and a rule that could route a write to a replica is
// refused.
func TestRulesValidation(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"[[rule]]\nroute = \"master\"", "rule[0]: name is required"},
		{"[[rule]]\nname = \"a\"\n[[rule]]\nname = \"a\"", `rule[1] ("a"): name "a" is already used by rule[0]`},
		{"[[rule]]\nname = \"a b\"", `rule[0] ("a b"): name may hold only letters`},
		{"[[rule]]\nname = \"a\"\npatern = \"x\"", `unknown key "rule.patern" (did you mean "pattern"?)`},
		{"[[rule]]\nname = \"a\"\npattern = \"(\"", `rule[0] ("a"): pattern is not a valid RE2 expression`},
		{"[[rule]]\nname = \"a\"\nclient_address = \"10.0.0.0/33\"", `rule[0] ("a"): client_address: "10.0.0.0/33" is not a CIDR prefix`},
		{"[[rule]]\nname = \"a\"\nclient_address = \"nowhere\"", `rule[0] ("a"): client_address: "nowhere" is neither an address`},
		{"[[rule]]\nname = \"a\"\nkind = \"select\"", `rule[0] ("a"): kind must be`},
		{"[[rule]]\nname = \"a\"\ncluster = \"other\"", `rule[0] ("a"): cluster: no [[cluster]] is named "other"`},
		{"[[rule]]\nname = \"a\"\nroute = \"replica\"", `rule[0] ("a"): route = "replica" needs kind = "read"`},
		{"[[rule]]\nname = \"a\"\nroute = \"replica\"\nkind = \"write\"", `rule[0] ("a"): route = "replica" needs kind = "read"`},
		{"[[rule]]\nname = \"a\"\nroute = \"replica\"\nkind = \"ddl\"", `rule[0] ("a"): route = "replica" needs kind = "read"`},
		{"[[rule]]\nname = \"a\"\nroute = \"elsewhere\"", `rule[0] ("a"): route must be "master", "replica" or the name of a [[cluster]] (got "elsewhere"`},
		{"[[rule]]\nname = \"a\"\ncluster = \"main\"\nroute = \"main\"", `rule[0] ("a"): route = "main" sends statements to the cluster the rule's cluster key already matches`},
		{"[[rule]]\nname = \"a\"\ntimeout = \"2 seconds\"", `rule[0].timeout`},
		{"[[rule]]\nname = \"a\"\ntimeout = \"-2s\"", `rule[0] ("a"): timeout must be > 0 (got -2s)`},
		{"[[rule]]\nname = \"a\"\nerror = true\ntimeout = \"2s\"", `rule[0] ("a"): error and timeout exclude each other`},
		{"[[rule]]\nname = \"a\"\nerror = true\nmirror = \"b\"", `rule[0] ("a"): error and mirror exclude each other`},
		{"[[rule]]\nname = \"a\"\nmirror = \"nowhere\"", `rule[0] ("a"): mirror: no [[cluster]] is named "nowhere"`},
		{"[[rule]]\nname = \"a\"\nmirror = \"main\"", `rule[0] ("a"): mirror = "main" is the cluster the rule's statements run on`},
		{"[[rule]]\nname = \"a\"\ncluster = \"b\"\nmirror = \"b\"", `rule[0] ("a"): mirror = "b" is the cluster the rule's statements run on`},
		{"[[rule]]\nname = \"a\"\nroute = \"b\"\nmirror = \"b\"", `rule[0] ("a"): mirror = "b" is also the rule's route`},
		{"[[rule]]\nname = \"a\"\nmirror = \"b\"\n[[broadcast]]\nschema = \"s\"\ntable = \"t\"", `rule[0] ("a"): mirror cannot be used with [[broadcast]] tables`},
		{"[[rule]]\nname = \"a\"\nmirror = \"b\"\n[[shard]]\nschema = \"s\"\ntable = \"t\"\nkey = \"id\"\nalgorithm = \"mod\"\nclusters = [\"main\", \"b\"]",
			`rule[0] ("a"): mirror = "b" holds shards of a [[shard]] rule`},
		{"[[rule]]\nname = \"a\"\nmirror = \"main\"\n[[shard]]\nschema = \"s\"\ntable = \"t\"\nkey = \"id\"\nalgorithm = \"mod\"\nclusters = [\"b\"]",
			`rule[0] ("a"): mirror = "main" is the default cluster`},
		{"[proxy]\nmirror_queue = 0", `proxy.mirror_queue must be between 1 and`},
		{"[proxy]\nmirror_workers = 100", `proxy.mirror_workers must be between 1 and 64 (got 100)`},
		{"[[rule]]\nname = \"a\"\nroute = \"master\"\nerror = true", `rule[0] ("a"): error and route exclude each other`},
		{"[[rule]]\nname = \"a\"\nerror_code = 1045", `rule[0] ("a"): error_code and error_message need error = true`},
		{"[[rule]]\nname = \"a\"\nerror = true\nerror_code = 7", `rule[0] ("a"): error_code must be a MySQL error code`},
		{"[[rule]]\nname = \"a\"\nlog = \"yes\"", "rule[0].log: want true or false"},
	} {
		_, err := Parse([]byte(base + cluster("b", "127.0.0.1:3406") + "\n" + tc.doc + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.doc, err, tc.want)
		}
	}
	if _, err := Parse([]byte(base + "[[rule]]\nname = \"ok\"\nroute = \"replica\"\nkind = \"read\"\nclient_address = \"127.0.0.1\"\n")); err != nil {
		t.Errorf("a replica route for reads: %v", err)
	}
	ok := "[[rule]]\nname = \"ok\"\nroute = \"b\"\ntimeout = \"2s\"\n[[rule]]\nname = \"copy\"\nkind = \"write\"\nmirror = \"b\"\n"
	if _, err := Parse([]byte(base + cluster("b", "127.0.0.1:3406") + ok)); err != nil {
		t.Errorf("a route to another cluster, a timeout and a mirror: %v", err)
	}
}

// TestRulesDiff: rules added, removed, changed and reordered are live
// changes of a reload.
func TestRulesDiff(t *testing.T) {
	old := mustParse(t, base+"[[rule]]\nname = \"a\"\nlog = true\n[[rule]]\nname = \"b\"\nlog = true\n[[rule]]\nname = \"c\"\n")
	next := mustParse(t, base+"[[rule]]\nname = \"b\"\nlog = true\n[[rule]]\nname = \"a\"\nlog = false\n[[rule]]\nname = \"d\"\n")
	cs := Diff(old, next)
	got := strings.Join(cs.Strings(), "\n")
	for _, want := range []string{`rule "a": changed`, `rule "c": removed`, `rule "d": added`, "rule: order changed"} {
		if !strings.Contains(got, want) {
			t.Errorf("diff lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, `rule "b"`) {
		t.Errorf("diff reports the unchanged rule b:\n%s", got)
	}
	if cs.NeedRestart() != 0 {
		t.Errorf("rule changes need a restart:\n%s", got)
	}
	if live := Live(old, next); len(live.Rules) != 3 || live.Rules[0].Name != "b" {
		t.Errorf("Live keeps rules %+v, want the file's", live.Rules)
	}
}

// TestRulesDescribe: check-config's description lists each rule with its
// match keys and actions.
func TestRulesDescribe(t *testing.T) {
	c := mustParse(t, base+"[[rule]]\nname = \"reports\"\nuser = \"reporting\"\nkind = \"read\"\nroute = \"replica\"\nlog = true\n"+
		"[[rule]]\nname = \"deny\"\npattern = \"^DROP\"\nerror = true\n[[rule]]\nname = \"all\"\n"+
		"[[rule]]\nname = \"slow\"\nkind = \"write\"\ntimeout = \"2s\"\nmirror = \"b\"\n"+cluster("b", "127.0.0.1:3406"))
	d := c.Describe()
	for _, want := range []string{`rule "reports": user="reporting" kind="read" -> route replica, log`,
		`rule "deny": pattern="^DROP" -> error 1142`, `rule "all": every statement -> count only`,
		`rule "slow": kind="write" -> timeout 2s, mirror b`} {
		if !strings.Contains(d, want) {
			t.Errorf("description lacks %q:\n%s", want, d)
		}
	}
}
