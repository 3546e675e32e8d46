package admin

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/observe"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
)

// run carries out one parsed admin command. It returns a result set,
// or nil and the info text of an OK packet; errors are *protocol.SQLError
// naming what failed.
func (p *Port) run(a *session, cmd adminCommand) (*Table, string, error) {
	switch cmd.kind {
	case adminHelp:
		r := &Table{Columns: []string{"command", "description"}}
		for _, c := range adminCommands {
			r.Rows = append(r.Rows, []string{c[0], c[1]})
		}
		return r, "", nil
	case adminShowBackends:
		return ShowBackends(p.ctl), "", nil
	case adminShowClusters:
		return ShowClusters(p.ctl), "", nil
	case adminShowPools:
		return ShowPools(p.ctl), "", nil
	case adminShowSessions:
		return ShowSessions(p.ctl), "", nil
	case adminShowDigests:
		return ShowDigests(p.ctl, cmd.limit), "", nil
	case adminShowShards:
		return p.showShards(), "", nil
	case adminShowRules:
		return ShowRules(p.ctl), "", nil
	case adminShowCache:
		return ShowCache(p.ctl.Cache(), cmd.limit), "", nil
	case adminFlushCache:
		return nil, flushCache(a, p.ctl.Cache(), cmd.schema, cmd.table), nil
	case adminShowEvents:
		return ShowEvents(p.ctl), "", nil
	case adminShowConfig:
		r := &Table{Columns: []string{"config"}}
		for _, l := range strings.Split(strings.TrimRight(p.ctl.Config().Describe(), "\n"), "\n") {
			r.Rows = append(r.Rows, []string{l})
		}
		return r, "", nil
	case adminShowVersion:
		return p.showVersion(), "", nil
	case adminShowFleet:
		t, err := ShowFleet(p.ctx, p.ctl)
		return t, "", err
	case adminSetOffline, adminSetOnline, adminSetWeight:
		info, err := p.setBackend(cmd)
		return nil, info, err
	case adminKillConnection, adminKillQuery:
		return nil, "", p.kill(a, cmd)
	case adminShowSessionsFleet:
		t, err := p.showSessionsFleet()
		return t, "", err
	case adminSwitchover, adminFailover:
		return nil, "", p.masterChange(a, cmd)
	case adminReload:
		a.log.Warn("admin: reload")
		changes, err := p.ctl.Reload()
		if err != nil {
			a.log.Warn("admin: reload failed; the running configuration is unchanged", zap.Error(err))
			return nil, "", err
		}
		r := &Table{Columns: []string{"change"}}
		for _, c := range changes {
			r.Rows = append(r.Rows, []string{c})
		}
		return r, "", nil
	case adminFlushPrivileges:
		a.log.Info("admin: flush privileges")
		p.ctl.FlushPrivileges()
		return nil, "", nil
	case adminShowFirewall, adminFirewallAllow, adminFirewallForget, adminFirewallForgetAll:
		return p.runFirewall(a, cmd)
	}
	return nil, "", protocol.ERUnknownError.New("sluice admin: command %d has no handler", cmd.kind)
}

// backendRole names a backend's place for the admin port: fenced old
// masters are listed with the cluster they left.
func backendRole(c *health.Cluster, b *health.Backend) string {
	if slices.Contains(c.Fenced, b) {
		return "old_master"
	}
	return b.Role.String()
}

// ShowBackends builds SHOW BACKENDS: every backend the prober watches, by
// cluster, with its state, weight, load, lag and pool use.
func ShowBackends(ctl Control) *Table {
	r := &Table{Columns: []string{"cluster", "address", "role", "state", "weight", "load", "lag",
		"conn_open", "conn_in_use", "queries", "last_error"}}
	for _, c := range ctl.Topology().Current().Clusters {
		for _, b := range c.Watched() {
			load, lag := "", ""
			if st := b.Status(); st != nil {
				load = strconv.FormatFloat(st.Load, 'f', 2, 64)
				if st.Lag >= 0 && b.Role == health.RoleReplica {
					lag = st.Lag.String()
				}
			}
			open, queries := "", ""
			if pi, ok := ctl.Pool(b.Address); ok {
				open = strconv.Itoa(pi.Open)
				queries = strconv.FormatUint(pi.Queries, 10)
			}
			r.Rows = append(r.Rows, []string{c.Name, b.Address, backendRole(c, b), b.State().String(),
				strconv.Itoa(b.CurrentWeight()), load, lag, open, strconv.FormatInt(b.InUse(), 10), queries, b.LastError()})
		}
	}
	return r
}

