package health

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/health/loadavg"
)

// Prober watches every backend of the current snapshot. Each backend has a
// worker goroutine of its own that keeps a control connection to it (the
// cluster's service account; re-dialled after a failure) and, every
// Interval, probes it within Timeout: a ping, @@read_only, the replication
// status, the GTID positions and Threads_running; for a replica with an
// agent it also polls the agent. A slow or dead backend so delays only its
// own probes. Each result is published on the Backend (Status) and moves
// its state:
//
//   - up, or lagging for a replica whose lag is over the cluster's
//     max_replication_lag (see Status.Lag), after a successful probe;
//   - down after FailuresBeforeDown failed probes in a row;
//   - fenced and offline (Backend.Hold) are kept whatever probes find.
//
// A round ends when every backend has finished a probe started in it;
// Topology.Round counts them. The Prober only writes Backend states and
// statuses and the round counter. Backends that a new snapshot adds get a
// worker at the next interval; those it drops lose theirs. Set its fields
// before Run and do not change them afterwards; Run gives a zero Interval
// or Timeout conf's default and a FailuresBeforeDown below 1 the value 1.
type Prober struct {
	Topology           *Topology
	Interval           time.Duration
	Timeout            time.Duration
	FailuresBeforeDown int
	// TLS returns the TLS configuration to probe b with, nil for none. A
	// nil TLS probes every backend without TLS.
	TLS func(b *Backend) *tls.Config
	// Check, when set, replaces the probe of the server (tests): it must
	// give up by itself and return the Status read (Lag, Lagging and Load
	// are filled in by the Prober).
	Check func(ctx context.Context, b *Backend) (*Status, error)
	// OnChange, when set, is called after the prober changes a backend's
	// state, from the backend's worker goroutine.
	OnChange func(b *Backend, from, to State, reason string)
	// OnStatus, when set, is called with each successful probe's Status.
	OnStatus func(b *Backend, st *Status)
	// OnAgent, when set, is called when a replica's agent starts failing
	// (err set: the load falls back to Threads_running) and when it
	// answers again (err nil). The first poll reports only a failure.
	OnAgent func(b *Backend, err error)
}

// Run probes until ctx is done, then closes its control connections and
// returns once every worker has stopped.
func (p *Prober) Run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if p.Interval <= 0 {
		p.Interval = conf.DefaultHealthInterval
	}
	if p.Timeout <= 0 {
		p.Timeout = conf.DefaultHealthTimeout
	}
	if p.FailuresBeforeDown < 1 {
		p.FailuresBeforeDown = 1
	}
	httpc := &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     max(3*p.Interval, 5*time.Second),
		DisableCompression:  true,
	}}
	defer httpc.CloseIdleConnections()

	type done struct {
		w    *worker
		tick uint64
	}
	finished := make(chan done)
	workers := map[*Backend]*worker{}
	stopped := make(chan struct{})
	running := 0
	defer func() {
		for _, w := range workers {
			w.cancel()
		}
		for running > 0 {
			select {
			case <-stopped:
				running--
			case <-finished:
			}
		}
	}()

	// pending holds the workers the current round still waits for; the
	// round began at tick roundStart.
	var tick, roundStart uint64
	pending := map[*worker]bool{}
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	for {
		// Follow the snapshot: a worker per backend it holds, told at
		// each probe which cluster the backend is in now.
		snap := p.Topology.Current()
		seen := map[*Backend]*Cluster{}
		for _, c := range snap.Clusters {
			for _, b := range c.Watched() {
				seen[b] = c
				if workers[b] != nil {
					continue
				}
				wctx, wcancel := context.WithCancel(ctx)
				w := &worker{p: p, b: b, http: httpc, cancel: wcancel, trigger: make(chan probeRequest, 1)}
				workers[b] = w
				running++
				go func() {
					defer func() { stopped <- struct{}{} }()
					w.run(wctx, func(tick uint64) bool {
						select {
						case finished <- done{w, tick}:
							return true
						case <-wctx.Done():
							return false
						}
					})
				}()
			}
		}
		for b, w := range workers {
			if seen[b] == nil {
				w.cancel()
				delete(workers, b)
				delete(pending, w)
			}
		}
		if len(pending) == 0 {
			roundStart = tick
			for _, w := range workers {
				pending[w] = true
			}
		}
		// Start a probe on every worker that is free; a busy one (a
		// backend that does not answer) just misses this tick.
		for b, w := range workers {
			select {
			case w.trigger <- probeRequest{tick, seen[b]}:
			default:
			}
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return
			case d := <-finished:
				if d.tick >= roundStart && pending[d.w] {
					delete(pending, d.w)
					if len(pending) == 0 {
						p.Topology.round.Add(1)
					}
				}
			case <-stopped:
				running--
			case <-t.C:
				tick++
				break wait
			case <-p.Topology.kick: // a round now; the ticker keeps its pace
				tick++
				break wait
			}
		}
	}
}

