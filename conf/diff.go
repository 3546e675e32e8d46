package conf

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Change is one difference between a running configuration and a file read
// again for a reload. Restart marks a setting sluice cannot change while it
// runs; Live keeps the running value of such a setting until a restart.
type Change struct {
	// Key names the setting the way the file spells it: "proxy.listen",
	// "cluster main: replica 127.0.0.1:3308", "shard pay.orders".
	Key string
	// Detail says what changed: "added", "removed", `"a" -> "b"`. Secrets
	// are never shown, only that they changed.
	Detail string
	// Restart: the new value takes effect only when sluice restarts.
	Restart bool
}

// String formats the change for logs and admin results:
// `proxy.log_level: "info" -> "debug"`, or with a "needs restart: " prefix.
func (c Change) String() string {
	s := c.Key + ": " + c.Detail
	if c.Restart {
		return "needs restart: " + s
	}
	return s
}

// Changes are the differences Diff found, in the order of the file's
// sections.
type Changes []Change

// Strings formats every change with Change.String.
func (cs Changes) Strings() []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return out
}

// NeedRestart reports how many of the changes need a restart.
func (cs Changes) NeedRestart() int {
	n := 0
	for _, c := range cs {
		if c.Restart {
			n++
		}
	}
	return n
}

// Which settings sluice applies while it runs, and which wait for a restart.
//
// Live: replicas added and removed, their weights and agents, a cluster's
// balance, max_replication_lag, reads_fall_back_to_master, consistency,
// pool_size and pool_wait_timeout; all of [health]; all of [auth] (new
// logins); [proxy] log_level, max_client_connections, max_allowed_packet and
// handshake_timeout (new connections), connect_timeout,
// max_prepared_statements, backend_statement_cache (the next statement a
// connection caches) and server_version, the login backoff
// (login_failures_before_backoff, login_backoff, login_backoff_max) and
// shutdown_delay and shutdown_timeout (read when shutdown starts);
// [sharding], [[shard]] and [[broadcast]]; all of [limits] and
// [[limits.user]] (new connections and the next statement of every
// session); [[rule]] (the next statement of every session; a prepared
// statement keeps the decision of its PREPARE); [firewall] and
// [[firewall.user]] (the next statement of every session).
//
// Restart: the listeners (listen, admin_listen, metrics_listen, and the
// metrics listener's metrics_user, its password and metrics_tls_*), client TLS
// (tls_cert, tls_key, require_tls), local_infile (it is offered in the
// greeting), threads, state_dir, [admin], and of a cluster its name (a
// cluster added or removed), master, service account and TLS: these are
// what sessions and pools were built around, and a failover may already
// have moved the master away from the configured one.
const (
	live    = false
	restart = true
)

