package proxy

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/internal/mono"
	"github.com/sluice-proxy/sluice/observe"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
)

// runAdmin carries out one parsed admin command. It returns a result set,
// or nil and the info text of an OK packet; errors are *protocol.SQLError
// naming what failed.
func (s *Server) runAdmin(a *adminSession, cmd adminCommand) (*adminResult, string, error) {
	switch cmd.kind {
	case adminHelp:
		r := &adminResult{cols: []string{"command", "description"}}
		for _, c := range adminCommands {
			r.rows = append(r.rows, []string{c[0], c[1]})
		}
		return r, "", nil
	case adminShowBackends:
		return s.showBackends(), "", nil
	case adminShowClusters:
		return s.showClusters(), "", nil
	case adminShowPools:
		return s.showPools(), "", nil
	case adminShowSessions:
		return s.showSessions(), "", nil
	case adminShowDigests:
		return s.showDigests(cmd.limit), "", nil
	case adminShowShards:
		return s.showShards(), "", nil
	case adminShowEvents:
		return s.showEvents(), "", nil
	case adminShowConfig:
		r := &adminResult{cols: []string{"config"}}
		for _, l := range strings.Split(strings.TrimRight(s.config().Describe(), "\n"), "\n") {
			r.rows = append(r.rows, []string{l})
		}
		return r, "", nil
	case adminShowVersion:
		return s.showVersion(), "", nil
	case adminSetOffline, adminSetOnline, adminSetWeight:
		info, err := s.setBackend(cmd)
		return nil, info, err
	case adminKillConnection:
		return nil, "", s.killConnection(cmd.id)
	case adminKillQuery:
		return nil, "", s.killQuery(cmd.id)
	case adminSwitchover:
		ctx, cancel := context.WithCancel(s.ctx)
		defer cancel()
		a.log.Warn("admin: switchover", zap.String("cluster", cmd.cluster), zap.String("target", cmd.addr))
		return nil, "", s.Switchover(ctx, cmd.cluster, cmd.addr)
	case adminFailover:
		ctx, cancel := context.WithCancel(s.ctx)
		defer cancel()
		a.log.Warn("admin: failover", zap.String("cluster", cmd.cluster))
		return nil, "", s.FailoverCluster(ctx, cmd.cluster)
	case adminReload:
		a.log.Warn("admin: reload")
		changes, err := s.Reload()
		if err != nil {
			return nil, "", err
		}
		r := &adminResult{cols: []string{"change"}}
		for _, c := range changes {
			r.rows = append(r.rows, []string{c})
		}
		return r, "", nil
	}
	return nil, "", protocol.NewError(protocol.ErUnknownError, "sluice admin: command %d has no handler", cmd.kind)
}

// backendRole names a backend's place for the admin port: fenced old
// masters are listed with the cluster they left.
func backendRole(c *health.Cluster, b *health.Backend) string {
	if slices.Contains(c.Fenced, b) {
		return "old_master"
	}
	return b.Role.String()
}

func (s *Server) showBackends() *adminResult {
	r := &adminResult{cols: []string{"cluster", "address", "role", "state", "weight", "load", "lag",
		"conn_open", "conn_in_use", "queries", "last_error"}}
	for _, c := range s.topo.Current().Clusters {
		for _, b := range c.Watched() {
			load, lag := "", ""
			if st := b.Status(); st != nil {
				load = strconv.FormatFloat(st.Load, 'f', 2, 64)
				if st.Lag >= 0 && b.Role == health.RoleReplica {
					lag = st.Lag.String()
				}
			}
			open, queries := "", ""
			if p := s.pool(b.Address); p != nil {
				o, _, _ := p.Stats()
				open = strconv.Itoa(o)
				queries = strconv.FormatUint(p.queries.Load(), 10)
			}
			r.rows = append(r.rows, []string{c.Name, b.Address, backendRole(c, b), b.State().String(),
				strconv.Itoa(b.CurrentWeight()), load, lag, open, strconv.FormatInt(b.InUse(), 10), queries, b.LastError()})
		}
	}
	return r
}