// probeRequest asks a worker for a probe in round tick; c is the
// backend's cluster in the current snapshot.
type probeRequest struct {
	tick uint64
	c    *Cluster
}

// worker probes one backend. Its fields are owned by its goroutine, except
// trigger and cancel, which the Prober's loop uses.
type worker struct {
	p       *Prober
	b       *Backend
	http    *http.Client
	cancel  context.CancelFunc
	trigger chan probeRequest

	// c is the backend's cluster as of the current probe.
	c           *Cluster
	conn        *client.Conn
	version     string
	behindSince time.Time
	agentErr    string // the agent's last failure, "" while it answers
	// funcs and funcsSig are the last function catalog read (a master's)
	// and the rows it was built from: an unchanged catalog is shared
	// between Statuses, not built again each probe.
	funcs    Functions
	funcsSig string
	// schemas is the last schema list read (a master's), kept the same
	// way.
	schemas Schemas
	// funcsDigest and schemasDigest are the server's digests of those
	// catalogs when they were read (catalogSigQuery), "" when unknown.
	funcsDigest, schemasDigest string
	// objs is the last catalog of views and routines read (a master's),
	// objsSig the server's digest of its views and of its routines when
	// it was read (catalogSigQuery).
	objs    *Objects
	objsSig [2]string
}

// run probes each time it is triggered, reporting each finished probe with
// report, until ctx is done or report fails.
func (w *worker) run(ctx context.Context, report func(tick uint64) bool) {
	defer w.closeConn()
	for {
		select {
		case <-ctx.Done():
			return
		case req := <-w.trigger:
			w.c = req.c
			w.probe(ctx)
			if !report(req.tick) {
				return
			}
		}
	}
}

// probe runs one probe and applies its result.
func (w *worker) probe(ctx context.Context) {
	b := w.b
	var st *Status
	var err error
	b.probeSince.Store(time.Now().UnixNano())
	defer b.probeSince.Store(0)
	if w.p.Check != nil {
		st, err = w.p.Check(ctx, b)
	} else {
		st, err = w.query(ctx)
	}
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		msg := err.Error()
		b.lastErr.Store(&msg)
		n := int(b.failures.Add(1))
		if n >= w.p.FailuresBeforeDown || State(b.probed.Load()) == StateDown {
			w.settle(StateDown, msg)
		}
		return
	}
	now := time.Now()
	st.Time = now
	if b.Role == RoleReplica {
		judgeLag(st, w.c.Master.Status(), w.c.MaxReplicationLag, &w.behindSince, now)
		if src := FencedSource(st, w.c); src != "" {
			// Whatever its lag says, it follows a server that takes no writes: what it
			// serves falls behind the master for good.
			st.Lag, st.Lagging = -1, true
			st.LagNote = "replicates from " + src + ", an old master fenced by a failover"
		}
	} else {
		st.Lag = -1
	}
	st.Load, st.LoadSource = float64(st.ThreadsRunning), "threads_running"
	if b.Agent != "" {
		w.pollAgent(ctx, st)
	}
	b.failures.Store(0)
	b.status.Store(st)
	if w.p.OnStatus != nil {
		w.p.OnStatus(b, st)
	}
	if st.Lagging {
		w.settle(StateLagging, fmt.Sprintf("replication lag %s over max_replication_lag %s: %s", lagText(st.Lag), w.c.MaxReplicationLag, st.LagNote))
	} else {
		w.settle(StateUp, "probe succeeded")
	}
}

