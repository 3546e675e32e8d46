// Package sluicebin builds the sluice binary for tests that run it as a
// process of its own (memory, shutdown and soak tests), where an in-process
// Server cannot show what the deployed program does.
package sluicebin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Build builds ./cmd/sluice of the module the test runs in into a
// temporary directory of t and returns the binary's path. The binary
// measured is the one deployed: no race detector even when the tests run
// with -race or GOFLAGS asks for it. A missing go command or a failed
// build fails the test.
func Build(t testing.TB) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build sluice: %v", err)
	}
	out, err := exec.Command(goBin, "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		t.Fatalf("go env GOMOD: not inside a module (%q)", gomod)
	}
	bin := filepath.Join(t.TempDir(), "sluice")
	build := exec.Command(goBin, "build", "-race=false", "-o", bin, "./cmd/sluice")
	build.Dir = filepath.Dir(gomod)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/sluice: %v\n%s", err, out)
	}
	return bin
}