// Diff lists what changed from old to new, each change classified as live
// or needing a restart. Both configurations should be validated. Equal
// configurations give no changes.
func Diff(old, new *Config) Changes {
	d := &differ{}
	op, np := &old.Proxy, &new.Proxy
	same(d, "proxy.listen", op.Listen, np.Listen, restart)
	same(d, "proxy.admin_listen", op.AdminListen, np.AdminListen, restart)
	same(d, "proxy.metrics_listen", op.MetricsListen, np.MetricsListen, restart)
	same(d, "proxy.metrics_user", op.MetricsUser, np.MetricsUser, restart)
	secret(d, "proxy.metrics_password", op.MetricsPassword, np.MetricsPassword, restart)
	same(d, "proxy.metrics_tls_cert", op.MetricsTLSCert, np.MetricsTLSCert, restart)
	same(d, "proxy.metrics_tls_key", op.MetricsTLSKey, np.MetricsTLSKey, restart)
	same(d, "proxy.log_level", op.LogLevel, np.LogLevel, live)
	same(d, "proxy.threads", op.Threads, np.Threads, restart)
	same(d, "proxy.event_loop", op.EventLoop, np.EventLoop, restart)
	same(d, "proxy.max_client_connections", op.MaxClientConnections, np.MaxClientConnections, live)
	same(d, "proxy.max_allowed_packet", op.MaxAllowedPacket, np.MaxAllowedPacket, live)
	same(d, "proxy.handshake_timeout", op.HandshakeTimeout, np.HandshakeTimeout, live)
	same(d, "proxy.connect_timeout", op.ConnectTimeout, np.ConnectTimeout, live)
	same(d, "proxy.server_version", op.ServerVersion, np.ServerVersion, live)
	same(d, "proxy.max_prepared_statements", op.MaxPreparedStatements, np.MaxPreparedStatements, live)
	same(d, "proxy.backend_statement_cache", op.BackendStatementCache, np.BackendStatementCache, live)
	same(d, "proxy.local_infile", op.LocalInfile, np.LocalInfile, restart)
	same(d, "proxy.tls_cert", op.TLSCert, np.TLSCert, restart)
	same(d, "proxy.tls_key", op.TLSKey, np.TLSKey, restart)
	same(d, "proxy.require_tls", op.RequireTLS, np.RequireTLS, restart)
	same(d, "proxy.state_dir", op.StateDir, np.StateDir, restart)
	same(d, "proxy.slow_query_threshold", op.SlowQueryThreshold, np.SlowQueryThreshold, live)
	same(d, "proxy.log_sql", op.LogSQL, np.LogSQL, live)
	same(d, "proxy.login_failures_before_backoff", op.LoginFailuresBeforeBackoff, np.LoginFailuresBeforeBackoff, live)
	same(d, "proxy.login_backoff", op.LoginBackoff, np.LoginBackoff, live)
	same(d, "proxy.login_backoff_max", op.LoginBackoffMax, np.LoginBackoffMax, live)
	same(d, "proxy.shutdown_delay", op.ShutdownDelay, np.ShutdownDelay, live)
	same(d, "proxy.shutdown_timeout", op.ShutdownTimeout, np.ShutdownTimeout, live)
	same(d, "proxy.mirror_queue", op.MirrorQueue, np.MirrorQueue, restart)
	same(d, "proxy.mirror_workers", op.MirrorWorkers, np.MirrorWorkers, restart)

	oa, na := &old.Auth, &new.Auth
	same(d, "auth.backend", oa.Backend, na.Backend, live)
	same(d, "auth.address", oa.Address, na.Address, live)
	same(d, "auth.tls", oa.TLS, na.TLS, live)
	same(d, "auth.tls_ca", oa.TLSCA, na.TLSCA, live)
	same(d, "auth.max_pending_handshakes", oa.MaxPendingHandshakes, na.MaxPendingHandshakes, live)
	same(d, "auth.max_kept_auth_connections", oa.MaxKeptAuthConnections, na.MaxKeptAuthConnections, live)
	same(d, "auth.max_concurrent_logins", oa.MaxConcurrentLogins, na.MaxConcurrentLogins, live)
	same(d, "auth.enforce_grants", oa.EnforceGrants, na.EnforceGrants, live)
	same(d, "auth.grants_ttl", oa.GrantsTTL, na.GrantsTTL, live)
	same(d, "auth.proxy_protocol", oa.ProxyProtocol, na.ProxyProtocol, live)
	same(d, "auth.proxy_protocol_version", oa.ProxyProtocolVersion, na.ProxyProtocolVersion, live)
	same(d, "auth.mirror_schema", oa.MirrorSchema, na.MirrorSchema, live)
	same(d, "auth.service_user", oa.ServiceUser, na.ServiceUser, live)
	secret(d, "auth.service_password", oa.ServicePassword, na.ServicePassword, live)
	d.users(oa.Users, na.Users)

	same(d, "admin.user", old.Admin.User, new.Admin.User, restart)
	secret(d, "admin.password", old.Admin.Password, new.Admin.Password, restart)

	for _, oc := range old.Clusters {
		nc := new.Cluster(oc.Name)
		if nc == nil {
			d.add("cluster "+oc.Name, "removed", restart)
			continue
		}
		d.cluster(&oc, nc)
	}
	for _, nc := range new.Clusters {
		if old.Cluster(nc.Name) == nil {
			d.add("cluster "+nc.Name, "added", restart)
		}
	}

	oh, nh := &old.Health, &new.Health
	same(d, "health.interval", oh.Interval, nh.Interval, live)
	same(d, "health.timeout", oh.Timeout, nh.Timeout, live)
	same(d, "health.failures_before_down", oh.FailuresBeforeDown, nh.FailuresBeforeDown, live)
	same(d, "health.auto_failover", oh.AutoFailover, nh.AutoFailover, live)
	same(d, "health.failover_block", oh.FailoverBlock, nh.FailoverBlock, live)
	same(d, "health.failover_write_wait", oh.FailoverWriteWait, nh.FailoverWriteWait, live)
	same(d, "health.switchover_timeout", oh.SwitchoverTimeout, nh.SwitchoverTimeout, live)
	same(d, "health.enforce_read_only", oh.EnforceReadOnly, nh.EnforceReadOnly, live)

	same(d, "sharding.default_cluster", old.DefaultCluster(), new.DefaultCluster(), live)
	same(d, "sharding.max_merge_rows", old.Sharding.MaxMergeRows, new.Sharding.MaxMergeRows, live)
	same(d, "sharding.node_id", old.Sharding.NodeID, new.Sharding.NodeID, live)
	d.shards(old.Shards, new.Shards)
	d.broadcast(old.Broadcast, new.Broadcast)
	d.limits("limits.", &old.Limits.LimitValues, &new.Limits.LimitValues)
	d.limitUsers(old.Limits.Users, new.Limits.Users)
	d.rules(old.Rules, new.Rules)
	d.firewall(&old.Firewall, &new.Firewall)
	d.cache(&old.Cache, &new.Cache)
	d.fleet(&old.Fleet, &new.Fleet)
	return d.out
}

