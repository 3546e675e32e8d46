package conf

import (
	"strings"
	"testing"
	"time"
)

// TestLimitsDefaultsAndInheritance: [limits] has MySQL-like defaults, and a
// [[limits.user]] entry takes every key it does not set from [limits],
// while a key it sets (even to 0) wins.
func TestLimitsDefaultsAndInheritance(t *testing.T) {
	c := mustParse(t, base)
	want := LimitValues{IdleTimeout: Duration{8 * time.Hour}, MaxQueued: 1000, QueueTimeout: Duration{time.Second}}
	if c.Limits.LimitValues != want {
		t.Fatalf("default limits %+v, want %+v", c.Limits.LimitValues, want)
	}
	c = mustParse(t, base+`
[limits]
max_connections = 50
idle_timeout = "10m"
max_statements_per_second = 200

[[limits.user]]
name = "batch"
max_statements_per_second = 1000
burst = 10
idle_timeout = "0s"

[[limits.user]]
name = "web"
query_timeout = "2s"
`)
	batch, named := c.Limits.For("batch")
	if !named {
		t.Fatal("batch has no entry")
	}
	if batch.MaxConnections != 50 || batch.IdleTimeout.Duration != 0 || batch.MaxStatementsPerSecond != 1000 ||
		batch.Burst != 10 || batch.MaxQueued != 1000 || batch.QueueTimeout.Duration != time.Second {
		t.Errorf("batch limits %+v", batch)
	}
	web, _ := c.Limits.For("web")
	if web.QueryTimeout.Duration != 2*time.Second || web.MaxStatementsPerSecond != 200 || web.IdleTimeout.Duration != 10*time.Minute {
		t.Errorf("web limits %+v", web)
	}
	other, named := c.Limits.For("someone")
	if named || other != c.Limits.LimitValues {
		t.Errorf("unnamed user gets %+v (named %v), want [limits]", other, named)
	}
}

func TestLimitsValidation(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"[limits]\nmax_connections = -1", "limits.max_connections must be >= 0"},
		{"[limits]\nidle_timeout = \"-1s\"", "limits.idle_timeout must be >= 0"},
		{"[limits]\nmax_statements_per_second = -5", "limits.max_statements_per_second must be between 0"},
		{"[limits]\nburst = -1", "limits.burst must be between 0"},
		{"[limits]\nmax_queued = -1", "limits.max_queued must be >= 0"},
		{"[limits]\nqueue_timeout = \"-2s\"", "limits.queue_timeout must be >= 0"},
		{"[[limits.user]]\nmax_connections = 1", "limits.user[0]: name is required"},
		{"[[limits.user]]\nname = \"a\"\n[[limits.user]]\nname = \"a\"", `limits.user[1] ("a"): name "a" is already used by limits.user[0]`},
		{"[[limits.user]]\nname = \"a\"\nquery_timeout = \"-1s\"", `limits.user[0] ("a"): query_timeout must be >= 0`},
		{"[[limits.user]]\nname = \"admin\"", `"admin" is the admin user`},
		{"[limits]\nmax_conections = 1", `unknown key "limits.max_conections" (did you mean "max_connections"?)`},
		{"[[limits.user]]\nname = \"a\"\nburst = \"ten\"", "limits.user[0].burst: want an integer, got a string"},
		{"[limits]\nquery_timeout = \"soon\"", "limits.query_timeout: invalid duration"},
	} {
		_, err := Parse([]byte(base + "\n" + tc.doc + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.doc, err, tc.want)
		}
	}
	// With static auth the users are known.
	static := strings.Replace(base, "address = \"127.0.0.1:3310\"", "backend = \"static\"", 1) +
		"[[auth.user]]\nname = \"app\"\npassword_hash = \"*0123456789ABCDEF0123456789ABCDEF01234567\"\n"
	if _, err := Parse([]byte(static + "[[limits.user]]\nname = \"app\"\nmax_connections = 3\n")); err != nil {
		t.Errorf("limits for a static user: %v", err)
	}
	for _, tc := range []struct{ doc, want string }{
		{static + "[[limits.user]]\nname = \"apq\"\n", `limits.user[0] ("apq"): no [[auth.user]] is named "apq"`},
	} {
		_, err := Parse([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.doc, err, tc.want)
		}
	}
}

func TestLimitsDiffAndDescribe(t *testing.T) {
	old := mustParse(t, base+"[limits]\nmax_connections = 5\n[[limits.user]]\nname = \"a\"\nmax_statements_per_second = 100\n")
	next := mustParse(t, base+"[limits]\nmax_connections = 6\n[[limits.user]]\nname = \"a\"\nmax_statements_per_second = 200\n[[limits.user]]\nname = \"b\"\n")
	got := strings.Join(Diff(old, next).Strings(), "\n")
	for _, want := range []string{
		"limits.max_connections: 5 -> 6",
		// a inherits max_connections, so it changes with [limits].
		`limits.user "a" max_connections: 5 -> 6`,
		`limits.user "a" max_statements_per_second: 100 -> 200`,
		`limits.user "b": added`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("diff lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "needs restart") {
		t.Errorf("limits need no restart:\n%s", got)
	}
	d := next.Describe()
	for _, want := range []string{
		"limits: max_connections 6, idle_timeout 8h, query_timeout off, max_statements_per_second unlimited",
		`  user "a": max_connections 6, idle_timeout 8h, query_timeout off, max_statements_per_second 200 (burst 200, max_queued 1000, queue_timeout 1s)`,
	} {
		if !strings.Contains(d, want) {
			t.Errorf("Describe lacks %q:\n%s", want, d)
		}
	}
}
