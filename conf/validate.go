package conf

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Allowed values of enumerated settings, in the order error messages list
// them.
var (
	logLevels      = []string{"debug", "info", "warn", "error"}
	authBackends   = []string{"mysql", "static"}
	balancers      = []string{"round-robin", "weighted", "least-load", "least-conn"}
	shardAlgorithm = []string{"mod", "hash", "range", "date"}
	dateUnits      = []string{"day", "month", "year"}
	consistencies  = []string{"eventual", "causal", "strong"}
)

// Validate checks a configuration whose defaults are applied and whose
// secrets are resolved, as Parse leaves it. It returns nil or all problems
// found joined with errors.Join, one line each, each naming its key.
// Validate does not modify c.
func (c *Config) Validate() error {
	var p problems
	c.validateProxy(&p)
	c.validateAuth(&p)
	if c.Admin.User == "" {
		p.add("admin.user must not be empty")
	}
	c.validateClusters(&p)
	c.validateHealth(&p)
	c.validateShards(&p)
	c.validateLimits(&p)
	c.validateRules(&p)
	c.validateFirewall(&p)
	c.validateCache(&p)
	c.validateFleet(&p)
	return errors.Join(p...)
}

// problems collects validation errors in the order they are found.
type problems []error

func (p *problems) add(format string, args ...any) {
	*p = append(*p, fmt.Errorf(format, args...))
}

func (c *Config) validateProxy(p *problems) {
	x := &c.Proxy
	listeners := []struct{ key, addr string }{
		{"proxy.listen", x.Listen},
		{"proxy.admin_listen", x.AdminListen},
		{"proxy.metrics_listen", x.MetricsListen},
	}
	for i, l := range listeners {
		// The admin and metrics listeners may be switched off with "".
		if i > 0 && l.addr == "" {
			continue
		}
		if err := checkAddr(l.addr, true); err != nil {
			p.add("%s: %v", l.key, err)
			continue
		}
		for _, prev := range listeners[:i] {
			if l.addr == prev.addr && !strings.HasSuffix(l.addr, ":0") {
				p.add("%s: %q is already used by %s", l.key, l.addr, prev.key)
				break
			}
		}
	}
	if !slices.Contains(logLevels, x.LogLevel) {
		p.add("proxy.log_level: unknown value %q (want %s)", x.LogLevel, oneOf(logLevels))
	}
	if x.MaxClientConnections <= 0 {
		p.add("proxy.max_client_connections must be > 0 (got %d)", x.MaxClientConnections)
	}
	if (x.TLSCert == "") != (x.TLSKey == "") {
		p.add("proxy.tls_cert and proxy.tls_key must be set together")
	}
	if x.RequireTLS && x.TLSCert == "" {
		p.add("proxy.require_tls needs proxy.tls_cert and proxy.tls_key")
	}
	c.validateMetricsAccess(p)
	if x.Threads < 0 || x.Threads > MaxThreads {
		p.add("proxy.threads must be between 0 (sluice chooses) and %d (got %d)", MaxThreads, x.Threads)
	}
	if x.BackendStatementCache <= 0 {
		p.add("proxy.backend_statement_cache must be > 0 (got %d)", x.BackendStatementCache)
	}
	if x.MaxPreparedStatements <= 0 {
		p.add("proxy.max_prepared_statements must be > 0 (got %d)", x.MaxPreparedStatements)
	}
	if x.MaxAllowedPacket < MinMaxAllowedPacket || x.MaxAllowedPacket > MaxMaxAllowedPacket {
		p.add("proxy.max_allowed_packet must be between %d and %d bytes (got %d)",
			MinMaxAllowedPacket, MaxMaxAllowedPacket, x.MaxAllowedPacket)
	}
	if x.HandshakeTimeout.Duration <= 0 {
		p.add("proxy.handshake_timeout must be > 0 (got %s)", x.HandshakeTimeout)
	}
	if x.ConnectTimeout.Duration <= 0 {
		p.add("proxy.connect_timeout must be > 0 (got %s)", x.ConnectTimeout)
	}
	if x.SlowQueryThreshold.Duration < 0 {
		p.add("proxy.slow_query_threshold must be >= 0 (0 switches the slow-query log off; got %s)", x.SlowQueryThreshold)
	}
	if x.LoginFailuresBeforeBackoff < 0 {
		p.add("proxy.login_failures_before_backoff must be >= 0 (0 switches the login backoff off; got %d)", x.LoginFailuresBeforeBackoff)
	}
	if x.LoginBackoff.Duration <= 0 {
		p.add("proxy.login_backoff must be > 0 (got %s)", x.LoginBackoff)
	}
	if x.LoginBackoffMax.Duration < x.LoginBackoff.Duration {
		p.add("proxy.login_backoff_max must be >= proxy.login_backoff (got %s < %s)", x.LoginBackoffMax, x.LoginBackoff)
	}
	if x.ShutdownDelay.Duration < 0 {
		p.add("proxy.shutdown_delay must be >= 0 (got %s)", x.ShutdownDelay)
	}
	if x.ShutdownTimeout.Duration <= 0 {
		p.add("proxy.shutdown_timeout must be > 0 (got %s)", x.ShutdownTimeout)
	}
	if x.MirrorQueue < 1 || x.MirrorQueue > MaxMirrorQueue {
		p.add("proxy.mirror_queue must be between 1 and %d (got %d)", MaxMirrorQueue, x.MirrorQueue)
	}
	if x.MirrorWorkers < 1 || x.MirrorWorkers > MaxMirrorWorkers {
		p.add("proxy.mirror_workers must be between 1 and %d (got %d)", MaxMirrorWorkers, x.MirrorWorkers)
	}
	for _, r := range x.ServerVersion {
		if r < 0x20 || r == 0x7f {
			// The handshake sends the version NUL-terminated.
			p.add("proxy.server_version: %q contains a control character", x.ServerVersion)
			break
		}
	}
}