// differ collects changes.
type differ struct{ out Changes }

func (d *differ) add(key, detail string, restart bool) {
	d.out = append(d.out, Change{Key: key, Detail: detail, Restart: restart})
}

// same records key when a and b differ, showing both values.
func same[T comparable](d *differ, key string, a, b T, restart bool) {
	if a != b {
		d.add(key, fmt.Sprintf("%s -> %s", show(a), show(b)), restart)
	}
}

// secret records key when a and b differ without showing either.
func secret(d *differ, key, a, b string, restart bool) {
	if a != b {
		d.add(key, "changed", restart)
	}
}

// show formats a value for a change: strings quoted, the rest as %v.
func show(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%v", v)
}

func (d *differ) users(old, new []StaticUser) {
	find := func(l []StaticUser, name string) *StaticUser {
		for i := range l {
			if l[i].Name == name {
				return &l[i]
			}
		}
		return nil
	}
	for _, u := range old {
		key := fmt.Sprintf("auth.user %q", u.Name)
		switch n := find(new, u.Name); {
		case n == nil:
			d.add(key, "removed", live)
		case n.PasswordHash != u.PasswordHash:
			d.add(key, "password_hash changed", live)
		case !slices.Equal(n.Grants, u.Grants):
			d.add(key, "grants changed", live)
		}
	}
	for _, u := range new {
		if find(old, u.Name) == nil {
			d.add(fmt.Sprintf("auth.user %q", u.Name), "added", live)
		}
	}
}

func (d *differ) cluster(o, n *Cluster) {
	k := "cluster " + o.Name + ": "
	same(d, k+"master", o.Master, n.Master, restart)
	same(d, k+"user", o.User, n.User, restart)
	secret(d, k+"password", o.Password, n.Password, restart)
	same(d, k+"tls", o.TLS, n.TLS, restart)
	same(d, k+"tls_ca", o.TLSCA, n.TLSCA, restart)
	same(d, k+"balance", o.Balance, n.Balance, live)
	same(d, k+"max_replication_lag", o.MaxReplicationLag, n.MaxReplicationLag, live)
	same(d, k+"reads_fall_back_to_master", o.ReadsFallBackToMaster, n.ReadsFallBackToMaster, live)
	same(d, k+"pool_size", o.PoolSize, n.PoolSize, live)
	same(d, k+"pool_wait_timeout", o.PoolWaitTimeout, n.PoolWaitTimeout, live)
	same(d, k+"consistency", o.Consistency, n.Consistency, live)
	for _, or := range o.Replicas {
		rk := k + "replica " + or.Address
		nr := n.Replica(or.Address)
		if nr == nil {
			d.add(rk, "removed", live)
			continue
		}
		same(d, rk+" weight", or.Weight, nr.Weight, live)
		if or.Agent != nr.Agent {
			// An agent URL may hold credentials.
			d.add(rk+" agent", "changed", live)
		}
	}
	for _, nr := range n.Replicas {
		if o.Replica(nr.Address) == nil {
			d.add(k+"replica "+nr.Address, "added", live)
		}
	}
}

// limits records each key of LimitValues that differs, as prefix+key; every
// limit is live (new connections and the next statement of every session).
func (d *differ) limits(prefix string, o, n *LimitValues) {
	ov, nv := reflect.ValueOf(o).Elem(), reflect.ValueOf(n).Elem()
	for i := 0; i < ov.NumField(); i++ {
		if a, b := ov.Field(i).Interface(), nv.Field(i).Interface(); a != b {
			d.add(prefix+tomlName(ov.Type().Field(i)), fmt.Sprintf("%s -> %s", show(a), show(b)), live)
		}
	}
}

func (d *differ) limitUsers(old, new []UserLimits) {
	find := func(l []UserLimits, name string) *UserLimits {
		for i := range l {
			if l[i].Name == name {
				return &l[i]
			}
		}
		return nil
	}
	for i := range old {
		key := fmt.Sprintf("limits.user %q", old[i].Name)
		if n := find(new, old[i].Name); n == nil {
			d.add(key, "removed", live)
		} else {
			d.limits(key+" ", &old[i].LimitValues, &n.LimitValues)
		}
	}
	for _, u := range new {
		if find(old, u.Name) == nil {
			d.add(fmt.Sprintf("limits.user %q", u.Name), "added", live)
		}
	}
}

// Replica returns the replica at addr, or nil. The result points into
// c.Replicas.
func (c *Cluster) Replica(addr string) *Replica {
	for i := range c.Replicas {
		if c.Replicas[i].Address == addr {
			return &c.Replicas[i]
		}
	}
	return nil
}

