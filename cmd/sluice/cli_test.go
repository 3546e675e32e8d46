package main

import (
	"bytes"
	"net"
	"runtime"
	"strings"
	"testing"
)

// runCLI runs sluice with args and returns its exit status and output.
func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestHelp: sluice -h, --help, -help and help list every subcommand on
// stdout and exit 0; each subcommand's -h and --help print its flags on
// stdout and exit 0.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help", "-help", "help"} {
		code, out, errOut := runCLI(arg)
		if code != exitOK || errOut != "" {
			t.Errorf("sluice %s: exit %d, stderr %q; want 0 and nothing", arg, code, errOut)
		}
		for _, want := range []string{"sluice [run]", "check-config", "sandbox", "version", "Exit status"} {
			if !strings.Contains(out, want) {
				t.Errorf("sluice %s: %q lacks %q", arg, out, want)
			}
		}
	}
	subcommands := []struct {
		args  []string
		flags []string
	}{
		{[]string{"run"}, []string{"-config", "-cpuprofile"}},
		{nil, []string{"-config"}},
		{[]string{"check-config"}, []string{"sluice check-config [-skip-secrets] FILE", "-skip-secrets"}},
		{[]string{"sandbox"}, []string{"-replicas", "-fleet", "-listen", "-admin-listen", "-metrics-listen", "-log-level"}},
	}
	for _, sc := range subcommands {
		for _, h := range []string{"-h", "--help"} {
			args := append(append([]string(nil), sc.args...), h)
			code, out, errOut := runCLI(args...)
			if code != exitOK || errOut != "" {
				t.Errorf("sluice %s: exit %d, stderr %q; want 0 and nothing", strings.Join(args, " "), code, errOut)
			}
			for _, f := range sc.flags {
				if !strings.Contains(out, f) {
					t.Errorf("sluice %s: %q lacks %q", strings.Join(args, " "), out, f)
				}
			}
		}
	}
}

// TestVersion: sluice version, --version and -version print the version,
// the commit and the Go version on one line and exit 0.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version", "-version"} {
		code, out, errOut := runCLI(arg)
		if code != exitOK || errOut != "" {
			t.Errorf("sluice %s: exit %d, stderr %q", arg, code, errOut)
		}
		want := "sluice " + version + " (commit "
		if !strings.HasPrefix(out, want) || !strings.Contains(out, runtime.Version()) || strings.Count(out, "\n") != 1 {
			t.Errorf("sluice %s: %q, want one line %q… with %s", arg, out, want, runtime.Version())
		}
	}
}

// TestUsageErrors: bad flags, stray arguments and a missing file name exit
// 2 with a message on stderr and nothing on stdout.
func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-bogus"},
		{"run", "-bogus"},
		{"run", "extra"},
		{"check-config"},
		{"check-config", "a.toml", "b.toml"},
		{"check-config", "-bogus", "a.toml"},
		{"sandbox", "-replicas", "x"},
		{"sandbox", "extra"},
	} {
		code, out, errOut := runCLI(args...)
		if code != exitUsage || out != "" || errOut == "" {
			t.Errorf("sluice %s: exit %d, stdout %q, stderr %q; want 2, nothing, a message", strings.Join(args, " "), code, out, errOut)
		}
	}
}

// TestSandboxRefusesTakenPort: a sandbox whose port is taken says which
// flag to change and exits 1 before it starts any server.
func TestSandboxRefusesTakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, flag := range []string{"-listen", "-admin-listen", "-metrics-listen"} {
		args := []string{"sandbox", "-listen", "127.0.0.1:0", "-admin-listen", "", "-metrics-listen", "", flag, ln.Addr().String()}
		code, out, errOut := runCLI(args...)
		if code != exitError {
			t.Errorf("%s taken: exit %d, want 1", flag, code)
		}
		if strings.Contains(out, "starting MariaDB") {
			t.Errorf("%s taken: servers were started: %q", flag, out)
		}
		if !strings.Contains(errOut, flag+" "+ln.Addr().String()) || !strings.Contains(errOut, "address already in use") {
			t.Errorf("%s taken: stderr %q, want the flag, the address and the reason", flag, errOut)
		}
	}
}