// tlsModes are the values of auth.tls and cluster.tls ("" in a Config built
// in code means "off").
var tlsModes = []string{"off", "preferred", "required"}

func (c *Config) validateAuth(p *problems) {
	a := &c.Auth
	if a.TLS != "" && !slices.Contains(tlsModes, a.TLS) {
		p.add("auth.tls: unknown value %q (want %s)", a.TLS, oneOf(tlsModes))
	}
	if a.MaxPendingHandshakes < 0 {
		p.add("auth.max_pending_handshakes: %d is negative (0 defers every login)", a.MaxPendingHandshakes)
	}
	if a.MaxKeptAuthConnections < 0 {
		p.add("auth.max_kept_auth_connections: %d is negative (0 keeps none)", a.MaxKeptAuthConnections)
	}
	if a.MaxConcurrentLogins < 1 {
		p.add("auth.max_concurrent_logins: %d must be >= 1", a.MaxConcurrentLogins)
	}
	if a.GrantsTTL.Duration <= 0 {
		p.add("auth.grants_ttl: %v must be > 0", a.GrantsTTL.Duration)
	}
	if a.ProxyProtocolVersion != 1 && a.ProxyProtocolVersion != 2 {
		p.add("auth.proxy_protocol_version: %d is not 1 or 2", a.ProxyProtocolVersion)
	}
	if a.MirrorSchema && a.ServiceUser == "" {
		p.add("auth.mirror_schema = true needs auth.service_user: sluice creates the mirrored tables on the auth server as that account")
	}
	if a.ServiceUser == "" && a.ServicePassword != "" {
		p.add("auth.service_password is set but auth.service_user is empty")
	}
	switch a.Backend {
	case "mysql":
		if a.Address == "" {
			p.add("auth.address is required when auth.backend = %q", a.Backend)
		} else if err := checkAddr(a.Address, false); err != nil {
			p.add("auth.address: %v", err)
		}
		if len(a.Users) > 0 {
			p.add("auth.user is only used when auth.backend = \"static\" (auth.backend = %q)", a.Backend)
		}
	case "static":
		if a.Address != "" {
			p.add("auth.address is only used when auth.backend = \"mysql\" (auth.backend = %q)", a.Backend)
		}
		if len(a.Users) == 0 {
			p.add("auth.backend = \"static\" needs at least one [[auth.user]]")
		}
		for _, k := range []struct {
			key string
			set bool
		}{{"proxy_protocol", a.ProxyProtocol}, {"mirror_schema", a.MirrorSchema}, {"service_user", a.ServiceUser != ""}} {
			if k.set {
				p.add("auth.%s is only used when auth.backend = \"mysql\" (auth.backend = %q)", k.key, a.Backend)
			}
		}
		first := make(map[string]int, len(a.Users))
		for i, u := range a.Users {
			label := fmt.Sprintf("auth.user[%d]", i)
			if u.Name != "" {
				label += fmt.Sprintf(" (%q)", u.Name)
			}
			if u.Name == "" {
				p.add("%s: name is required", label)
			} else if j, dup := first[u.Name]; dup {
				p.add("%s: name %q is already used by auth.user[%d]", label, u.Name, j)
			} else {
				first[u.Name] = i
			}
			if !isNativeHash(u.PasswordHash) {
				// The hash itself is not printed: it is as good as a
				// password for anyone who can read the error.
				p.add("%s: password_hash must be \"*\" and 40 hex digits, as SELECT PASSWORD('...') prints it", label)
			}
		}
	default:
		p.add("auth.backend: unknown value %q (want %s)", a.Backend, oneOf(authBackends))
	}
}