func (s *Server) showClusters() *adminResult {
	r := &adminResult{cols: []string{"cluster", "master", "master_state", "replicas", "fenced", "balance", "epoch", "writes_refused"}}
	snap := s.topo.Current()
	for _, c := range snap.Clusters {
		names := func(bs []*health.Backend) string {
			l := make([]string, len(bs))
			for i, b := range bs {
				l[i] = b.Address + " " + b.State().String()
			}
			return strings.Join(l, ", ")
		}
		r.rows = append(r.rows, []string{c.Name, c.Master.Address, c.Master.State().String(), names(c.Replicas),
			names(c.Fenced), c.Balance, strconv.FormatUint(snap.Epoch, 10), c.WritesRefused})
	}
	return r
}

func (s *Server) showPools() *adminResult {
	r := &adminResult{cols: []string{"cluster", "address", "role", "size", "open", "idle", "in_use", "closed", "wait_timeout"}}
	for _, c := range s.topo.Current().Clusters {
		for _, b := range c.Watched() {
			p := s.pool(b.Address)
			if p == nil {
				continue
			}
			o, i, closed := p.Stats()
			r.rows = append(r.rows, []string{c.Name, b.Address, backendRole(c, b), strconv.Itoa(p.size), strconv.Itoa(o),
				strconv.Itoa(i), strconv.FormatInt(b.InUse(), 10), strconv.Itoa(closed), p.waitTimeout.String()})
		}
	}
	return r
}

func (s *Server) showSessions() *adminResult {
	r := &adminResult{cols: []string{"id", "user", "client", "schema", "backend", "state", "time", "digest", "pinned"}}
	s.mu.Lock()
	sessions := make([]*Session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		sessions = append(sessions, sess)
	}
	s.mu.Unlock()
	slices.SortFunc(sessions, func(a, b *Session) int { return int(a.id) - int(b.id) })
	now := mono.Now()
	for _, sess := range sessions {
		v := sess.info.view(now)
		if v.user == "" {
			continue // still logging in
		}
		r.rows = append(r.rows, []string{strconv.FormatUint(uint64(sess.id), 10), v.user,
			sess.client.NetConn().RemoteAddr().String(), v.schema, v.backend, v.state,
			strconv.FormatFloat(v.time.Seconds(), 'f', 3, 64), v.digest, v.pins})
	}
	return r
}

func (s *Server) showDigests(limit int) *adminResult {
	r := &adminResult{cols: []string{"digest", "count", "total_ms", "avg_ms", "max_ms", "rows", "errors", "route"}}
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) }
	for _, d := range s.digests.Snapshot(limit) {
		avg := time.Duration(0)
		if d.Count > 0 {
			avg = d.Total / time.Duration(d.Count)
		}
		digest := d.Digest
		if digest == "" {
			digest = "(unparsed)"
		}
		r.rows = append(r.rows, []string{digest, strconv.FormatUint(d.Count, 10), ms(d.Total), ms(avg), ms(d.Max),
			strconv.FormatUint(d.Rows, 10), strconv.FormatUint(d.Errors, 10), observe.DigestRouteNames(d.Routes)})
	}
	return r
}

func (s *Server) showShards() *adminResult {
	r := &adminResult{cols: []string{"schema", "table", "key", "algorithm", "clusters", "tables_per_cluster", "physical_tables"}}
	for _, sh := range s.config().Shards {
		n := max(sh.TablesPerCluster, 1)
		phys := sh.Table
		if n > 1 {
			phys = fmt.Sprintf("%s_0 .. %s_%d", sh.Table, sh.Table, n-1)
		}
		r.rows = append(r.rows, []string{sh.Schema, sh.Table, sh.Key, sh.Algorithm, strings.Join(sh.Clusters, ","),
			strconv.Itoa(n), phys})
	}
	all := make([]string, len(s.config().Clusters))
	for i, c := range s.config().Clusters {
		all[i] = c.Name
	}
	for _, b := range s.config().Broadcast {
		r.rows = append(r.rows, []string{b.Schema, b.Table, "", "broadcast", strings.Join(all, ","), "1", b.Table})
	}
	return r
}

func (s *Server) showEvents() *adminResult {
	r := &adminResult{cols: []string{"time", "kind", "cluster", "backend", "epoch", "detail"}}
	for _, e := range s.events.List() {
		r.rows = append(r.rows, []string{e.At.UTC().Format("2006-01-02 15:04:05.000"), e.Kind, e.Cluster, e.Backend,
			strconv.FormatUint(e.Epoch, 10), e.Detail})
	}
	return r
}

