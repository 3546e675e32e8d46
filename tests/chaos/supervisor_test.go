package chaos

import (
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ft "github.com/sluice-proxy/sluice/tests/internal/failovertest"
)

// supervisor keeps one sluice process running on a configuration file, as a service manager
// would: when the process dies (a failpoint, or a kill -9 by the test) it starts a new one,
// without failpoint, after the next of its pauses.
type supervisor struct {
	bin, cfg string
	pauses   []time.Duration
	begin    time.Time

	mu       sync.Mutex
	cur      *ft.Sluice
	all      []*ft.Sluice
	byTest   map[*ft.Sluice]bool // processes the test killed itself
	notes    []string
	unwanted []string // deaths nobody asked for, and restarts that failed
	started  int

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// startSupervisor starts the first process with SLUICE_FAILPOINT=failpoint and waits until it
// serves; the end of the test stops the supervisor and its process.
func startSupervisor(t *testing.T, bin, cfg, failpoint string, pauses []time.Duration) (*supervisor, error) {
	s := &supervisor{bin: bin, cfg: cfg, pauses: pauses, begin: time.Now(), byTest: map[*ft.Sluice]bool{},
		stop: make(chan struct{}), done: make(chan struct{})}
	first, err := s.launch(failpoint)
	if err != nil {
		if first != nil {
			_ = first.Kill()
		}
		return nil, err
	}
	s.cur = first
	t.Cleanup(s.Stop)
	go s.loop()
	return s, nil
}

func (s *supervisor) launch(failpoint string) (*ft.Sluice, error) {
	s.mu.Lock()
	s.started++
	name := fmt.Sprintf("sluice%d", s.started)
	s.mu.Unlock()
	p, err := ft.LaunchSluice(s.bin, s.cfg, name, failpoint)
	if p != nil {
		s.mu.Lock()
		s.all = append(s.all, p)
		s.mu.Unlock()
	}
	if err == nil {
		what := "started"
		if failpoint != "" {
			what += " with SLUICE_FAILPOINT=" + failpoint
		}
		s.note("%s %s, serving on %s", name, what, p.Addr)
	}
	return p, err
}

func (s *supervisor) note(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notes = append(s.notes, fmt.Sprintf("%6.2fs ", time.Since(s.begin).Seconds())+fmt.Sprintf(format, args...))
}

func (s *supervisor) loop() {
	defer close(s.done)
	for deaths := 0; ; deaths++ {
		s.mu.Lock()
		cur := s.cur
		s.mu.Unlock()
		select {
		case <-s.stop:
			cur.Stop(20 * time.Second)
			return
		case <-cur.Done():
		}
		s.mu.Lock()
		byTest := s.byTest[cur]
		s.mu.Unlock()
		how := death(cur)
		s.note("%s died: %s", cur.Name, how)
		if !byTest && !strings.Contains(how, "failpoint") {
			s.mu.Lock()
			s.unwanted = append(s.unwanted, fmt.Sprintf("%s died by itself: %s; log tail:\n%s", cur.Name, how, cur.Log.Tail(20)))
			s.mu.Unlock()
		}
		select {
		case <-s.stop:
			return
		case <-time.After(s.pauses[deaths%len(s.pauses)]):
		}
		for attempt := 1; ; attempt++ {
			next, err := s.launch("")
			if err == nil {
				s.mu.Lock()
				s.cur = next
				s.mu.Unlock()
				break
			}
			if next != nil {
				_ = next.Kill()
			}
			s.note("restart failed: %v", err)
			if attempt == 5 {
				s.mu.Lock()
				s.unwanted = append(s.unwanted, fmt.Sprintf("sluice did not restart: %v", err))
				s.mu.Unlock()
				<-s.stop
				return
			}
			select {
			case <-s.stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
}

// death describes how p ended.
func death(p *ft.Sluice) string {
	sig := p.Signal()
	if sig == 0 {
		return fmt.Sprintf("exited: %v", p.Err())
	}
	if lines := p.Log.Grep("failpoint: "); len(lines) > 0 && sig == syscall.SIGKILL {
		return strings.TrimSpace(lines[len(lines)-1])
	}
	return "signal " + sig.String()
}

// kill sends the current process SIGKILL, as a crash would, and returns its name.
func (s *supervisor) kill() string {
	s.mu.Lock()
	cur := s.cur
	s.byTest[cur] = true
	s.mu.Unlock()
	s.note("kill -9 %s", cur.Name)
	_ = cur.Kill()
	return cur.Name
}

// Stop ends the supervision and stops the current process; it may be called more than once.
func (s *supervisor) Stop() {
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.done
}

// grep returns the lines of every process's log that contain sub.
func (s *supervisor) grep(sub string) []string {
	s.mu.Lock()
	all := append([]*ft.Sluice(nil), s.all...)
	s.mu.Unlock()
	var out []string
	for _, p := range all {
		for _, l := range p.Log.Grep(sub) {
			out = append(out, p.Name+": "+l)
		}
	}
	return out
}

// report returns the supervisor's notes, the unwanted events, and every process's log tail.
func (s *supervisor) report(tail int) (notes, unwanted []string, tails string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, p := range s.all {
		fmt.Fprintf(&b, "--- %s log tail ---\n%s\n", p.Name, p.Log.Tail(tail))
	}
	return append([]string(nil), s.notes...), append([]string(nil), s.unwanted...), b.String()
}
