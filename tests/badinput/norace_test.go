//go:build !race

package badinput

// raceEnabled reports a -race build, whose shadow memory inflates RSS.
const raceEnabled = false
