package conf

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// base is the smallest valid configuration; tests append sections to it.
const base = `
[auth]
address = "127.0.0.1:3310"

[[cluster]]
name = "main"
user = "sluice"
master = "127.0.0.1:3306"
  [[cluster.replica]]
  address = "127.0.0.1:3307"
`

// cluster returns a [[cluster]] section with the given extra lines.
func cluster(name, master string, extra ...string) string {
	s := "\n[[cluster]]\n"
	if name != "" {
		s += "name = \"" + name + "\"\n"
	}
	s += "user = \"sluice\"\n"
	if master != "" {
		s += "master = \"" + master + "\"\n"
	}
	return s + strings.Join(extra, "\n") + "\n"
}

// auth is an [auth] section for the mysql backend.
const auth = "\n[auth]\naddress = \"127.0.0.1:3310\"\n"

func mustParse(t *testing.T, doc string) *Config {
	t.Helper()
	c, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v\n--- document ---\n%s", err, doc)
	}
	return c
}

func TestDefaults(t *testing.T) {
	c := mustParse(t, base+`
[[shard]]
schema = "pay"
table = "orders"
key = "uid"
algorithm = "mod"
clusters = ["main"]
`)
	checks := []struct {
		name      string
		got, want any
	}{
		{"proxy.listen", c.Proxy.Listen, "127.0.0.1:6033"},
		{"proxy.admin_listen", c.Proxy.AdminListen, "127.0.0.1:6032"},
		{"proxy.metrics_listen", c.Proxy.MetricsListen, "127.0.0.1:6070"},
		{"proxy.log_level", c.Proxy.LogLevel, "info"},
		{"proxy.max_client_connections", c.Proxy.MaxClientConnections, 10000},
		{"proxy.max_allowed_packet", c.Proxy.MaxAllowedPacket, int64(67108864)},
		{"proxy.handshake_timeout", c.Proxy.HandshakeTimeout.Duration, 10 * time.Second},
		{"proxy.connect_timeout", c.Proxy.ConnectTimeout.Duration, 2 * time.Second},
		{"proxy.server_version", c.Proxy.ServerVersion, ""},
		{"proxy.max_prepared_statements", c.Proxy.MaxPreparedStatements, 1024},
		{"proxy.backend_statement_cache", c.Proxy.BackendStatementCache, 64},
		{"proxy.threads", c.Proxy.Threads, 0},
		{"proxy.local_infile", c.Proxy.LocalInfile, false},
		{"proxy.slow_query_threshold", c.Proxy.SlowQueryThreshold.Duration, time.Second},
		{"proxy.log_sql", c.Proxy.LogSQL, false},
		{"auth.backend", c.Auth.Backend, "mysql"},
		{"admin.user", c.Admin.User, "admin"},
		{"admin.password", c.Admin.Password, ""},
		{"health.interval", c.Health.Interval.Duration, 500 * time.Millisecond},
		{"health.timeout", c.Health.Timeout.Duration, time.Second},
		{"health.failures_before_down", c.Health.FailuresBeforeDown, 3},
		{"health.auto_failover", c.Health.AutoFailover, true},
		{"health.failover_block", c.Health.FailoverBlock.Duration, 10 * time.Minute},
		{"health.enforce_read_only", c.Health.EnforceReadOnly, false},
		{"health.failover_write_wait", c.Health.FailoverWriteWait.Duration, 10 * time.Second},
		{"health.switchover_timeout", c.Health.SwitchoverTimeout.Duration, 10 * time.Second},
		{"proxy.state_dir", c.Proxy.StateDir, ""},
		{"cluster[0].balance", c.Clusters[0].Balance, "round-robin"},
		{"cluster[0].max_replication_lag", c.Clusters[0].MaxReplicationLag.Duration, 5 * time.Second},
		{"cluster[0].consistency", c.Clusters[0].Consistency, "eventual"},
		{"cluster[0].reads_fall_back_to_master", c.Clusters[0].ReadsFallBackToMaster, true},
		{"cluster[0].password", c.Clusters[0].Password, ""},
		{"cluster[0].replica[0].weight", c.Clusters[0].Replicas[0].Weight, 1},
		{"shard[0].tables_per_cluster", c.Shards[0].TablesPerCluster, 1},
		{"path", c.Path, ""},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}
}

func TestExplicitValuesWin(t *testing.T) {
	c := mustParse(t, `
[proxy]
listen = "0.0.0.0:7033"
log_level = "debug"
max_client_connections = 5
max_allowed_packet = 1024
handshake_timeout = "3s"
server_version = "8.0.36-sluice"
slow_query_threshold = "0s"
log_sql = true

[health]
auto_failover = false
failover_block = "0s"
`+auth+cluster("main", "127.0.0.1:3306",
		`balance = "weighted"`,
		`max_replication_lag = "250ms"`,
		`reads_fall_back_to_master = false`,
		`  [[cluster.replica]]`,
		`  address = "127.0.0.1:3307"`,
		`  weight = 7`,
	))
	if c.Proxy.Listen != "0.0.0.0:7033" || c.Proxy.LogLevel != "debug" || c.Proxy.MaxClientConnections != 5 ||
		c.Proxy.MaxAllowedPacket != 1024 || c.Proxy.HandshakeTimeout.Duration != 3*time.Second ||
		c.Proxy.ServerVersion != "8.0.36-sluice" || c.Proxy.SlowQueryThreshold.Duration != 0 || !c.Proxy.LogSQL {
		t.Errorf("proxy = %+v", c.Proxy)
	}
	if c.Proxy.AdminListen != DefaultAdminListen {
		t.Errorf("proxy.admin_listen = %q, want the default", c.Proxy.AdminListen)
	}
	if c.Health.AutoFailover || c.Health.FailoverBlock.Duration != 0 {
		t.Errorf("health = %+v", c.Health)
	}
	cl := c.Clusters[0]
	if cl.Balance != "weighted" || cl.MaxReplicationLag.Duration != 250*time.Millisecond || cl.Replicas[0].Weight != 7 ||
		cl.ReadsFallBackToMaster {
		t.Errorf("cluster = %+v", cl)
	}
}

