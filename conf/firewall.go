package conf

import (
	"fmt"
	"slices"
	"strings"
)

// Firewall modes: what the [firewall] allowlist does with a user's
// statements.
const (
	// FirewallOff lets every statement through and records nothing.
	FirewallOff = "off"
	// FirewallLearn lets every statement through and adds its digest to
	// the user's allowlist.
	FirewallLearn = "learn"
	// FirewallEnforce refuses a statement whose digest is not on the
	// user's allowlist.
	FirewallEnforce = "enforce"
)

// FirewallModes are the values of firewall.mode and of an entry's mode,
// in the order error messages list them.
var FirewallModes = []string{FirewallOff, FirewallLearn, FirewallEnforce}

// Firewall is the [firewall] table: the statement allowlist's mode for
// every user, and [[firewall.user]] entries that give some users their
// own. The allowlists themselves are not configuration: sluice learns
// them (and keeps them in proxy.state_dir) and the admin port edits them.
type Firewall struct {
	// Mode is the mode of users without an entry: "off" (the default),
	// "learn" or "enforce".
	Mode string `toml:"mode"`
	// Users are the [[firewall.user]] entries, one per user name.
	Users []FirewallUser `toml:"user"`
}

// FirewallUser is one [[firewall.user]] entry.
type FirewallUser struct {
	// Name is the MySQL user name the entry applies to.
	Name string `toml:"name"`
	// Mode is the user's mode; required.
	Mode string `toml:"mode"`
}

// ModeFor returns user's firewall mode and the label its metrics carry:
// its [[firewall.user]] entry's mode and name, else [firewall] mode and
// "default". An empty mode (a Config built in code) is "off".
func (f *Firewall) ModeFor(user string) (mode, label string) {
	mode, label = f.DefaultMode(), "default"
	for i := range f.Users {
		if f.Users[i].Name == user {
			mode, label = f.Users[i].Mode, user
			break
		}
	}
	if mode == "" {
		mode = FirewallOff // an entry of a Config built in code
	}
	return mode, label
}

// DefaultMode is the mode of users without an entry: [firewall] mode,
// "off" when empty.
func (f *Firewall) DefaultMode() string {
	if f.Mode == "" {
		return FirewallOff
	}
	return f.Mode
}

// On reports whether any user's mode is other than "off".
func (f *Firewall) On() bool {
	if f.DefaultMode() != FirewallOff {
		return true
	}
	for i := range f.Users {
		if m := f.Users[i].Mode; m != "" && m != FirewallOff {
			return true
		}
	}
	return false
}

// validateFirewall checks [firewall] and its [[firewall.user]] entries.
func (c *Config) validateFirewall(p *problems) {
	f := &c.Firewall
	if f.Mode != "" && !slices.Contains(FirewallModes, f.Mode) {
		p.add("firewall.mode: unknown value %q (want %s)", f.Mode, oneOf(FirewallModes))
	}
	first := make(map[string]int, len(f.Users))
	for i := range f.Users {
		u := &f.Users[i]
		label := fmt.Sprintf("firewall.user[%d]", i)
		if u.Name != "" {
			label += fmt.Sprintf(" (%q)", u.Name)
		}
		switch j, dup := first[u.Name]; {
		case strings.TrimSpace(u.Name) == "":
			p.add("%s: name is required", label)
		case dup:
			p.add("%s: name %q is already used by firewall.user[%d]", label, u.Name, j)
		default:
			first[u.Name] = i
		}
		if u.Name != "" && u.Name == c.Admin.User {
			p.add("%s: %q is the admin user, which cannot log in on the data port", label, u.Name)
		}
		if u.Name != "" && c.Auth.Backend == "static" && !slices.ContainsFunc(c.Auth.Users, func(a StaticUser) bool { return a.Name == u.Name }) {
			// With static auth the users are known: a name that is not
			// one of them is a typo that would leave the user unchecked.
			p.add("%s: no [[auth.user]] is named %q", label, u.Name)
		}
		switch {
		case u.Mode == "":
			p.add("%s: mode is required (want %s)", label, oneOf(FirewallModes))
		case !slices.Contains(FirewallModes, u.Mode):
			p.add("%s: mode: unknown value %q (want %s)", label, u.Mode, oneOf(FirewallModes))
		}
	}
}

// firewall records a changed [firewall] mode and each [[firewall.user]]
// entry added, removed or changed; all are live (the next statement).
func (d *differ) firewall(old, new *Firewall) {
	same(d, "firewall.mode", old.Mode, new.Mode, live)
	modeOf := func(l []FirewallUser, name string) (string, bool) {
		for _, u := range l {
			if u.Name == name {
				return u.Mode, true
			}
		}
		return "", false
	}
	for _, u := range old.Users {
		key := fmt.Sprintf("firewall.user %q", u.Name)
		if m, ok := modeOf(new.Users, u.Name); !ok {
			d.add(key, "removed", live)
		} else if m != u.Mode {
			d.add(key+" mode", fmt.Sprintf("%s -> %s", show(u.Mode), show(m)), live)
		}
	}
	for _, u := range new.Users {
		if _, ok := modeOf(old.Users, u.Name); !ok {
			d.add(fmt.Sprintf("firewall.user %q", u.Name), "added", live)
		}
	}
}

// describeFirewall prints [firewall] for Describe: the default mode and
// each entry's, or nothing while every user is "off".
func describeFirewall(f *Firewall, line func(string, ...any)) {
	if !f.On() {
		return
	}
	line("firewall: mode %s", f.DefaultMode())
	for _, u := range f.Users {
		line("  user %q: %s", u.Name, u.Mode)
	}
}

// firewallWarnings warns about a firewall that learns or enforces with
// nowhere to keep the allowlist.
func (c *Config) firewallWarnings() []string {
	if !c.Firewall.On() || c.Proxy.StateDir != "" {
		return nil
	}
	return []string{"firewall: a user's mode is learn or enforce but proxy.state_dir is not set: " +
		"the allowlists live in memory only, and a restart forgets them (an enforcing user then runs nothing until they are allowed again)"}
}
