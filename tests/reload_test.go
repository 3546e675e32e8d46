package tests

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// reloadConfig is the shared topology's sluice configuration with only the
// replicas at the given indexes, and extra TOML appended.
func reloadConfig(replicas []int, proxyKeys []string, extra string) string {
	topo := env.topo
	o := sandbox.SluiceOptions{Listen: "127.0.0.1:0",
		ProxyKeys: append([]string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = "127.0.0.1:0"`}, proxyKeys...)}
	text := sandbox.ShardedSluiceConfig(o, topo.Auth, []sandbox.NamedTopology{{Name: "main", Topology: topo}}, extra)
	for i, r := range topo.Replicas {
		if !slices.Contains(replicas, i) {
			block := "  [[cluster.replica]]\n  address = \"" + r.Addr() + "\"\n"
			if !strings.Contains(text, block) {
				panic("reloadConfig: no block for replica " + r.Addr())
			}
			text = strings.Replace(text, block, "", 1)
		}
	}
	return text + "\n[admin]\nuser = \"admin\"\npassword = \"" + adminPassword + "\"\n"
}

// reloadSluice starts an in-process sluice from a configuration file holding
// text (so Reload has a file to read again) and returns it with the path.
func reloadSluice(t *testing.T, text string) (*server.Server, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sluice.toml")
	writeConfig(t, path, text)
	cfg, err := conf.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	log := zap.NewNop()
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		log, _ = zap.NewDevelopment()
	}
	srv, err := server.New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv, path
}

func writeConfig(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// reloadDB opens the app user's pool through srv.
func reloadDB(t *testing.T, srv *server.Server, db string) *sql.DB {
	t.Helper()
	o := env.topo.Opts
	d, err := sql.Open("mysql", dsn(srv.Addr().String(), o.AppUser, o.AppPassword, db, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// pollUntil polls cond until it holds or 20s pass.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mustReload runs RELOAD CONFIG through the mariadb client on srv's admin
// port and returns the changes it lists.
func mustReload(t *testing.T, srv *server.Server) []string {
	t.Helper()
	out, errOut, err := adminCLI(t, srv, adminPassword, "RELOAD CONFIG")
	if err != nil {
		t.Fatalf("RELOAD CONFIG: %v: %s", err, errOut)
	}
	var changes []string
	for i, l := range strings.Split(out, "\n") {
		if i > 0 && l != "" { // the first line is the column name
			changes = append(changes, l)
		}
	}
	return changes
}

// TestReloadAddsReplica: a replica added to the file serves reads after a
// reload, once probed; the snapshot's epoch goes up.
func TestReloadAddsReplica(t *testing.T) {
	topo := env.topo
	srv, path := reloadSluice(t, reloadConfig([]int{0}, nil, ""))
	d := reloadDB(t, srv, "")
	ctx := ctxT(t)
	r0, r1 := topo.Replicas[0].ServerID, topo.Replicas[1].ServerID
	for range 10 {
		if id := serverID(t, ctx, d, ""); id != r0 {
			t.Fatalf("read served by server %d before the reload, want replica %d only", id, r0)
		}
	}
	epoch := srv.Topology().Current().Epoch

	writeConfig(t, path, reloadConfig([]int{0, 1}, nil, ""))
	changes := mustReload(t, srv)
	want := "cluster main: replica " + topo.Replicas[1].Addr() + ": added"
	if !slices.Equal(changes, []string{want}) {
		t.Fatalf("changes %q, want [%q]", changes, want)
	}
	snap := srv.Topology().Current()
	if snap.Epoch != epoch+1 || len(snap.Cluster("main").Replicas) != 2 {
		t.Fatalf("epoch %d with %d replicas, want %d with 2", snap.Epoch, len(snap.Cluster("main").Replicas), epoch+1)
	}
	pollUntil(t, "a read served by the added replica", func() bool {
		return serverID(t, ctx, d, "") == r1
	})
	if _, ok := srv.PoolStats()[topo.Replicas[1].Addr()]; !ok {
		t.Error("the added replica has no pool")
	}
}

// TestReloadRemovesReplica: a replica removed from the file gets no new
// reads, and a session that was reading from it goes on on the other one.
func TestReloadRemovesReplica(t *testing.T) {
	topo := env.topo
	srv, path := reloadSluice(t, reloadConfig([]int{0, 1}, nil, ""))
	d := reloadDB(t, srv, "")
	ctx := ctxT(t)
	r0, r1 := topo.Replicas[0].ServerID, topo.Replicas[1].ServerID
	// Wait for both replicas' first probes, then put one session on r0.
	c := conn(t, d)
	pollUntil(t, "the session reading from replica 0", func() bool { return serverID(t, ctx, c, "") == r0 })

	writeConfig(t, path, reloadConfig([]int{1}, nil, ""))
	changes := mustReload(t, srv)
	want := "cluster main: replica " + topo.Replicas[0].Addr() + ": removed"
	if !slices.Equal(changes, []string{want}) {
		t.Fatalf("changes %q, want [%q]", changes, want)
	}
	// The session's next read works, on the replica that stays.
	if id := serverID(t, ctx, c, ""); id != r1 {
		t.Fatalf("the session's read after the reload went to server %d, want replica %d", id, r1)
	}
	for range 20 {
		if id := serverID(t, ctx, d, ""); id != r1 {
			t.Fatalf("a read after the reload went to server %d, want only replica %d", id, r1)
		}
	}
	if _, ok := srv.PoolStats()[topo.Replicas[0].Addr()]; ok {
		t.Error("the removed replica still has a pool")
	}
	for _, b := range srv.Topology().Current().Cluster("main").Watched() {
		if b.Address == topo.Replicas[0].Addr() {
			t.Errorf("the removed replica is still in the topology as %s", b.Role)
		}
	}
}

// TestReloadBadFileChangesNothing: a file with a typo'd key fails the
// reload with conf's error (key and line); the running configuration, the
// topology and reads are as before.
func TestReloadBadFileChangesNothing(t *testing.T) {
	srv, path := reloadSluice(t, reloadConfig([]int{0}, nil, ""))
	d := reloadDB(t, srv, "")
	ctx := ctxT(t)
	cfg, snap := srv.Config(), srv.Topology().Current()

	bad := strings.Replace(reloadConfig([]int{0, 1}, nil, ""), "[proxy]\n", "[proxy]\nmax_client_conections = 5\n", 1)
	writeConfig(t, path, bad)
	changes, err := srv.Reload()
	var se *protocol.SQLError
	if !errors.As(err, &se) {
		t.Fatalf("Reload = %q, %v; want a *protocol.SQLError", changes, err)
	}
	for _, want := range []string{`unknown key "proxy.max_client_conections"`, "line 2", "unchanged"} {
		if !strings.Contains(se.Message, want) {
			t.Errorf("error %q does not say %q", se.Message, want)
		}
	}
	// The same through the admin port: the client gets the error.
	if _, errOut, err := adminCLI(t, srv, adminPassword, "RELOAD CONFIG"); err == nil ||
		!strings.Contains(errOut, `unknown key "proxy.max_client_conections"`) {
		t.Errorf("RELOAD CONFIG of a broken file: %v, %q; want the error naming the key", err, errOut)
	}
	if srv.Config() != cfg || srv.Topology().Current() != snap {
		t.Error("a failed reload changed the running configuration or the topology")
	}
	if id := serverID(t, ctx, d, ""); id != env.topo.Replicas[0].ServerID {
		t.Errorf("read after the failed reload served by %d, want replica %d", id, env.topo.Replicas[0].ServerID)
	}
}

// TestReloadListenNeedsRestart: a new listen address is reported as needing
// a restart; sluice keeps serving on the old one.
func TestReloadListenNeedsRestart(t *testing.T) {
	srv, path := reloadSluice(t, reloadConfig([]int{0}, nil, ""))
	addr := srv.Addr().String()
	text := strings.Replace(reloadConfig([]int{0}, []string{`log_level = "debug"`}, ""),
		`listen = "127.0.0.1:0"`, `listen = "127.0.0.1:16033"`, 1)
	writeConfig(t, path, text)
	changes := mustReload(t, srv)
	want := []string{
		`needs restart: proxy.listen: "127.0.0.1:0" -> "127.0.0.1:16033"`,
		`proxy.log_level: "info" -> "debug"`,
	}
	if !slices.Equal(changes, want) {
		t.Fatalf("changes %q, want %q", changes, want)
	}
	if got := srv.Config(); got.Proxy.Listen != "127.0.0.1:0" || got.Proxy.LogLevel != "debug" {
		t.Errorf("running listen %q log_level %q, want the old listen and the new level", got.Proxy.Listen, got.Proxy.LogLevel)
	}
	d := reloadDB(t, srv, "")
	if srv.Addr().String() != addr {
		t.Fatalf("listener moved to %s", srv.Addr())
	}
	serverID(t, ctxT(t), d, "")
	// The change stays pending: the next reload reports it again.
	if again := mustReload(t, srv); !slices.Equal(again, want[:1]) {
		t.Errorf("second reload changes %q, want %q", again, want[:1])
	}
}

// TestReloadShardRule: a shard rule added by a reload routes the statements
// that start afterwards, in a session opened before it.
func TestReloadShardRule(t *testing.T) {
	root := mustRoot(t, env.topo.Master)
	mustExec(t, root, "CREATE DATABASE IF NOT EXISTS reloaddb")
	t.Cleanup(func() { mustExec(t, root, "DROP DATABASE IF EXISTS reloaddb") })
	for _, tbl := range []string{"items", "items_0", "items_1"} {
		mustExec(t, root, "DROP TABLE IF EXISTS reloaddb."+tbl)
		mustExec(t, root, "CREATE TABLE reloaddb."+tbl+" (id INT PRIMARY KEY, v VARCHAR(10))")
	}
	srv, path := reloadSluice(t, reloadConfig([]int{0, 1}, nil, ""))
	c := conn(t, reloadDB(t, srv, "reloaddb"))
	ctx := ctxT(t)
	mustExecC(t, c, "INSERT INTO items (id, v) VALUES (3, 'before')")

	const rule = "[[shard]]\nschema = \"reloaddb\"\ntable = \"items\"\nkey = \"id\"\nalgorithm = \"mod\"\nclusters = [\"main\"]\ntables_per_cluster = 2\n"
	writeConfig(t, path, reloadConfig([]int{0, 1}, nil, rule))
	changes := mustReload(t, srv)
	if !slices.Equal(changes, []string{"shard reloaddb.items: added"}) {
		t.Fatalf("changes %q", changes)
	}
	mustExecC(t, c, "INSERT INTO items (id, v) VALUES (5, 'after')")
	count := func(table string, id int) int {
		var n int
		if err := root.QueryRowContext(ctx, "SELECT COUNT(*) FROM reloaddb."+table+" WHERE id = ?", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if count("items", 3) != 1 || count("items_1", 3) != 0 {
		t.Error("the insert before the reload did not go to the logical table")
	}
	if count("items_1", 5) != 1 || count("items", 5) != 0 {
		t.Error("the insert after the reload was not routed by the new rule to items_1")
	}
}

// TestReloadWhileServing: reloads that add and remove a replica and resize
// the pools, while clients read and write, fail no statement (run with
// -race).
func TestReloadWhileServing(t *testing.T) {
	root := mustRoot(t, env.topo.Master)
	mustExec(t, root, "CREATE DATABASE IF NOT EXISTS reloaddb2")
	t.Cleanup(func() { mustExec(t, root, "DROP DATABASE IF EXISTS reloaddb2") })
	mustExec(t, root, "CREATE TABLE IF NOT EXISTS reloaddb2.t (id INT AUTO_INCREMENT PRIMARY KEY)")
	// The clients log in to reloaddb2 and read on the replicas: they must
	// have it first, or a login right after the CREATE gets 1049 there.
	for _, r := range env.topo.Replicas {
		rdb := mustRoot(t, r)
		pollUntil(t, "reloaddb2.t on replica "+r.Addr(), func() bool {
			_, err := rdb.Exec("SELECT 1 FROM reloaddb2.t LIMIT 0")
			return err == nil
		})
	}
	configs := []string{
		reloadConfig([]int{0, 1}, nil, ""),
		reloadConfig([]int{1}, nil, ""),
		reloadConfig([]int{0, 1}, []string{"connect_timeout = \"3s\""}, ""),
	}
	srv, path := reloadSluice(t, configs[0])
	d := reloadDB(t, srv, "reloaddb2")
	d.SetMaxOpenConns(4)
	stop := make(chan struct{})
	errs := make(chan error, 4)
	var done atomic.Int64
	for w := range 4 {
		go func() {
			var err error
			defer func() { errs <- err }()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if w%2 == 0 && i%3 == 0 {
					_, err = d.Exec("INSERT INTO t () VALUES ()")
				} else {
					var id uint32
					err = d.QueryRow("SELECT @@server_id").Scan(&id)
				}
				if err != nil {
					return
				}
				done.Add(1)
			}
		}()
	}
	for i := range 9 {
		writeConfig(t, path, configs[(i+1)%len(configs)])
		mustReload(t, srv)
		// Statements run under each configuration.
		seen := done.Load()
		pollUntil(t, "statements after a reload", func() bool { return done.Load() >= seen+40 })
	}
	close(stop)
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("statement failed during reloads: %v", err)
		}
	}
}
