package observe

import (
	"sync"
	"time"

	"github.com/sluice-proxy/sluice/health"
)

// MaxEvents bounds the SHOW EVENTS ring: the oldest rows are dropped.
const MaxEvents = 1000

// Event is one row of SHOW EVENTS.
type Event struct {
	At      time.Time
	Kind    string
	Cluster string
	Backend string
	Detail  string
	Epoch   uint64
}

// Events keeps the last MaxEvents events. It is safe for concurrent
// use; events are rare (state changes, failovers, reloads), so a mutex is
// enough.
type Events struct {
	mu   sync.Mutex
	buf  []Event
	next int // where the next event goes once buf is full
}

// Add records e, dropping the oldest event when the ring is full.
func (r *Events) Add(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) < MaxEvents {
		r.buf = append(r.buf, e)
		return
	}
	r.buf[r.next] = e
	r.next = (r.next + 1) % MaxEvents
}

// List returns the events oldest first.
func (r *Events) List() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Event, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

// StateEventKind is the SHOW EVENTS kind of a backend going to state to.
func StateEventKind(to health.State) string {
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
