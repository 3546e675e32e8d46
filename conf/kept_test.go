package conf

import (
	"slices"
	"strings"
	"testing"
)

// TestMaxKeptAuthConnections: auth.max_kept_auth_connections defaults to
// 64, takes 0 (none kept), refuses a negative value by name, and applies on
// reload.
func TestMaxKeptAuthConnections(t *testing.T) {
	if got := mustParse(t, base).Auth.MaxKeptAuthConnections; got != 64 {
		t.Errorf("default = %d, want 64", got)
	}
	if c := mustParse(t, withAuth("max_kept_auth_connections = 0")); c.Auth.MaxKeptAuthConnections != 0 {
		t.Errorf("0 parsed as %d", c.Auth.MaxKeptAuthConnections)
	}
	_, err := Parse([]byte(withAuth("max_kept_auth_connections = -1")))
	if want := "auth.max_kept_auth_connections: -1 is negative"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("-1: err = %v, want %q", err, want)
	}
	old := mustParse(t, base)
	n := mustParse(t, withAuth("max_kept_auth_connections = 500"))
	d := Diff(old, n)
	if got, want := d.Strings(), []string{"auth.max_kept_auth_connections: 64 -> 500"}; !slices.Equal(got, want) {
		t.Errorf("Diff = %q, want %q", got, want)
	}
	if d.NeedRestart() != 0 {
		t.Errorf("auth.max_kept_auth_connections needs a restart, want live")
	}
}
