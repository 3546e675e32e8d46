//go:build linux

package evloop

import (
	"container/heap"
	"fmt"
	"iter"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/sluice-proxy/sluice/internal/mono"
	"go.uber.org/zap"
)

// An Loop runs sessions' waits for their sockets on one epoll
// instance ([proxy] event_loop). Each session's command loop runs as a
// coroutine (a Task); when a read or write of one of its connections
// finds the socket not ready, the coroutine hands the wait to its loop and
// the loop's goroutine switches straight to the next task whose socket is
// ready.
//
// Why: with a goroutine per session, every wait parks the goroutine in
// Go's network poller, and every wake-up goes through the scheduler: a run
// queue, a spinning search for work, often a second thread woken for it.
// On a host whose cores the proxy shares with the database servers that
// cost per statement several times sluice's own work. A coroutine switch
// is a direct hand-off on the same thread, and the loop sleeps in
// epoll_wait itself, as an event-driven proxy does.
//
// The loop's goroutine keeps its processor while it sleeps in epoll_wait
// (a raw system call), so the server runs with one processor more than it
// has loops (Server.Start) for everything else: logins, the admin port,
// probes, and tasks that step off the loop (Task.detach) for work that
// blocks on something other than their sockets.
//
// Concurrency: the loop's goroutine, and the tasks it resumes, own the
// timers and the tasks' wait fields. The slot table (which connection a
// registered descriptor is, and who waits on it) is guarded by mu, since a
// connection closing on another goroutine frees its slot; so is the queue
// of tasks handed to the loop from other goroutines (submit).
type Loop struct {
	epfd   int
	wakefd int // eventfd: submit writes it to end an epoll_wait
	log    *zap.Logger

	// rawWait: sleep in epoll_wait holding the processor. Off when the
	// process has a single processor, which the loop would take from
	// everything else.
	rawWait bool
	// counted: the loop holds one of rawLoops (takeProcessor); under mu.
	counted bool

	// runnable are tasks to resume in this round (loop goroutine only).
	runnable []*Task

	mu       sync.Mutex
	slots    []loopSlot
	free     []uint32
	incoming []*Task
	stopping bool
	tasks    int // tasks started on the loop and not finished
	// fdsClosed: the loop has ended and closed epfd and wakefd, whose
	// numbers the kernel may hand out again.
	fdsClosed bool

	timers timerHeap
	done   chan struct{}
}

// loopSlot is one registered descriptor: its connection, the generation
// that the epoll key carries (a freed slot's stale events are ignored),
// and the task waiting on it.
type loopSlot struct {
	c      *Conn
	gen    uint32
	waiter *Task
	write  bool
	// missed are the events that came while no task waited for them: a
	// wait that skips its first read (loopWait.first) looks here.
	missed uint32
}

// wakeKey marks the eventfd's events.
const wakeKey = ^uint64(0)

// Task is one session's code run as a coroutine by an Loop.
// attached is true while the loop drives it: only then do its
// connections' waits go to the loop; while it is detached (on a goroutine
// of its own) they wait in ppoll(2).
type Task struct {
	loop  *Loop
	next  func() (loopWait, bool)
	stop  func()
	yield func(loopWait) bool

	attached bool
	waitSlot int32 // slot waited on, -1 when not waiting
	timedOut bool
	waitErr  error // the wait could not be set up
	// deadline is the current wait's (mono.Now ns, 0 for none); heapIdx
	// the task's place in its loop's timers, -1 when it has none there.
	deadline int64
	heapIdx  int
}

// loopWait is what a task yields to its driver: a wait for a connection
// to be readable or writable until deadline (mono.Now ns, 0 for none), or a
// request to step off the loop (detach) or back onto it (attach).
type loopWait struct {
	c        *Conn
	write    bool
	deadline int64
	detach   bool
	attach   bool
	// first: the task has not tried its read yet (the peer was just sent
	// a request, so nothing is expected to be there): it waits at once,
	// unless an event came for the socket while nobody waited.
	first bool
}

func New(log *zap.Logger, rawWait bool) (*Loop, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	r, _, e := syscall.Syscall(syscall.SYS_EVENTFD2, 0, syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if e != 0 {
		syscall.Close(epfd)
		return nil, e
	}
	l := &Loop{epfd: epfd, wakefd: int(r), log: log, rawWait: rawWait, done: make(chan struct{})}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN}
	*(*uint64)(unsafe.Pointer(&ev.Fd)) = wakeKey
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, l.wakefd, &ev); err != nil {
		syscall.Close(epfd)
		syscall.Close(l.wakefd)
		return nil, err
	}
	go l.run()
	return l, nil
}

