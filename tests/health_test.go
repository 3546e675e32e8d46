package tests

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/health/loadavg"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// healthSetup shapes a sluice started by startHealthProxy: extra lines for
// the [[cluster]] table, for each [[cluster.replica]] (by index), and for
// [health].
type healthSetup struct {
	// proxy are extra lines for the [proxy] table.
	proxy    []string
	cluster  []string
	replicas map[int][]string
	health   []string
	// replicaAddrs replaces the topology's replica addresses when set.
	replicaAddrs []string
	// user and password replace the topology's service account when set.
	user, password string
}

// healthConfig is a sluice configuration for topo shaped by h, on free
// ports.
func healthConfig(topo *sandbox.Topology, h healthSetup) string {
	var b strings.Builder
	b.WriteString("[proxy]\nlisten = \"127.0.0.1:0\"\nmetrics_listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\n")
	for _, k := range h.proxy {
		b.WriteString(k + "\n")
	}
	fmt.Fprintf(&b, "\n[auth]\nbackend = \"mysql\"\naddress = %q\n", topo.Auth.Addr())
	user, password := topo.Opts.ServiceUser, topo.Opts.ServicePassword
	if h.user != "" {
		user, password = h.user, h.password
	}
	fmt.Fprintf(&b, "\n[[cluster]]\nname = \"main\"\nuser = %q\npassword = %q\nmaster = %q\n",
		user, password, topo.Master.Addr())
	for _, k := range h.cluster {
		b.WriteString(k + "\n")
	}
	addrs := h.replicaAddrs
	if addrs == nil {
		for _, r := range topo.Replicas {
			addrs = append(addrs, r.Addr())
		}
	}
	for i, a := range addrs {
		fmt.Fprintf(&b, "  [[cluster.replica]]\n  address = %q\n", a)
		for _, k := range h.replicas[i] {
			b.WriteString("  " + k + "\n")
		}
	}
	b.WriteString("\n[health]\n")
	for _, k := range h.health {
		b.WriteString(k + "\n")
	}
	return b.String()
}

// startHealthProxy starts an in-process sluice for topo shaped by h and
// closes it when the test ends.
func startHealthProxy(t *testing.T, topo *sandbox.Topology, h healthSetup) *server.Server {
	t.Helper()
	cfg, err := conf.Parse([]byte(healthConfig(topo, h)))
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
	t.Cleanup(func() { srv.Close() })
	return srv
}

// backendOf returns srv's backend at addr.
func backendOf(t *testing.T, srv *server.Server, addr string) *health.Backend {
	t.Helper()
	for _, c := range srv.Topology().Current().Clusters {
		for _, b := range c.Backends() {
			if b.Address == addr {
				return b
			}
		}
	}
	t.Fatalf("sluice has no backend %s", addr)
	return nil
}

