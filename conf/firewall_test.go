package conf

import (
	"fmt"
	"strings"
	"testing"
)

// TestFirewallParse: [firewall] mode defaults to "off"; a mode and
// [[firewall.user]] entries decode, and ModeFor gives an entry's user its
// own mode and label, everyone else the table's and "default".
func TestFirewallParse(t *testing.T) {
	c := mustParse(t, base)
	if m, l := c.Firewall.ModeFor("app"); m != FirewallOff || l != "default" || c.Firewall.On() {
		t.Errorf("default firewall: mode %q label %q on %v, want off, default, false", m, l, c.Firewall.On())
	}
	c = mustParse(t, base+"\n[firewall]\nmode = \"learn\"\n[[firewall.user]]\nname = \"app\"\nmode = \"enforce\"\n"+
		"[[firewall.user]]\nname = \"batch\"\nmode = \"off\"\n")
	for _, tc := range []struct{ user, mode, label string }{
		{"app", FirewallEnforce, "app"}, {"batch", FirewallOff, "batch"}, {"other", FirewallLearn, "default"},
	} {
		if m, l := c.Firewall.ModeFor(tc.user); m != tc.mode || l != tc.label {
			t.Errorf("ModeFor(%q) = %q, %q; want %q, %q", tc.user, m, l, tc.mode, tc.label)
		}
	}
	if !c.Firewall.On() {
		t.Error("On() = false with learn and enforce users")
	}
	if (&Firewall{Users: []FirewallUser{{Name: "a", Mode: "off"}, {Name: "b"}}}).On() {
		t.Error("On() = true with every user off (an empty mode is off)")
	}
	if d := c.Describe(); !strings.Contains(d, "firewall: mode learn\n") || !strings.Contains(d, `  user "app": enforce`) {
		t.Errorf("Describe lacks the firewall:\n%s", d)
	}
}

// TestFirewallValidation: each mistake is reported naming the key and the
// line it is on.
func TestFirewallValidation(t *testing.T) {
	baseLines := strings.Count(base, "\n") + 1 // the doc starts after a newline
	for _, tc := range []struct {
		doc  string
		line int // of the doc, from 1
		want string
	}{
		{"[firewall]\nmode = \"block\"", 2, `firewall.mode: unknown value "block" (want "off", "learn" or "enforce")`},
		{"[[firewall.user]]\nmode = \"learn\"", 1, "firewall.user[0]: name is required"},
		{"[[firewall.user]]\nname = \"app\"", 1, `firewall.user[0] ("app"): mode is required`},
		{"[[firewall.user]]\nname = \"app\"\nmode = \"on\"", 3, `firewall.user[0] ("app"): mode: unknown value "on"`},
		{"[[firewall.user]]\nname = \"app\"\nmode = \"off\"\n[[firewall.user]]\nname = \"app\"\nmode = \"learn\"", 5,
			`firewall.user[1] ("app"): name "app" is already used by firewall.user[0]`},
		{"[[firewall.user]]\nname = \"admin\"\nmode = \"learn\"", 1, `firewall.user[0] ("admin"): "admin" is the admin user`},
		{"[firewall]\nmod = \"learn\"", 2, `unknown key "firewall.mod"`},
	} {
		_, err := Parse([]byte(base + "\n" + tc.doc + "\n"))
		want := fmt.Sprintf("line %d: ", baseLines+tc.line)
		if err == nil || !strings.Contains(err.Error(), want+tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.doc, err, want+tc.want)
		}
	}
}

// TestFirewallStaticUsers: with static auth an entry must name one of
// the [[auth.user]] entries.
func TestFirewallStaticUsers(t *testing.T) {
	static := strings.Replace(base, "address = \"127.0.0.1:3310\"", "backend = \"static\"", 1) +
		"[[auth.user]]\nname = \"app\"\npassword_hash = \"*0123456789ABCDEF0123456789ABCDEF01234567\"\n"
	if _, err := Parse([]byte(static + "[[firewall.user]]\nname = \"app\"\nmode = \"enforce\"\n")); err != nil {
		t.Errorf("a firewall entry for a static user: %v", err)
	}
	_, err := Parse([]byte(static + "[[firewall.user]]\nname = \"apq\"\nmode = \"enforce\"\n"))
	if want := `firewall.user[0] ("apq"): no [[auth.user]] is named "apq"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want it to contain %q", err, want)
	}
}

// TestFirewallDiffAndWarning: mode and entry changes are live changes of a
// reload; learning without a state_dir is warned about.
func TestFirewallDiffAndWarning(t *testing.T) {
	old := mustParse(t, base+"\n[firewall]\nmode = \"off\"\n[[firewall.user]]\nname = \"a\"\nmode = \"learn\"\n[[firewall.user]]\nname = \"b\"\nmode = \"learn\"\n")
	nw := mustParse(t, base+"\n[firewall]\nmode = \"learn\"\n[[firewall.user]]\nname = \"a\"\nmode = \"enforce\"\n[[firewall.user]]\nname = \"c\"\nmode = \"off\"\n")
	got := strings.Join(Diff(old, nw).Strings(), "; ")
	want := `firewall.mode: "off" -> "learn"; firewall.user "a" mode: "learn" -> "enforce"; firewall.user "b": removed; firewall.user "c": added`
	if got != want {
		t.Errorf("Diff = %s\nwant %s", got, want)
	}
	if l := Live(old, nw); l.Firewall.Mode != FirewallLearn || len(l.Firewall.Users) != 2 {
		t.Errorf("Live keeps the running firewall: %+v", l.Firewall)
	}
	warned := func(c *Config) bool {
		for _, w := range c.Warnings() {
			if strings.HasPrefix(w, "firewall: ") {
				return true
			}
		}
		return false
	}
	if !warned(nw) {
		t.Error("no warning for a learning firewall without proxy.state_dir")
	}
	nw.Proxy.StateDir = "/var/lib/sluice"
	if warned(nw) || warned(mustParse(t, base)) {
		t.Error("a warning with state_dir set, or with the firewall off")
	}
}