// spawn starts run as a task on the loop; run gets its task.
func (l *Loop) Spawn(run func(t *Task)) {
	t := &Task{loop: l, waitSlot: -1, heapIdx: -1}
	t.next, t.stop = iter.Pull(func(yield func(loopWait) bool) {
		t.yield = yield
		run(t)
	})
	l.mu.Lock()
	l.tasks++
	l.mu.Unlock()
	l.submit(t)
}

// submit hands t to the loop, which resumes it at once: from a goroutine
// of its own it may have missed readiness the loop saw meanwhile, so it
// tries its I/O again before it waits.
func (l *Loop) submit(t *Task) {
	l.mu.Lock()
	l.incoming = append(l.incoming, t)
	l.mu.Unlock()
	l.wake()
}

func (l *Loop) wake() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fdsClosed {
		return
	}
	one := uint64(1)
	syscall.Write(l.wakefd, (*[8]byte)(unsafe.Pointer(&one))[:])
}

// stop ends the loop once its last task has finished.
func (l *Loop) Stop() {
	l.mu.Lock()
	first := !l.stopping
	l.stopping = true
	l.mu.Unlock()
	if first {
		l.wake()
	}
	<-l.done
}

func (l *Loop) run() {
	defer close(l.done)
	evs := make([]syscall.EpollEvent, 128)
	var in []*Task
	for {
		timeout := -1
		if len(l.timers) > 0 {
			d := l.timers[0].deadline - int64(mono.Now())
			timeout = 0
			if d > 0 {
				timeout = int((d + 999_999) / 1_000_000)
			}
		}
		n := l.wait(evs, timeout)
		for i := 0; i < n; i++ {
			key := *(*uint64)(unsafe.Pointer(&evs[i].Fd))
			if key == wakeKey {
				var b [8]byte
				syscall.Read(l.wakefd, b[:])
				continue
			}
			if t := l.ready(key, evs[i].Events); t != nil {
				l.resume(t)
			}
		}
		l.mu.Lock()
		in, l.incoming = l.incoming, in[:0]
		l.mu.Unlock()
		for _, t := range in {
			t.attached = true
			l.resume(t)
		}
		clear(in)
		for len(l.runnable) > 0 {
			t := l.runnable[len(l.runnable)-1]
			l.runnable = l.runnable[:len(l.runnable)-1]
			l.resume(t)
		}
		if len(l.timers) > 0 {
			l.expire(int64(mono.Now()))
		}
		l.mu.Lock()
		end := l.stopping && l.tasks == 0
		if end {
			l.fdsClosed = true
			syscall.Close(l.epfd)
			syscall.Close(l.wakefd)
			if l.counted {
				rawLoops.Add(-1)
			}
		}
		l.mu.Unlock()
		if end {
			return
		}
	}
}

// wait is epoll_wait. A raw call keeps the processor while it sleeps; the
// runtime's preemption signal ends it early (EINTR), so a stop-the-world
// still reaches the loop.
func (l *Loop) wait(evs []syscall.EpollEvent, msec int) int {
	p := uintptr(unsafe.Pointer(&evs[0]))
	var r uintptr
	var e syscall.Errno
	if l.rawWait {
		r, _, e = syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(l.epfd), p, uintptr(len(evs)), uintptr(msec), 0, 0)
	} else {
		r, _, e = syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(l.epfd), p, uintptr(len(evs)), 0, 0, 0)
		if e == 0 && r == 0 && msec != 0 {
			r, _, e = syscall.Syscall6(syscall.SYS_EPOLL_PWAIT, uintptr(l.epfd), p, uintptr(len(evs)), uintptr(msec), 0, 0)
		}
	}
	if e != 0 {
		return 0
	}
	return int(r)
}