func lagText(d time.Duration) string {
	if d < 0 {
		return "unknown"
	}
	return d.Round(time.Millisecond).String()
}

// settle records to as what the probes found and moves the backend's state
// there unless it is held.
func (w *worker) settle(to State, reason string) {
	w.b.probed.Store(uint32(to))
	if from, changed := w.b.settle(to); changed && w.p.OnChange != nil {
		w.p.OnChange(w.b, from, to, reason)
	}
}

// pollAgent fills st's load from the replica's agent, leaving
// Threads_running in place when the agent fails.
func (w *worker) pollAgent(ctx context.Context, st *Status) {
	actx, cancel := context.WithTimeout(ctx, w.p.Timeout)
	defer cancel()
	r, err := loadavg.Fetch(actx, w.http, loadavg.URL(w.b.Agent))
	if err != nil {
		if w.agentErr == "" && w.p.OnAgent != nil {
			w.p.OnAgent(w.b, err)
		}
		w.agentErr = err.Error()
		return
	}
	if w.agentErr != "" && w.p.OnAgent != nil {
		w.p.OnAgent(w.b, nil)
	}
	w.agentErr = ""
	st.Load, st.LoadSource = r.PerCPU(), "agent"
	st.Load1, st.Load5, st.Load15, st.CPUs = r.Load1, r.Load5, r.Load15, r.CPUs
}

// errProbe marks failures of the probe's own SQL.
var errProbe = errors.New("probe")

