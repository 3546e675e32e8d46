package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
	"unsafe"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
	"github.com/sluice-proxy/sluice/rules"
	"github.com/sluice-proxy/sluice/shard"
)

// The query rules' mirror ([[rule]] mirror = "<cluster>"): a copy of each
// statement a rule mirrors is put on one bounded queue, shared by every
// session, and a fixed set of workers run the copies on the mirror
// clusters' masters, each worker on connections of its own, and discard
// the results. A session never waits for the mirror: a copy that finds the
// queue full is dropped and counted.
//
// A copy runs as the mirror cluster's service account ([[cluster]] user),
// the account all of sluice's data connections to that cluster log in
// with, in the session's current schema, with autocommit and the
// account's default session variables: the session's SET variables,
// transaction and user variables are not carried over (see mirrorable for
// which statements are copied at all).

// mirrorStatementTimeout bounds one copy on its worker: a copy still
// running then has its connection closed (the server ends it), so a slow
// mirror cluster cannot hold a worker forever.
const mirrorStatementTimeout = time.Minute

// mirror is the Env's queue and workers. Its methods are safe for
// concurrent use; the workers start with the first copy and end at stop.
type mirror struct {
	env   *Env
	queue chan mirrorJob
	n     int
	once  sync.Once
	done  chan struct{}

	// mu guards stopped and conns, the connections the workers hold
	// (stop closes them, which ends a copy in flight).
	mu      sync.Mutex
	stopped bool
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// mirrorJob is one copy: the text of a statement, the rule that copied it
// (which counts it) and the cluster (its index) and schema it runs in.
type mirrorJob struct {
	rule    *rules.Rule
	cluster int
	schema  string
	text    []byte
	// plan is the copied statement's (shared, read-only): a write's
	// tables are invalidated in the result cache once the copy ran.
	plan *router.Plan
	// nbe: the text was written for a session whose sql_mode has
	// NO_BACKSLASH_ESCAPES, so it must be read that way on the mirror
	// too (else a value ending in a backslash would end its string
	// elsewhere).
	nbe bool
}

// initMirror makes the Env's mirror with cfg's queue and worker count
// ([proxy] mirror_queue and mirror_workers, restart-only). The rules
// count the copies (rules.Rule.MirrorCounts), which the server exports.
func (e *Env) initMirror(cfg *conf.Config) {
	q, n := cfg.Proxy.MirrorQueue, cfg.Proxy.MirrorWorkers
	if q <= 0 {
		q = conf.DefaultMirrorQueue
	}
	if n <= 0 {
		n = conf.DefaultMirrorWorkers
	}
	e.mirror = &mirror{env: e, queue: make(chan mirrorJob, q), n: n, done: make(chan struct{}), conns: make(map[net.Conn]struct{})}
}

// StopMirror stops the mirror's workers, closing their connections (a copy
// in flight is cut off), and waits for them; copies still queued are
// dropped uncounted. The server's Close calls it once the sessions ended.
func (e *Env) StopMirror() {
	m := e.mirror
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return
	}
	m.stopped = true
	close(m.done)
	for c := range m.conns {
		_ = c.Close()
	}
	m.mu.Unlock()
	m.wg.Wait()
}

// mirrorable reports whether a statement of plan may be copied: a read or
// a write that leaves no state on the connection that runs it (a user
// variable, a temporary table, a lock, a transaction). The rest — USE,
// SET, transaction control, statements that pin — would change the
// worker's connection, which serves every session's copies.
func mirrorable(plan *router.Plan) bool {
	return (plan.Kind == router.KindRead || plan.Kind == router.KindWrite) && plan.Pins == 0 && !plan.Multi
}

