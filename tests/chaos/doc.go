// Package chaos holds the failover chaos loop (make chaos): iteration after iteration, a
// semi-synchronous sandbox topology with sluice, built with the failpoint tag, as a process
// in front of it, transactional writers through sluice, random replica degradations and
// random kill -9 of the master, of a replica and of sluice (at a failpoint or at a random
// moment). After each iteration no acknowledged transaction may be missing, no two servers
// may ever have been writable at once, and every replica must converge on the master.
// Without SLUICE_CHAOS_ITERATIONS the test skips itself, so `go test ./tests/...` does not run
// it. Nothing here is needed by the binary.
package chaos
