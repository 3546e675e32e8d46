package main

// buildCommit is the commit sluice_build_info reports: the one the
// Makefile stamped, else the revision the Go toolchain recorded, else
// "unknown". It is the commit `sluice version` prints.
func buildCommit() string {
	if commit != "" {
		return commit
	}
	if c := stampedRevision(); c != "" {
		return c
	}
	return "unknown"
}