func TestExampleFile(t *testing.T) {
	c := loadExample(t)
	if c.Path != exampleFile {
		t.Errorf("Path = %q", c.Path)
	}
	if len(c.Clusters) != 2 || c.Clusters[0].Name != "db1" || c.Clusters[1].Name != "db2" {
		t.Fatalf("clusters = %+v", c.Clusters)
	}
	db1 := c.Clusters[0]
	if db1.Balance != "least-load" || len(db1.Replicas) != 2 || db1.Replicas[1].Weight != 2 ||
		db1.Replicas[0].Agent != "http://127.0.0.1:9107" {
		t.Errorf("db1 = %+v", db1)
	}
	// The installed file takes its secrets from the environment.
	if c.Admin.Password != exampleAdminPassword {
		t.Errorf("admin password = %q", c.Admin.Password)
	}
	if db1.Password != exampleBackendPassword {
		t.Errorf("db1 password = %q", db1.Password)
	}
	if len(c.Shards) != 1 || c.Shards[0].TablesPerCluster != 10 || strings.Join(c.Shards[0].Clusters, ",") != "db1,db2" {
		t.Errorf("shards = %+v", c.Shards)
	}
	if len(c.Broadcast) != 1 || c.Broadcast[0] != (Broadcast{Schema: "pay", Table: "currencies"}) {
		t.Errorf("broadcast = %+v", c.Broadcast)
	}
}

