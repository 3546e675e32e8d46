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