// ready returns the task an event wakes, nil if none waits for it.
func (l *Loop) ready(key uint64, events uint32) *Task {
	idx, gen := uint32(key), uint32(key>>32)
	l.mu.Lock()
	defer l.mu.Unlock()
	if int(idx) >= len(l.slots) {
		return nil
	}
	s := &l.slots[idx]
	const failed = syscall.EPOLLHUP | syscall.EPOLLERR
	if s.gen != gen {
		return nil
	}
	if s.waiter == nil || s.write && events&(syscall.EPOLLOUT|failed) == 0 ||
		!s.write && events&(syscall.EPOLLIN|syscall.EPOLLRDHUP|failed) == 0 {
		s.missed |= events
		return nil
	}
	t := s.waiter
	s.waiter = nil
	// The other direction's edge is spent too: remember it for a later
	// first wait (loopWait.first).
	if s.write {
		s.missed |= events &^ (syscall.EPOLLOUT | failed)
	} else {
		s.missed |= events &^ (syscall.EPOLLIN | syscall.EPOLLRDHUP | failed)
	}
	return t
}

// resume runs t until it waits again, steps off the loop or ends.
func (l *Loop) resume(t *Task) {
	t.waitSlot = -1
	w, ok := l.next(t)
	if !ok {
		if t.heapIdx >= 0 {
			heap.Remove(&l.timers, t.heapIdx)
		}
		l.mu.Lock()
		l.tasks--
		l.mu.Unlock()
		return
	}
	switch {
	case w.detach:
		t.attached = false
		// Off the loop no deadline of the loop's applies; a task that ends
		// there must not stay in the heap.
		if t.heapIdx >= 0 {
			heap.Remove(&l.timers, t.heapIdx)
		}
		go t.drive()
	case w.attach:
		// Already on the loop: go on.
		l.submit(t)
	default:
		l.park(t, w)
	}
}

// next resumes t's coroutine. A panic the session's own recover did not
// catch ends the task, not the loop.
func (l *Loop) next(t *Task) (w loopWait, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			l.log.Error("event loop task panicked", zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
			ok = false
		}
	}()
	return t.next()
}

// park makes t wait for w on this loop, registering w's connection here
// if it is not yet.
func (l *Loop) park(t *Task, w loopWait) {
	slot, err := w.c.registerOn(l)
	if err != nil {
		// Closed meanwhile, or epoll refused it: the task sees why.
		t.waitErr = err
		l.runnable = append(l.runnable, t)
		return
	}
	want := uint32(syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLHUP | syscall.EPOLLERR)
	if w.write {
		want = syscall.EPOLLOUT | syscall.EPOLLHUP | syscall.EPOLLERR
	}
	l.mu.Lock()
	s := &l.slots[slot]
	missed := s.missed&want != 0
	// What came before is stale for a task that read until EAGAIN, and
	// is what a first wait must not miss.
	s.missed &^= want
	if w.first && missed {
		l.mu.Unlock()
		l.runnable = append(l.runnable, t)
		return
	}
	s.waiter, s.write = t, w.write
	l.mu.Unlock()
	t.waitSlot = int32(slot)
	// One timer entry per task, kept across waits: the idle deadline of
	// a client's reads rarely changes from one command to the next.
	t.deadline = w.deadline
	switch {
	case t.heapIdx >= 0 && w.deadline == 0:
		heap.Remove(&l.timers, t.heapIdx)
	case t.heapIdx >= 0:
		heap.Fix(&l.timers, t.heapIdx)
	case w.deadline != 0:
		heap.Push(&l.timers, t)
	}
}

// expire resumes the tasks whose wait's deadline has passed.
func (l *Loop) expire(now int64) {
	for len(l.timers) > 0 && l.timers[0].deadline <= now {
		t := heap.Pop(&l.timers).(*Task)
		if t.waitSlot < 0 {
			continue // not waiting: its next wait pushes it again
		}
		l.mu.Lock()
		s := &l.slots[t.waitSlot]
		waiting := s.waiter == t
		if waiting {
			s.waiter = nil
		}
		l.mu.Unlock()
		if waiting {
			t.timedOut = true
			l.resume(t)
		}
	}
}

// add registers fd (edge-triggered, for both directions) and returns its
// slot. Edge-triggered is right because a task always tries its I/O before
// it waits, and waits only after EAGAIN.
func (l *Loop) add(c *Conn) (uint32, error) {
	l.mu.Lock()
	var idx uint32
	if n := len(l.free); n > 0 {
		idx = l.free[n-1]
		l.free = l.free[:n-1]
	} else {
		l.slots = append(l.slots, loopSlot{})
		idx = uint32(len(l.slots) - 1)
	}
	s := &l.slots[idx]
	s.c, s.waiter, s.missed = c, nil, 0
	gen := s.gen
	l.mu.Unlock()
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLOUT | syscall.EPOLLRDHUP | 1<<31} // EPOLLET
	*(*uint64)(unsafe.Pointer(&ev.Fd)) = uint64(gen)<<32 | uint64(idx)
	if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, c.fd, &ev); err != nil {
		l.release(idx)
		return 0, err
	}
	return idx, nil
}