// TestBadFiles checks that each bad example file fails with exactly one line
// naming the file, the line where it helps, and the problem.
func TestBadFiles(t *testing.T) {
	tests := []struct {
		file string
		want string
	}{
		{"bad-typo.toml", `testdata/bad-typo.toml: line 12: unknown key "cluster.replica.wieght" (did you mean "weight"?)`},
		{"bad-missing-master.toml", `testdata/bad-missing-master.toml: line 4: cluster[0] ("main"): master is required`},
		{"bad-duration.toml", `testdata/bad-duration.toml: line 3: proxy.handshake_timeout: invalid duration "5 parsecs" (use a number with a unit: "500ms", "5s", "10m")`},
		{"bad-syntax.toml", `testdata/bad-syntax.toml: line 2: invalid TOML: strings cannot contain newlines`},
		{"bad-two-secrets.toml", `testdata/bad-two-secrets.toml: line 7: cluster[0] ("main"): password and password_env are both set; set at most one of them`},
		{"bad-shard-cluster.toml", `testdata/bad-shard-cluster.toml: line 14: shard[0] (pay.orders): clusters: no [[cluster]] is named "db9"`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			c, err := Load(filepath.Join("testdata", tt.file))
			if err == nil {
				t.Fatalf("Load succeeded: %+v", c)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
	// Every bad-*.toml file must be covered above.
	files, err := filepath.Glob("testdata/bad-*.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(tests) {
		t.Errorf("testdata has %d bad files, the table covers %d", len(files), len(tests))
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.toml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v, want one wrapping fs.ErrNotExist", err)
	}
}

// TestValidationErrors checks every validation rule. Each document has
// exactly one problem, so the whole error must be exactly that one line.
func TestValidationErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want string
	}{
		// Clusters.
		{"no cluster", auth, `cluster: at least one [[cluster]] is required`},
		{"missing master", auth + cluster("main", ""), `cluster[0] ("main"): master is required`},
		{"missing name", auth + cluster("", "127.0.0.1:3306"), `cluster[0]: name is required`},
		{"bad name", auth + cluster("my cluster", "127.0.0.1:3306"),
			`cluster[0] ("my cluster"): name may hold only letters, digits, '_' and '-'`},
		{"missing user", auth + "[[cluster]]\nname = \"main\"\nmaster = \"127.0.0.1:3306\"\n", `cluster[0] ("main"): user is required`},
		{"duplicate name", base + cluster("main", "127.0.0.1:3406"), `cluster[1] ("main"): name "main" is already used by cluster[0]`},
		{"unknown balance", auth + cluster("main", "127.0.0.1:3306", `balance = "random"`),
			`cluster[0] ("main"): balance: unknown value "random" (want "round-robin", "weighted", "least-load" or "least-conn")`},
		{"unknown consistency", auth + cluster("main", "127.0.0.1:3306", `consistency = "session"`),
			`cluster[0] ("main"): consistency: unknown value "session" (want "eventual", "causal" or "strong")`},
		{"zero replication lag", auth + cluster("main", "127.0.0.1:3306", `max_replication_lag = "0s"`),
			`cluster[0] ("main"): max_replication_lag must be > 0 (got 0s)`},
		{"no master fallback without replicas", auth + cluster("main", "127.0.0.1:3306", `reads_fall_back_to_master = false`),
			`cluster[0] ("main"): reads_fall_back_to_master = false needs at least one [[cluster.replica]]`},
		{"master without port", auth + cluster("main", "db.example"),
			`cluster[0] ("main"): master: "db.example" is not host:port (missing port in address)`},
		{"master without host", auth + cluster("main", ":3306"), `cluster[0] ("main"): master: ":3306" has no host`},
		{"master port 0", auth + cluster("main", "127.0.0.1:0"),
			`cluster[0] ("main"): master: "127.0.0.1:0" has an invalid port (want 1..65535)`},
		{"master port name", auth + cluster("main", "127.0.0.1:mysql"),
			`cluster[0] ("main"): master: "127.0.0.1:mysql" has an invalid port (want 1..65535)`},
		{"replica weight 0", auth + cluster("main", "127.0.0.1:3306",
			"[[cluster.replica]]", `address = "127.0.0.1:3307"`,
			"[[cluster.replica]]", `address = "127.0.0.1:3308"`, "weight = 0"),
			`cluster[0] ("main"): replica[1].weight must be >= 1 (got 0)`},
		{"replica without address", auth + cluster("main", "127.0.0.1:3306", "[[cluster.replica]]", "weight = 2"),
			`cluster[0] ("main"): replica[0].address is required`},
		{"replica bad address", auth + cluster("main", "127.0.0.1:3306", "[[cluster.replica]]", `address = "3307"`),
			`cluster[0] ("main"): replica[0].address: "3307" is not host:port (missing port in address)`},
		{"replica is master", auth + cluster("main", "127.0.0.1:3306", "[[cluster.replica]]", `address = "127.0.0.1:3306"`),
			`cluster[0] ("main"): replica[0].address "127.0.0.1:3306" is already used by cluster[0] ("main") master`},
		{"address in two clusters", base + cluster("other", "127.0.0.1:3307"),
			`cluster[1] ("other"): master "127.0.0.1:3307" is already used by cluster[0] ("main") replica[0].address`},
		{"agent not http", auth + cluster("main", "127.0.0.1:3306", "[[cluster.replica]]", `address = "127.0.0.1:3307"`, `agent = "ftp://h:1"`),
			`cluster[0] ("main"): replica[0].agent: scheme must be http or https (got "ftp")`},
		{"agent without host", auth + cluster("main", "127.0.0.1:3306", "[[cluster.replica]]", `address = "127.0.0.1:3307"`, `agent = "http:///x"`),
			`cluster[0] ("main"): replica[0].agent: URL has no host`},

		// Auth.
		{"mysql without address", "[auth]\nbackend = \"mysql\"\n" + cluster("main", "127.0.0.1:3306"),
			`auth.address is required when auth.backend = "mysql"`},
		{"default backend without address", cluster("main", "127.0.0.1:3306"),
			`auth.address is required when auth.backend = "mysql"`},
		{"unknown backend", "[auth]\nbackend = \"ldap\"\n" + cluster("main", "127.0.0.1:3306"),
			`auth.backend: unknown value "ldap" (want "mysql" or "static")`},
		{"auth address not host:port", "[auth]\naddress = \"localhost\"\n" + cluster("main", "127.0.0.1:3306"),
			`auth.address: "localhost" is not host:port (missing port in address)`},
		{"mysql with users", base + "[[auth.user]]\nname = \"app\"\npassword_hash = \"*14E65567ABDB5135D0CFD9A70B3032C179A49EE7\"\n",
			`auth.user is only used when auth.backend = "static" (auth.backend = "mysql")`},
		{"static without users", "[auth]\nbackend = \"static\"\n" + cluster("main", "127.0.0.1:3306"),
			`auth.backend = "static" needs at least one [[auth.user]]`},
		{"static with address", "[auth]\nbackend = \"static\"\naddress = \"127.0.0.1:3310\"\n" +
			"[[auth.user]]\nname = \"app\"\npassword_hash = \"*14E65567ABDB5135D0CFD9A70B3032C179A49EE7\"\n" + cluster("main", "127.0.0.1:3306"),
			`auth.address is only used when auth.backend = "mysql" (auth.backend = "static")`},
		{"static user without name", "[auth]\nbackend = \"static\"\n" +
			"[[auth.user]]\npassword_hash = \"*14E65567ABDB5135D0CFD9A70B3032C179A49EE7\"\n" + cluster("main", "127.0.0.1:3306"),
			`auth.user[0]: name is required`},
		{"static user duplicate", "[auth]\nbackend = \"static\"\n" +
			"[[auth.user]]\nname = \"app\"\npassword_hash = \"*14E65567ABDB5135D0CFD9A70B3032C179A49EE7\"\n" +
			"[[auth.user]]\nname = \"app\"\npassword_hash = \"*14E65567ABDB5135D0CFD9A70B3032C179A49EE7\"\n" + cluster("main", "127.0.0.1:3306"),
			`auth.user[1] ("app"): name "app" is already used by auth.user[0]`},
		{"static user bad hash", "[auth]\nbackend = \"static\"\n" +
			"[[auth.user]]\nname = \"app\"\npassword_hash = \"14E65567ABDB5135D0CFD9A70B3032C179A49EE7\"\n" + cluster("main", "127.0.0.1:3306"),
			`auth.user[0] ("app"): password_hash must be "*" and 40 hex digits, as SELECT PASSWORD('...') prints it`},
		{"static user non-hex hash", "[auth]\nbackend = \"static\"\n" +
			"[[auth.user]]\nname = \"app\"\npassword_hash = \"*14E65567ABDB5135D0CFD9A70B3032C179A49EEG\"\n" + cluster("main", "127.0.0.1:3306"),
			`auth.user[0] ("app"): password_hash must be "*" and 40 hex digits, as SELECT PASSWORD('...') prints it`},

		// Admin.
		{"empty admin user", base + "[admin]\nuser = \"\"\n", `admin.user must not be empty`},

		// Proxy.
		{"listen not host:port", base + "[proxy]\nlisten = \"6033\"\n",
			`proxy.listen: "6033" is not host:port (missing port in address)`},
		{"metrics_listen bad port", base + "[proxy]\nmetrics_listen = \"127.0.0.1:99999\"\n",
			`proxy.metrics_listen: "127.0.0.1:99999" has an invalid port (want 0..65535)`},
		{"admin_listen same as listen", base + "[proxy]\nadmin_listen = \"127.0.0.1:6033\"\n",
			`proxy.admin_listen: "127.0.0.1:6033" is already used by proxy.listen`},
		{"unknown log level", base + "[proxy]\nlog_level = \"verbose\"\n",
			`proxy.log_level: unknown value "verbose" (want "debug", "info", "warn" or "error")`},
		{"max_client_connections 0", base + "[proxy]\nmax_client_connections = 0\n",
			`proxy.max_client_connections must be > 0 (got 0)`},
		{"threads negative", base + "[proxy]\nthreads = -1\n",
			`proxy.threads must be between 0 (sluice chooses) and 1024 (got -1)`},
		{"max_allowed_packet too small", base + "[proxy]\nmax_allowed_packet = 1023\n",
			`proxy.max_allowed_packet must be between 1024 and 1073741824 bytes (got 1023)`},
		{"max_allowed_packet too large", base + "[proxy]\nmax_allowed_packet = 1073741825\n",
			`proxy.max_allowed_packet must be between 1024 and 1073741824 bytes (got 1073741825)`},
		{"handshake_timeout 0", base + "[proxy]\nhandshake_timeout = \"0s\"\n", `proxy.handshake_timeout must be > 0 (got 0s)`},
		{"connect_timeout negative", base + "[proxy]\nconnect_timeout = \"-1s\"\n", `proxy.connect_timeout must be > 0 (got -1s)`},
		{"slow_query_threshold negative", base + "[proxy]\nslow_query_threshold = \"-1ms\"\n",
			`proxy.slow_query_threshold must be >= 0 (0 switches the slow-query log off; got -1ms)`},
		{"server_version with NUL", base + "[proxy]\nserver_version = \"8.0\\u0000x\"\n",
			`proxy.server_version: "8.0\x00x" contains a control character`},

		// Health.
		{"interval 0", base + "[health]\ninterval = \"0s\"\n", `health.interval must be > 0 (got 0s)`},
		{"timeout 0", base + "[health]\ntimeout = \"0s\"\n", `health.timeout must be > 0 (got 0s)`},
		{"failures_before_down 0", base + "[health]\nfailures_before_down = 0\n", `health.failures_before_down must be >= 1 (got 0)`},
		{"failover_block negative", base + "[health]\nfailover_block = \"-1m\"\n", `health.failover_block must be >= 0 (got -1m)`},
		{"failover_write_wait negative", base + "[health]\nfailover_write_wait = \"-1s\"\n", `health.failover_write_wait must be >= 0 (got -1s)`},
		{"switchover_timeout 0", base + "[health]\nswitchover_timeout = \"0s\"\n", `health.switchover_timeout must be > 0 (got 0s)`},

		// Shards and broadcast tables.
		{"shard without schema", base + shard(`table = "orders"`, `key = "uid"`, `algorithm = "mod"`, `clusters = ["main"]`),
			`shard[0]: schema is required`},
		{"shard without key", base + shard(`schema = "pay"`, `table = "orders"`, `algorithm = "mod"`, `clusters = ["main"]`),
			`shard[0] (pay.orders): key is required`},
		{"shard unknown algorithm", base + shard(`schema = "pay"`, `table = "orders"`, `key = "uid"`, `algorithm = "modulo"`, `clusters = ["main"]`),
			`shard[0] (pay.orders): algorithm: unknown value "modulo" (want "mod", "hash", "range" or "date")`},
		{"shard without clusters", base + shard(`schema = "pay"`, `table = "orders"`, `key = "uid"`, `algorithm = "mod"`),
			`shard[0] (pay.orders): clusters must name at least one cluster`},
		{"shard unknown cluster", base + shard(`schema = "pay"`, `table = "orders"`, `key = "uid"`, `algorithm = "mod"`, `clusters = ["main", "db9"]`),
			`shard[0] (pay.orders): clusters: no [[cluster]] is named "db9"`},
		{"shard cluster twice", base + shard(`schema = "pay"`, `table = "orders"`, `key = "uid"`, `algorithm = "mod"`, `clusters = ["main", "main"]`),
			`shard[0] (pay.orders): clusters: "main" is listed twice`},
		{"shard tables_per_cluster 0", base + shard(`schema = "pay"`, `table = "orders"`, `key = "uid"`, `algorithm = "mod"`, `clusters = ["main"]`, `tables_per_cluster = 0`),
			`shard[0] (pay.orders): tables_per_cluster must be >= 1 (got 0)`},
		{"shard negative virtual_shards", base + shard(`schema = "pay"`, `table = "orders"`, `key = "uid"`, `algorithm = "hash"`, `clusters = ["main"]`, `virtual_shards = -1`),
			`shard[0] (pay.orders): virtual_shards must be >= 0 (got -1)`},
		{"range without boundaries", base + shard(`schema = "pay"`, `table = "orders"`, `key = "uid"`, `algorithm = "range"`, `clusters = ["main"]`),
			`shard[0] (pay.orders): boundaries are required when algorithm = "range"`},
		{"boundaries without range", base + shard(`schema = "pay"`, `table = "orders"`, `key = "uid"`, `algorithm = "mod"`, `clusters = ["main"]`, `boundaries = [1, 2]`),
			`shard[0] (pay.orders): boundaries are only used when algorithm = "range"`},
		{"boundaries not ascending", base + shard(`schema = "pay"`, `table = "orders"`, `key = "uid"`, `algorithm = "range"`, `clusters = ["main"]`, `boundaries = [10, 5]`),
			`shard[0] (pay.orders): boundaries must be strictly ascending (5 follows 10)`},
		{"table sharded twice", base +
			shard(`schema = "pay"`, `table = "orders"`, `key = "uid"`, `algorithm = "mod"`, `clusters = ["main"]`) +
			shard(`schema = "PAY"`, `table = "orders"`, `key = "id"`, `algorithm = "hash"`, `clusters = ["main"]`),
			`shard[1] (PAY.orders): table is already sharded by shard[0] (pay.orders)`},
		{"broadcast without table", base + "[[broadcast]]\nschema = \"pay\"\n", `broadcast[0]: table is required`},
		{"broadcast twice", base + "[[broadcast]]\nschema = \"pay\"\ntable = \"fx\"\n[[broadcast]]\nschema = \"pay\"\ntable = \"fx\"\n",
			`broadcast[1] (pay.fx): table is already listed by broadcast[0]`},
		{"broadcast and sharded", base +
			shard(`schema = "pay"`, `table = "orders"`, `key = "uid"`, `algorithm = "mod"`, `clusters = ["main"]`) +
			"[[broadcast]]\nschema = \"pay\"\ntable = \"orders\"\n",
			`broadcast[0] (pay.orders): table cannot be both broadcast and sharded (by shard[0] (pay.orders))`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.doc))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v\n--- document ---\n%s", c, tt.doc)
			}
			// The lines are TestProblemLines' concern.
			if got := withoutLines(err.Error()); got != tt.want {
				t.Errorf("error:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// withoutLines removes the "line N: " that starts each line of an error
// message.
func withoutLines(msg string) string {
	return regexp.MustCompile(`(?m)^line [0-9]+: `).ReplaceAllString(msg, "")
}

// shard returns a [[shard]] section with the given lines.
func shard(lines ...string) string {
	return "\n[[shard]]\n" + strings.Join(lines, "\n") + "\n"
}

// TestAllProblemsReported checks that validation reports every problem, one
// per line, in file order, and that the first line reads on its own.
func TestAllProblemsReported(t *testing.T) {
	doc := `
[proxy]
log_level = "loud"
[auth]
backend = "ldap"
` + cluster("a", "") + cluster("a", "127.0.0.1:3306", `balance = "random"`)
	_, err := Parse([]byte(doc))
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	// The toml library knows the line of a key in the last [[cluster]]
	// only, so the first cluster's problem comes last, without one.
	want := []string{
		`line 3: proxy.log_level: unknown value "loud" (want "debug", "info", "warn" or "error")`,
		`line 5: auth.backend: unknown value "ldap" (want "mysql" or "static")`,
		`line 13: cluster[1] ("a"): name "a" is already used by cluster[0]`,
		`line 16: cluster[1] ("a"): balance: unknown value "random" (want "round-robin", "weighted", "least-load" or "least-conn")`,
		`cluster[0] ("a"): master is required`,
	}
	if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestDecodeErrors covers problems found before validation: syntax, types,
// durations and unknown keys.
func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want string
	}{
		{"syntax", "[proxy]\nlisten = = 1\n", `line 2: invalid TOML: expected value but found '=' instead`},
		{"bad duration", "[proxy]\nhandshake_timeout = \"5 parsecs\"\n" + base,
			`line 2: proxy.handshake_timeout: invalid duration "5 parsecs" (use a number with a unit: "500ms", "5s", "10m")`},
		{"duration without unit", base + "[health]\ninterval = \"500\"\n",
			`line 12: health.interval: invalid duration "500" (use a number with a unit: "500ms", "5s", "10m")`},
		{"duration as integer", base + "[health]\n\ninterval = 500\n",
			`line 13: health.interval: want a duration string such as "5s", got an integer`},
		// The key occurs in two clusters, and the toml library knows the line
		// of the last one only, so the index names the right one instead.
		{"duration in an array of tables", auth +
			cluster("a", "127.0.0.1:3306", `max_replication_lag = "5 s"`) +
			cluster("b", "127.0.0.1:3406", `max_replication_lag = "5s"`),
			`cluster[0].max_replication_lag: invalid duration "5 s" (use a number with a unit: "500ms", "5s", "10m")`},
		{"duration in the only cluster", auth + cluster("a", "127.0.0.1:3306", `max_replication_lag = "5 s"`),
			`line 9: cluster[0].max_replication_lag: invalid duration "5 s" (use a number with a unit: "500ms", "5s", "10m")`},
		{"string for integer", base + "[proxy]\nmax_client_connections = \"10000\"\n",
			`line 12: proxy.max_client_connections: want an integer, got a string`},
		{"string for boolean", base + "[health]\nauto_failover = \"yes\"\n",
			`line 12: health.auto_failover: want true or false, got a string`},
		// The array is dropped with its bad element: the rule's
		// "clusters must name at least one cluster" would only repeat it.
		{"integer in string array", base + shard(`schema = "pay"`, `table = "orders"`, `key = "uid"`, `algorithm = "mod"`, `clusters = ["main", 2]`),
			`line 17: shard[0].clusters[1]: want a string, got an integer`},
		{"table for array of tables", auth + "[cluster]\nname = \"main\"\n",
			`line 4: cluster: want an array of tables, got a table (write [[cluster]], not [cluster])`},
		{"typed problems in file order", base + "[proxy]\nlisten = 1\nlog_level = 2\n",
			"line 12: proxy.listen: want a string, got an integer\nline 13: proxy.log_level: want a string, got an integer"},
		{"unknown key", base + "[proxy]\nlisten = \"127.0.0.1:6033\"\nlisen = \"x\"\n",
			`line 13: unknown key "proxy.lisen" (did you mean "listen"?)`},
		{"unknown key in dotted form", base + "[health]\nproxy.bogus = 1\n",
			`line 12: unknown key "health.proxy.bogus"`},
		{"unknown key without suggestion", "bogus = 1\n" + base, `line 1: unknown key "bogus"`},
		{"unknown table reported once", base + "[clusters]\nname = \"x\"\nmaster = \"y\"\n",
			`line 11: unknown key "clusters" (did you mean "cluster"?)`},
		{"unknown key in replica", base + "  wieght = 2\n",
			`line 11: unknown key "cluster.replica.wieght" (did you mean "weight"?)`},
		{"unknown key in two replicas", auth + cluster("main", "127.0.0.1:3306",
			"[[cluster.replica]]", `address = "127.0.0.1:3307"`, "wieght = 2",
			"[[cluster.replica]]", `address = "127.0.0.1:3308"`, "wieght = 3"),
			`unknown key "cluster.replica.wieght" at cluster[0].replica[0].wieght, cluster[0].replica[1].wieght (did you mean "weight"?)`},
		{"all unknown keys", "[proxy]\nlistn = \"x\"\n[admin]\npasword = \"y\"\n" + base,
			"line 2: unknown key \"proxy.listn\" (did you mean \"listen\"?)\nline 4: unknown key \"admin.pasword\" (did you mean \"password\"?)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.doc))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v\n--- document ---\n%s", c, tt.doc)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error:\n got %s\nwant %s\n--- document ---\n%s", got, tt.want, tt.doc)
			}
		})
	}
}

