package conf

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDiff(t *testing.T) {
	cases := []struct {
		name string
		edit func(c *Config)
		want []string
	}{
		{"unchanged", func(c *Config) {}, nil},
		{"replica added", func(c *Config) {
			c.Clusters[1].Replicas = append(c.Clusters[1].Replicas, Replica{Address: "127.0.0.1:3408", Weight: 1})
		}, []string{"cluster db2: replica 127.0.0.1:3408: added"}},
		{"replica removed", func(c *Config) {
			c.Clusters[0].Replicas = c.Clusters[0].Replicas[1:]
		}, []string{"cluster db1: replica 127.0.0.1:3307: removed"}},
		{"replicas reordered", func(c *Config) {
			r := c.Clusters[0].Replicas
			r[0], r[1] = r[1], r[0]
		}, nil},
		{"weight and agent", func(c *Config) {
			c.Clusters[0].Replicas[1].Weight = 5
			c.Clusters[0].Replicas[0].Agent = "http://u:secret@127.0.0.1:9108"
		}, []string{
			"cluster db1: replica 127.0.0.1:3307 agent: changed",
			"cluster db1: replica 127.0.0.1:3308 weight: 2 -> 5",
		}},
		{"cluster settings", func(c *Config) {
			c.Clusters[0].Balance = "least-conn"
			c.Clusters[0].MaxReplicationLag = Duration{10 * time.Second}
			c.Clusters[0].ReadsFallBackToMaster = false
			c.Clusters[0].PoolSize = 16
			c.Clusters[0].PoolWaitTimeout = Duration{time.Second}
			c.Clusters[0].Consistency = "causal"
		}, []string{
			`cluster db1: balance: "least-load" -> "least-conn"`,
			"cluster db1: max_replication_lag: 5s -> 10s",
			"cluster db1: reads_fall_back_to_master: true -> false",
			"cluster db1: pool_size: 128 -> 16",
			"cluster db1: pool_wait_timeout: 5s -> 1s",
			`cluster db1: consistency: "eventual" -> "causal"`,
		}},
		{"cluster identity needs restart", func(c *Config) {
			c.Clusters[1].Master = "127.0.0.1:3506"
			c.Clusters[1].User = "other"
			c.Clusters[1].Password = "pw-new"
			c.Clusters[1].TLS = "required"
		}, []string{
			`needs restart: cluster db2: master: "127.0.0.1:3406" -> "127.0.0.1:3506"`,
			`needs restart: cluster db2: user: "sluice" -> "other"`,
			"needs restart: cluster db2: password: changed",
			`needs restart: cluster db2: tls: "off" -> "required"`,
		}},
		{"cluster added and removed", func(c *Config) {
			c.Clusters[1].Name = "db3"
			c.Shards = nil
		}, []string{
			"needs restart: cluster db2: removed",
			"needs restart: cluster db3: added",
			"shard pay.orders: removed",
		}},
		{"listeners and process", func(c *Config) {
			c.Proxy.Listen = "127.0.0.1:7033"
			c.Proxy.AdminListen = ""
			c.Proxy.MetricsListen = "127.0.0.1:7070"
			c.Proxy.Threads = 2
			c.Proxy.StateDir = "/srv/sluice"
			c.Proxy.TLSCert, c.Proxy.TLSKey, c.Proxy.RequireTLS = "c.pem", "k.pem", true
			c.Proxy.LocalInfile = true
		}, []string{
			`needs restart: proxy.listen: "127.0.0.1:6033" -> "127.0.0.1:7033"`,
			`needs restart: proxy.admin_listen: "127.0.0.1:6032" -> ""`,
			`needs restart: proxy.metrics_listen: "127.0.0.1:6070" -> "127.0.0.1:7070"`,
			"needs restart: proxy.threads: 0 -> 2",
			"needs restart: proxy.local_infile: false -> true",
			`needs restart: proxy.tls_cert: "" -> "c.pem"`,
			`needs restart: proxy.tls_key: "" -> "k.pem"`,
			"needs restart: proxy.require_tls: false -> true",
			`needs restart: proxy.state_dir: "/var/lib/sluice" -> "/srv/sluice"`,
		}},
		{"proxy limits", func(c *Config) {
			c.Proxy.LogLevel = "debug"
			c.Proxy.MaxClientConnections = 10
			c.Proxy.MaxAllowedPacket = 4096
			c.Proxy.HandshakeTimeout = Duration{time.Second}
			c.Proxy.ConnectTimeout = Duration{3 * time.Second}
			c.Proxy.ServerVersion = "8.0.36"
			c.Proxy.MaxPreparedStatements = 7
		}, []string{
			`proxy.log_level: "info" -> "debug"`,
			"proxy.max_client_connections: 10000 -> 10",
			"proxy.max_allowed_packet: 67108864 -> 4096",
			"proxy.handshake_timeout: 10s -> 1s",
			"proxy.connect_timeout: 2s -> 3s",
			`proxy.server_version: "" -> "8.0.36"`,
			"proxy.max_prepared_statements: 1024 -> 7",
		}},
		{"auth", func(c *Config) {
			c.Auth.Backend, c.Auth.Address = "static", ""
			c.Auth.Users = []StaticUser{{Name: "app", PasswordHash: "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7"}}
		}, []string{
			`auth.backend: "mysql" -> "static"`,
			`auth.address: "127.0.0.1:3310" -> ""`,
			`auth.user "app": added`,
		}},
		{"admin needs restart", func(c *Config) {
			c.Admin.User = "root"
			c.Admin.Password = "pw-admin"
		}, []string{
			`needs restart: admin.user: "admin" -> "root"`,
			"needs restart: admin.password: changed",
		}},
		{"health", func(c *Config) {
			c.Health.Interval = Duration{time.Second}
			c.Health.Timeout = Duration{2 * time.Second}
			c.Health.FailuresBeforeDown = 5
			c.Health.AutoFailover = false
			c.Health.FailoverBlock = Duration{time.Minute}
			c.Health.FailoverWriteWait = Duration{0}
			c.Health.EnforceReadOnly = true
		}, []string{
			"health.interval: 500ms -> 1s",
			"health.timeout: 1s -> 2s",
			"health.failures_before_down: 3 -> 5",
			"health.auto_failover: true -> false",
			"health.failover_block: 10m -> 1m",
			"health.failover_write_wait: 10s -> 0s",
			"health.enforce_read_only: false -> true",
		}},
		{"sharding", func(c *Config) {
			c.Sharding.DefaultCluster = "db2"
			c.Sharding.MaxMergeRows = 10
			c.Sharding.NodeID = 3
			c.Shards[0].TablesPerCluster = 5
			c.Shards = append(c.Shards, Shard{Schema: "pay", Table: "Refunds", Key: "uid", Algorithm: "hash", Clusters: []string{"db1"}, TablesPerCluster: 1})
			c.Broadcast = []Broadcast{{Schema: "pay", Table: "fx"}}
		}, []string{
			`sharding.default_cluster: "db1" -> "db2"`,
			"sharding.max_merge_rows: 100000 -> 10",
			"sharding.node_id: 0 -> 3",
			"shard pay.orders: rule changed",
			"shard pay.refunds: added",
			"broadcast pay.currencies: removed",
			"broadcast pay.fx: added",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old, file := loadExample(t), loadExample(t)
			tc.edit(file)
			got := Diff(old, file).Strings()
			if !slices.Equal(got, tc.want) {
				t.Errorf("Diff:\n got %q\nwant %q", got, tc.want)
			}
			for _, s := range got {
				for _, secret := range []string{"pw-new", "pw-admin", "u:secret"} {
					if strings.Contains(s, secret) {
						t.Errorf("change %q shows a secret", s)
					}
				}
			}
		})
	}
}