// remove unregisters c's descriptor from slot idx. A task still waiting
// there is handed back so it sees the connection closed.
func (l *Loop) remove(c *Conn, idx uint32) {
	l.mu.Lock()
	if !l.fdsClosed {
		_ = syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_DEL, c.fd, nil)
	}
	l.mu.Unlock()
	if t := l.release(idx); t != nil {
		l.submit(t)
	}
}

func (l *Loop) release(idx uint32) *Task {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &l.slots[idx]
	t := s.waiter
	s.c, s.waiter = nil, nil
	s.gen++
	l.free = append(l.free, idx)
	return t
}

// drive runs a detached task on a goroutine of its own until it asks to
// go back onto the loop.
func (t *Task) drive() {
	for {
		w, ok := t.loop.next(t)
		if !ok {
			t.loop.mu.Lock()
			t.loop.tasks--
			t.loop.mu.Unlock()
			t.loop.wake() // a stop may wait for the last task
			return
		}
		if w.detach {
			continue
		}
		// attach, or (should a detached task's connection yield) a wait:
		// the loop resumes it and it retries its I/O there.
		t.loop.submit(t)
		return
	}
}

// detach moves the calling task off its loop, to a goroutine of its own,
// before it blocks on something other than its sockets (a pool's wait, a
// dial, a timer, another goroutine); it reports whether it did. Call
// attach afterwards. t may be nil (a session served by its own goroutine).
func (t *Task) Detach() bool {
	if t == nil || !t.attached {
		return false
	}
	t.yield(loopWait{detach: true})
	return true
}

// attach moves a detached task back onto its loop.
func (t *Task) Attach() {
	t.yield(loopWait{attach: true})
}

// waitFor makes the calling task wait on its loop for c; it reports
// whether the deadline passed first.
func (t *Task) waitFor(c *Conn, write, first bool, deadline int64) (timedOut bool, err error) {
	t.timedOut, t.waitErr = false, nil
	t.yield(loopWait{c: c, write: write, first: first, deadline: deadline})
	return t.timedOut, t.waitErr
}

// timerHeap orders a loop's tasks that wait with a deadline by it.
type timerHeap []*Task

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].deadline < h[j].deadline }
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx, h[j].heapIdx = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*Task)
	t.heapIdx = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.heapIdx = -1
	return t
}

// rawLoops counts the loops of the process that sleep holding their
// processor.
var rawLoops atomic.Int32

// takeProcessor reports whether a new loop may sleep holding its
// processor: while that leaves at least one processor to the rest of the
// process. Loops beyond that (more Servers in one process, as in tests)
// sleep through the scheduler's system-call path, or they would starve
// everything else, the other loops included, until the runtime preempts
// them.
func takeProcessor() bool {
	if rawLoops.Add(1) <= int32(runtime.GOMAXPROCS(0)-1) {
		return true
	}
	rawLoops.Add(-1)
	return false
}

// Supported: event loops run on this platform.
const Supported = true

// Start starts n event loops, as many as may sleep holding a processor
// doing so (TakeProcessor). The caller sizes GOMAXPROCS first: one
// processor more than it has loops, for everything else (see Loop). On an
// error no loop is left running.
func Start(n int, log *zap.Logger) ([]*Loop, error) {
	loops := make([]*Loop, 0, n)
	for range n {
		raw := takeProcessor()
		l, err := New(log, raw)
		if err == nil {
			l.mu.Lock()
			l.counted = raw
			l.mu.Unlock()
		} else if raw {
			rawLoops.Add(-1)
		}
		if err != nil {
			for _, l := range loops {
				l.Stop()
			}
			return nil, fmt.Errorf("starting event loops: %w", err)
		}
		loops = append(loops, l)
	}
	return loops, nil
}

// OnLoopOf reports whether c's socket is registered on t's loop, or
// either has none (no move needed). c may be nil.
func (c *Conn) OnLoopOf(t *Task) bool {
	if t == nil || c == nil {
		return true
	}
	h := c.home.Load()
	return h == nil || h == t.loop
}

// Tasks counts the tasks started on l and not finished (for metrics).
func (l *Loop) Tasks() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tasks
}