// mirrorStatement queues a copy of text when a rule of d mirrors it. It
// never blocks: a full queue drops the copy and counts it.
func (s *Session) mirrorStatement(set *rules.Set, d *rules.Decision, plan *router.Plan, text []byte, schema string) {
	if !d.Mirror || !mirrorable(plan) {
		return
	}
	r := set.Rule(d.MirrorRule)
	if s.lexDoubt(plan) || !s.utf8Client() && !ascii(text) {
		// The mirror connection reads text with the server's default
		// sql_mode (but for NO_BACKSLASH_ESCAPES, set per copy) in
		// utf8mb4: a text that may read otherwise there is not copied
		// rather than copied wrong.
		r.NoteMirrorFailed()
		return
	}
	if r.MirrorIdx == s.clusterIdx {
		// check-config keeps mirrors off the clusters statements run
		// on; should the session be on the mirror cluster anyway, a
		// copy would run the statement twice there.
		return
	}
	s.env.mirror.enqueue(mirrorJob{rule: r, cluster: r.MirrorIdx, schema: schema, text: append([]byte(nil), text...), plan: plan,
		nbe: s.lastStatus&protocol.StatusNoBackslashEscape != 0})
}

// mirrorExecution queues a copy of an execution of prepared statement st
// (its packet p, parsed as ex) when a rule its PREPARE matched mirrors it:
// the statement's text with the execution's parameter values written in,
// as sharding runs executions it splits.
func (s *Session) mirrorExecution(st *preparedStmt, p []byte, ex protocol.Execute) {
	if !st.rule.Mirror || !mirrorable(st.plan) || st.rule.Err {
		return
	}
	var args []shard.Value
	var types []shard.ParamType
	var buf []byte
	err := protocol.ExecuteParams(p, ex, st.params, st.types, func(i int) ([]byte, bool) {
		d, ok := st.longData[i]
		return d, ok
	}, func(_ int, v protocol.Param) error {
		args = append(args, paramValue(v, &buf))
		types = append(types, paramType(v.Type))
		return nil
	})
	if err != nil {
		return // the execution itself gets the error
	}
	q, err := shard.Interpolate(st.sql, args, types, nil, s.lastStatus&protocol.StatusNoBackslashEscape != 0)
	if err != nil {
		st.ruleSet.Rule(st.rule.MirrorRule).NoteMirrorFailed()
		return
	}
	// An execution runs in the schema its statement was prepared in.
	s.mirrorStatement(st.ruleSet, &st.rule, st.plan, unsafe.Slice(unsafe.StringData(q), len(q)), st.schema)
}

// enqueue puts j on the queue, starting the workers on first use, or
// drops it when the queue is full or the mirror stopped.
func (m *mirror) enqueue(j mirrorJob) {
	m.once.Do(m.startWorkers)
	select {
	case <-m.done:
		return
	default:
	}
	select {
	case m.queue <- j:
	default:
		j.rule.NoteMirrorDropped()
	}
}

func (m *mirror) startWorkers() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return
	}
	m.wg.Add(m.n)
	for range m.n {
		go m.work()
	}
}

// mirrorConn is a worker's connection to one mirror cluster's master.
type mirrorConn struct {
	nc     net.Conn
	c      *protocol.Conn
	addr   string
	schema string
	// used is when the connection last ran a copy.
	used time.Time
	// nbe is whether the connection's sql_mode has NO_BACKSLASH_ESCAPES
	// (from its last OK or EOF), modeKnown whether nbe was learnt yet.
	nbe, modeKnown bool
}

// work runs copies until the mirror stops. A worker keeps a connection
// per mirror cluster.
func (m *mirror) work() {
	defer m.wg.Done()
	conns := make(map[int]*mirrorConn)
	defer func() {
		for _, mc := range conns {
			m.closeConn(mc)
		}
	}()
	for {
		select {
		case <-m.done:
			return
		case j := <-m.queue:
			err := m.run(conns, j)
			m.env.invalidateMirrored(j)
			if err != nil {
				j.rule.NoteMirrorFailed()
				if ce := m.env.log.Check(zap.DebugLevel, "mirror: copy not run"); ce != nil {
					ce.Write(zap.String("rule", j.rule.Name), zap.Error(err))
				}
			}
		}
	}
}