// ShowClusters builds SHOW CLUSTERS: one row per cluster of the current
// topology snapshot.
func ShowClusters(ctl Control) *Table {
	r := &Table{Columns: []string{"cluster", "master", "master_state", "replicas", "fenced", "balance", "epoch", "writes_refused"}}
	snap := ctl.Topology().Current()
	for _, c := range snap.Clusters {
		names := func(bs []*health.Backend) string {
			l := make([]string, len(bs))
			for i, b := range bs {
				l[i] = b.Address + " " + b.State().String()
			}
			return strings.Join(l, ", ")
		}
		r.Rows = append(r.Rows, []string{c.Name, c.Master.Address, c.Master.State().String(), names(c.Replicas),
			names(c.Fenced), c.Balance, strconv.FormatUint(snap.Epoch, 10), c.WritesRefused})
	}
	return r
}

// ShowPools builds SHOW POOLS: the data connection pool of every backend
// that has one.
func ShowPools(ctl Control) *Table {
	r := &Table{Columns: []string{"cluster", "address", "role", "size", "open", "idle", "in_use", "closed", "wait_timeout"}}
	for _, c := range ctl.Topology().Current().Clusters {
		for _, b := range c.Watched() {
			pi, ok := ctl.Pool(b.Address)
			if !ok {
				continue
			}
			r.Rows = append(r.Rows, []string{c.Name, b.Address, backendRole(c, b), strconv.Itoa(pi.Size), strconv.Itoa(pi.Open),
				strconv.Itoa(pi.Idle), strconv.FormatInt(b.InUse(), 10), strconv.Itoa(pi.Closed), pi.WaitTimeout.String()})
		}
	}
	return r
}

// ShowSessions builds SHOW SESSIONS: the logged-in client sessions.
func ShowSessions(ctl Control) *Table {
	r := &Table{Columns: []string{"id", "user", "client", "schema", "backend", "state", "time", "digest", "pinned"}}
	for _, v := range ctl.Sessions() {
		r.Rows = append(r.Rows, []string{strconv.FormatUint(uint64(v.ID), 10), v.User, v.Client, v.Schema, v.Backend, v.State,
			strconv.FormatFloat(v.Time.Seconds(), 'f', 3, 64), v.Digest, v.Pins})
	}
	return r
}

// ShowRules builds SHOW RULES: the query rules in the order they are
// tried, each with its hits, its last hit (UTC, empty if none), its
// actions and its match fields as the configuration gives them.
func ShowRules(ctl Control) *Table {
	r := &Table{Columns: []string{"name", "hits", "last_hit", "actions", "match"}}
	set := ctl.Rules()
	cfg := ctl.Config()
	for i, rule := range set.Rules() {
		last := ""
		if t := rule.LastHit(); !t.IsZero() {
			last = t.UTC().Format("2006-01-02 15:04:05.000")
		}
		match := ""
		if i < len(cfg.Rules) && cfg.Rules[i].Name == rule.Name {
			match = ruleMatch(&cfg.Rules[i])
		}
		r.Rows = append(r.Rows, []string{rule.Name, strconv.FormatUint(rule.Hits(), 10), last, rule.Actions(), match})
	}
	return r
}

// ruleMatch spells a rule's match fields as key=value pairs.
func ruleMatch(c *conf.Rule) string {
	var out []string
	for _, f := range [][2]string{{"digest", c.Digest}, {"pattern", c.Pattern}, {"user", c.User}, {"schema", c.Schema},
		{"client_address", c.ClientAddress}, {"kind", c.Kind}, {"cluster", c.Cluster}} {
		if f[1] != "" {
			out = append(out, f[0]+"="+strconv.Quote(f[1]))
		}
	}
	return strings.Join(out, " ")
}

// ShowDigests builds SHOW QUERY DIGESTS: the busiest statement digests,
// largest total time first, at most limit of them (< 0: all).
func ShowDigests(ctl Control, limit int) *Table {
	r := &Table{Columns: []string{"digest", "count", "total_ms", "avg_ms", "max_ms", "rows", "errors", "route", "digest_id"}}
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) }
	for _, d := range ctl.Digests().Snapshot(limit) {
		avg := time.Duration(0)
		if d.Count > 0 {
			avg = d.Total / time.Duration(d.Count)
		}
		digest := d.Digest
		if digest == "" {
			digest = "(unparsed)"
		}
		r.Rows = append(r.Rows, []string{digest, strconv.FormatUint(d.Count, 10), ms(d.Total), ms(avg), ms(d.Max),
			strconv.FormatUint(d.Rows, 10), strconv.FormatUint(d.Errors, 10), observe.DigestRouteNames(d.Routes),
			router.FormatDigestID(router.DigestID(d.Digest))})
	}
	return r
}

