package conf

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// withAuth is base with extra lines in its [auth] table.
func withAuth(lines string) string {
	return strings.Replace(base, "[auth]\n", "[auth]\n"+lines+"\n", 1)
}

// TestMaxPendingHandshakes: auth.max_pending_handshakes defaults to 64,
// takes 0 (every login deferred), refuses a negative value by name, and
// applies on reload.
func TestMaxPendingHandshakes(t *testing.T) {
	if got := mustParse(t, base).Auth.MaxPendingHandshakes; got != 64 {
		t.Errorf("default = %d, want 64", got)
	}
	for _, n := range []int{0, 5, 100000} {
		c := mustParse(t, withAuth("max_pending_handshakes = "+strconv.Itoa(n)))
		if c.Auth.MaxPendingHandshakes != n {
			t.Errorf("max_pending_handshakes = %d parsed as %d", n, c.Auth.MaxPendingHandshakes)
		}
	}
	_, err := Parse([]byte(withAuth("max_pending_handshakes = -1")))
	if want := "auth.max_pending_handshakes: -1 is negative"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("-1: err = %v, want %q", err, want)
	}

	old := mustParse(t, base)
	n := mustParse(t, withAuth("max_pending_handshakes = 0"))
	d := Diff(old, n)
	if got, want := d.Strings(), []string{"auth.max_pending_handshakes: 64 -> 0"}; !slices.Equal(got, want) {
		t.Errorf("Diff = %q, want %q", got, want)
	}
	if d.NeedRestart() != 0 {
		t.Errorf("auth.max_pending_handshakes needs a restart, want live")
	}
	if l := Live(old, n); l.Auth.MaxPendingHandshakes != 0 {
		t.Errorf("Live kept %d, want the file's 0", l.Auth.MaxPendingHandshakes)
	}
}

// TestMaxConcurrentLogins: auth.max_concurrent_logins defaults to 64,
// refuses a value below 1 by name, and applies on reload.
func TestMaxConcurrentLogins(t *testing.T) {
	if got := mustParse(t, base).Auth.MaxConcurrentLogins; got != 64 {
		t.Errorf("default = %d, want 64", got)
	}
	for _, n := range []int{0, -3} {
		_, err := Parse([]byte(withAuth("max_concurrent_logins = " + strconv.Itoa(n))))
		if want := "auth.max_concurrent_logins: " + strconv.Itoa(n) + " must be >= 1"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%d: err = %v, want %q", n, err, want)
		}
	}
	old := mustParse(t, base)
	n := mustParse(t, withAuth("max_concurrent_logins = 8"))
	d := Diff(old, n)
	if got, want := d.Strings(), []string{"auth.max_concurrent_logins: 64 -> 8"}; !slices.Equal(got, want) {
		t.Errorf("Diff = %q, want %q", got, want)
	}
	if d.NeedRestart() != 0 {
		t.Errorf("auth.max_concurrent_logins needs a restart, want live")
	}
	if l := Live(old, n); l.Auth.MaxConcurrentLogins != 8 {
		t.Errorf("Live kept %d, want the file's 8", l.Auth.MaxConcurrentLogins)
	}
}
