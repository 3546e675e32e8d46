// Package binlog owns the binlog tailer of one cluster: a connection to the
// cluster's current master that reads its binary log as a replica would
// (go-mysql's replication package) and reports which tables each
// transaction wrote, so that a result cache can invalidate entries for
// writes that did not pass through sluice (a client on the master, a
// trigger, another sluice).
//
// A Tailer runs on one goroutine of its own, started by Start and ended by
// cancelling the context given to Start; its callbacks run on that
// goroutine, one at a time, and must not block. Its counters are atomics,
// safe to read from any goroutine. It supports MariaDB (GTID positions as
// MariaDB writes them) only.
package binlog

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"go.uber.org/zap"

	"crypto/tls"
)

// Options configure a Tailer. Every field has the default its comment
// names; a tailer without Master idles, one without OnChange or OnReset
// reads and discards.
type Options struct {
	// Cluster names the cluster in logs and metric labels.
	Cluster string
	// Master returns the address (host:port) of the cluster's master as
	// sluice knows it now, or "" while it has none. It is called often (every
	// MasterCheck) and must be cheap and safe for concurrent use: a load of
	// the current topology snapshot. When the address changes the tailer
	// leaves the old master, calls OnReset and starts at the new master's
	// current position.
	Master func() string
	// User and Password are the service account's. It needs REPLICATION
	// SLAVE on the master (docs/operations.md lists the grants).
	User, Password string
	// TLS, when set, is the TLS configuration to connect to the master with.
	TLS *tls.Config
	// MasterTLS, when set, is asked for the TLS configuration of each
	// connection to the master at addr and overrides TLS: a certificate is
	// verified against the name of the master connected to, which changes
	// with a failover. nil means no TLS for that master.
	MasterTLS func(addr string) *tls.Config
	// ServerID is the replica server_id the tailer registers with. It must
	// be unique in the replication topology: two replicas with the same id
	// make the master drop the older one's connection each time the other
	// connects. 0 means DefaultServerID(Cluster, "").
	ServerID uint32
	// OnChange is called for each table a transaction on the master wrote:
	// rows (ddl false) or its definition (ddl true: CREATE, ALTER, DROP,
	// RENAME, TRUNCATE). A transaction that writes a table several times
	// may report it several times.
	OnChange func(schema, table string, ddl bool)
	// OnReset is called when the tailer cannot know what it missed: when it
	// first attaches to a master, when it attaches to a new one, when the
	// master no longer has the position it would resume from, and for an
	// event it cannot read (a statement it cannot parse, one that may write
	// tables it does not name). The cache must then drop everything.
	OnReset func()
	// Metrics, when set, receives the tailer's counters (NewMetrics).
	Metrics *Metrics
	// Log receives info and warning lines, each with the cluster's name.
	// nil logs nothing.
	Log *zap.Logger
	// MasterCheck is how often Master is asked while events are awaited
	// (default 200ms), and how long a tailer without a master waits before
	// asking again.
	MasterCheck time.Duration
	// RetryMin and RetryMax bound the wait before reconnecting after a
	// failure: it starts at RetryMin (default 100ms) and doubles up to
	// RetryMax (default 5s); a connection that read events starts it over.
	RetryMin, RetryMax time.Duration
	// Heartbeat is the period at which an idle master sends a heartbeat
	// (default 1s); a connection that hears nothing for 5 heartbeats is
	// taken as dead and replaced.
	Heartbeat time.Duration
	// ConnectTimeout bounds connecting and each control query (default 5s).
	ConnectTimeout time.Duration
}

