package main

import (
	"slices"
	"testing"
)

// TestWithSmallStacks: sluice adds adaptivestackstart=0 to GODEBUG, keeps
// the operator's other settings and the rest of the environment, and leaves
// an environment that already names the setting alone (so the exec'd
// process does not exec again).
func TestWithSmallStacks(t *testing.T) {
	cases := []struct {
		env  []string
		want []string // nil: no exec
	}{
		{[]string{"HOME=/root"}, []string{"HOME=/root", "GODEBUG=adaptivestackstart=0"}},
		{[]string{"GODEBUG=", "A=1"}, []string{"A=1", "GODEBUG=adaptivestackstart=0"}},
		{[]string{"GODEBUG=gctrace=1", "A=1"}, []string{"A=1", "GODEBUG=gctrace=1,adaptivestackstart=0"}},
		{[]string{"GODEBUG=gctrace=1,adaptivestackstart=1"}, nil},
		{[]string{"A=1", "GODEBUG=adaptivestackstart=0"}, nil},
	}
	for _, c := range cases {
		got, ok := withSmallStacks(c.env)
		if c.want == nil {
			if ok {
				t.Errorf("%q: exec with %q, want no exec", c.env, got)
			}
			continue
		}
		if !ok || !slices.Equal(got, c.want) {
			t.Errorf("%q: got %q (exec %v), want %q", c.env, got, ok, c.want)
		}
	}
}
