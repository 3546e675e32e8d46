package main

import (
	"os/exec"
	"testing"
	"time"
)

// TestDebianVersion: the binaries' git describe version becomes a Debian
// version that starts with a digit and sorts as the releases do; dpkg
// itself checks the validity and the order when it is there.
func TestDebianVersion(t *testing.T) {
	when := time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)
	const commit = "ceb705e2e726"
	cases := []struct{ describe, want string }{
		{"v1.2.3", "1.2.3"},
		{"1.2.3", "1.2.3"},
		{"v1.2.3-rc1", "1.2.3~rc1"},
		{"v1.2.3-4-gabc1234", "1.2.3+4.gabc1234"},
		{"v1.2.3-rc1-4-gabc1234", "1.2.3~rc1+4.gabc1234"},
		{"v1.2.3-dirty", "1.2.3+dirty"},
		{"v1.2.3-4-gabc1234-dirty", "1.2.3+4.gabc1234.dirty"},
		{"ceb705e", "0.0.0~git20261203.512.gceb705e2e726"},
		{"1234567", "0.0.0~git20261203.512.gceb705e2e726"}, // a hash of digits only
		{"ceb705e-dirty", "0.0.0~git20261203.512.gceb705e2e726.dirty"},
		{"dev", "0.0.0~git20261203.512.gceb705e2e726"},
		{"", "0.0.0~git20261203.512.gceb705e2e726"},
	}
	for _, c := range cases {
		got, err := debianVersion(c.describe, commit, 512, when)
		if err != nil || got != c.want {
			t.Errorf("debianVersion(%q) = %q, %v; want %q", c.describe, got, err, c.want)
		}
	}
	if _, err := debianVersion("dev", "", 512, when); err == nil {
		t.Errorf("no tag and no commit: no error")
	}
	if _, err := debianVersion("dev", commit, 0, when); err == nil {
		t.Errorf("no tag and no commit count: no error")
	}

	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Log("dpkg not found: validity and order not checked by dpkg")
		return
	}
	for _, c := range cases {
		if out, err := exec.Command("dpkg", "--validate-version", c.want).CombinedOutput(); err != nil {
			t.Errorf("dpkg refuses %q: %s", c.want, out)
		}
	}
	// Each version sorts before the next.
	// Untagged builds of one day sort by their commit count, not by their
	// hash (ceb705e2e726 after 0a1b2c3d4e5f, 99 before 512), and a later
	// day after an earlier one.
	order := []string{"0.0.0~git20261203.99.gceb705e2e726", "0.0.0~git20261203.512.g0a1b2c3d4e5f",
		"0.0.0~git20261203.513.gceb705e2e726", "0.0.0~git20261204.514.g0a1b2c3d4e5f", "1.2.3~rc1", "1.2.3~rc1+4.gabc1234", "1.2.3", "1.2.3+4.gabc1234", "1.2.4~rc1", "1.2.4"}
	for i := 1; i < len(order); i++ {
		if err := exec.Command("dpkg", "--compare-versions", order[i-1], "lt", order[i]).Run(); err != nil {
			t.Errorf("dpkg does not sort %q before %q", order[i-1], order[i])
		}
	}
}