// isNativeHash reports whether s is a mysql_native_password hash: "*" and 40
// hex digits of either case.
func isNativeHash(s string) bool {
	if len(s) != 41 || s[0] != '*' {
		return false
	}
	for _, r := range s[1:] {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F') {
			return false
		}
	}
	return true
}

// clusterLabel names a cluster in error messages, by index and, when it has
// one, by name: cluster[0] ("main").
func clusterLabel(i int, name string) string {
	if name == "" {
		return fmt.Sprintf("cluster[%d]", i)
	}
	return fmt.Sprintf("cluster[%d] (%q)", i, name)
}

func (c *Config) validateClusters(p *problems) {
	if len(c.Clusters) == 0 {
		p.add("cluster: at least one [[cluster]] is required")
		return
	}
	names := make(map[string]int, len(c.Clusters))
	// Backends are named by address in admin SQL, so an address may appear
	// only once in the whole topology.
	addrs := make(map[string]string)
	useAddr := func(label, key, addr string) {
		if prev, dup := addrs[addr]; dup {
			p.add("%s: %s %q is already used by %s", label, key, addr, prev)
			return
		}
		addrs[addr] = label + " " + key
	}
	for i := range c.Clusters {
		cl := &c.Clusters[i]
		label := clusterLabel(i, cl.Name)
		if cl.PoolSize < 0 || cl.PoolSize > 100000 {
			// 0, in a Config built in code, means the default.
			p.add("%s: pool_size must be between 1 and 100000 (got %d)", label, cl.PoolSize)
		}
		if cl.PoolWaitTimeout.Duration < 0 {
			p.add("%s: pool_wait_timeout must not be negative (got %s)", label, cl.PoolWaitTimeout)
		}
		if cl.TLS != "" && !slices.Contains(tlsModes, cl.TLS) {
			p.add("%s: tls: unknown value %q (want %s)", label, cl.TLS, oneOf(tlsModes))
		}
		switch {
		case cl.Name == "":
			p.add("%s: name is required", label)
		case !isName(cl.Name):
			p.add("%s: name may hold only letters, digits, '_' and '-'", label)
		default:
			if j, dup := names[cl.Name]; dup {
				p.add("%s: name %q is already used by cluster[%d]", label, cl.Name, j)
			} else {
				names[cl.Name] = i
			}
		}
		if cl.User == "" {
			p.add("%s: user is required", label)
		}
		if cl.Master == "" {
			p.add("%s: master is required", label)
		} else if err := checkAddr(cl.Master, false); err != nil {
			p.add("%s: master: %v", label, err)
		} else {
			useAddr(label, "master", cl.Master)
		}
		if !slices.Contains(balancers, cl.Balance) {
			p.add("%s: balance: unknown value %q (want %s)", label, cl.Balance, oneOf(balancers))
		}
		// "" is what a configuration built in code has: eventual.
		if cl.Consistency != "" && !slices.Contains(consistencies, cl.Consistency) {
			p.add("%s: consistency: unknown value %q (want %s)", label, cl.Consistency, oneOf(consistencies))
		}
		if cl.MaxReplicationLag.Duration <= 0 {
			p.add("%s: max_replication_lag must be > 0 (got %s)", label, cl.MaxReplicationLag)
		}
		if !cl.ReadsFallBackToMaster && len(cl.Replicas) == 0 {
			// Without replicas every read goes to the master; a cluster
			// that refuses them there would refuse every read.
			p.add("%s: reads_fall_back_to_master = false needs at least one [[cluster.replica]]", label)
		}
		for j, r := range cl.Replicas {
			key := fmt.Sprintf("replica[%d]", j)
			if r.Address == "" {
				p.add("%s: %s.address is required", label, key)
			} else if err := checkAddr(r.Address, false); err != nil {
				p.add("%s: %s.address: %v", label, key, err)
			} else {
				useAddr(label, key+".address", r.Address)
			}
			if r.Weight < 1 {
				p.add("%s: %s.weight must be >= 1 (got %d)", label, key, r.Weight)
			}
			if r.Agent != "" {
				if err := checkAgentURL(r.Agent); err != nil {
					p.add("%s: %s.agent: %v", label, key, err)
				}
			}
		}
	}
}

