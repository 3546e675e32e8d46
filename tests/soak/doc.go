// Package soak holds sluice's soak test (make soak): sluice runs as a
// process of its own, built from cmd/sluice, in front of a sandbox topology
// (a master, two GTID replicas and an auth server). Workers connect,
// authenticate, run a few statements and disconnect over and over while
// long-lived connections keep a steady mixed read/write load, for SOAK (a Go
// duration; make soak defaults to 30m, make test runs 60s). Afterwards the
// process's goroutines, open descriptors and resident memory must be back
// near what they were after the warm-up, with zero errors on any client and
// no warning in sluice's log (slow-query lines are only counted). Without
// SOAK the test skips itself, so `go test ./tests/...` does not run it.
// Nothing here is needed by the binary.
package soak