// TestManyUnknownKeys checks that a file that is not a sluice configuration
// gets a bounded report.
func TestManyUnknownKeys(t *testing.T) {
	var b strings.Builder
	b.WriteString(base + "[proxy]\n")
	for i := range 12 {
		fmt.Fprintf(&b, "key%d = %d\n", i, i)
	}
	_, err := Parse([]byte(b.String()))
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 11 {
		t.Fatalf("got %d lines, want 11:\n%v", len(lines), err)
	}
	if lines[0] != `line 12: unknown key "proxy.key0"` {
		t.Errorf("first line = %q", lines[0])
	}
	if lines[10] != "... and 2 more unknown keys" {
		t.Errorf("last line = %q", lines[10])
	}
}

// TestTypeErrorsHideValues checks that a value of the wrong type is not
// repeated in the error, since it may be a password.
func TestTypeErrorsHideValues(t *testing.T) {
	_, err := Parse([]byte(auth + cluster("main", "127.0.0.1:3306", "password = 918273645")))
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	if strings.Contains(err.Error(), "918273645") {
		t.Errorf("error shows the password: %v", err)
	}
	if !strings.Contains(err.Error(), "cluster[0].password: want a string, got an integer") {
		t.Errorf("error = %v", err)
	}
}

func TestSecrets(t *testing.T) {
	const env = "SLUICE_CONF_TEST_PASSWORD"
	const unset = "SLUICE_CONF_TEST_UNSET"
	t.Setenv(env, "from-env")
	t.Setenv(unset, "")
	os.Unsetenv(unset) // t.Setenv restores it after the test

	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	lf := write("lf", "from-file\n")
	crlf := write("crlf", "from-file-crlf\r\n")
	bare := write("bare", " spaced ")
	missing := filepath.Join(dir, "missing")

	tests := []struct {
		name    string
		lines   string // lines of [admin] and of the cluster
		admin   string // wanted admin password
		backend string // wanted cluster password
		wantErr string // wanted error, if any
	}{
		{name: "none", admin: "", backend: ""},
		{name: "inline", lines: `password = "inline"`, admin: "inline", backend: "inline"},
		{name: "env", lines: `password_env = "` + env + `"`, admin: "from-env", backend: "from-env"},
		{name: "file", lines: `password_file = "` + lf + `"`, admin: "from-file", backend: "from-file"},
		{name: "file with CRLF", lines: `password_file = "` + crlf + `"`, admin: "from-file-crlf", backend: "from-file-crlf"},
		{name: "file keeps spaces", lines: `password_file = "` + bare + `"`, admin: " spaced ", backend: " spaced "},
		{name: "env unset", lines: `password_env = "` + unset + `"`,
			wantErr: `line 2: admin.password_env: environment variable "` + unset + `" is not set` + "\n" +
				`line 11: cluster[0] ("main"): password_env: environment variable "` + unset + `" is not set`},
		{name: "file missing", lines: `password_file = "` + missing + `"`,
			wantErr: `line 2: admin.password_file: open ` + missing + `: no such file or directory` + "\n" +
				`line 11: cluster[0] ("main"): password_file: open ` + missing + `: no such file or directory`},
		// A conflict is reported at the first of the keys it names.
		{name: "two sources", lines: "password = \"x\"\npassword_file = \"" + lf + "\"",
			wantErr: `line 2: admin.password and admin.password_file are both set; set at most one of them` + "\n" +
				`line 12: cluster[0] ("main"): password and password_file are both set; set at most one of them`},
		{name: "three sources", lines: "password = \"x\"\npassword_env = \"" + env + "\"\npassword_file = \"" + lf + "\"",
			wantErr: `line 2: admin.password, admin.password_env and admin.password_file are all set; set at most one of them` + "\n" +
				`line 13: cluster[0] ("main"): password, password_env and password_file are all set; set at most one of them`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "[admin]\n" + tt.lines + "\n" + auth + cluster("main", "127.0.0.1:3306", tt.lines)
			c, err := Parse([]byte(doc))
			if tt.wantErr != "" {
				if err == nil {
					t.Fatal("Parse succeeded")
				}
				if err.Error() != tt.wantErr {
					t.Errorf("error:\n got %s\nwant %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Admin.Password != tt.admin {
				t.Errorf("admin password = %q, want %q", c.Admin.Password, tt.admin)
			}
			if c.Clusters[0].Password != tt.backend {
				t.Errorf("cluster password = %q, want %q", c.Clusters[0].Password, tt.backend)
			}
		})
	}

	t.Run("missing file wraps fs.ErrNotExist", func(t *testing.T) {
		_, err := Parse([]byte(auth + cluster("main", "127.0.0.1:3306", `password_file = "`+missing+`"`)))
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("err = %v, want one wrapping fs.ErrNotExist", err)
		}
	})
}

