// Package failpoint lets a test stop sluice dead at a named point, the way a crash or a
// kill -9 would, to check that what sluice does there can be resumed by a fresh process.
// Built without the "failpoint" build tag, Hit does nothing and compiles away; with it
// (go build -tags failpoint), the environment variable SLUICE_FAILPOINT names the points
// that kill the process with SIGKILL.
//
// SLUICE_FAILPOINT is a comma-separated list of "name" (the first time Hit(name) runs) or
// "name#n" (the n-th time). The names a failover passes are listed in docs/operations.md.
package failpoint

// Names of the points an automatic failover passes, in order. A repoint passes
// FailoverRepointed once per replica repointed.
const (
	// FailoverChosen: the candidate is chosen; no server has been changed yet.
	FailoverChosen = "failover.chosen"
	// FailoverStopped: replication is stopped on the candidate (STOP SLAVE), read-only still on.
	FailoverStopped = "failover.stopped"
	// FailoverReset: the candidate forgot its master (RESET SLAVE ALL), read-only still on.
	FailoverReset = "failover.reset"
	// FailoverPromoted: the candidate is writable.
	FailoverPromoted = "failover.promoted"
	// FailoverRepointed: one more replica replicates from the new master.
	FailoverRepointed = "failover.repointed"
	// FailoverRecorded: the state file holds the finished failover.
	FailoverRecorded = "failover.recorded"
)