func (s *Server) showVersion() *adminResult {
	v := Version
	if v == "dev" {
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
	}
	advertised := s.serverVersion()
	if advertised == "" {
		advertised = "(not learnt yet)"
	}
	return &adminResult{cols: []string{"sluice", "go", "server_version"}, rows: [][]string{{v, runtime.Version(), advertised}}}
}

// findBackend returns the backend at addr in the current snapshot and its
// cluster.
func (s *Server) findBackend(addr string) (*health.Cluster, *health.Backend) {
	for _, c := range s.topo.Current().Clusters {
		for _, b := range c.Watched() {
			if b.Address == addr {
				return c, b
			}
		}
	}
	return nil, nil
}

// setBackend runs SET BACKEND '<addr>' OFFLINE | ONLINE | WEIGHT n.
func (s *Server) setBackend(cmd adminCommand) (string, error) {
	c, b := s.findBackend(cmd.addr)
	if b == nil {
		return "", protocol.NewError(protocol.ErWrongArguments,
			"sluice admin: no backend %q; SHOW BACKENDS lists the addresses", cmd.addr)
	}
	switch cmd.kind {
	case adminSetOffline:
		if b == c.Master {
			return "", protocol.NewError(protocol.ErWrongArguments,
				"sluice admin: %s is the master of cluster %s and cannot go offline; use SWITCHOVER CLUSTER %s TO '<replica>' first",
				b.Address, c.Name, c.Name)
		}
		from := b.Hold(health.StateOffline)
		if from != health.StateOffline {
			s.backendStateChanged(b, from, health.StateOffline, "admin: SET BACKEND OFFLINE")
		}
		return "", nil
	case adminSetOnline:
		from := b.State()
		to := b.Release()
		if from != to {
			s.event("online", b.Cluster, b.Address, "admin: SET BACKEND ONLINE, was "+from.String())
			s.backendStateChanged(b, from, to, "admin: SET BACKEND ONLINE")
		}
		return "", nil
	default:
		prev := b.CurrentWeight()
		b.SetWeight(cmd.weight)
		s.log.Info("backend weight changed", zap.String("cluster", b.Cluster), zap.String("backend", b.Address),
			zap.Int("from", prev), zap.Int("to", cmd.weight))
		if c.Balance == health.BalanceRoundRobin || c.Balance == "" {
			return "cluster " + c.Name + " balances round-robin, which ignores weights", nil
		}
		return "", nil
	}
}

// sessionByID returns the client session id, or nil.
func (s *Server) sessionByID(id uint32) *Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id]
}

func noSuchSession(id uint32) *protocol.SQLError {
	return protocol.NewError(ErNoSuchThread, "Unknown thread id: %d (SHOW SESSIONS lists the client sessions)", id)
}

// killConnection closes client session id; its goroutine ends the session
// as for a client that went away.
func (s *Server) killConnection(id uint32) error {
	sess := s.sessionByID(id)
	if sess == nil {
		return noSuchSession(id)
	}
	s.log.Info("admin: killing client session", zap.Uint32("conn_id", id))
	return sess.client.Close()
}

// killQuery kills the statement session id runs: KILL QUERY of the backend
// thread that runs it, sent on a connection of its own (the session's is
// busy). The client then gets the server's own ERR 1317. A session running
// nothing is left alone.
func (s *Server) killQuery(id uint32) error {
	sess := s.sessionByID(id)
	if sess == nil {
		return noSuchSession(id)
	}
	run := sess.info.running.Load()
	if run == nil {
		return nil
	}
	err := s.killBackendQuery(run, func() bool { return sess.info.running.Load() == run })
	if err != nil {
		if se, ok := err.(*protocol.SQLError); ok {
			return se // the server refused the KILL
		}
		return protocol.NewError(protocol.ErCouldNotConnect, "sluice admin: KILL QUERY %d: %v", id, err)
	}
	p := run.pool
	s.log.Info("admin: killed a statement", zap.Uint32("conn_id", id), zap.String("backend", p.addr), zap.Uint32("thread_id", run.threadID))
	return nil
}

// pinNames spells a session's pins for SHOW SESSIONS.
func pinNames(p router.Pin, inTx bool) string {
	var l []string
	if inTx {
		l = append(l, "transaction")
	}
	for bit, name := range router.PinNames {
		if p&bit != 0 {
			l = append(l, name)
		}
	}
	slices.Sort(l[min(len(l), boolInt(inTx)):])
	return strings.Join(l, ",")
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