// isName reports whether s is usable as a cluster name in admin SQL and
// metric labels.
func isName(s string) bool {
	for _, r := range s {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return s != ""
}

// checkAgentURL checks that s is an absolute http or https URL with a host.
// Errors do not repeat the URL, which may hold credentials.
func checkAgentURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("not a valid URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("scheme must be http or https (got %q)", u.Scheme)
	}
	if u.Host == "" {
		return errors.New("URL has no host")
	}
	return nil
}

func (c *Config) validateHealth(p *problems) {
	h := &c.Health
	if h.Interval.Duration <= 0 {
		p.add("health.interval must be > 0 (got %s)", h.Interval)
	}
	if h.Timeout.Duration <= 0 {
		p.add("health.timeout must be > 0 (got %s)", h.Timeout)
	}
	if h.FailuresBeforeDown < 1 {
		p.add("health.failures_before_down must be >= 1 (got %d)", h.FailuresBeforeDown)
	}
	if h.FailoverBlock.Duration < 0 {
		p.add("health.failover_block must be >= 0 (got %s)", h.FailoverBlock)
	}
	if h.FailoverWriteWait.Duration < 0 {
		p.add("health.failover_write_wait must be >= 0 (got %s)", h.FailoverWriteWait)
	}
	if h.SwitchoverTimeout.Duration <= 0 {
		p.add("health.switchover_timeout must be > 0 (got %s)", h.SwitchoverTimeout)
	}
}

// validateShards checks the [[shard]] rules, [sharding] and the [[broadcast]] tables. A table
// is sharded by one rule at most and is never also broadcast, so the rules' tables are
// collected first.
func (c *Config) validateShards(p *problems) {
	tables := make(map[string]string) // lower-case schema.table → label of the rule sharding it
	for i := range c.Shards {
		c.validateShardRule(p, i, tables)
	}
	c.validateSharding(p)
	c.validateBroadcast(p, tables)
}

