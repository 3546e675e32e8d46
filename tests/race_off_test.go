//go:build !race

package tests

// raceEnabled: the race detector slows sluice and the test drivers several
// times; tests that measure a rate scale it down.
const raceEnabled = false