func TestLiveKeepsRestartSettings(t *testing.T) {
	running, file := loadExample(t), loadExample(t)
	file.Proxy.Listen = "127.0.0.1:7033"
	file.Proxy.LogLevel = "debug"
	file.Admin.User = "root"
	file.Clusters[0].Master = "127.0.0.1:4000"
	file.Clusters[0].Balance = "weighted"
	file.Clusters[0].Replicas = append(file.Clusters[0].Replicas, Replica{Address: "127.0.0.1:3309", Weight: 1})
	// db2 leaves the file, db3 arrives; both wait for a restart.
	file.Clusters[1].Name = "db3"
	file.Clusters[1], file.Clusters[0] = file.Clusters[0], file.Clusters[1]
	file.Shards = nil

	live := Live(running, file)
	checks := []struct {
		what      string
		got, want any
	}{
		{"proxy.listen", live.Proxy.Listen, "127.0.0.1:6033"},
		{"proxy.log_level", live.Proxy.LogLevel, "debug"},
		{"admin.user", live.Admin.User, "admin"},
		{"clusters", len(live.Clusters), 2},
		{"cluster 0 name", live.Clusters[0].Name, "db1"},
		{"cluster 1 name", live.Clusters[1].Name, "db2"},
		{"db1 master", live.Clusters[0].Master, "127.0.0.1:3306"},
		{"db1 balance", live.Clusters[0].Balance, "weighted"},
		{"db1 replicas", len(live.Clusters[0].Replicas), 3},
		{"db2 master", live.Clusters[1].Master, "127.0.0.1:3406"},
		{"default cluster", live.DefaultCluster(), "db3"},
		{"shards", len(live.Shards), 0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	// sharding.default_cluster names db3, which only a restart adds.
	if err := live.Validate(); err == nil || !strings.Contains(err.Error(), `sharding.default_cluster: no [[cluster]] is named "db3"`) {
		t.Errorf("Validate(live) = %v, want the default cluster named", err)
	}
	live.Clusters[0].Replicas[0].Weight = 99
	if running.Clusters[0].Replicas[0].Weight == 99 {
		t.Error("Live shares replicas with running")
	}
	if n := Diff(running, file).NeedRestart(); n != 5 {
		t.Errorf("NeedRestart = %d, want 5 (listen, admin.user, db1 master, db2 removed, db3 added): %q", n, Diff(running, file).Strings())
	}
}