// validateShardRule checks rule i of [[shard]], its keys in the order they depend on each
// other, and records its table in tables.
func (c *Config) validateShardRule(p *problems, i int, tables map[string]string) {
	s := &c.Shards[i]
	label := fmt.Sprintf("shard[%d]", i)
	if s.Schema != "" && s.Table != "" {
		label += fmt.Sprintf(" (%s.%s)", s.Schema, s.Table)
	}
	checkShardTable(p, label, s, tables)
	if s.Key == "" {
		p.add("%s: key is required", label)
	}
	if !slices.Contains(shardAlgorithm, s.Algorithm) {
		p.add("%s: algorithm: unknown value %q (want %s)", label, s.Algorithm, oneOf(shardAlgorithm))
	}
	c.validateShardClusters(p, label, s)
	shards := len(s.Clusters) * max(s.TablesPerCluster, 1)
	checkVirtualShards(p, label, s, shards)
	checkDateUnit(p, label, s)
	checkIDColumn(p, label, s, shards)
	checkBoundaries(p, label, s, shards)
}

// checkShardTable requires the rule's schema and table, and claims the table in tables unless
// an earlier rule already shards it.
func checkShardTable(p *problems, label string, s *Shard, tables map[string]string) {
	if s.Schema == "" {
		p.add("%s: schema is required", label)
	}
	if s.Table == "" {
		p.add("%s: table is required", label)
	}
	if s.Schema == "" || s.Table == "" {
		return
	}
	t := strings.ToLower(s.Schema + "." + s.Table)
	if prev, dup := tables[t]; dup {
		p.add("%s: table is already sharded by %s", label, prev)
		return
	}
	tables[t] = label
}

// validateShardClusters checks that the rule names configured clusters, each once, and at
// least one table per cluster.
func (c *Config) validateShardClusters(p *problems, label string, s *Shard) {
	if len(s.Clusters) == 0 {
		p.add("%s: clusters must name at least one cluster", label)
	}
	listed := make(map[string]bool, len(s.Clusters))
	for _, name := range s.Clusters {
		if c.Cluster(name) == nil {
			p.add("%s: clusters: no [[cluster]] is named %q", label, name)
		} else if listed[name] {
			p.add("%s: clusters: %q is listed twice", label, name)
		}
		listed[name] = true
	}
	if s.TablesPerCluster < 1 {
		p.add("%s: tables_per_cluster must be >= 1 (got %d)", label, s.TablesPerCluster)
	}
}

// checkVirtualShards checks virtual_shards against the algorithm and the rule's number of
// physical tables (shards), which it must be a multiple of.
func checkVirtualShards(p *problems, label string, s *Shard, shards int) {
	switch {
	case s.VirtualShards < 0:
		p.add("%s: virtual_shards must be >= 0 (got %d)", label, s.VirtualShards)
	case s.VirtualShards > 0 && s.Algorithm != "mod" && s.Algorithm != "hash":
		p.add("%s: virtual_shards is only used when algorithm is \"mod\" or \"hash\"", label)
	case s.VirtualShards > 0 && shards > 0 && s.VirtualShards%shards != 0:
		p.add("%s: virtual_shards (%d) must be a multiple of the number of physical tables (%d clusters x %d tables = %d)",
			label, s.VirtualShards, len(s.Clusters), s.TablesPerCluster, shards)
	}
}

// checkDateUnit requires date_unit with algorithm "date" and refuses it otherwise.
func checkDateUnit(p *problems, label string, s *Shard) {
	switch {
	case s.Algorithm == "date" && s.DateUnit == "":
		p.add("%s: date_unit is required when algorithm = \"date\" (want %s)", label, oneOf(dateUnits))
	case s.Algorithm == "date" && !slices.Contains(dateUnits, s.DateUnit):
		p.add("%s: date_unit: unknown value %q (want %s)", label, s.DateUnit, oneOf(dateUnits))
	case s.Algorithm != "date" && s.DateUnit != "":
		p.add("%s: date_unit is only used when algorithm = \"date\"", label)
	}
}

