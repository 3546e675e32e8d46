package sharding

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// seedFlag replays a differential run: go test ./tests/sharding -shard.seed=N
// (or SLUICE_SHARD_SEED=N); 0 picks a new seed from the clock.
var seedFlag = flag.Uint64("shard.seed", 0, "seed of the differential test's generator (0: from the clock; env SLUICE_SHARD_SEED)")

// env is the setup every test of the package shares; TestMain fills it and
// tests only read it.
var env struct {
	clusters map[string]*sandbox.Topology // by cluster name (clusterNames)
	ref      *sandbox.Topology            // the reference master, and the auth server
	srv      *server.Server
	addr     string
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	// Two clusters of a master and a replica without auth servers, and the
	// reference (no replicas) whose topology brings the one auth server.
	// A missing server binary is a failure, never a skip.
	topos, err := sandbox.StartAll(ctx, []sandbox.Options{
		{Replicas: 1, NoAuth: true},
		{Replicas: 1, NoAuth: true},
		{Replicas: -1},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "sharding: cannot start the sandbox topologies:", err)
		return 1
	}
	defer func() {
		for _, t := range topos {
			t.Stop()
		}
	}()
	env.clusters = map[string]*sandbox.Topology{clusterNames[0]: topos[0], clusterNames[1]: topos[1]}
	env.ref = topos[2]
	if err := createLayout(ctx, env.clusters, env.ref.Master); err != nil {
		fmt.Fprintln(os.Stderr, "sharding: cannot create the tables:", err)
		return 1
	}
	for _, t := range topos[:2] {
		if err := t.WaitReplicated(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "sharding:", err)
			return 1
		}
	}
	srv, err := startSluice(named(clusterNames, topos[:2]), shardingTOML())
	if err != nil {
		fmt.Fprintln(os.Stderr, "sharding: cannot start sluice:", err)
		return 1
	}
	defer srv.Close()
	env.srv, env.addr = srv, srv.Addr().String()
	fmt.Fprintf(os.Stderr, "sharding: 2 clusters, reference and sluice up in %v (sluice %s)\n",
		time.Since(start).Round(time.Millisecond), env.addr)
	return m.Run()
}

// clusterTopos are the shared clusters' topologies in clusterNames order.
func clusterTopos() []*sandbox.Topology {
	t := make([]*sandbox.Topology, len(clusterNames))
	for i, n := range clusterNames {
		t[i] = env.clusters[n]
	}
	return t
}

// named pairs cluster names with their topologies, in order.
func named(names []string, topos []*sandbox.Topology) []sandbox.NamedTopology {
	n := make([]sandbox.NamedTopology, len(names))
	for i := range names {
		n[i] = sandbox.NamedTopology{Name: names[i], Topology: topos[i]}
	}
	return n
}

// adminPassword is the [admin] password of the sluices the tests start.
const adminPassword = "shard-admin"