// DefaultServerID derives a server_id from the cluster's name and instance,
// a name unique among the sluices that tail the same master ("" means this
// host's name and process id). It lies in [2^31, 2^32), above the ids DBAs
// usually give their servers (1, 2, 3, …, or an address's last octets), so a
// collision with a real server is unlikely; configure an id where that is
// not enough.
func DefaultServerID(cluster, instance string) uint32 {
	if instance == "" {
		host, _ := os.Hostname()
		instance = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	h := fnv.New32a()
	h.Write([]byte("sluice-binlog\x00" + instance + "\x00" + cluster))
	return h.Sum32() | 1<<31
}

// Tailer is one cluster's binlog tailer. Its methods are safe for
// concurrent use.
type Tailer struct {
	o    Options
	log  *zap.Logger
	done chan struct{}

	events     atomic.Uint64
	heartbeats atomic.Uint64
	reconnects atomic.Uint64
	resets     atomic.Uint64
	// attachedTo is the master the tailer reads from now, or "".
	attachedTo atomic.Pointer[string]
	// position is the GTID position after the last whole transaction read.
	position atomic.Pointer[string]
}

// Start starts a tailer for one cluster and returns at once; the tailer
// runs until ctx ends. Wait for Done to know its goroutines and connections
// are gone.
func Start(ctx context.Context, o Options) *Tailer {
	if o.ServerID == 0 {
		o.ServerID = DefaultServerID(o.Cluster, "")
	}
	if o.Master == nil {
		o.Master = func() string { return "" }
	}
	if o.OnChange == nil {
		o.OnChange = func(string, string, bool) {}
	}
	if o.OnReset == nil {
		o.OnReset = func() {}
	}
	defaults := []struct {
		d   *time.Duration
		def time.Duration
	}{{&o.MasterCheck, 200 * time.Millisecond}, {&o.RetryMin, 100 * time.Millisecond},
		{&o.RetryMax, 5 * time.Second}, {&o.Heartbeat, time.Second}, {&o.ConnectTimeout, 5 * time.Second}}
	for _, d := range defaults {
		if *d.d <= 0 {
			*d.d = d.def
		}
	}
	if o.RetryMax < o.RetryMin {
		o.RetryMax = o.RetryMin
	}
	log := o.Log
	if log == nil {
		log = zap.NewNop()
	}
	t := &Tailer{o: o, log: log.With(zap.String("cluster", o.Cluster)), done: make(chan struct{})}
	go t.run(ctx)
	return t
}

// Done is closed when the tailer has stopped: its context ended, its
// connections are closed and its goroutines have returned.
func (t *Tailer) Done() <-chan struct{} { return t.done }

// tlsFor is the TLS configuration of a connection to the master at addr.
func (t *Tailer) tlsFor(addr string) *tls.Config {
	if t.o.MasterTLS != nil {
		return t.o.MasterTLS(addr)
	}
	return t.o.TLS
}

// Stats is what a tailer has done so far.
type Stats struct {
	// Events counts the binlog events read.
	Events uint64
	// Heartbeats counts the heartbeats of an idle master among them.
	Heartbeats uint64
	// Reconnects counts the connections to a master that ended other than
	// by the tailer's stop (and failed attempts to open one).
	Reconnects uint64
	// Resets counts the OnReset calls.
	Resets uint64
	// Master is the master the tailer reads from now ("" while none).
	Master string
	// Position is the MariaDB GTID position after the last transaction read.
	Position string
}

// Stats returns the tailer's counters.
func (t *Tailer) Stats() Stats {
	s := Stats{Events: t.events.Load(), Heartbeats: t.heartbeats.Load(), Reconnects: t.reconnects.Load(),
		Resets: t.resets.Load()}
	if p := t.attachedTo.Load(); p != nil {
		s.Master = *p
	}
	if p := t.position.Load(); p != nil {
		s.Position = *p
	}
	return s
}

// errMasterChanged ends a connection whose master is no longer the
// cluster's.
var errMasterChanged = errors.New("the cluster's master changed")

// run keeps the tailer attached to the cluster's current master until ctx
// ends: it reconnects after failures with a growing pause, resumes from the
// last whole transaction read when it can, and starts over (OnReset) when
// it cannot.
func (t *Tailer) run(ctx context.Context) {
	defer close(t.done)
	defer t.attachedTo.Store(nil)
	var resume *mysql.MariadbGTIDSet
	attached := ""
	wait := t.o.RetryMin
	for ctx.Err() == nil {
		addr := t.o.Master()
		if addr == "" {
			t.attachedTo.Store(nil)
			sleep(ctx, t.o.MasterCheck)
			continue
		}
		if addr != attached {
			if attached != "" {
				t.log.Info("binlog tailer follows the new master", zap.String("from", attached), zap.String("to", addr))
			}
			resume = nil // a new master: start at its present and reset
		}
		attached = addr
		c := &conn{t: t, addr: addr, resume: resume}
		err := c.tail(ctx)
		resume = c.resume
		if ctx.Err() != nil {
			return
		}
		t.attachedTo.Store(nil)
		if errors.Is(err, errMasterChanged) {
			wait = t.o.RetryMin
			continue
		}
		t.reconnects.Add(1)
		t.o.Metrics.reconnect(t.o.Cluster)
		if c.read {
			wait = t.o.RetryMin
		}
		if unresumable(err) {
			t.log.Warn("binlog tailer cannot resume: the master lacks the position; starting at its present",
				zap.String("master", addr), zap.String("position", positionText(resume)), zap.String("error", err.Error()))
			resume = nil
		} else {
			t.log.Warn("binlog tailer lost the master; reconnecting", zap.String("master", addr),
				zap.Duration("after", wait), zap.String("error", err.Error()))
		}
		sleep(ctx, wait)
		wait = min(2*wait, t.o.RetryMax)
	}
}

// reset calls OnReset and counts it.
func (t *Tailer) reset(why string) {
	t.resets.Add(1)
	t.log.Info("binlog tailer resets the cache", zap.String("reason", why))
	t.o.OnReset()
}

// unresumable reports whether err is the master's refusal of the position
// asked for (ER_MASTER_FATAL_ERROR_READING_BINLOG: purged, or never seen in
// its history).
func unresumable(err error) bool {
	var me *mysql.MyError
	return errors.As(err, &me) && me.Code == mysql.ER_MASTER_FATAL_ERROR_READING_BINLOG
}

// positionText is a GTID position for the log ("" when none).
func positionText(p *mysql.MariadbGTIDSet) string {
	if p == nil {
		return ""
	}
	return p.String()
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
	case <-tm.C:
	}
}
