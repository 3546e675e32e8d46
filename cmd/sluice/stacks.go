package main

import (
	"os"
	"strings"
	"syscall"
)

// smallStacks is the GODEBUG setting sluice serves with. The runtime
// otherwise starts new goroutines with a stack as big as the average one a
// GC scanned, and logins and statements in flight make that 4 KiB or more
// while an idle session's serving goroutine needs 2 KiB; a goroutine's stack
// shrinks only when a GC finds a quarter of it in use, so an idle session
// would keep the bigger stack for good (2 KiB more of its ~8 KiB).
const smallStacks = "adaptivestackstart=0"

// execWithSmallStacks replaces the process with itself, the same arguments
// and environment plus smallStacks in GODEBUG, for the commands that serve
// clients. The runtime reads this setting only at start-up and it cannot be
// set in the binary (it is not a //go:debug setting). The process keeps its
// pid, so a supervisor sees nothing. It returns, and sluice runs as it is,
// when the setting is already there or the exec fails.
func execWithSmallStacks(cmd string) {
	if cmd != "run" && cmd != "sandbox" {
		return
	}
	env, ok := withSmallStacks(os.Environ())
	if !ok {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	_ = syscall.Exec(exe, os.Args, env)
}

// withSmallStacks returns env with smallStacks added to its GODEBUG, and
// false when GODEBUG already names adaptivestackstart (an operator who
// sets it decides; and the exec'd process must not exec again).
func withSmallStacks(env []string) ([]string, bool) {
	out := make([]string, 0, len(env)+1)
	godebug := ""
	for _, kv := range env {
		v, isDebug := strings.CutPrefix(kv, "GODEBUG=")
		if !isDebug {
			out = append(out, kv)
			continue
		}
		for _, setting := range strings.Split(v, ",") {
			if strings.HasPrefix(strings.TrimSpace(setting), "adaptivestackstart=") {
				return nil, false
			}
		}
		godebug = v
	}
	if godebug != "" {
		godebug += ","
	}
	return append(out, "GODEBUG="+godebug+smallStacks), true
}