// startSluice starts an in-process sluice on free ports in front of
// clusters, with the shared auth server and shardKeys (the [sharding],
// [[shard]] and [[broadcast]] tables). Reads are causal, so a session reads
// its own writes even from a replica.
func startSluice(clusters []sandbox.NamedTopology, shardKeys string) (*server.Server, error) {
	o := sandbox.SluiceOptions{
		Listen:      "127.0.0.1:0",
		ProxyKeys:   []string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = "127.0.0.1:0"`},
		ClusterKeys: []string{`consistency = "causal"`},
	}
	text := sandbox.ShardedSluiceConfig(o, env.ref.Auth, clusters, shardKeys) +
		"\n[admin]\nuser = \"admin\"\npassword = \"" + adminPassword + "\"\n"
	cfg, err := conf.Parse([]byte(text))
	if err != nil {
		return nil, err
	}
	log := zap.NewNop()
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		log, _ = zap.NewDevelopment()
	}
	srv, err := server.New(cfg, log)
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		srv.Close()
		return nil, err
	}
	// Statements on sharded tables are read under the servers' global
	// sql_mode, which sluice refuses to guess (1235) until its probes have
	// read it on every server. A probe round under load may miss a server:
	// wait for the next, as a client of a just-started sluice would retry.
	deadline := time.Now().Add(time.Minute)
	for !globalModesKnown(srv) {
		if time.Now().After(deadline) {
			srv.Close()
			return nil, errors.New("sluice's probes did not read every server's sql_mode within a minute")
		}
		time.Sleep(10 * time.Millisecond) // the probes have no event to wait on
	}
	return srv, nil
}

// globalModesKnown reports whether srv's probes have read the global
// sql_mode of every server of every cluster.
func globalModesKnown(srv *server.Server) bool {
	for _, c := range srv.Topology().Current().Clusters {
		for _, b := range append([]*health.Backend{c.Master}, c.Replicas...) {
			if st := b.Status(); st == nil || !st.SQLModeKnown {
				return false
			}
		}
	}
	return true
}

// dsn is a go-sql-driver DSN; binary false interpolates parameters into the
// text (text protocol), true leaves them to server-side prepared statements.
func dsn(user, password, addr, db string, binary bool) string {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = user, password, "tcp", addr, db
	c.Timeout, c.ReadTimeout, c.WriteTimeout = 5*time.Second, 30*time.Second, 30*time.Second
	c.InterpolateParams = !binary
	return c.FormatDSN()
}

// sluiceDB opens the app user's pool to addr (a sluice), closed at the end of t.
func sluiceDB(t testing.TB, addr, db string, binary bool) *sql.DB {
	t.Helper()
	o := env.ref.Opts
	d, err := sql.Open("mysql", dsn(o.AppUser, o.AppPassword, addr, db, binary))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// refDB opens a pool straight to the reference server.
func refDB(t testing.TB, db string, binary bool) *sql.DB {
	t.Helper()
	o := env.ref.Opts
	d, err := sql.Open("mysql", dsn(o.ServiceUser, o.ServicePassword, env.ref.Master.Addr(), db, binary))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// conn is one dedicated connection of d: one sluice session.
func conn(t testing.TB, d *sql.DB) *sql.Conn {
	t.Helper()
	c, err := d.Conn(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ctxT is a context bounded for one test.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// mysqlErr returns the server error in err, or nil.
func mysqlErr(err error) *mysql.MySQLError {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me
	}
	return nil
}

// errCode is err's MySQL error number, 0 when it has none.
func errCode(err error) uint16 {
	if me := mysqlErr(err); me != nil {
		return me.Number
	}
	return 0
}

// keyOn returns the first key from start upwards (step 1) that the mod rule
// r places on cluster, skipping the keys in avoid.
func keyOn(r *rule, cluster string, start int64, avoid ...int64) int64 {
	for k := start; ; k++ {
		s, _ := r.shardOf(strconv.FormatInt(k, 10))
		if r.cluster(s) == cluster && !containsInt(avoid, k) {
			return k
		}
	}
}

func containsInt(list []int64, v int64) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// appRule is the rule of table in appSchema.
func appRule(t testing.TB, table string) *rule {
	t.Helper()
	for _, r := range rulesFor(appSchema) {
		if r.table == table {
			return r
		}
	}
	t.Fatalf("no rule for %s.%s", appSchema, table)
	return nil
}

// shardOfKey is r's shard of an integer key.
func shardOfKey(t testing.TB, r *rule, key int64) int {
	t.Helper()
	s, err := r.shardOf(strconv.FormatInt(key, 10))
	if err != nil || s < 0 {
		t.Fatalf("%s.%s: no shard for %d (%v)", r.schema, r.table, key, err)
	}
	return s
}

// countOn counts the rows of schema.table on cluster's master that match where.
func countOn(t testing.TB, cluster, schema, table, where string, args ...any) int {
	t.Helper()
	db, err := env.clusters[cluster].Master.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	q := fmt.Sprintf("SELECT COUNT(*) FROM `%s`.`%s` WHERE %s", schema, table, where)
	if err := db.QueryRowContext(ctxT(t), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s on %s: %v", q, cluster, err)
	}
	return n
}
