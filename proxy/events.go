package proxy

import (
	"sync"
	"time"
)

// This is the minimal events store of the issue 7 contract, for the reload
// branch; the admin branch's bounded ring replaces it at merge.

// eventRow is one row of SHOW EVENTS.
type eventRow struct {
	At                             time.Time
	Kind, Cluster, Backend, Detail string
	Epoch                          uint64
}

// eventLog holds the recorded events; it is safe for concurrent use.
type eventLog struct {
	mu   sync.Mutex
	rows []eventRow
}

// eventsKept bounds the events held.
const eventsKept = 1000

// event records one row of SHOW EVENTS with the topology epoch of now.
func (s *Server) event(kind, cluster, backend, detail string) {
	l := &s.events
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.rows) >= eventsKept {
		l.rows = append(l.rows[:0], l.rows[1:]...)
	}
	l.rows = append(l.rows, eventRow{At: time.Now(), Kind: kind, Cluster: cluster, Backend: backend, Detail: detail, Epoch: s.topo.Current().Epoch})
}