// run runs one copy on a connection of conns to the master of j's
// cluster, (re)connecting as needed. An error means the copy did not run;
// the server's answer, an error included, is discarded.
func (m *mirror) run(conns map[int]*mirrorConn, j mirrorJob) error {
	c := m.env.topo.Current().Clusters[j.cluster]
	if c.Master == nil || !c.Master.Up() {
		return fmt.Errorf("cluster %s has no master up", c.Name)
	}
	mc := conns[j.cluster]
	if mc != nil && (mc.addr != c.Master.Address || j.schema == "" && mc.schema != "" || !mc.alive()) {
		// A failover moved the master, the copy must run with no
		// schema selected (a connection cannot go back to none), or the
		// connection idled and does not answer a ping.
		m.closeConn(mc)
		delete(conns, j.cluster)
		mc = nil
	}
	if mc == nil {
		var err error
		if mc, err = m.dial(c.Master.Address); err != nil {
			return err
		}
		conns[j.cluster] = mc
	}
	mc.used = time.Now()
	_ = mc.nc.SetDeadline(mc.used.Add(mirrorStatementTimeout))
	if j.schema != "" && mc.schema != j.schema {
		mc.c.ResetSeq()
		err := mc.c.WritePacketFlush(append([]byte{protocol.ComInitDB}, j.schema...))
		if err == nil {
			_, err = protocol.ReadResponse(mc.c, protocol.ResponseSingle)
		}
		var se *protocol.SQLError
		switch {
		case err == nil:
			mc.schema = j.schema
		case errors.As(err, &se):
			// The schema is missing there: the connection is fine.
			return fmt.Errorf("schema %s on %s: %w", j.schema, mc.addr, err)
		default:
			m.closeConn(mc)
			delete(conns, j.cluster)
			return fmt.Errorf("schema %s on %s: %w", j.schema, mc.addr, err)
		}
	}
	if !mc.modeKnown || mc.nbe != j.nbe {
		if err := mc.setNoBackslashEscapes(j.nbe); err != nil {
			m.closeConn(mc)
			delete(conns, j.cluster)
			return fmt.Errorf("sql_mode on %s: %w", mc.addr, err)
		}
	}
	mc.c.ResetSeq()
	err := mc.c.WritePacketFlush(append([]byte{protocol.ComQuery}, j.text...))
	var status uint16
	if err == nil {
		status, err = protocol.ReadResponse(mc.c, protocol.ResponseResult)
		if err == nil {
			mc.nbe = status&protocol.StatusNoBackslashEscape != 0
		}
	}
	var se *protocol.SQLError
	if err != nil && !errors.As(err, &se) {
		m.closeConn(mc)
		delete(conns, j.cluster)
		return fmt.Errorf("copy on %s: %w", mc.addr, err)
	}
	if status&protocol.StatusInTrans != 0 || err == nil && status&protocol.StatusAutocommit == 0 {
		// The copy left a transaction open (it should not: mirrorable):
		// the connection must not run the next session's copies.
		m.closeConn(mc)
		delete(conns, j.cluster)
	}
	j.rule.NoteMirrored()
	return nil
}

// setNoBackslashEscapes adds NO_BACKSLASH_ESCAPES to the connection's
// sql_mode, or takes it away, and checks that the server's status agrees.
func (mc *mirrorConn) setNoBackslashEscapes(on bool) error {
	q := "SET SESSION sql_mode = REPLACE(@@SESSION.sql_mode, 'NO_BACKSLASH_ESCAPES', '')"
	if on {
		q = "SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',NO_BACKSLASH_ESCAPES')"
	}
	mc.c.ResetSeq()
	if err := mc.c.WritePacketFlush(append([]byte{protocol.ComQuery}, q...)); err != nil {
		return err
	}
	status, err := protocol.ReadResponse(mc.c, protocol.ResponseResult)
	if err != nil {
		return err
	}
	mc.nbe, mc.modeKnown = status&protocol.StatusNoBackslashEscape != 0, true
	if mc.nbe != on {
		return fmt.Errorf("NO_BACKSLASH_ESCAPES stays %v", mc.nbe)
	}
	return nil
}