// TestSecretFileRelativeToConfig checks that Load reads a relative
// password_file from the configuration file's directory, not the working
// directory.
func TestSecretFileRelativeToConfig(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "secrets"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secrets", "pw"), []byte("relative\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "sluice.toml")
	doc := auth + cluster("main", "127.0.0.1:3306", `password_file = "secrets/pw"`)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Clusters[0].Password != "relative" {
		t.Errorf("password = %q, want %q", c.Clusters[0].Password, "relative")
	}
	if c.Path != path {
		t.Errorf("Path = %q, want %q", c.Path, path)
	}
	// Parse has no file, so the same path is relative to the working
	// directory, where it does not exist.
	if _, err := Parse([]byte(doc)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Parse: err = %v, want one wrapping fs.ErrNotExist", err)
	}
}

func TestStaticUsers(t *testing.T) {
	c := mustParse(t, `
[auth]
backend = "static"
[[auth.user]]
name = "app"
password_hash = "*14e65567abdb5135d0cfd9a70b3032c179a49ee7"
[[auth.user]]
name = "report"
password_hash = "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19"
`+cluster("main", "127.0.0.1:3306"))
	want := []StaticUser{
		{Name: "app", PasswordHash: "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7"},
		{Name: "report", PasswordHash: "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19"},
	}
	if len(c.Auth.Users) != len(want) {
		t.Fatalf("users = %+v", c.Auth.Users)
	}
	for i := range want {
		if !reflect.DeepEqual(c.Auth.Users[i], want[i]) {
			t.Errorf("user %d = %+v, want %+v", i, c.Auth.Users[i], want[i])
		}
	}
}