// checkIDColumn checks that a rule with global ids has few enough shards (virtual ones when
// set, else shards) for an id to hold the shard number, and that the id is not the key.
func checkIDColumn(p *problems, label string, s *Shard, shards int) {
	if s.IDColumn == "" {
		return
	}
	n := shards
	if s.VirtualShards > 0 {
		n = s.VirtualShards
	}
	if n > MaxIDShards {
		p.add("%s: id_column: global ids hold shard numbers below %d, and this rule has %d shards", label, MaxIDShards, n)
	}
	if strings.EqualFold(s.IDColumn, s.Key) {
		p.add("%s: id_column must differ from key (the id is placed by the key's shard)", label)
	}
}

// checkBoundaries checks a range rule's boundaries: one range per physical table (shards),
// strictly ascending; other algorithms take none.
func checkBoundaries(p *problems, label string, s *Shard, shards int) {
	if s.Algorithm == "range" && len(s.Boundaries) == 1 {
		p.add("%s: boundaries need at least two values (the start of the first range and the end of the last)", label)
	}
	if s.Algorithm == "range" && len(s.Boundaries) > 1 && len(s.Boundaries)-1 != shards {
		p.add("%s: boundaries define %d ranges but the rule has %d physical tables (%d clusters x %d tables)",
			label, len(s.Boundaries)-1, shards, len(s.Clusters), s.TablesPerCluster)
	}
	switch {
	case s.Algorithm == "range" && len(s.Boundaries) == 0:
		p.add("%s: boundaries are required when algorithm = \"range\"", label)
	case s.Algorithm != "range" && len(s.Boundaries) > 0:
		p.add("%s: boundaries are only used when algorithm = \"range\"", label)
	}
	for j := 1; j < len(s.Boundaries); j++ {
		if s.Boundaries[j] <= s.Boundaries[j-1] {
			p.add("%s: boundaries must be strictly ascending (%d follows %d)", label, s.Boundaries[j], s.Boundaries[j-1])
			break
		}
	}
}

// validateSharding checks the [sharding] table.
func (c *Config) validateSharding(p *problems) {
	if d := c.Sharding.DefaultCluster; d != "" && c.Cluster(d) == nil {
		p.add("sharding.default_cluster: no [[cluster]] is named %q", d)
	}
	if c.Sharding.MaxMergeRows < 1 {
		p.add("sharding.max_merge_rows must be >= 1 (got %d)", c.Sharding.MaxMergeRows)
	}
	if c.Sharding.NodeID < 0 || c.Sharding.NodeID > MaxNodeID {
		p.add("sharding.node_id must be between 0 and %d (got %d)", MaxNodeID, c.Sharding.NodeID)
	}
}

// validateBroadcast checks the [[broadcast]] tables: each listed once, and none of them
// sharded (tables holds the sharded ones).
func (c *Config) validateBroadcast(p *problems, tables map[string]string) {
	broadcast := make(map[string]int)
	for i, b := range c.Broadcast {
		label := fmt.Sprintf("broadcast[%d]", i)
		if b.Schema == "" {
			p.add("%s: schema is required", label)
		}
		if b.Table == "" {
			p.add("%s: table is required", label)
		}
		if b.Schema == "" || b.Table == "" {
			continue
		}
		label += fmt.Sprintf(" (%s.%s)", b.Schema, b.Table)
		t := strings.ToLower(b.Schema + "." + b.Table)
		if j, dup := broadcast[t]; dup {
			p.add("%s: table is already listed by broadcast[%d]", label, j)
			continue
		}
		broadcast[t] = i
		if prev, sharded := tables[t]; sharded {
			p.add("%s: table cannot be both broadcast and sharded (by %s)", label, prev)
		}
	}
}