// query probes the server over the control connection, dialling it first
// when there is none. A failure, or a refused replication status, closes
// the connection.
func (w *worker) query(ctx context.Context) (*Status, error) {
	if w.conn == nil {
		if err := w.dial(ctx); err != nil {
			return nil, err
		}
	}
	st, err := w.read()
	if err != nil || st.ReplicationError != "" {
		// A refusal may be a missing global privilege: those are read at
		// login, so the next probe logs in again to see a new GRANT.
		w.closeConn()
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

func (w *worker) closeConn() {
	if w.conn != nil {
		_ = w.conn.Close()
		w.conn = nil
	}
}

// dial opens the control connection: a full login with the cluster's
// service account (a bare TCP connect would count against the server's
// max_connect_errors), over TLS when the proxy says so. Timeout bounds the
// connect and the whole login.
func (w *worker) dial(ctx context.Context) error {
	timeout := w.p.Timeout
	dialer := func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: timeout}
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		_ = nc.SetDeadline(time.Now().Add(timeout))
		return nc, nil
	}
	var tc *tls.Config
	if w.p.TLS != nil {
		tc = w.p.TLS(w.b)
	}
	c, err := client.ConnectWithDialer(ctx, "tcp", w.b.Address, w.c.user, w.c.password, "", dialer, func(c *client.Conn) error {
		c.SetAttributes(map[string]string{"program_name": "sluice-health"})
		if tc != nil {
			c.SetTLSConfig(tc)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	w.conn, w.version = c, c.GetServerVersion()
	return nil
}

// mariadbVars and mysqlVars read a server's state: read_only, the GTIDs
// it executed and applied, sql_mode and (MariaDB) Threads_running.
const (
	mariadbVars = "SELECT @@global.read_only, @@global.gtid_current_pos, @@global.gtid_slave_pos, @@global.sql_mode," +
		" (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'THREADS_RUNNING')"
	mysqlVars = "SELECT @@global.read_only, @@global.gtid_executed, @@global.gtid_executed, @@global.sql_mode"
)

// threadsRunning is the Threads_running status v less the probe's own
// statement, which is one of them.
func threadsRunning(v string) int {
	n, _ := strconv.Atoi(v)
	return max(n-1, 0)
}

// read runs the probe's statements within Timeout. The first one's answer
// is the proof of life (no ping before it): each round trip a probe makes
// is CPU sluice spends twice a second per backend.
func (w *worker) read() (*Status, error) {
	c := w.conn
	if err := c.SetDeadline(time.Now().Add(w.p.Timeout)); err != nil {
		return nil, err
	}
	st := &Status{Version: w.version, Flavor: flavorOf(w.version), SecondsBehind: -1}
	vars, replStatus := mariadbVars, "SHOW ALL SLAVES STATUS"
	if st.Flavor == FlavorMySQL {
		vars, replStatus = mysqlVars, "SHOW SLAVE STATUS"
		if n, err := c.CompareServerVersion("8.0.22"); err == nil && n >= 0 {
			replStatus = "SHOW REPLICA STATUS"
		}
	}
	r, err := c.Execute(vars)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errProbe, vars, err)
	}
	if r.Resultset == nil || r.RowNumber() != 1 {
		return nil, fmt.Errorf("%w: %s returned no row", errProbe, vars)
	}
	// read_only is 0/1, or a word on servers where it has more modes.
	ro, _ := r.GetString(0, 0)
	st.ReadOnly = ro != "" && ro != "0" && !strings.EqualFold(ro, "OFF")
	st.ExecutedGTID, _ = r.GetString(0, 1)
	st.AppliedGTID, _ = r.GetString(0, 2)
	if m, err := r.GetString(0, 3); err == nil {
		st.SQLMode, st.SQLModeKnown = m, true
	}
	if vars == mariadbVars {
		running, _ := r.GetString(0, 4)
		st.ThreadsRunning = threadsRunning(running)
	}

	r, err = c.Execute(replStatus)
	var refused *mysql.MyError
	switch {
	case errors.As(err, &refused):
		// The server answers but will not say (typically a missing
		// privilege): it is alive, its replication state is unknown.
		st.ReplicationError = fmt.Sprintf("%s: error %d: %s", replStatus, refused.Code, refused.Message)
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %w", errProbe, replStatus, err)
	default:
		readReplication(r.Resultset, st)
	}

	if vars == mysqlVars {
		// MySQL keeps its status out of information_schema.
		r, err = c.Execute("SHOW GLOBAL STATUS LIKE 'Threads_running'")
		if err != nil {
			return nil, fmt.Errorf("%w: SHOW GLOBAL STATUS: %w", errProbe, err)
		}
		if r.Resultset != nil && r.RowNumber() == 1 {
			v, _ := r.GetString(0, 1)
			st.ThreadsRunning = threadsRunning(v)
		}
	}
	if w.b.Role == RoleMaster {
		w.readCatalogs(c, st)
	}
	return st, nil
}

// readReplication fills st's replication fields from SHOW ALL SLAVES
// STATUS / SHOW REPLICA STATUS, one row per replication source (none on a
// server that does not replicate). Column names differ by server and
// version; each field takes the first name the result has.
func readReplication(rs *mysql.Resultset, st *Status) {
	if rs == nil || rs.RowNumber() == 0 {
		return
	}
	col := func(names ...string) int {
		for _, n := range names {
			if i, ok := rs.FieldNames[n]; ok {
				return i
			}
		}
		return -1
	}
	str := func(row, i int) (string, bool) {
		if i < 0 {
			return "", false
		}
		if null, _ := rs.IsNull(row, i); null {
			return "", false
		}
		s, err := rs.GetString(row, i)
		return s, err == nil
	}
	io := col("Slave_IO_Running", "Replica_IO_Running")
	sqlc := col("Slave_SQL_Running", "Replica_SQL_Running")
	behind := col("Seconds_Behind_Master", "Seconds_Behind_Source")
	recv := col("Gtid_IO_Pos", "Retrieved_Gtid_Set")
	host := col("Master_Host", "Source_Host")
	port := col("Master_Port", "Source_Port")

	st.Replicating, st.IORunning, st.SQLRunning = true, true, true
	lagKnown, lag := true, int64(0)
	var received []string
	for row := range rs.RowNumber() {
		if v, _ := str(row, io); v != "Yes" {
			st.IORunning = false
		}
		if v, _ := str(row, sqlc); v != "Yes" {
			st.SQLRunning = false
		}
		v, ok := str(row, behind)
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil {
			lagKnown = false
		} else {
			lag = max(lag, n)
		}
		if v, ok := str(row, recv); ok && v != "" {
			received = append(received, v)
		}
		if row == 0 {
			st.MasterHost, _ = str(row, host)
			if v, ok := str(row, port); ok {
				st.MasterPort, _ = strconv.Atoi(v)
			}
		}
	}
	if lagKnown {
		st.SecondsBehind = lag
	}
	st.ReceivedGTID = strings.Join(received, ",")
}