func TestDescribe(t *testing.T) {
	const (
		adminSecret   = "admin-s3cret-value"
		envSecret     = "env-s3cret-value"
		fileSecret    = "file-s3cret-value"
		agentPassword = "agent-s3cret"
	)
	t.Setenv("SLUICE_CONF_TEST_BACKEND", envSecret)
	secretFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(secretFile, []byte(fileSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := mustParse(t, `
[admin]
password = "`+adminSecret+`"
`+auth+cluster("db1", "10.0.0.1:3306",
		`password_env = "SLUICE_CONF_TEST_BACKEND"`,
		`balance = "least-load"`,
		`reads_fall_back_to_master = false`,
		"[[cluster.replica]]", `address = "10.0.0.2:3306"`, "weight = 3",
		`agent = "http://sluice:`+agentPassword+`@10.0.0.2:9107"`,
		"[[cluster.replica]]", `address = "10.0.0.3:3306"`,
	)+cluster("db2", "10.0.1.1:3306", `password_file = "`+secretFile+`"`)+
		shard(`schema = "pay"`, `table = "orders"`, `key = "uid"`, `algorithm = "mod"`, `clusters = ["db1", "db2"]`, `tables_per_cluster = 10`))

	got := c.Describe()
	for _, want := range []string{
		`cluster "db1": balance least-load, max_replication_lag 5s, 2 replica(s)`,
		"  user \"sluice\", password from env SLUICE_CONF_TEST_BACKEND\n",
		"  master   10.0.0.1:3306\n",
		"  replica  10.0.0.2:3306  weight 3  agent http://sluice:xxxxx@10.0.0.2:9107\n",
		"  replica  10.0.0.3:3306  weight 1\n",
		"  reads_fall_back_to_master false: reads fail when no replica can serve them\n",
		`cluster "db2": balance round-robin`,
		"  user \"sluice\", password from file " + secretFile + "\n",
		"  master   10.0.1.1:3306\n",
		`admin: user "admin", password set in the file`,
		"auth: mysql, auth server 127.0.0.1:3310\n",
		"shard pay.orders: key uid, algorithm mod, 2 cluster(s) x 10 table(s)\n",
		"failover_block 10m, failover_write_wait 10s, switchover_timeout 10s\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Describe lacks %q:\n%s", want, got)
		}
	}
	for _, secret := range []string{adminSecret, envSecret, fileSecret, agentPassword} {
		if strings.Contains(got, secret) {
			t.Errorf("Describe shows secret %q:\n%s", secret, got)
		}
	}
	// The resolved passwords are there to be hidden.
	if c.Admin.Password != adminSecret || c.Clusters[0].Password != envSecret || c.Clusters[1].Password != fileSecret {
		t.Fatalf("passwords not resolved: admin %q, db1 %q, db2 %q", c.Admin.Password, c.Clusters[0].Password, c.Clusters[1].Password)
	}
}

