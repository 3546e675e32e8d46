// Package crash holds the crash-point tests of automatic failover: sluice, built with the
// failpoint tag, runs as a process of its own in front of a semi-synchronous sandbox
// topology and is killed by a failpoint at one step of a failover; a fresh sluice started on
// the same configuration and state directory must finish that failover. Nothing here is
// needed by the binary.
package crash