// utf8Client reports whether the session's client character set is
// utf8mb4 or utf8mb3 (whose bytes utf8mb4 reads alike): the character set
// of the mirror's connections.
func (s *Session) utf8Client() bool {
	for i := len(s.vars) - 1; i >= 0; i-- {
		switch s.vars[i].Name {
		case "names", "character set", "character_set_client":
			switch strings.ToLower(s.vars[i].Charset) {
			case "utf8mb4", "utf8", "utf8mb3":
				return true
			}
			return false
		}
	}
	c := s.key.collation
	return c == 33 || c == 45 || c == 46 || c == 83 || c >= 192 && c <= 215 || c >= 224 && c <= 247
}

// ascii reports whether text is all 7-bit: read alike in every client
// character set sluice lets through.
func ascii(text []byte) bool {
	for _, b := range text {
		if b >= 0x80 {
			return false
		}
	}
	return true
}

// mirrorIdleCheck: a worker's connection idle for longer is pinged before
// it runs a copy. The server may have closed it meanwhile (wait_timeout),
// and a copy sent on a closed connection could not tell whether it ran, so
// it would be lost; after a failed ping it runs on a new connection.
const mirrorIdleCheck = 30 * time.Second

// alive reports whether mc may run the next copy: used recently, or
// answering a COM_PING.
func (mc *mirrorConn) alive() bool {
	if time.Since(mc.used) < mirrorIdleCheck {
		return true
	}
	_ = mc.nc.SetDeadline(time.Now().Add(mirrorIdleCheck))
	mc.c.ResetSeq()
	if err := mc.c.WritePacketFlush([]byte{protocol.ComPing}); err != nil {
		return false
	}
	_, err := protocol.ReadResponse(mc.c, protocol.ResponseSingle)
	return err == nil
}

// dial opens a worker's connection to addr, logged in with the service
// account of addr's pool.
func (m *mirror) dial(addr string) (*mirrorConn, error) {
	p := m.env.pool(addr)
	if p == nil {
		return nil, fmt.Errorf("no pool for %s", addr)
	}
	ctx, cancel := context.WithTimeout(m.env.ctx, p.dialTimeout+m.env.config().Health.Timeout.Duration)
	defer cancel()
	nc, c, err := p.dialService(ctx)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		_ = nc.Close()
		return nil, errors.New("the mirror stopped")
	}
	m.conns[nc] = struct{}{}
	return &mirrorConn{nc: nc, c: c, addr: addr}, nil
}

func (m *mirror) closeConn(mc *mirrorConn) {
	m.mu.Lock()
	delete(m.conns, mc.nc)
	m.mu.Unlock()
	_ = mc.nc.Close()
}

// invalidateMirrored bumps, in the result cache, the tables a mirrored
// write may have changed on its cluster, after the copy ran (or failed
// part way): an answer of that cluster read before the copy landed stops
// being served. The copy is asynchronous, so nothing the client was told
// depends on it; what matters is that an entry older than the copy does
// not outlive it. Tables sluice cannot name bump every entry.
func (e *Env) invalidateMirrored(j mirrorJob) {
	c := e.cache
	if c == nil || !c.Enabled() || j.plan == nil || j.plan.Kind != router.KindWrite {
		return
	}
	a := j.plan.Access
	if a == nil || a.Unknown || j.plan.Opaque || j.plan.Call || len(j.plan.Funcs) > 0 || a.Inner != nil || a.Execute != "" {
		c.V.Global().Bump()
		return
	}
	named := false
	for _, n := range a.Needs {
		if n.Level != router.NeedTable && n.Level != router.NeedColumn {
			continue
		}
		db := n.DB
		if db == "" {
			db = j.schema
		}
		if db == "" {
			c.V.Global().Bump()
			return
		}
		c.V.Of(db, n.Table).Bump()
		named = true
	}
	if !named {
		c.V.Global().Bump()
	}
}