func TestDescribeStaticHidesHashes(t *testing.T) {
	const hash = "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7"
	c := mustParse(t, "[auth]\nbackend = \"static\"\n[[auth.user]]\nname = \"app\"\npassword_hash = \""+hash+"\"\n"+
		cluster("main", "127.0.0.1:3306"))
	got := c.Describe()
	if !strings.Contains(got, `auth: static, 1 user(s): "app"`) {
		t.Errorf("Describe lacks the static users:\n%s", got)
	}
	if strings.Contains(got, hash[1:]) {
		t.Errorf("Describe shows a password hash:\n%s", got)
	}
}

func TestDescribeExample(t *testing.T) {
	c := loadExample(t)
	got := c.Describe()
	if !strings.HasPrefix(got, "config "+exampleFile+"\n") {
		t.Errorf("Describe does not start with the file:\n%s", got)
	}
	for _, secret := range []string{exampleAdminPassword, exampleBackendPassword} {
		if strings.Contains(got, secret) {
			t.Errorf("Describe shows secret %q", secret)
		}
	}
}

func TestCluster(t *testing.T) {
	c := mustParse(t, base+cluster("db2", "127.0.0.1:3406"))
	if got := c.Cluster("db2"); got == nil || got.Master != "127.0.0.1:3406" {
		t.Fatalf("Cluster(db2) = %+v", got)
	}
	c.Cluster("db2").Balance = "least-conn"
	if c.Clusters[1].Balance != "least-conn" {
		t.Errorf("Cluster does not point into Clusters")
	}
	if got := c.Cluster("nope"); got != nil {
		t.Errorf("Cluster(nope) = %+v, want nil", got)
	}
}

func TestDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		text    string
		wantErr bool
	}{
		{in: "500ms", want: 500 * time.Millisecond, text: "500ms"},
		{in: "10m", want: 10 * time.Minute, text: "10m"},
		{in: "1h30m", want: 90 * time.Minute, text: "1h30m"},
		{in: "2h", want: 2 * time.Hour, text: "2h"},
		{in: "1m0.5s", want: time.Minute + 500*time.Millisecond, text: "1m0.5s"},
		{in: "0s", want: 0, text: "0s"},
		{in: "5", wantErr: true},
		{in: "5 parsecs", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		var d Duration
		err := d.UnmarshalText([]byte(tt.in))
		if tt.wantErr {
			if err == nil || !strings.HasPrefix(err.Error(), `invalid duration "`+tt.in+`"`) {
				t.Errorf("UnmarshalText(%q) error = %v", tt.in, err)
			}
			continue
		}
		if err != nil || d.Duration != tt.want {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", tt.in, d.Duration, err, tt.want)
			continue
		}
		text, err := d.MarshalText()
		if err != nil || string(text) != tt.text {
			t.Errorf("MarshalText(%v) = %q, %v; want %q", tt.want, text, err, tt.text)
		}
		var back Duration
		if err := back.UnmarshalText(text); err != nil || back != d {
			t.Errorf("round trip of %q gave %v, %v", tt.in, back, err)
		}
	}
}

func TestValidateHandBuilt(t *testing.T) {
	c := defaults()
	c.Auth.Address = "127.0.0.1:3310"
	c.Clusters = []Cluster{{Name: "main", User: "sluice", Master: "127.0.0.1:3306", Balance: DefaultBalance,
		MaxReplicationLag: Duration{time.Second}, Replicas: []Replica{{Address: "127.0.0.1:3307", Weight: 1}}}}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	c.Clusters[0].Replicas[0].Weight = 0
	err := c.Validate()
	if err == nil || err.Error() != `cluster[0] ("main"): replica[0].weight must be >= 1 (got 0)` {
		t.Errorf("Validate = %v", err)
	}
}

// FuzzParse checks that no input makes Parse panic, and that whatever it
// accepts validates and describes.
func FuzzParse(f *testing.F) {
	for _, name := range []string{exampleFile, "testdata/bad-typo.toml", "testdata/bad-duration.toml", "testdata/bad-missing-master.toml", "testdata/many-problems.toml"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(base + "[[cluster.replica]]\nwieght = 1\n[x]\ny.z = 1\n"))
	f.Add([]byte("cluster = [{name = \"a\", user = \"u\", master = \"h:1\", replica = [{address = \"h:2\"}]}]\n[auth]\naddress = \"a:1\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a config that Validate rejects: %v", err)
		}
		if c.Describe() == "" {
			t.Fatal("empty Describe")
		}
	})
}

func TestListenersCanBeSwitchedOff(t *testing.T) {
	c, err := Parse([]byte(`
[proxy]
admin_listen = ""
metrics_listen = ""
[auth]
address = "127.0.0.1:3310"
[[cluster]]
name = "main"
user = "sluice"
master = "127.0.0.1:3306"
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Proxy.AdminListen != "" || c.Proxy.MetricsListen != "" {
		t.Fatalf("admin %q metrics %q, want both off", c.Proxy.AdminListen, c.Proxy.MetricsListen)
	}
	if _, err := Parse([]byte("[proxy]\nlisten = \"\"\n[auth]\naddress = \"127.0.0.1:1\"\n[[cluster]]\nname = \"m\"\nuser = \"u\"\nmaster = \"127.0.0.1:2\"\n")); err == nil || !strings.Contains(err.Error(), "proxy.listen") {
		t.Fatalf("empty proxy.listen: err = %v", err)
	}
}
