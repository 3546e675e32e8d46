package proxy

import (
	"sync"
	"time"

	"github.com/sluice-proxy/sluice/health"
)

// maxEvents bounds the SHOW EVENTS ring: the oldest rows are dropped.
const maxEvents = 1000

// adminEvent is one row of SHOW EVENTS.
type adminEvent struct {
	at      time.Time
	kind    string
	cluster string
	backend string
	detail  string
	epoch   uint64
}

// eventRing keeps the last maxEvents events. It is safe for concurrent
// use; events are rare (state changes, failovers, reloads), so a mutex is
// enough.
type eventRing struct {
	mu   sync.Mutex
	buf  []adminEvent
	next int // where the next event goes once buf is full
}

func (r *eventRing) add(e adminEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) < maxEvents {
		r.buf = append(r.buf, e)
		return
	}
	r.buf[r.next] = e
	r.next = (r.next + 1) % maxEvents
}

// list returns the events oldest first.
func (r *eventRing) list() []adminEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]adminEvent, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

// event records one row of SHOW EVENTS, with the topology epoch current
// when it is recorded. kind is one of "failover", "failover_refused",
// "repointed", "switchover", "fenced", "backend_up", "backend_down",
// "reload", "offline", "online". It is safe
// for concurrent use from any goroutine.
func (s *Server) event(kind, cluster, backend, detail string) {
	var epoch uint64
	if s.topo != nil {
		epoch = s.topo.Current().Epoch
	}
	s.events.add(adminEvent{at: time.Now(), kind: kind, cluster: cluster, backend: backend, detail: detail, epoch: epoch})
}

// stateEventKind is the SHOW EVENTS kind of a backend going to state to.
func stateEventKind(to health.State) string {
	switch to {
	case health.StateUp:
		return "backend_up"
	case health.StateFenced:
		return "fenced"
	case health.StateOffline:
		return "offline"
	}
	return "backend_down" // down or lagging: out of rotation
}