func (c *Config) validateLimits(p *problems) {
	checkLimitValues(p, "limits", &c.Limits.LimitValues)
	first := make(map[string]int, len(c.Limits.Users))
	for i := range c.Limits.Users {
		u := &c.Limits.Users[i]
		label := fmt.Sprintf("limits.user[%d]", i)
		if u.Name != "" {
			label += fmt.Sprintf(" (%q)", u.Name)
		}
		if u.Name == "" {
			p.add("%s: name is required", label)
		} else if j, dup := first[u.Name]; dup {
			p.add("%s: name %q is already used by limits.user[%d]", label, u.Name, j)
		} else {
			first[u.Name] = i
		}
		if u.Name != "" && u.Name == c.Admin.User {
			p.add("%s: %q is the admin user, which cannot log in on the data port", label, u.Name)
		}
		if u.Name != "" && c.Auth.Backend == "static" && !slices.ContainsFunc(c.Auth.Users, func(a StaticUser) bool { return a.Name == u.Name }) {
			// With static auth the users are known: a name that is not
			// one of them is a typo that would leave the user unlimited.
			p.add("%s: no [[auth.user]] is named %q", label, u.Name)
		}
		checkLimitValues(p, label+":", &u.LimitValues)
	}
}

// checkLimitValues checks one set of limits; prefix names where they are
// ("limits" or "limits.user[0] ("app"):").
func checkLimitValues(p *problems, prefix string, v *LimitValues) {
	key := func(k string) string {
		if strings.HasSuffix(prefix, ":") {
			return prefix + " " + k
		}
		return prefix + "." + k
	}
	if v.MaxConnections < 0 {
		p.add("%s must be >= 0 (0 means unlimited; got %d)", key("max_connections"), v.MaxConnections)
	}
	for _, d := range []struct {
		name string
		v    Duration
	}{{"idle_timeout", v.IdleTimeout}, {"query_timeout", v.QueryTimeout}, {"queue_timeout", v.QueueTimeout}} {
		if d.v.Duration < 0 {
			p.add("%s must be >= 0 (0 switches it off; got %s)", key(d.name), d.v)
		}
	}
	if v.MaxStatementsPerSecond < 0 || v.MaxStatementsPerSecond > MaxStatementsPerSecond {
		p.add("%s must be between 0 (unlimited) and %d (got %d)", key("max_statements_per_second"), MaxStatementsPerSecond, v.MaxStatementsPerSecond)
	}
	if v.Burst < 0 || v.Burst > MaxBurst {
		p.add("%s must be between 0 (one second's worth) and %d (got %d)", key("burst"), MaxBurst, v.Burst)
	}
	if v.MaxQueued < 0 {
		p.add("%s must be >= 0 (got %d)", key("max_queued"), v.MaxQueued)
	}
}

// checkAddr checks that addr is host:port with a numeric port. A listen
// address may leave the host empty (all interfaces) and use port 0 (any
// free port); a backend address needs both.
func checkAddr(addr string, listen bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			return fmt.Errorf("%q is not host:port (%s)", addr, ae.Err)
		}
		return fmt.Errorf("%q is not host:port", addr)
	}
	if host == "" && !listen {
		return fmt.Errorf("%q has no host", addr)
	}
	n, err := strconv.Atoi(port)
	lowest := 1
	if listen {
		lowest = 0
	}
	if err != nil || n < lowest || n > 65535 {
		return fmt.Errorf("%q has an invalid port (want %d..65535)", addr, lowest)
	}
	return nil
}

// oneOf lists allowed values for an error message: "a", "b" or "c".
func oneOf(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = strconv.Quote(v)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// validateMetricsAccess checks the metrics listener's basic auth and TLS
// keys: a user needs a password source and the other way round (half of
// the pair would leave the page open while the DBA thinks it is closed),
// and the certificate and key go together.
func (c *Config) validateMetricsAccess(p *problems) {
	x := &c.Proxy
	hasPassword := x.MetricsPasswordEnv != "" || x.MetricsPasswordFile != ""
	if x.MetricsUser != "" && !hasPassword {
		p.add("proxy.metrics_user needs proxy.metrics_password_env or proxy.metrics_password_file")
	}
	if x.MetricsUser == "" && hasPassword {
		p.add("proxy.metrics_password_env and proxy.metrics_password_file need proxy.metrics_user")
	}
	if (x.MetricsTLSCert == "") != (x.MetricsTLSKey == "") {
		p.add("proxy.metrics_tls_cert and proxy.metrics_tls_key must be set together")
	}
}
