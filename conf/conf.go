// Package conf owns sluice's configuration: the TOML schema a DBA writes, its
// defaults, loading, validation and a human-readable description of the
// topology it declares.
//
// Loading follows one fixed order: defaults are set, the file is decoded over
// them, unknown keys are rejected, secrets are resolved from environment
// variables or files, and the result is validated. Every step runs even when
// an earlier one found problems (only a syntax error stops the load), so one
// load reports all of them. Every error names the key it is about, and the
// line when the TOML library can tell it.
//
// The package does no I/O beyond reading the configuration file and the
// secret files and environment variables it names. A *Config is a plain
// value: it is not safe for concurrent mutation, but any number of goroutines
// may read one that nobody modifies.
package conf

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Duration is a time.Duration written in TOML as a string such as "500ms",
// "5s" or "10m".
type Duration struct{ time.Duration }

// UnmarshalText parses a duration string in the syntax of time.ParseDuration.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := time.ParseDuration(string(text))
	if err != nil {
		return fmt.Errorf("invalid duration %q (use a number with a unit: \"500ms\", \"5s\", \"10m\")", text)
	}
	d.Duration = v
	return nil
}

// MarshalText formats the duration the way UnmarshalText reads it.
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(d.String()), nil
}

// String formats d like time.Duration's String method, without zero
// trailing units: "10m" rather than "10m0s" and "1h" rather than "1h0m0s".
func (d Duration) String() string {
	s := d.Duration.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// Config is a whole sluice configuration file.
type Config struct {
	Proxy     Proxy       `toml:"proxy"`
	Auth      Auth        `toml:"auth"`
	Admin     Admin       `toml:"admin"`
	Clusters  []Cluster   `toml:"cluster"`
	Health    Health      `toml:"health"`
	Sharding  Sharding    `toml:"sharding"`
	Shards    []Shard     `toml:"shard"`
	Broadcast []Broadcast `toml:"broadcast"`
	Limits    Limits      `toml:"limits"`
	// Rules are the [[rule]] entries, in the order they are tried.
	Rules []Rule `toml:"rule"`
	// Firewall is the statement allowlist's [firewall] table.
	Firewall Firewall `toml:"firewall"`
	Cache    Cache    `toml:"cache"`
	// Fleet is [fleet]: the etcd cluster this instance shares with others.
	Fleet Fleet `toml:"fleet"`

	// Path is the file the configuration was loaded from; it is empty when
	// the configuration came from Parse.
	Path string `toml:"-"`
}

// Proxy is the [proxy] table: listeners and client-facing limits.
type Proxy struct {
	// Listen is the host:port for application traffic.
	Listen string `toml:"listen"`
	// AdminListen is the host:port of the admin SQL interface; "" switches
	// it off.
	AdminListen string `toml:"admin_listen"`
	// MetricsListen is the host:port serving /metrics and /healthz;
	// "" switches the listener off.
	MetricsListen string `toml:"metrics_listen"`
	// MetricsUser, when set, puts the metrics listener (the status page,
	// its API, /metrics and /readyz; not /healthz, which liveness probes
	// read) behind HTTP basic auth: this user, and the password from
	// MetricsPasswordEnv or MetricsPasswordFile, never the file itself.
	MetricsUser         string `toml:"metrics_user"`
	MetricsPasswordEnv  string `toml:"metrics_password_env"`
	MetricsPasswordFile string `toml:"metrics_password_file"`
	// MetricsPassword is the resolved password of MetricsUser.
	MetricsPassword string `toml:"-"`
	// MetricsTLSCert and MetricsTLSKey are PEM files of the metrics
	// listener's certificate and key; with both set it serves HTTPS only.
	MetricsTLSCert string `toml:"metrics_tls_cert"`
	MetricsTLSKey  string `toml:"metrics_tls_key"`
	// LogLevel is one of debug, info, warn or error.
	LogLevel string `toml:"log_level"`
	// Threads is how many threads run Go code at once (GOMAXPROCS); 0
	// lets the server choose, one while that is enough and one per CPU
	// under load (server/procs.go). On a host shared with
	// database servers fewer leave them CPU and cost the proxy less in
	// scheduling, as HAProxy's nbthread or ProxySQL's mysql-threads do.
	Threads int `toml:"threads"`
	// EventLoop runs sessions on event loops, one per thread, instead of
	// a goroutine each (internal/evloop). Linux only; needs a restart.
	EventLoop bool `toml:"event_loop"`
	// MaxClientConnections caps concurrent client connections.
	MaxClientConnections int `toml:"max_client_connections"`
	// MaxAllowedPacket is the largest packet, in bytes, accepted from a client.
	MaxAllowedPacket int64 `toml:"max_allowed_packet"`
	// HandshakeTimeout bounds a client's handshake and authentication.
	HandshakeTimeout Duration `toml:"handshake_timeout"`
	// ConnectTimeout bounds dialing a backend or the auth server.
	ConnectTimeout Duration `toml:"connect_timeout"`
	// ServerVersion, when set, replaces the version string advertised to clients.
	ServerVersion string `toml:"server_version"`
	// MaxPreparedStatements caps the prepared statements one client session
	// may hold open.
	MaxPreparedStatements int `toml:"max_prepared_statements"`
	// BackendStatementCache bounds the prepared statements each backend
	// connection keeps for the sessions it serves (least recently used
	// first out, closed with COM_STMT_CLOSE); a backend holds at most
	// pool_size times this many of sluice's statements.
	BackendStatementCache int `toml:"backend_statement_cache"`
	// LocalInfile lets clients stream files for LOAD DATA LOCAL INFILE
	// through sluice to the master.
	LocalInfile bool `toml:"local_infile"`
	// TLSCert and TLSKey are PEM files of sluice's certificate and key
	// towards clients; with both set, clients may (or, with RequireTLS,
	// must) switch to TLS.
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
	// RequireTLS refuses clients that do not switch to TLS.
	RequireTLS bool `toml:"require_tls"`
	// StateDir is the directory of the failover state files (one per
	// cluster); "" keeps no state file.
	StateDir string `toml:"state_dir"`
	// SlowQueryThreshold: a statement that takes longer is logged at warn
	// level; 0 switches the slow-query log off.
	SlowQueryThreshold Duration `toml:"slow_query_threshold"`
	// LogSQL adds the statement's text to slow-query log lines, which
	// otherwise carry only its digest (text may hold secrets).
	LogSQL bool `toml:"log_sql"`
	// LoginFailuresBeforeBackoff is how many failed logins in a row a
	// client address may have before its next logins are refused for a
	// while (the login backoff); 0 switches the backoff off.
	LoginFailuresBeforeBackoff int `toml:"login_failures_before_backoff"`
	// LoginBackoff is the first refusal period; each further failure
	// doubles it, up to LoginBackoffMax. An address is forgotten after a
	// successful login, or when LoginBackoffMax passed since its last
	// failure.
	LoginBackoff    Duration `toml:"login_backoff"`
	LoginBackoffMax Duration `toml:"login_backoff_max"`
	// ShutdownDelay is how long sluice goes on accepting clients after
	// SIGTERM while /readyz already answers 503, so a load balancer stops
	// sending new clients first.
	ShutdownDelay Duration `toml:"shutdown_delay"`
	// ShutdownTimeout bounds the drain after the listener closed:
	// statements and transactions still running then are cut off.
	ShutdownTimeout Duration `toml:"shutdown_timeout"`
	// MirrorQueue bounds the statements [[rule]] mirror copies waiting for
	// a mirror worker; a copy that finds it full is dropped and counted.
	// MirrorWorkers is how many workers run the copies, each on backend
	// connections of its own. Both need a restart.
	MirrorQueue   int `toml:"mirror_queue"`
	MirrorWorkers int `toml:"mirror_workers"`
}

// Auth is the [auth] table: how client credentials are checked.
type Auth struct {
	// Backend is "mysql" (relay to a dedicated auth server) or "static".
	Backend string `toml:"backend"`
	// Address is the auth server's host:port; required for backend "mysql".
	Address string `toml:"address"`
	// TLS is the auth-server leg's TLS mode: "off", "preferred" (TLS when
	// the server offers it) or "required".
	TLS string `toml:"tls"`
	// TLSCA is a PEM file of CAs that verify the auth server's certificate;
	// without it the link is encrypted but the server is not verified.
	TLSCA string `toml:"tls_ca"`
	// MaxPendingHandshakes bounds the handshakes that hold an auth-server
	// connection while waiting for the client's handshake response
	// (backend "mysql"); beyond it logins are deferred: sluice greets the
	// client with its own scramble and reaches the auth server only after
	// the client answered, at the cost of one round trip. 0 defers every
	// login.
	MaxPendingHandshakes int `toml:"max_pending_handshakes"`
	// MaxKeptAuthConnections bounds the auth-server connections kept open
	// after a login of a client that can change user only on the
	// connection that issued its login's scramble (MariaDB Connector/C,
	// libmysqlclient); backend "mysql". 0 keeps none: those clients'
	// COM_CHANGE_USER then fails with 1251.
	MaxKeptAuthConnections int `toml:"max_kept_auth_connections"`
	// MaxConcurrentLogins bounds the logins (and COM_CHANGE_USERs) that
	// hold an auth-server connection at once (backend "mysql"); more wait
	// their turn, in order, within handshake_timeout. Logins waiting for
	// their client's handshake response take at most half of them (and
	// at most max_pending_handshakes), so silent clients cannot hold up
	// the others.
	MaxConcurrentLogins int `toml:"max_concurrent_logins"`
	// EnforceGrants makes sluice check every statement against the
	// logged-in account's privileges (learnt from the auth server, or the
	// static users' Grants) before routing it. false lets every logged-in
	// user do whatever the clusters' service accounts may.
	EnforceGrants bool `toml:"enforce_grants"`
	// GrantsTTL bounds how long an account's privileges are used before
	// they are read again from the auth server: a REVOKE there reaches open
	// sessions within it.
	GrantsTTL Duration `toml:"grants_ttl"`
	// ProxyProtocol makes sluice open each auth-server connection with a
	// PROXY protocol header carrying the client's address, so accounts
	// with a host part match as on a direct connection (the auth server
	// needs proxy_protocol_networks to include sluice's address).
	ProxyProtocol bool `toml:"proxy_protocol"`
	// ProxyProtocolVersion is the PROXY header's version, 1 (text) or 2
	// (binary).
	ProxyProtocolVersion int `toml:"proxy_protocol_version"`
	// MirrorSchema makes sluice create every cluster's schemas, tables
	// (structure only), views, sequences and routines (stubs) on the auth
	// server at start-up, after the DDL it routes and after a reload, so
	// DBAs can GRANT on them there. Needs ServiceUser.
	MirrorSchema bool `toml:"mirror_schema"`
	// ServiceUser is sluice's own account on the auth server (backend
	// "mysql"): it reads an account's grants again when they expire
	// (SHOW GRANTS FOR needs SELECT on mysql.*) and, with MirrorSchema,
	// creates the mirrored schemas. Empty: grants are read only at login.
	ServiceUser string `toml:"service_user"`
	// ServicePassword is ServiceUser's resolved password (see
	// Admin.Password).
	ServicePassword     string `toml:"service_password"`
	ServicePasswordEnv  string `toml:"service_password_env"`
	ServicePasswordFile string `toml:"service_password_file"`
	// Users are the [[auth.user]] entries; used only by backend "static".
	Users []StaticUser `toml:"user"`
}

// StaticUser is one [[auth.user]] entry of the static auth backend.
type StaticUser struct {
	// Name is the MySQL user name.
	Name string `toml:"name"`
	// PasswordHash is the mysql_native_password hash as SELECT PASSWORD('x')
	// prints it: "*" followed by 40 hex digits. Parse normalises it to upper
	// case.
	PasswordHash string `toml:"password_hash"`
	// Grants are the user's privileges as GRANT statements in SHOW GRANTS
	// form (TO CURRENT_USER or TO the user), checked when
	// auth.enforce_grants is on. None: the user may do nothing but log in.
	Grants []string `toml:"grants"`
}

// Admin is the [admin] table: the account of the admin SQL interface.
type Admin struct {
	// User is the admin user name.
	User string `toml:"user"`
	// Password is the resolved admin password; after Parse it holds the value
	// of whichever of password, password_env or password_file was set.
	Password string `toml:"password"`
	// PasswordEnv names an environment variable holding the password.
	PasswordEnv string `toml:"password_env"`
	// PasswordFile names a file holding the password.
	PasswordFile string `toml:"password_file"`
}

// Cluster is one [[cluster]] entry: a master and its replicas.
type Cluster struct {
	// Name identifies the cluster in admin SQL, shard rules and metrics.
	Name string `toml:"name"`
	// User is the service account used for data connections to the cluster.
	User string `toml:"user"`
	// Password is the resolved service account password (see Admin.Password).
	Password string `toml:"password"`
	// PasswordEnv names an environment variable holding the password.
	PasswordEnv string `toml:"password_env"`
	// PasswordFile names a file holding the password.
	PasswordFile string `toml:"password_file"`
	// Master is the master's host:port.
	Master string `toml:"master"`
	// Balance is the replica balancer: round-robin, weighted, least-load or
	// least-conn.
	Balance string `toml:"balance"`
	// MaxReplicationLag is the lag beyond which a replica takes no reads.
	MaxReplicationLag Duration `toml:"max_replication_lag"`
	// ReadsFallBackToMaster sends reads to the master when no replica can
	// serve them; when false such reads fail. Parse defaults it to true
	// (DefaultReadsFallBackToMaster).
	ReadsFallBackToMaster bool `toml:"reads_fall_back_to_master"`
	// PoolSize caps the data connections sluice keeps open to each backend
	// of the cluster; sessions share them statement by statement.
	PoolSize int `toml:"pool_size"`
	// PoolWaitTimeout is how long a statement waits for a free connection
	// when a pool is exhausted before it fails with ERR 1040.
	PoolWaitTimeout Duration `toml:"pool_wait_timeout"`
	// TLS is the data connections' TLS mode ("off", "preferred" or
	// "required"), TLSCA the PEM file of CAs that verify the backends.
	TLS   string `toml:"tls"`
	TLSCA string `toml:"tls_ca"`
	// Consistency is what a session's reads may see: "eventual" (any
	// serving replica), "causal" (after a session's write, only replicas
	// that have applied it, else the master) or "strong" (the master).
	Consistency string `toml:"consistency"`
	// Replicas are the [[cluster.replica]] entries.
	Replicas []Replica `toml:"replica"`
}

// Replica is one [[cluster.replica]] entry.
type Replica struct {
	// Address is the replica's host:port.
	Address string `toml:"address"`
	// Weight is the replica's share for the weighted balancer; at least 1.
	Weight int `toml:"weight"`
	// Agent is the optional http(s) URL of a sluice-agent reporting the
	// host's load average.
	Agent string `toml:"agent"`
}

// Health is the [health] table: probing and automatic failover.
type Health struct {
	// Interval is the time between two probes of a backend.
	Interval Duration `toml:"interval"`
	// Timeout bounds one probe.
	Timeout Duration `toml:"timeout"`
	// FailuresBeforeDown is how many probes in a row must fail before a
	// backend is marked down.
	FailuresBeforeDown int `toml:"failures_before_down"`
	// AutoFailover enables promoting a replica when a master goes down.
	AutoFailover bool `toml:"auto_failover"`
	// FailoverBlock is the time after a failover of a cluster during which no
	// second automatic failover of it happens.
	FailoverBlock Duration `toml:"failover_block"`
	// FailoverWriteWait is how long a statement for a master that is down,
	// fenced or unknown waits for a failover to give the cluster a master
	// (auto_failover on) before it fails.
	FailoverWriteWait Duration `toml:"failover_write_wait"`
	// SwitchoverTimeout bounds how long a planned switchover waits for the
	// target to apply every transaction of the old master (writes are held
	// meanwhile); past it the switchover is undone.
	SwitchoverTimeout Duration `toml:"switchover_timeout"`
	// EnforceReadOnly makes sluice set read_only on a configured replica it
	// finds writable at start-up, instead of only reporting it.
	EnforceReadOnly bool `toml:"enforce_read_only"`
}

// Sharding is the [sharding] table: settings shared by all shard rules.
type Sharding struct {
	// DefaultCluster holds every table that has no [[shard]] rule and is
	// not broadcast, and statements that name no table; "" means the first
	// [[cluster]].
	DefaultCluster string `toml:"default_cluster"`
	// MaxMergeRows bounds the rows a scatter-gather statement may hold in
	// sluice's memory at once (sorted, grouped or distinct rows); past it
	// the statement fails.
	MaxMergeRows int `toml:"max_merge_rows"`
	// NodeID is this sluice instance's number in the global ids it makes
	// (0 .. MaxNodeID); instances that make ids for the same tables must
	// have different numbers.
	NodeID int `toml:"node_id"`
}

// Shard is one [[shard]] rule: a logical table spread over physical tables
// in several clusters by the value of one column.
type Shard struct {
	// Schema and Table name the logical, sharded table.
	Schema string `toml:"schema"`
	Table  string `toml:"table"`
	// Key is the shard key column.
	Key string `toml:"key"`
	// Algorithm is mod, hash, range or date.
	Algorithm string `toml:"algorithm"`
	// Clusters are the names of the clusters holding the shards, in order.
	Clusters []string `toml:"clusters"`
	// TablesPerCluster is the number of physical tables in each cluster,
	// named <table>_0 .. <table>_<n-1>; with 1 (the default) the physical
	// table keeps the logical name.
	TablesPerCluster int `toml:"tables_per_cluster"`
	// VirtualShards is the number of virtual shards of algorithms mod and
	// hash (a multiple of len(Clusters) x TablesPerCluster); 0 means none.
	VirtualShards int `toml:"virtual_shards"`
	// Boundaries are the ascending range starts for algorithm range; the
	// last one is the end of the last range.
	Boundaries []int64 `toml:"boundaries"`
	// DateUnit is day, month or year for algorithm date.
	DateUnit string `toml:"date_unit"`
	// IDColumn is an optional BIGINT column filled with a global id on
	// INSERT when the statement gives none; ids carry their shard number,
	// so statements that give only the id still reach one shard.
	IDColumn string `toml:"id_column"`
}

// LimitValues are the limits sluice applies to one user's sessions: the
// keys of the [limits] table, which [[limits.user]] entries override. A
// zero count or duration switches its limit off.
type LimitValues struct {
	// MaxConnections caps the user's concurrent client connections; 0
	// means unlimited.
	MaxConnections int `toml:"max_connections"`
	// IdleTimeout closes a client connection idle between commands for
	// longer (MySQL's wait_timeout); 0 switches it off.
	IdleTimeout Duration `toml:"idle_timeout"`
	// QueryTimeout kills a statement that runs longer on its backend; the
	// client gets ERR 3024. 0 switches it off.
	QueryTimeout Duration `toml:"query_timeout"`
	// MaxStatementsPerSecond is the rate of statements all the user's
	// sessions together may run; 0 means unlimited.
	MaxStatementsPerSecond int `toml:"max_statements_per_second"`
	// Burst is how many statements may run at once above the rate after a
	// quiet spell; 0 means one second's worth (max_statements_per_second).
	Burst int `toml:"burst"`
	// MaxQueued caps the user's statements waiting for their turn at once;
	// more are refused with ERR 1226. 0 refuses every statement over the
	// rate at once.
	MaxQueued int `toml:"max_queued"`
	// QueueTimeout is the longest a statement waits for its turn; one
	// that would wait longer is refused with ERR 1226.
	QueueTimeout Duration `toml:"queue_timeout"`
}

// Limits is the [limits] table: the limits of every user, and
// [[limits.user]] entries that override them for one user.
type Limits struct {
	LimitValues
	// Users are the [[limits.user]] entries. After Parse each holds every
	// key: the ones it does not set are copied from [limits].
	Users []UserLimits `toml:"user"`
}

// UserLimits is one [[limits.user]] entry: a user name and its limits.
type UserLimits struct {
	// Name is the MySQL user name the entry applies to.
	Name string `toml:"name"`
	LimitValues
}

// For returns the limits of user: its [[limits.user]] entry's, else the
// [limits] table's. named reports whether user has an entry.
func (l *Limits) For(user string) (v LimitValues, named bool) {
	for i := range l.Users {
		if l.Users[i].Name == user {
			return l.Users[i].LimitValues, true
		}
	}
	return l.LimitValues, false
}

// Broadcast is one [[broadcast]] entry: a table copied to every cluster,
// written to all of them and read from any one.
type Broadcast struct {
	Schema string `toml:"schema"`
	Table  string `toml:"table"`
}

// Default values of settings that are not given.
const (
	DefaultListen               = "127.0.0.1:6033"
	DefaultAdminListen          = "127.0.0.1:6032"
	DefaultMetricsListen        = "127.0.0.1:6070"
	DefaultLogLevel             = "info"
	DefaultMaxClientConnections = 10000
	// MaxThreads bounds proxy.threads.
	MaxThreads              = 1024
	DefaultMaxAllowedPacket = 64 << 20
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultConnectTimeout   = 2 * time.Second
	DefaultMaxPreparedStmts = 1024
	// DefaultBackendStatementCache: a pool of the default 128
	// connections then holds at most 8,192 statements on its backend,
	// half of MariaDB's default max_prepared_stmt_count (16382).
	DefaultBackendStatementCache = 64
	// DefaultSlowQueryThreshold is proxy.slow_query_threshold's.
	DefaultSlowQueryThreshold = time.Second
	DefaultTLSMode            = "off"
	DefaultPoolSize           = 128
	DefaultPoolWaitTimeout    = 5 * time.Second
	DefaultAuthBackend        = "mysql"
	// DefaultMaxPendingHandshakes is auth.max_pending_handshakes'.
	DefaultMaxPendingHandshakes = 64
	// DefaultMaxKeptAuthConnections is auth.max_kept_auth_connections'.
	DefaultMaxKeptAuthConnections = 64
	// DefaultMaxConcurrentLogins is auth.max_concurrent_logins'. With the
	// kept connections' 64 it stays inside MariaDB's default
	// max_connections (151) on the auth server.
	DefaultMaxConcurrentLogins = 64
	// DefaultGrantsTTL is auth.grants_ttl's.
	DefaultGrantsTTL = 30 * time.Second
	// DefaultProxyProtocolVersion is auth.proxy_protocol_version's.
	DefaultProxyProtocolVersion = 2
	DefaultAdminUser            = "admin"
	DefaultBalance              = "round-robin"
	DefaultConsistency          = "eventual"
	DefaultMaxReplicationLag    = 5 * time.Second
	// DefaultReadsFallBackToMaster is cluster.reads_fall_back_to_master's.
	DefaultReadsFallBackToMaster = true
	DefaultReplicaWeight         = 1
	DefaultHealthInterval        = 500 * time.Millisecond
	DefaultHealthTimeout         = time.Second
	DefaultFailuresBeforeDown    = 3
	DefaultAutoFailover          = true
	DefaultFailoverBlock         = 10 * time.Minute
	DefaultFailoverWriteWait     = 10 * time.Second
	DefaultSwitchoverTimeout     = 10 * time.Second
	DefaultTablesPerCluster      = 1
	// DefaultIdleTimeout is limits.idle_timeout's, MySQL's wait_timeout.
	DefaultIdleTimeout = 8 * time.Hour
	// DefaultMaxQueued and DefaultQueueTimeout are the rate limit's queue.
	DefaultMaxQueued    = 1000
	DefaultQueueTimeout = time.Second
	// MaxStatementsPerSecond bounds limits.max_statements_per_second and
	// MaxBurst limits.burst.
	MaxStatementsPerSecond = 10_000_000
	MaxBurst               = 100_000_000
	DefaultMaxMergeRows    = 100000
	// MaxNodeID is the largest sharding.node_id: global ids keep 5 bits
	// for it.
	MaxNodeID = 31
	// MaxIDShards is the most shards (virtual shards when set) a rule with
	// an id_column may have: global ids keep 8 bits for the shard number.
	MaxIDShards = 256
)

// Defaults of the login backoff and of graceful shutdown ([proxy]).
const (
	DefaultLoginFailuresBeforeBackoff = 5
	DefaultLoginBackoff               = time.Second
	DefaultLoginBackoffMax            = 30 * time.Second
	DefaultShutdownDelay              = 0
	DefaultShutdownTimeout            = 30 * time.Second
)

// Defaults and bounds of the query rules' mirror ([proxy] mirror_queue,
// mirror_workers).
const (
	DefaultMirrorQueue   = 1024
	MaxMirrorQueue       = 1 << 20
	DefaultMirrorWorkers = 2
	MaxMirrorWorkers     = 64
)

// Limits of max_allowed_packet, in bytes.
const (
	MinMaxAllowedPacket = 1024
	MaxMaxAllowedPacket = 1 << 30
)

// defaults returns a Config holding every default that does not live in an
// array element; those are filled in by applyElementDefaults after decoding.
func defaults() *Config {
	return &Config{
		Firewall: Firewall{Mode: FirewallOff},
		Proxy: Proxy{
			Listen:                DefaultListen,
			AdminListen:           DefaultAdminListen,
			MetricsListen:         DefaultMetricsListen,
			LogLevel:              DefaultLogLevel,
			MaxClientConnections:  DefaultMaxClientConnections,
			MaxAllowedPacket:      DefaultMaxAllowedPacket,
			HandshakeTimeout:      Duration{DefaultHandshakeTimeout},
			ConnectTimeout:        Duration{DefaultConnectTimeout},
			MaxPreparedStatements: DefaultMaxPreparedStmts,
			BackendStatementCache: DefaultBackendStatementCache,
			SlowQueryThreshold:    Duration{DefaultSlowQueryThreshold},

			LoginFailuresBeforeBackoff: DefaultLoginFailuresBeforeBackoff,
			LoginBackoff:               Duration{DefaultLoginBackoff},
			LoginBackoffMax:            Duration{DefaultLoginBackoffMax},
			ShutdownDelay:              Duration{DefaultShutdownDelay},
			ShutdownTimeout:            Duration{DefaultShutdownTimeout},
			MirrorQueue:                DefaultMirrorQueue,
			MirrorWorkers:              DefaultMirrorWorkers,
		},
		Auth: Auth{Backend: DefaultAuthBackend, TLS: DefaultTLSMode, MaxPendingHandshakes: DefaultMaxPendingHandshakes, MaxKeptAuthConnections: DefaultMaxKeptAuthConnections,
			MaxConcurrentLogins: DefaultMaxConcurrentLogins,
			EnforceGrants:       true, GrantsTTL: Duration{DefaultGrantsTTL}, ProxyProtocolVersion: DefaultProxyProtocolVersion},
		Admin:    Admin{User: DefaultAdminUser},
		Fleet:    fleetDefaults(),
		Sharding: Sharding{MaxMergeRows: DefaultMaxMergeRows},
		Limits: Limits{LimitValues: LimitValues{
			IdleTimeout:  Duration{DefaultIdleTimeout},
			MaxQueued:    DefaultMaxQueued,
			QueueTimeout: Duration{DefaultQueueTimeout},
		}},
		Cache: defaultCache(),
		Health: Health{
			Interval:           Duration{DefaultHealthInterval},
			Timeout:            Duration{DefaultHealthTimeout},
			FailuresBeforeDown: DefaultFailuresBeforeDown,
			AutoFailover:       DefaultAutoFailover,
			FailoverBlock:      Duration{DefaultFailoverBlock},
			FailoverWriteWait:  Duration{DefaultFailoverWriteWait},
			SwitchoverTimeout:  Duration{DefaultSwitchoverTimeout},
		},
	}
}

// Load reads the configuration file at path and parses it like Parse. A
// relative password_file is taken relative to the directory of path. The
// returned Config has Path set to path. A configuration with problems gives
// an error listing all of them, one per line, each starting with path.
func Load(path string) (*Config, error) {
	return LoadWith(path, LoadOptions{})
}

// LoadOptions change what Load does; the zero value is Load.
type LoadOptions struct {
	// SkipSecrets leaves every password_env and password_file unread:
	// the passwords they name stay empty and cannot fail the load. It is
	// for checking a file whose secrets exist only where it is deployed,
	// never for running sluice.
	SkipSecrets bool
}

// LoadWith is Load with options.
func LoadWith(path string, o LoadOptions) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := parse(data, secretSource{dir: filepath.Dir(path), skip: o.SkipSecrets})
	if l, ok := err.(*errorList); ok {
		l.file = path
		return nil, l
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.Path = path
	return c, nil
}

// Parse builds a Config from the TOML text in data: it applies defaults,
// decodes data over them, rejects unknown keys, resolves secrets and
// validates the result. A relative password_file is taken relative to the
// working directory. The error lists every problem found, one per line, in
// file order.
func Parse(data []byte) (*Config, error) {
	return parse(data, secretSource{})
}

// DefaultCluster returns the name of the cluster that holds unsharded
// tables: sharding.default_cluster, or the first cluster.
func (c *Config) DefaultCluster() string {
	if c.Sharding.DefaultCluster != "" || len(c.Clusters) == 0 {
		return c.Sharding.DefaultCluster
	}
	return c.Clusters[0].Name
}

// Cluster returns the cluster called name, or nil if there is none. The
// result points into c.Clusters.
func (c *Config) Cluster(name string) *Cluster {
	for i := range c.Clusters {
		if c.Clusters[i].Name == name {
			return &c.Clusters[i]
		}
	}
	return nil
}