// waitState polls until srv's backend at addr is in state want.
func waitState(t *testing.T, srv *server.Server, addr string, want health.State) *health.Backend {
	t.Helper()
	b := backendOf(t, srv, addr)
	deadline := time.Now().Add(60 * time.Second)
	for b.State() != want {
		if time.Now().After(deadline) {
			st := b.Status()
			note := ""
			if st != nil {
				note = st.LagNote
			}
			t.Fatalf("backend %s is %s, not %s, after 60s (last error %q, lag note %q)", addr, b.State(), want, b.LastError(), note)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return b
}

// appDBAt opens a pool of app-user sessions through the sluice at addr that
// keeps no idle connection, so every Conn is a new session.
func appDBAt(t *testing.T, addr string) *sql.DB {
	t.Helper()
	o := env.topo.Opts
	d, err := sql.Open("mysql", dsn(addr, o.AppUser, o.AppPassword, "", func(c *mysql.Config) { c.InterpolateParams = true }))
	if err != nil {
		t.Fatal(err)
	}
	d.SetMaxIdleConns(0)
	t.Cleanup(func() { d.Close() })
	return d
}

// readSplit runs sessions × perSession SELECT @@server_id through d, with
// up to 8 sessions at once, and counts the answers by server id.
func readSplit(t *testing.T, d *sql.DB, sessions, perSession int) map[uint32]int {
	t.Helper()
	ctx := ctxT(t)
	var mu sync.Mutex
	counts := map[uint32]int{}
	work := make(chan int, sessions)
	for i := range sessions {
		work <- i
	}
	close(work)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			local := map[uint32]int{}
			defer func() {
				mu.Lock()
				for id, n := range local {
					counts[id] += n
				}
				mu.Unlock()
			}()
			for range work {
				c, err := d.Conn(ctx)
				if err != nil {
					errs <- err
					return
				}
				for range perSession {
					var id uint32
					if err := c.QueryRowContext(ctx, "SELECT @@server_id").Scan(&id); err != nil {
						c.Close()
						errs <- err
						return
					}
					local[id]++
				}
				c.Close()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("read failed: %v", err)
	}
	return counts
}

// describeSplit prints counts by server name, with shares of total.
func describeSplit(topo *sandbox.Topology, counts map[uint32]int) string {
	total := 0
	for _, n := range counts {
		total += n
	}
	names := map[uint32]string{}
	for _, s := range topo.Servers() {
		names[s.ServerID] = s.Name
	}
	var ids []uint32
	for id := range counts {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var parts []string
	for _, id := range ids {
		parts = append(parts, fmt.Sprintf("%s %d (%.1f%%)", names[id], counts[id], 100*float64(counts[id])/float64(total)))
	}
	return strings.Join(parts, ", ")
}

// TestHealthProbeReadsServerState checks what the shared sluice's probes
// read from the sandbox: the master does not replicate and is writable; the
// replicas replicate from it with both threads running, no lag, GTID
// positions and read_only; probe rounds go on.
func TestHealthProbeReadsServerState(t *testing.T) {
	round := env.srv.Topology().Round()
	deadline := time.Now().Add(30 * time.Second)
	for env.srv.Topology().Round() < round+2 {
		if time.Now().After(deadline) {
			t.Fatalf("probe rounds stuck at %d", env.srv.Topology().Round())
		}
		time.Sleep(20 * time.Millisecond)
	}
	mb := backendOf(t, env.srv, env.topo.Master.Addr())
	m := mb.Status()
	if m == nil || m.Replicating || m.ReadOnly || m.Flavor != health.FlavorMariaDB || m.ExecutedGTID == "" ||
		m.Lagging || mb.State() != health.StateUp {
		t.Fatalf("master %s status: %+v", mb.State(), m)
	}
	for _, r := range env.topo.Replicas {
		b := waitState(t, env.srv, r.Addr(), health.StateUp)
		st := b.Status()
		if !st.Replicating || !st.IORunning || !st.SQLRunning || st.SecondsBehind < 0 || !st.ReadOnly ||
			st.MasterPort != env.topo.Master.Port || st.ReceivedGTID == "" || st.AppliedGTID == "" || st.Lagging ||
			st.LoadSource != "threads_running" {
			t.Fatalf("replica %s status: %+v", r.Name, st)
		}
		t.Logf("%s: IO %v SQL %v behind %ds received %s applied %s executed %s threads_running %d",
			r.Name, st.IORunning, st.SQLRunning, st.SecondsBehind, st.ReceivedGTID, st.AppliedGTID, st.ExecutedGTID, st.ThreadsRunning)
	}
}

// TestLaggingReplicaGetsNoReads stops one replica's SQL thread and writes
// on the master: the replica falls behind, goes lagging once it has been
// behind for more than max_replication_lag (MariaDB shows no
// Seconds_Behind_Master with a stopped SQL thread, so sluice tells from
// the GTID positions), and gets no reads; once its SQL thread runs again
// and it caught up, it is up and serves reads again.
func TestLaggingReplicaGetsNoReads(t *testing.T) {
	victim, other := env.topo.Replicas[0], env.topo.Replicas[1]
	root := mustRoot(t, victim)
	master := mustRoot(t, env.topo.Master)
	ctx := ctxT(t)
	mustExec(t, master, "CREATE TABLE IF NOT EXISTS sluice_test.health_lag (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = root.ExecContext(ctx, "START SLAVE SQL_THREAD")
		_, _ = master.ExecContext(ctx, "DROP TABLE IF EXISTS sluice_test.health_lag")
		if err := env.topo.WaitReplicated(ctx); err != nil {
			t.Errorf("replicas did not catch up after the test: %v", err)
		}
		waitBackendUp(t, env.srv, victim.Addr())
	})
	if err := env.topo.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	srv := startHealthProxy(t, env.topo, healthSetup{
		cluster: []string{`max_replication_lag = "1s"`},
		health:  []string{`interval = "100ms"`},
	})
	waitState(t, srv, victim.Addr(), health.StateUp)
	d := appDBAt(t, srv.Addr().String())

	mustExec(t, root, "STOP SLAVE SQL_THREAD")
	mustExec(t, master, "INSERT INTO sluice_test.health_lag (v) VALUES (1)")
	b := waitState(t, srv, victim.Addr(), health.StateLagging)
	st := b.Status()
	t.Logf("%s lagging: lag %v, %s", victim.Name, st.Lag, st.LagNote)
	if st.SQLRunning || !st.Lagging {
		t.Fatalf("lagging replica's status: %+v", st)
	}
	counts := readSplit(t, d, 40, 10)
	t.Logf("reads with %s lagging: %s", victim.Name, describeSplit(env.topo, counts))
	if counts[victim.ServerID] != 0 || counts[other.ServerID] != 400 {
		t.Fatalf("reads with %s lagging went to %s", victim.Name, describeSplit(env.topo, counts))
	}

	mustExec(t, root, "START SLAVE SQL_THREAD")
	waitState(t, srv, victim.Addr(), health.StateUp)
	counts = readSplit(t, d, 40, 10)
	t.Logf("reads after %s caught up: %s", victim.Name, describeSplit(env.topo, counts))
	if counts[victim.ServerID] == 0 {
		t.Fatalf("%s is up again but got no reads: %s", victim.Name, describeSplit(env.topo, counts))
	}
}

// TestWeightedSplit sends 10,000 reads through a cluster balanced by weight
// 1:3: the replicas serve 25% and 75% of them, within 3 points.
func TestWeightedSplit(t *testing.T) {
	srv := startHealthProxy(t, env.topo, healthSetup{
		cluster:  []string{`balance = "weighted"`},
		replicas: map[int][]string{0: {"weight = 1"}, 1: {"weight = 3"}},
		health:   []string{`interval = "100ms"`},
	})
	for _, r := range env.topo.Replicas {
		waitState(t, srv, r.Addr(), health.StateUp)
	}
	counts := readSplit(t, appDBAt(t, srv.Addr().String()), 500, 20)
	t.Logf("weighted 1:3 over 10000 reads: %s", describeSplit(env.topo, counts))
	light := 100 * float64(counts[env.topo.Replicas[0].ServerID]) / 10000
	heavy := 100 * float64(counts[env.topo.Replicas[1].ServerID]) / 10000
	if light < 22 || light > 28 || heavy < 72 || heavy > 78 {
		t.Fatalf("weights 1:3 gave %.1f%% / %.1f%%, want 25%% / 75%% within 3 points", light, heavy)
	}
}

// TestLeastLoadSplit runs three replicas whose agents report loads 0.5, 4
// and 8 (same CPU count) and sends 10,000 reads: the least loaded replica
// serves the clear majority and the most loaded the fewest.
func TestLeastLoadSplit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topo, err := sandbox.Start(ctx, sandbox.Options{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer topo.Stop()
	loads := []string{"0.50", "4.00", "8.00"}
	replicaKeys := map[int][]string{}
	for i, l := range loads {
		file := filepath.Join(t.TempDir(), "loadavg")
		if err := os.WriteFile(file, []byte(l+" 1.00 1.00 2/300 4242\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		agent := httptest.NewServer(loadavg.Handler(file, 4))
		defer agent.Close()
		replicaKeys[i] = []string{fmt.Sprintf("agent = %q", agent.URL)}
	}
	srv := startHealthProxy(t, topo, healthSetup{
		cluster:  []string{`balance = "least-load"`},
		replicas: replicaKeys,
		health:   []string{`interval = "100ms"`},
	})
	for i, r := range topo.Replicas {
		b := waitState(t, srv, r.Addr(), health.StateUp)
		deadline := time.Now().Add(30 * time.Second)
		for st := b.Status(); st == nil || st.LoadSource != "agent"; st = b.Status() {
			if time.Now().After(deadline) {
				t.Fatalf("%s has no load from its agent (last error %q)", r.Name, b.LastError())
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("%s: agent load %s per CPU %.3f", r.Name, loads[i], b.Status().Load)
	}
	o := topo.Opts
	d, err := sql.Open("mysql", dsn(srv.Addr().String(), o.AppUser, o.AppPassword, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	d.SetMaxIdleConns(0)
	defer d.Close()
	counts := readSplit(t, d, 500, 20)
	t.Logf("least-load over 10000 reads (loads 0.5/4/8): %s", describeSplit(topo, counts))
	low, mid, high := counts[topo.Replicas[0].ServerID], counts[topo.Replicas[1].ServerID], counts[topo.Replicas[2].ServerID]
	if low+mid+high != 10000 {
		t.Fatalf("not every read went to a replica: %s", describeSplit(topo, counts))
	}
	if low <= 5500 || high >= mid || high >= low {
		t.Fatalf("least-load gave 0.5: %d, 4: %d, 8: %d; want the clear majority on 0.5 and the fewest on 8", low, mid, high)
	}
}

// TestReplicaKilledDuringReadLoad kills a replica while 16 clients run
// autocommit point selects through sluice, as text (interpolated
// parameters) and as binary prepared statements: no client sees an error,
// and the dead replica is taken out. It is started again after each.
func TestReplicaKilledDuringReadLoad(t *testing.T) {
	t.Run("text", func(t *testing.T) { killReplicaUnderLoad(t, false) })
	t.Run("prepared", func(t *testing.T) { killReplicaUnderLoad(t, true) })
}

func killReplicaUnderLoad(t *testing.T, prepared bool) {
	victim := env.topo.Replicas[1]
	master := mustRoot(t, env.topo.Master)
	mustExec(t, master, "CREATE TABLE IF NOT EXISTS sluice_test.health_kill (id INT PRIMARY KEY, v VARCHAR(32))")
	mustExec(t, master, "INSERT IGNORE INTO sluice_test.health_kill VALUES (1,'a'),(2,'b'),(3,'c'),(4,'d'),(5,'e'),(6,'f'),(7,'g'),(8,'h')")
	if err := env.topo.WaitReplicated(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if !victim.Running() {
			if err := victim.Start(ctx); err != nil {
				t.Errorf("restarting %s: %v", victim.Name, err)
				return
			}
		}
		if err := env.topo.WaitReplicated(ctx); err != nil {
			t.Errorf("replicas did not catch up after the test: %v", err)
		}
		_, _ = master.ExecContext(ctx, "DROP TABLE IF EXISTS sluice_test.health_kill")
		waitBackendUp(t, env.srv, victim.Addr())
	})
	srv := startHealthProxy(t, env.topo, healthSetup{health: []string{`interval = "100ms"`}})
	for _, r := range env.topo.Replicas {
		waitState(t, srv, r.Addr(), health.StateUp)
	}
	o := env.topo.Opts
	d, err := sql.Open("mysql", dsn(srv.Addr().String(), o.AppUser, o.AppPassword, "sluice_test",
		func(c *mysql.Config) { c.InterpolateParams = !prepared }))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	const clients = 16
	ctx := ctxT(t)
	var reads, afterKill, errCount atomic.Int64
	var killed atomic.Bool
	var firstErr atomic.Pointer[string]
	stop := make(chan struct{})
	servedBy := make([]map[uint32]int, clients)
	var wg sync.WaitGroup
	for i := range clients {
		servedBy[i] = map[uint32]int{}
		// One session per client for the whole run: a session sluice
		// closed would show as an error here.
		c := conn(t, d)
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				var v string
				var id uint32
				err := c.QueryRowContext(ctx, "SELECT v, @@server_id FROM health_kill WHERE id = ?", n%8+1).Scan(&v, &id)
				if err != nil {
					errCount.Add(1)
					msg := err.Error()
					firstErr.CompareAndSwap(nil, &msg)
					continue
				}
				servedBy[i][id]++
				reads.Add(1)
				if killed.Load() {
					afterKill.Add(1)
				}
			}
		})
	}
	waitReads := func(counter *atomic.Int64, n int64, what string) {
		deadline := time.Now().Add(60 * time.Second)
		for counter.Load() < n {
			if time.Now().After(deadline) {
				close(stop)
				wg.Wait()
				t.Fatalf("only %d reads %s within 60s", counter.Load(), what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitReads(&reads, 2000, "before the kill")
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	killed.Store(true)
	waitReads(&afterKill, 5000, "after the kill")
	close(stop)
	wg.Wait()

	total := map[uint32]int{}
	for _, m := range servedBy {
		for id, n := range m {
			total[id] += n
		}
	}
	t.Logf("%d reads by %d clients, %d after killing %s: %s", reads.Load(), clients, afterKill.Load(), victim.Name,
		describeSplit(env.topo, total))
	if n := errCount.Load(); n != 0 {
		t.Fatalf("%d reads failed; first: %s", n, *firstErr.Load())
	}
	if total[victim.ServerID] == 0 {
		t.Fatalf("%s served no reads before it was killed: the test proved nothing", victim.Name)
	}
	if st := backendOf(t, srv, victim.Addr()).State(); st != health.StateDown {
		t.Fatalf("killed replica is %s, want down", st)
	}
}

// TestReadsFallBackToMasterOff points a cluster at replicas that do not
// exist: with reads_fall_back_to_master = false a read fails with error
// 2003 naming the cluster and each replica's state; by default it goes to
// the master.
func TestReadsFallBackToMasterOff(t *testing.T) {
	var dead []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead = append(dead, ln.Addr().String())
		ln.Close()
	}
	strict := startHealthProxy(t, env.topo, healthSetup{
		cluster:      []string{"reads_fall_back_to_master = false"},
		replicaAddrs: dead,
		health:       []string{`interval = "100ms"`, "failures_before_down = 1"},
	})
	lenient := startHealthProxy(t, env.topo, healthSetup{replicaAddrs: dead, health: []string{`interval = "100ms"`}})
	for _, a := range dead {
		waitState(t, strict, a, health.StateDown)
	}
	ctx := ctxT(t)
	c := conn(t, appDBAt(t, strict.Addr().String()))
	var id uint32
	err := c.QueryRowContext(ctx, "SELECT @@server_id").Scan(&id)
	want := fmt.Sprintf("no replica of cluster main can serve the read (%s down, %s down) and reads_fall_back_to_master is false", dead[0], dead[1])
	if mysqlErrNumber(err) != 2003 || !strings.Contains(err.Error(), want) {
		t.Fatalf("read with no replica and no fallback: %v, want error 2003 with %q", err, want)
	}
	// The session goes on: writes and the master hint still work.
	if got := serverID(t, ctx, c, "/* sluice:master */ "); got != env.masterID {
		t.Fatalf("hinted read went to %d", got)
	}
	if got := serverID(t, ctx, conn(t, appDBAt(t, lenient.Addr().String())), ""); got != env.masterID {
		t.Fatalf("with the default fallback the read went to %d, want the master %d", got, env.masterID)
	}
}

// TestSessionKeepsReplicaWithinRound checks the session's replica rule: a
// session reads from one replica while no probe round ends (probes every
// hour: only the first round ends), and picks again after each round (probes
// every 50ms: one session alone meets both replicas).
func TestSessionKeepsReplicaWithinRound(t *testing.T) {
	ctx := ctxT(t)
	slow := startHealthProxy(t, env.topo, healthSetup{health: []string{`interval = "1h"`}})
	deadline := time.Now().Add(30 * time.Second)
	for slow.Topology().Round() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the first probe round did not end")
		}
		time.Sleep(10 * time.Millisecond)
	}
	d := appDBAt(t, slow.Addr().String())
	seen := map[uint32]int{}
	for range 3 {
		c := conn(t, d)
		first := serverID(t, ctx, c, "")
		for range 30 {
			if id := serverID(t, ctx, c, ""); id != first {
				t.Fatalf("a session moved from server %d to %d within one probe round", first, id)
			}
		}
		seen[first]++
		c.Close()
	}
	if len(seen) != 2 {
		t.Fatalf("3 sessions under round-robin read from %v, want both replicas", seen)
	}

	fast := startHealthProxy(t, env.topo, healthSetup{health: []string{`interval = "50ms"`}})
	c := conn(t, appDBAt(t, fast.Addr().String()))
	ids := map[uint32]bool{}
	for len(ids) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("one session saw only %v over many probe rounds", ids)
		}
		ids[serverID(t, ctx, c, "")] = true
		time.Sleep(5 * time.Millisecond)
	}
	for id := range ids {
		if !env.replicaIDs[id] {
			t.Fatalf("read served by %d, not a replica", id)
		}
	}
}

// TestProbeWithoutReplicationPrivilege runs sluice with a service account
// that may not read the replication status: the backends stay reachable
// (the master up), but the replicas' lag cannot be checked, so they are
// lagging, say why, and reads go to the master. Granted SLAVE MONITOR,
// the replicas come back.
func TestProbeWithoutReplicationPrivilege(t *testing.T) {
	master := mustRoot(t, env.topo.Master)
	const user = "sluice_probe_min"
	mustExec(t, master, "CREATE OR REPLACE USER "+user+"@'%' IDENTIFIED BY 'min'")
	mustExec(t, master, "GRANT SELECT ON sluice_test.* TO "+user+"@'%'")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = master.ExecContext(ctx, "DROP USER IF EXISTS "+user+"@'%'")
		if err := env.topo.WaitReplicated(ctx); err != nil {
			t.Errorf("replicas did not catch up after the test: %v", err)
		}
	})
	if err := env.topo.WaitReplicated(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	srv := startHealthProxy(t, env.topo, healthSetup{user: user, password: "min", health: []string{`interval = "100ms"`}})
	waitState(t, srv, env.topo.Master.Addr(), health.StateUp)
	for _, r := range env.topo.Replicas {
		b := waitState(t, srv, r.Addr(), health.StateLagging)
		if st := b.Status(); !strings.Contains(st.LagNote, "SLAVE MONITOR") || !strings.Contains(st.LagNote, "1227") {
			t.Fatalf("%s lagging for another reason: %s", r.Name, st.LagNote)
		}
	}
	t.Logf("note: %s", backendOf(t, srv, env.topo.Replicas[0].Addr()).Status().LagNote)
	ctx := ctxT(t)
	if id := serverID(t, ctx, conn(t, appDBAt(t, srv.Addr().String())), ""); id != env.masterID {
		t.Fatalf("read with no checkable replica went to %d, want the master", id)
	}
	mustExec(t, master, "GRANT SLAVE MONITOR ON *.* TO "+user+"@'%'")
	for _, r := range env.topo.Replicas {
		waitState(t, srv, r.Addr(), health.StateUp)
	}
}