func (p *Port) showShards() *Table {
	r := &Table{Columns: []string{"schema", "table", "key", "algorithm", "clusters", "tables_per_cluster", "physical_tables"}}
	for _, sh := range p.ctl.Config().Shards {
		n := max(sh.TablesPerCluster, 1)
		phys := sh.Table
		if n > 1 {
			phys = fmt.Sprintf("%s_0 .. %s_%d", sh.Table, sh.Table, n-1)
		}
		r.Rows = append(r.Rows, []string{sh.Schema, sh.Table, sh.Key, sh.Algorithm, strings.Join(sh.Clusters, ","),
			strconv.Itoa(n), phys})
	}
	all := make([]string, len(p.ctl.Config().Clusters))
	for i, c := range p.ctl.Config().Clusters {
		all[i] = c.Name
	}
	for _, b := range p.ctl.Config().Broadcast {
		r.Rows = append(r.Rows, []string{b.Schema, b.Table, "", "broadcast", strings.Join(all, ","), "1", b.Table})
	}
	return r
}

// ShowEvents builds SHOW EVENTS: the event timeline, oldest first.
func ShowEvents(ctl Control) *Table {
	r := &Table{Columns: []string{"time", "kind", "cluster", "backend", "epoch", "detail"}}
	for _, e := range ctl.Events().List() {
		r.Rows = append(r.Rows, []string{e.At.UTC().Format("2006-01-02 15:04:05.000"), e.Kind, e.Cluster, e.Backend,
			strconv.FormatUint(e.Epoch, 10), e.Detail})
	}
	return r
}

func (p *Port) showVersion() *Table {
	v := BuildVersion()
	advertised := p.ctl.ServerVersion()
	if advertised == "" {
		advertised = "(not learnt yet)"
	}
	return &Table{Columns: []string{"sluice", "go", "server_version"}, Rows: [][]string{{v, runtime.Version(), advertised}}}
}

// findBackend returns the backend at addr in the current snapshot and its
// cluster.
func findBackend(ctl Control, addr string) (*health.Cluster, *health.Backend) {
	for _, c := range ctl.Topology().Current().Clusters {
		for _, b := range c.Watched() {
			if b.Address == addr {
				return c, b
			}
		}
	}
	return nil, nil
}

// CheckBackendChange says whether ch can apply to this instance's
// topology: the backend exists and, to go offline, is not the master. Its
// info is what SET BACKEND answers on success.
func CheckBackendChange(ctl Control, ch BackendChange) (string, error) {
	c, b := findBackend(ctl, ch.Addr)
	if b == nil {
		return "", protocol.ERWrongArguments.New("sluice admin: no backend %q; SHOW BACKENDS lists the addresses", ch.Addr)
	}
	switch ch.Op {
	case OpOffline:
		if b == c.Master {
			return "", protocol.ERWrongArguments.New("sluice admin: %s is the master of cluster %s and cannot go offline; use SWITCHOVER CLUSTER %s TO '<replica>' first",
				b.Address, c.Name, c.Name)
		}
	case OpWeight:
		if c.Balance == health.BalanceRoundRobin || c.Balance == "" {
			return "cluster " + c.Name + " balances round-robin, which ignores weights", nil
		}
	}
	return "", nil
}

// ApplyBackendChange applies one SET BACKEND to this instance: an admin's
// here, or one the fleet shares. It is safe for concurrent use; the
// backend's state and weight are atomics.
func ApplyBackendChange(ctl Control, log *zap.Logger, ch BackendChange) (string, error) {
	info, err := CheckBackendChange(ctl, ch)
	if err != nil {
		return "", err
	}
	_, b := findBackend(ctl, ch.Addr)
	switch ch.Op {
	case OpOffline:
		from := b.Hold(health.StateOffline)
		if from != health.StateOffline {
			ctl.BackendStateChanged(b, from, health.StateOffline, "admin: SET BACKEND OFFLINE")
		}
	case OpOnline:
		from := b.State()
		to := b.Release()
		if from != to {
			ctl.Event("online", b.Cluster, b.Address, "admin: SET BACKEND ONLINE, was "+from.String())
			ctl.BackendStateChanged(b, from, to, "admin: SET BACKEND ONLINE")
		}
	default:
		prev := b.CurrentWeight()
		b.SetWeight(ch.Weight)
		log.Info("backend weight changed", zap.String("cluster", b.Cluster), zap.String("backend", b.Address),
			zap.Int("from", prev), zap.Int("to", ch.Weight))
	}
	return info, nil
}

// Version is the sluice version SHOW VERSION reports; cmd/sluice sets it
// from its build-time version.
var Version = "dev"
