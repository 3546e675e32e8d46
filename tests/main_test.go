package tests

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// env is the topology and proxy every test in the package shares.
var env struct {
	topo       *sandbox.Topology
	srv        *server.Server
	addr       string
	masterID   uint32
	replicaIDs map[uint32]bool
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	// A missing server binary is a failure, never a skip.
	topo, err := sandbox.Start(ctx, sandbox.Options{Replicas: 2})
	if err != nil {
		fmt.Fprintln(os.Stderr, "tests: cannot start the sandbox topology:", err)
		return 1
	}
	defer topo.Stop()
	srv, err := startProxy(topo)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tests: cannot start sluice:", err)
		return 1
	}
	defer srv.Close()
	env.topo, env.srv, env.addr = topo, srv, srv.Addr().String()
	env.masterID = topo.Master.ServerID
	env.replicaIDs = map[uint32]bool{}
	for _, r := range topo.Replicas {
		env.replicaIDs[r.ServerID] = true
	}
	fmt.Fprintf(os.Stderr, "tests: topology and sluice up in %v (sluice %s)\n", time.Since(start).Round(time.Millisecond), env.addr)
	return m.Run()
}

// startProxy starts an in-process sluice in front of topo on a free port.
// proxyKeys are extra lines for its [proxy] table.
func startProxy(topo *sandbox.Topology, proxyKeys ...string) (*server.Server, error) {
	return startProxyWith(topo, sandbox.SluiceOptions{ProxyKeys: proxyKeys})
}

// startProxyWith starts an in-process sluice on free ports with o's extra
// configuration lines.
func startProxyWith(topo *sandbox.Topology, o sandbox.SluiceOptions) (*server.Server, error) {
	log := zap.NewNop()
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		log, _ = zap.NewDevelopment()
	}
	return startProxyLogging(topo, o, log)
}

// startProxyLogging is startProxyWith logging to log.
func startProxyLogging(topo *sandbox.Topology, o sandbox.SluiceOptions, log *zap.Logger) (*server.Server, error) {
	o.Listen = "127.0.0.1:0"
	o.ProxyKeys = append([]string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = "127.0.0.1:0"`}, o.ProxyKeys...)
	cfg, err := conf.Parse([]byte(topo.SluiceConfigWith(o)))
	if err != nil {
		return nil, err
	}
	srv, err := server.New(cfg, log)
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, err
	}
	return srv, nil
}

// dsn is a go-sql-driver DSN for user through sluice at addr; mod, when
// set, adjusts the driver configuration (multiStatements and the like).
func dsn(addr, user, password, db string, mod func(*mysql.Config)) string {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = user, password, "tcp", addr, db
	c.Timeout, c.ReadTimeout, c.WriteTimeout = 5*time.Second, 30*time.Second, 30*time.Second
	if mod != nil {
		mod(c)
	}
	return c.FormatDSN()
}

// appDB opens the app user's pool through the shared sluice.
func appDB(t testing.TB, db string, mod func(*mysql.Config)) *sql.DB {
	t.Helper()
	o := env.topo.Opts
	d, err := sql.Open("mysql", dsn(env.addr, o.AppUser, o.AppPassword, db, mod))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// conn returns one dedicated client connection (one sluice session).
func conn(t testing.TB, d *sql.DB) *sql.Conn {
	t.Helper()
	c, err := d.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ctxT is a context bounded for one test step.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// serverID runs SELECT @@server_id (optionally with a prefix such as a hint)
// on c and returns it.
func serverID(t testing.TB, ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, prefix string) uint32 {
	t.Helper()
	var id uint32
	if err := q.QueryRowContext(ctx, prefix+"SELECT @@server_id").Scan(&id); err != nil {
		t.Fatalf("%sSELECT @@server_id: %v", prefix, err)
	}
	return id
}

// mysqlErrNumber returns the MySQL error number of err, or 0.
func mysqlErrNumber(err error) uint16 {
	if me, ok := err.(*mysql.MySQLError); ok {
		return me.Number
	}
	return 0
}
