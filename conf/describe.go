package conf

import (
	"fmt"
	"net/url"
	"strings"
)

// Describe returns the topology and main settings of c as indented lines of
// text for `sluice check-config`. It never prints a password or a password
// hash: secrets are described by where they come from. Describe works on any
// Config, valid or not.
func (c *Config) Describe() string {
	var b strings.Builder
	line := func(format string, args ...any) {
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}

	if c.Path != "" {
		line("config %s", c.Path)
	}
	x := &c.Proxy
	line("proxy: listen %s, admin_listen %s, metrics_listen %s", x.Listen, offIfEmpty(x.AdminListen), offIfEmpty(x.MetricsListen))
	line("  log_level %s, max_client_connections %d, max_allowed_packet %s, max_prepared_statements %d, backend_statement_cache %d, local_infile %v",
		x.LogLevel, x.MaxClientConnections, formatBytes(x.MaxAllowedPacket), x.MaxPreparedStatements, x.BackendStatementCache, x.LocalInfile)
	threads := "1 to one per CPU, as the load needs"
	switch {
	case x.Threads > 0:
		threads = fmt.Sprint(x.Threads)
	case x.EventLoop:
		threads = "one per CPU"
	}
	if x.EventLoop {
		threads += " (event loops)"
	}
	timeouts := fmt.Sprintf("  threads %s, handshake_timeout %s, connect_timeout %s", threads, x.HandshakeTimeout, x.ConnectTimeout)
	if x.ServerVersion != "" {
		timeouts += fmt.Sprintf(", server_version %q", x.ServerVersion)
	}
	line("%s", timeouts)
	if x.StateDir != "" {
		line("  state_dir %s", x.StateDir)
	}
	if x.MetricsUser != "" {
		line("  metrics basic auth: user %q, %s", x.MetricsUser, passwordSource("", x.MetricsPasswordEnv, x.MetricsPasswordFile))
	}
	if x.MetricsTLSCert != "" {
		line("  metrics tls: cert %s, key %s", x.MetricsTLSCert, x.MetricsTLSKey)
	}
	if x.TLSCert != "" {
		line("  tls to clients: cert %s, key %s, require_tls %v", x.TLSCert, x.TLSKey, x.RequireTLS)
	}

	slow := "off"
	if x.SlowQueryThreshold.Duration > 0 {
		slow = x.SlowQueryThreshold.String()
	}
	line("  slow_query_threshold %s, log_sql %v", slow, x.LogSQL)

	c.Auth.describe(line)
	c.Fleet.describe(line)
	line("admin: user %q, %s", c.Admin.User, passwordSource(c.Admin.Password, c.Admin.PasswordEnv, c.Admin.PasswordFile))

	h := &c.Health
	failover := "off"
	if h.AutoFailover {
		failover = fmt.Sprintf("on, failover_block %s, failover_write_wait %s", h.FailoverBlock, h.FailoverWriteWait)
	}
	line("health: interval %s, timeout %s, failures_before_down %d, auto_failover %s, switchover_timeout %s",
		h.Interval, h.Timeout, h.FailuresBeforeDown, failover, h.SwitchoverTimeout)
	if h.EnforceReadOnly {
		line("  enforce_read_only: writable replicas are set read-only at start-up")
	}

	for _, cl := range c.Clusters {
		line("cluster %q: balance %s, max_replication_lag %s, %d replica(s)",
			cl.Name, cl.Balance, cl.MaxReplicationLag, len(cl.Replicas))
		line("  user %q, %s", cl.User, passwordSource(cl.Password, cl.PasswordEnv, cl.PasswordFile))
		consistency := cl.Consistency
		if consistency == "" {
			consistency = DefaultConsistency
		}
		line("  pool_size %d, pool_wait_timeout %s, consistency %s", cl.PoolSize, cl.PoolWaitTimeout, consistency)
		if !cl.ReadsFallBackToMaster {
			line("  reads_fall_back_to_master false: reads fail when no replica can serve them")
		}
		if cl.TLS != "" && cl.TLS != "off" {
			line("  tls %s", strings.TrimPrefix(tlsNote(cl.TLS, cl.TLSCA), ", tls "))
		}
		line("  master   %s", cl.Master)
		for _, r := range cl.Replicas {
			s := fmt.Sprintf("  replica  %s  weight %d", r.Address, r.Weight)
			if r.Agent != "" {
				s += "  agent " + redactURL(r.Agent)
			}
			line("%s", s)
		}
	}

	for _, s := range c.Shards {
		line("shard %s.%s: key %s, algorithm %s, %d cluster(s) x %d table(s)",
			s.Schema, s.Table, s.Key, s.Algorithm, len(s.Clusters), s.TablesPerCluster)
		line("  clusters %s", strings.Join(s.Clusters, ", "))
		if s.VirtualShards > 0 {
			line("  virtual_shards %d", s.VirtualShards)
		}
		if len(s.Boundaries) > 0 {
			line("  boundaries %v", s.Boundaries)
		}
	}
	line("limits: %s", describeLimits(&c.Limits.LimitValues))
	for i := range c.Limits.Users {
		u := &c.Limits.Users[i]
		line("  user %q: %s", u.Name, describeLimits(&u.LimitValues))
	}
	for i := range c.Rules {
		line("rule %q: %s", c.Rules[i].Name, describeRule(&c.Rules[i]))
	}
	describeFirewall(&c.Firewall, line)
	line("cache: max_memory %d, max_entry %d, own_writes_window %s", c.Cache.MaxMemory, c.Cache.MaxEntry, c.Cache.OwnWritesWindow.Duration)
	if len(c.Broadcast) > 0 {
		names := make([]string, len(c.Broadcast))
		for i, t := range c.Broadcast {
			names[i] = t.Schema + "." + t.Table
		}
		line("broadcast: %s", strings.Join(names, ", "))
	}
	return b.String()
}

