package sandbox

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// shardedFile is the part of a sluice configuration ShardedSluiceConfig
// writes that the test inspects.
type shardedFile struct {
	Auth struct {
		Address string `toml:"address"`
	} `toml:"auth"`
	Cluster []struct {
		Name     string `toml:"name"`
		User     string `toml:"user"`
		Master   string `toml:"master"`
		Balance  string `toml:"balance"`
		Replicas []struct {
			Address string `toml:"address"`
		} `toml:"replica"`
	} `toml:"cluster"`
	Shard []struct {
		Table string `toml:"table"`
	} `toml:"shard"`
}

// TestShardedSluiceConfig: every cluster appears once, in the given order,
// with its own master and replicas; the cluster keys go to each, and the
// extra TOML is kept.
func TestShardedSluiceConfig(t *testing.T) {
	topo := func(port int, replicas ...int) *Topology {
		tp := &Topology{Master: &Server{Port: port}, Opts: Options{ServiceUser: "svc", ServicePassword: "pw"}}
		for _, r := range replicas {
			tp.Replicas = append(tp.Replicas, &Server{Port: r})
		}
		return tp
	}
	clusters := []NamedTopology{
		{Name: "db2", Topology: topo(4100, 4101)},
		{Name: "db1", Topology: topo(4200)},
		{Name: "db3", Topology: topo(4300, 4301, 4302)},
	}
	auth := &Server{Port: 4000}
	text := ShardedSluiceConfig(SluiceOptions{Listen: "127.0.0.1:0", ClusterKeys: []string{`balance = "least-conn"`}},
		auth, clusters, "[[shard]]\nschema = \"s\"\ntable = \"orders\"")
	var f shardedFile
	if _, err := toml.Decode(text, &f); err != nil {
		t.Fatalf("not TOML: %v\n%s", err, text)
	}
	if f.Auth.Address != auth.Addr() {
		t.Errorf("auth address %q, want %q", f.Auth.Address, auth.Addr())
	}
	if len(f.Cluster) != len(clusters) {
		t.Fatalf("%d clusters, want %d:\n%s", len(f.Cluster), len(clusters), text)
	}
	for i, c := range clusters {
		got := f.Cluster[i]
		if got.Name != c.Name || got.Master != c.Master.Addr() || got.User != "svc" || got.Balance != "least-conn" {
			t.Errorf("cluster[%d] = %+v, want %s on %s", i, got, c.Name, c.Master.Addr())
		}
		if len(got.Replicas) != len(c.Replicas) {
			t.Errorf("cluster %s: %d replicas, want %d", c.Name, len(got.Replicas), len(c.Replicas))
			continue
		}
		for j, r := range c.Replicas {
			if got.Replicas[j].Address != r.Addr() {
				t.Errorf("cluster %s replica %d: %s, want %s", c.Name, j, got.Replicas[j].Address, r.Addr())
			}
		}
	}
	if len(f.Shard) != 1 || f.Shard[0].Table != "orders" {
		t.Errorf("extra TOML lost: %+v", f.Shard)
	}
	// The one-cluster form is the same writer with the cluster named "main".
	one := clusters[0].Topology
	one.Auth = auth
	if got, want := one.SluiceConfig("127.0.0.1:0"),
		ShardedSluiceConfig(SluiceOptions{Listen: "127.0.0.1:0"}, auth, []NamedTopology{{Name: "main", Topology: one}}, ""); got != want {
		t.Errorf("SluiceConfig differs from its ShardedSluiceConfig form:\n%s\n---\n%s", got, want)
	}
}

// TestStartAllNoAuth starts two masters without auth servers side by side:
// neither has an auth server, each takes the service account, and they are
// separate servers (a table made on one is absent on the other).
func TestStartAllNoAuth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topos, err := StartAll(ctx, []Options{{Replicas: -1, NoAuth: true, Logf: t.Logf}, {Replicas: -1, NoAuth: true, Logf: t.Logf}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, tp := range topos {
			tp.Stop()
		}
	})
	for i, tp := range topos {
		if tp.Auth != nil {
			t.Errorf("topology %d has an auth server under NoAuth", i)
		}
		if n := len(tp.Servers()); n != 1 {
			t.Errorf("topology %d: %d servers, want 1 (the master)", i, n)
		}
		db, err := sql.Open("mysql", tp.Master.DSN(tp.Opts.ServiceUser, tp.Opts.ServicePassword, TestDatabase))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.PingContext(ctx); err != nil {
			t.Errorf("topology %d: service account: %v", i, err)
		}
	}
	if topos[0].Master.Addr() == topos[1].Master.Addr() {
		t.Fatalf("both masters on %s", topos[0].Master.Addr())
	}
	if err := topos[0].Master.Exec(ctx, "CREATE TABLE "+TestDatabase+".only_here (id INT)"); err != nil {
		t.Fatal(err)
	}
	var n int
	db1, err := topos[1].Master.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	if err := db1.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = 'only_here'", TestDatabase).Scan(&n); err != nil || n != 0 {
		t.Errorf("second master sees %d tables named only_here (err %v), want 0", n, err)
	}
}
