package proxy

import (
	"sync"
	"time"
)

// maxEvents bounds the event log: the oldest row goes when it is full.
const maxEvents = 1000

// eventRow is one row of SHOW EVENTS: something the control plane did to a
// cluster, with the topology epoch at the time.
type eventRow struct {
	Time    time.Time
	Kind    string // failover, switchover, fenced, backend_up, backend_down, reload, offline, online
	Cluster string
	Backend string
	Detail  string
	Epoch   uint64
}

// eventLog is a bounded log of eventRows, safe for concurrent use.
type eventLog struct {
	mu   sync.Mutex
	rows []eventRow
}

// event records one row of SHOW EVENTS; any goroutine may call it.
func (s *Server) event(kind, cluster, backend, detail string) {
	r := eventRow{Time: time.Now(), Kind: kind, Cluster: cluster, Backend: backend, Detail: detail, Epoch: s.topo.Current().Epoch}
	s.events.mu.Lock()
	defer s.events.mu.Unlock()
	if len(s.events.rows) >= maxEvents {
		s.events.rows = append(s.events.rows[:0], s.events.rows[1:]...)
	}
	s.events.rows = append(s.events.rows, r)
}