// describe prints the [auth] table for Describe: never a password, and
// the static users' grants only by their number (a grant line copied from
// SHOW GRANTS output may hold a password hash).
func (a *Auth) describe(line func(format string, args ...any)) {
	const notEnforced = "  enforce_grants false: every logged-in user may do what the clusters' service accounts may"
	if a.Backend == "static" {
		names := make([]string, len(a.Users))
		for i, u := range a.Users {
			names[i] = fmt.Sprintf("%q", u.Name)
		}
		line("auth: static, %d user(s): %s", len(a.Users), strings.Join(names, ", "))
		if a.EnforceGrants {
			line("  enforce_grants true")
		} else {
			line(notEnforced)
		}
		for _, u := range a.Users {
			if len(u.Grants) == 0 {
				line("  user %q: no grants", u.Name)
			} else {
				line("  user %q: %d grant(s)", u.Name, len(u.Grants))
			}
		}
		return
	}
	line("auth: %s, auth server %s%s", a.Backend, a.Address, tlsNote(a.TLS, a.TLSCA))
	proxyProtocol := "off"
	if a.ProxyProtocol {
		proxyProtocol = fmt.Sprintf("on, proxy_protocol_version %d", a.ProxyProtocolVersion)
	}
	line("  enforce_grants %v, grants_ttl %s, mirror_schema %v, proxy_protocol %s", a.EnforceGrants, a.GrantsTTL, a.MirrorSchema, proxyProtocol)
	if !a.EnforceGrants {
		line(notEnforced)
	}
	if a.ServiceUser == "" {
		line("  service_user none: grants are read only at login")
	} else {
		line("  service_user %q, %s", a.ServiceUser, passwordSource(a.ServicePassword, a.ServicePasswordEnv, a.ServicePasswordFile))
	}
}

// describeLimits prints one user's limits for Describe.
func describeLimits(v *LimitValues) string {
	count := func(n int) string {
		if n == 0 {
			return "unlimited"
		}
		return fmt.Sprint(n)
	}
	dur := func(d Duration) string {
		if d.Duration == 0 {
			return "off"
		}
		return d.String()
	}
	s := fmt.Sprintf("max_connections %s, idle_timeout %s, query_timeout %s, max_statements_per_second %s",
		count(v.MaxConnections), dur(v.IdleTimeout), dur(v.QueryTimeout), count(v.MaxStatementsPerSecond))
	if v.MaxStatementsPerSecond > 0 {
		burst := v.Burst
		if burst == 0 {
			burst = v.MaxStatementsPerSecond
		}
		s += fmt.Sprintf(" (burst %d, max_queued %d, queue_timeout %s)", burst, v.MaxQueued, dur(v.QueueTimeout))
	}
	return s
}

// passwordSource says where a password comes from without saying what it is.
func passwordSource(password, env, file string) string {
	switch {
	case env != "":
		return "password from env " + env
	case file != "":
		return "password from file " + file
	case password != "":
		return "password set in the file"
	default:
		return "no password"
	}
}

// redactURL hides any password in a URL's user information.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(invalid URL)"
	}
	return u.Redacted()
}

// formatBytes prints n in the largest binary unit that divides it.
func formatBytes(n int64) string {
	switch {
	case n > 0 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n > 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// offIfEmpty shows a switched-off listener.
func offIfEmpty(addr string) string {
	if addr == "" {
		return "off"
	}
	return addr
}

// tlsNote describes a leg's TLS mode for Describe ("" when off).
func tlsNote(mode, ca string) string {
	if mode == "" || mode == "off" {
		return ""
	}
	if ca == "" {
		return ", tls " + mode + " (server not verified)"
	}
	return ", tls " + mode + ", verified with " + ca
}