// shardKey names a shard or broadcast table case-insensitively, as
// validation compares them.
func shardKey(schema, table string) string { return strings.ToLower(schema + "." + table) }

func (d *differ) shards(old, new []Shard) {
	find := func(l []Shard, k string) *Shard {
		for i := range l {
			if shardKey(l[i].Schema, l[i].Table) == k {
				return &l[i]
			}
		}
		return nil
	}
	for i := range old {
		o := &old[i]
		k := shardKey(o.Schema, o.Table)
		switch n := find(new, k); {
		case n == nil:
			d.add("shard "+k, "removed", live)
		case !reflect.DeepEqual(*o, *n):
			d.add("shard "+k, "rule changed", live)
		}
	}
	for _, n := range new {
		if k := shardKey(n.Schema, n.Table); find(old, k) == nil {
			d.add("shard "+k, "added", live)
		}
	}
}

func (d *differ) broadcast(old, new []Broadcast) {
	keys := func(l []Broadcast) []string {
		out := make([]string, len(l))
		for i, b := range l {
			out[i] = shardKey(b.Schema, b.Table)
		}
		return out
	}
	ok, nk := keys(old), keys(new)
	for _, k := range ok {
		if !slices.Contains(nk, k) {
			d.add("broadcast "+k, "removed", live)
		}
	}
	for _, k := range nk {
		if !slices.Contains(ok, k) {
			d.add("broadcast "+k, "added", live)
		}
	}
}

// Live returns the configuration a reload runs with: file's settings,
// except that every setting Diff marks as needing a restart keeps its value
// from running. Clusters are running's, in running's order (a cluster's
// index is fixed while sluice runs), each with file's live settings when
// file has it. The result shares no slice with running that a caller may
// modify through it, and has file's Path. It is not validated: a file whose
// shard rules name a cluster that only a restart adds gives a Live
// configuration that fails Validate.
func Live(running, file *Config) *Config {
	out := *file
	rp, op := &running.Proxy, &out.Proxy
	op.Listen, op.AdminListen, op.MetricsListen = rp.Listen, rp.AdminListen, rp.MetricsListen
	op.Threads, op.LocalInfile, op.StateDir = rp.Threads, rp.LocalInfile, rp.StateDir
	op.EventLoop = rp.EventLoop
	op.TLSCert, op.TLSKey, op.RequireTLS = rp.TLSCert, rp.TLSKey, rp.RequireTLS
	op.MetricsUser, op.MetricsPassword, op.MetricsPasswordEnv, op.MetricsPasswordFile =
		rp.MetricsUser, rp.MetricsPassword, rp.MetricsPasswordEnv, rp.MetricsPasswordFile
	op.MetricsTLSCert, op.MetricsTLSKey = rp.MetricsTLSCert, rp.MetricsTLSKey
	out.Admin = running.Admin
	out.Fleet = running.Fleet
	if file.Sharding.DefaultCluster == "" {
		// The first cluster of file, which running's order may not have
		// first.
		out.Sharding.DefaultCluster = file.DefaultCluster()
	}
	out.Clusters = make([]Cluster, len(running.Clusters))
	for i, rc := range running.Clusters {
		c := rc
		if fc := file.Cluster(rc.Name); fc != nil {
			c = *fc
			c.Master = rc.Master
			c.User, c.Password, c.PasswordEnv, c.PasswordFile = rc.User, rc.Password, rc.PasswordEnv, rc.PasswordFile
			c.TLS, c.TLSCA = rc.TLS, rc.TLSCA
		}
		c.Replicas = slices.Clone(c.Replicas)
		out.Clusters[i] = c
	}
	return &out
}

// rules records each [[rule]] added, removed or changed (by name), and a
// new order of the rules both hold; all of them are live.
func (d *differ) rules(old, new []Rule) {
	find := func(l []Rule, name string) *Rule {
		for i := range l {
			if l[i].Name == name {
				return &l[i]
			}
		}
		return nil
	}
	for i := range old {
		key := fmt.Sprintf("rule %q", old[i].Name)
		if n := find(new, old[i].Name); n == nil {
			d.add(key, "removed", live)
		} else if *n != old[i] {
			d.add(key, "changed", live)
		}
	}
	for _, r := range new {
		if find(old, r.Name) == nil {
			d.add(fmt.Sprintf("rule %q", r.Name), "added", live)
		}
	}
	// The order of the rules both files hold.
	kept := func(l, other []Rule) []string {
		var out []string
		for i := range l {
			if find(other, l[i].Name) != nil {
				out = append(out, l[i].Name)
			}
		}
		return out
	}
	if !slices.Equal(kept(old, new), kept(new, old)) {
		d.add("rule", "order changed", live)
	}
}
