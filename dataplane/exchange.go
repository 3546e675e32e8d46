package dataplane

import (
	"time"

	"github.com/sluice-proxy/sluice/conf"
)

// HeldWriteWait is how long a statement for a master whose writes a switchover holds waits
// before it fails: the drain and the catch-up (switchover_timeout each) and the promote and
// repoint statements (each bounded by the control timeout).
func HeldWriteWait(h *conf.Health) time.Duration {
	return 2*h.SwitchoverTimeout.Duration + 4*h.Timeout.Duration
}

// masterBit is the session's bit in masterBusy for its active cluster.
func (s *Session) masterBit() uint64 { return 1 << (uint(s.clusterIdx) % 64) }

// markMasterBusy notes that a statement of the session may be on its way to its cluster's
// master. It is called before the session loads the snapshot that decides whether the
// statement waits, so a switchover that publishes a hold and then finds the bit clear knows
// the session will see the hold.
func (s *Session) markMasterBusy() {
	if b := s.masterBit(); s.masterBusy.Load()&b == 0 {
		s.masterBusy.Or(b)
	}
}

// unmarkMasterBusy clears the bit while the session waits for a held master.
func (s *Session) unmarkMasterBusy() { s.masterBusy.And(^s.masterBit()) }
