// Package mono is the process's one monotonic clock: the time since start,
// read from the monotonic clock alone. time.Now also reads the wall clock,
// a second clock read per statement that deadlines and latencies do not
// need. Values from Now compare with each other across packages (event
// loop deadlines, session timers, the process list's times).
package mono

import "time"

var base = time.Now()

// Now is the time since the process started, from the monotonic clock.
func Now() time.Duration { return time.Since(base) }
