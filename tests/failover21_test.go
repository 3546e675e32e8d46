package tests

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// Issue 21: a failover with degraded replicas. 8 clients run transactions through sluice
// (BEGIN; INSERT; INSERT; UPDATE counter; COMMIT) and record every COMMIT that returned OK;
// replicas lose their SQL or IO thread or lag behind MASTER_DELAY; the master is killed with
// SIGKILL and sluice fails over by itself. Whatever a replica received must survive: the
// replica that received everything is promoted (its relay log applied first), or the failover
// is refused, never a silent loss.

// txnSchema is the transactional writers' tables: every transaction inserts rows 2*txn and
// 2*txn+1 and adds one to its writer's counter, so on any consistent server a writer's counter
// equals the number of its transactions present, and a transaction has both rows or none.
var txnSchema = []string{
	"CREATE TABLE sluice_test.txn_rows (id BIGINT PRIMARY KEY, txn BIGINT NOT NULL, writer INT NOT NULL, KEY (txn))",
	"CREATE TABLE sluice_test.txn_counter (writer INT PRIMARY KEY, n BIGINT NOT NULL)",
}

const txnWriterCount = 8

// skipInEventLoopRun skips a failover test in make test's second run (event_loop = true in
// every sluice): the failover path does not depend on how sessions are served.
func skipInEventLoopRun(t *testing.T) {
	t.Helper()
	if os.Getenv(sandbox.ProxyKeysEnv) != "" {
		t.Skipf("failover tests run once, not again with %s set", sandbox.ProxyKeysEnv)
	}
}

// semiSyncTopology starts a semi-synchronous master with n replicas and an auth server for
// one test, with the transactional writers' tables replicated everywhere.
func semiSyncTopology(t *testing.T, n int) (*sandbox.Topology, health.Credentials) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topo, err := sandbox.Start(ctx, sandbox.Options{Replicas: n, SemiSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := topo.Stop(); err != nil {
			t.Error(err)
		}
	})
	stmts := slices.Clone(txnSchema)
	var vals []string
	for w := range txnWriterCount {
		vals = append(vals, fmt.Sprintf("(%d, 0)", w))
	}
	stmts = append(stmts, "INSERT INTO sluice_test.txn_counter VALUES "+strings.Join(vals, ", "))
	if err := topo.Master.Exec(ctx, stmts...); err != nil {
		t.Fatal(err)
	}
	if err := topo.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	return topo, health.Credentials{User: topo.Opts.ServiceUser, Password: topo.Opts.ServicePassword, Timeout: time.Second}
}

// sluiceTxnDB opens the application's pool through srv. Parameters are interpolated by the
// driver, so a transaction is five round trips and no prepared statements.
func sluiceTxnDB(t *testing.T, topo *sandbox.Topology, srv *server.Server) *sql.DB {
	t.Helper()
	o := topo.Opts
	db, err := sql.Open("mysql", dsn(srv.Addr().String(), o.AppUser, o.AppPassword, sandbox.TestDatabase,
		func(c *mysql.Config) { c.InterpolateParams = true }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(txnWriterCount)
	return db
}

// txnWriters are the clients: each loops over transactions with fresh txn numbers (a COMMIT
// that failed may still have committed) and records those whose COMMIT returned OK.
type txnWriters struct {
	acked    [][]int64 // per writer, the acknowledged txn numbers; read only after halt
	total    atomic.Int64
	killedAt atomic.Int64 // unix nanos, 0 before the kill
	// firstAfter is when the first transaction begun after the kill was acknowledged.
	firstAfter atomic.Int64
	failed     atomic.Int64
	errMu      sync.Mutex
	errs       map[string]int
	// gate is held for reading around each transaction; pause takes it for writing, which
	// waits for the transactions in flight and holds back new ones.
	gate sync.RWMutex
	stop context.CancelFunc
	wg   sync.WaitGroup
	once sync.Once
}

func startTxnWriters(t *testing.T, ctx context.Context, db *sql.DB) *txnWriters {
	t.Helper()
	w := &txnWriters{acked: make([][]int64, txnWriterCount), errs: map[string]int{}}
	wctx, stop := context.WithCancel(ctx)
	w.stop = stop
	for i := range txnWriterCount {
		w.wg.Go(func() {
			for k := int64(1); wctx.Err() == nil; k++ {
				txn := int64(i+1)*1_000_000_000 + k
				w.gate.RLock()
				start := time.Now().UnixNano()
				err := runTxn(wctx, db, i, txn)
				w.gate.RUnlock()
				if err == nil {
					w.acked[i] = append(w.acked[i], txn)
					w.total.Add(1)
					if k := w.killedAt.Load(); k != 0 && start > k {
						w.firstAfter.CompareAndSwap(0, time.Now().UnixNano())
					}
					continue
				}
				if wctx.Err() != nil {
					return
				}
				w.failed.Add(1)
				w.errMu.Lock()
				w.errs[err.Error()]++
				w.errMu.Unlock()
				select {
				case <-time.After(20 * time.Millisecond):
				case <-wctx.Done():
				}
			}
		})
	}
	t.Cleanup(w.halt)
	return w
}

// runTxn is one client transaction of writer w; nil means its COMMIT returned OK.
func runTxn(ctx context.Context, db *sql.DB, w int, txn int64) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"INSERT INTO txn_rows (id, txn, writer) VALUES (?, ?, ?)", []any{2 * txn, txn, w}},
		{"INSERT INTO txn_rows (id, txn, writer) VALUES (?, ?, ?)", []any{2*txn + 1, txn, w}},
		{"UPDATE txn_counter SET n = n + 1 WHERE writer = ?", []any{w}},
	} {
		if _, err := tx.ExecContext(ctx, q.sql, q.args...); err != nil {
			_ = tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}

// halt stops the writers and waits for them; afterwards acked may be read.
func (w *txnWriters) halt() { w.once.Do(func() { w.stop(); w.wg.Wait() }) }

// pause waits for the transactions in flight and holds back new ones until resume.
func (w *txnWriters) pause()  { w.gate.Lock() }
func (w *txnWriters) resume() { w.gate.Unlock() }

// kill records the moment of the kill for firstAfter, then kills s.
func (w *txnWriters) kill(t *testing.T, s *sandbox.Server) time.Time {
	t.Helper()
	at := time.Now()
	w.killedAt.Store(at.UnixNano())
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	return at
}

// writeAWhile lets the writers go on for at least d and at least n more acknowledged
// transactions: a load phase, so that the degradation before it leaves a real gap.
func (w *txnWriters) writeAWhile(t *testing.T, ctx context.Context, d time.Duration, n int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start, base := time.Now(), w.total.Load()
	eventually(t, ctx, fmt.Sprintf("%d acknowledged transactions over at least %v", n, d), func() error {
		got, took := w.total.Load()-base, time.Since(start)
		if got < n || took < d {
			return fmt.Errorf("%d acknowledged in %v (%d failed attempts)", got, took.Round(time.Millisecond), w.failed.Load())
		}
		return nil
	})
}

func (w *txnWriters) logErrors(t *testing.T) {
	t.Helper()
	w.errMu.Lock()
	defer w.errMu.Unlock()
	for msg, n := range w.errs {
		t.Logf("%d attempts failed with: %s", n, msg)
	}
}

// writesBackAfter is how long after the kill the first transaction begun after it was
// acknowledged; it waits for one until ctx ends.
func (w *txnWriters) writesBackAfter(t *testing.T, ctx context.Context) time.Duration {
	t.Helper()
	eventually(t, ctx, "a transaction begun after the kill acknowledged", func() error {
		if w.firstAfter.Load() == 0 {
			return fmt.Errorf("none yet (%d failed attempts)", w.failed.Load())
		}
		return nil
	})
	return time.Duration(w.firstAfter.Load() - w.killedAt.Load())
}

// checkTxns compares s's tables with the acknowledged transactions: every acknowledged
// transaction is there, no transaction is there in part, and each writer's counter equals the
// number of its transactions present (so it counts at least the acknowledged ones; extra ones
// are COMMITs whose answer was lost).
func checkTxns(t *testing.T, ctx context.Context, topo *sandbox.Topology, s *sandbox.Server, w *txnWriters) {
	t.Helper()
	db := serviceDB(t, topo, s)
	rowsOf := map[int64]int{}
	perWriter := map[int]int64{}
	rows, err := db.QueryContext(ctx, "SELECT id, txn, writer FROM txn_rows")
	if err != nil {
		t.Fatal(err)
	}
	var stray []int64
	for rows.Next() {
		var id, txn int64
		var writer int
		if err := rows.Scan(&id, &txn, &writer); err != nil {
			t.Fatal(err)
		}
		if id != 2*txn && id != 2*txn+1 {
			stray = append(stray, id)
		}
		if rowsOf[txn]++; rowsOf[txn] == 2 && writer >= 0 {
			perWriter[writer]++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if len(stray) > 0 {
		t.Errorf("%s: rows that belong to no transaction: %v", s.Name, stray[:min(len(stray), 10)])
	}
	var partial []int64
	for txn, n := range rowsOf {
		if n != 2 {
			partial = append(partial, txn)
		}
	}
	if len(partial) > 0 {
		slices.Sort(partial)
		t.Errorf("%s: %d transactions present in part, first: %v", s.Name, len(partial), partial[:min(len(partial), 10)])
	}
	var missing []int64
	n := 0
	for i := range w.acked {
		for _, txn := range w.acked[i] {
			n++
			if rowsOf[txn] != 2 {
				missing = append(missing, txn)
			}
		}
	}
	t.Logf("%s: %d acknowledged transactions checked one by one; it holds %d transactions", s.Name, n, len(rowsOf))
	if len(missing) > 0 {
		t.Errorf("%s: %d of %d acknowledged transactions lost, first: %v", s.Name, len(missing), n, missing[:min(len(missing), 10)])
	}
	crows, err := db.QueryContext(ctx, "SELECT writer, n FROM txn_counter ORDER BY writer")
	if err != nil {
		t.Fatal(err)
	}
	defer crows.Close()
	for crows.Next() {
		var writer int
		var c int64
		if err := crows.Scan(&writer, &c); err != nil {
			t.Fatal(err)
		}
		if c != perWriter[writer] {
			t.Errorf("%s: writer %d's counter is %d but %d of its transactions are present", s.Name, writer, c, perWriter[writer])
		}
	}
	if err := crows.Err(); err != nil {
		t.Fatal(err)
	}
}

// tableChecksums is CHECKSUM TABLE of the writers' tables on s.
func tableChecksums(ctx context.Context, s *sandbox.Server) (string, error) {
	db, err := s.RootDB()
	if err != nil {
		return "", err
	}
	rows, err := db.QueryContext(ctx, "CHECKSUM TABLE sluice_test.txn_rows, sluice_test.txn_counter")
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var table string
		var sum sql.NullString
		if err := rows.Scan(&table, &sum); err != nil {
			return "", err
		}
		parts = append(parts, table+"="+sum.String)
	}
	return strings.Join(parts, " "), rows.Err()
}

// survivorsConverge waits until every server of others replicates from master and has applied
// all it has (no writes go on), then checks that each one's executed set is a subset of the
// master's and that the tables are equal.
func survivorsConverge(t *testing.T, ctx context.Context, cred health.Credentials, master *sandbox.Server, others []*sandbox.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for _, o := range others {
		eventually(t, ctx, o.Name+" replicates from the new master "+master.Name+" and has applied all it has", func() error {
			st := controlState(t, ctx, o.Addr(), cred)
			rs := st.Replica
			if !rs.Configured || rs.MasterPort != master.Port || !rs.IOConnected() || !rs.SQLRunning {
				return fmt.Errorf("master port %d (want %d), IO %s (error %d %s), SQL running %v (error %d %s)", rs.MasterPort,
					master.Port, rs.IORunning, rs.LastIOErrno, rs.LastIOError, rs.SQLRunning, rs.LastSQLErrno, rs.LastSQLError)
			}
			mpos := controlState(t, ctx, master.Addr(), cred).BinlogPos
			if !rs.Executed.Contains(mpos) {
				return fmt.Errorf("executed %s, the master has %s", rs.Executed, mpos)
			}
			return nil
		})
		ost := controlState(t, ctx, o.Addr(), cred)
		mst := controlState(t, ctx, master.Addr(), cred)
		if !mst.BinlogPos.Contains(ost.Replica.Executed) {
			t.Errorf("%s executed %s, beyond the new master's %s", o.Name, ost.Replica.Executed, mst.BinlogPos)
		}
		want, err := tableChecksums(ctx, master)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tableChecksums(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s executed %s, master %s binlog %s; checksums %s", o.Name, ost.Replica.Executed, master.Name, mst.BinlogPos, got)
		if got != want {
			t.Errorf("%s's tables differ from the new master's: %s, master %s", o.Name, got, want)
		}
	}
}

// startDegradedSluice starts sluice in front of topo and the writers through it, and waits
// until they are going.
func startDegradedSluice(t *testing.T, ctx context.Context, topo *sandbox.Topology) (*server.Server, *txnWriters, string, *observer.ObservedLogs) {
	t.Helper()
	srv, logs, dir := failoverSluice(t, topo)
	quietDriver(t)
	w := startTxnWriters(t, ctx, sluiceTxnDB(t, topo, srv))
	w.writeAWhile(t, ctx, 0, 100)
	return srv, w, dir, logs
}

// receivedAll reads every reachable replica's received set (Gtid_IO_Pos merged with
// gtid_slave_pos) right after the kill, before sluice's probes have declared the master down.
func receivedAll(t *testing.T, ctx context.Context, cred health.Credentials, replicas []*sandbox.Server) map[*sandbox.Server]health.ServerState {
	t.Helper()
	out := map[*sandbox.Server]health.ServerState{}
	for _, r := range replicas {
		out[r] = controlState(t, ctx, r.Addr(), cred)
	}
	return out
}

// TestFailoverSplitLag is issue 21's first case: one replica's SQL thread is stopped (it still
// receives, and acknowledges semi-sync), another's IO thread is stopped a second before the
// master is killed, so the replica that cannot apply is the only one that received
// everything. sluice must promote it (after it applied its relay log) and lose nothing: every
// acknowledged transaction is on the new master, its position at promotion holds every GTID
// any replica had received (so no GTID number is handed out twice), and the other replicas
// replicate from it and end up with the same data. The same with the roles of r1 and r2
// swapped, and with three replicas.
func TestFailoverSplitLag(t *testing.T) {
	skipInEventLoopRun(t)
	type degrade struct {
		replica int // index in topo.Replicas
		stmt    string
	}
	const stopSQL, stopIO = "STOP SLAVE SQL_THREAD", "STOP SLAVE IO_THREAD"
	for _, tc := range []struct {
		name     string
		replicas int
		// steps are applied in order, each followed by a second of writes.
		steps []degrade
		// want is the replica that received everything.
		want int
	}{
		{"R1SQLStoppedR2IOStopped", 2, []degrade{{0, stopSQL}, {1, stopIO}}, 0},
		{"R2SQLStoppedR1IOStopped", 2, []degrade{{1, stopSQL}, {0, stopIO}}, 1},
		{"ThreeReplicas", 3, []degrade{{0, stopSQL}, {2, stopIO}, {1, stopIO}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			splitLag(t, tc.replicas, func(topo *sandbox.Topology, ctx context.Context, w *txnWriters) {
				for _, d := range tc.steps {
					r := topo.Replicas[d.replica]
					if err := r.Exec(ctx, d.stmt); err != nil {
						t.Fatal(err)
					}
					t.Logf("%s: %s", r.Name, d.stmt)
					w.writeAWhile(t, ctx, time.Second, 50)
				}
			}, tc.want)
		})
	}
}

// splitLag runs one case of TestFailoverSplitLag on a topology of its own: degrade makes the
// replicas lag while the writers go on, then the master is killed; replica want is the one
// that received everything.
func splitLag(t *testing.T, replicas int, degrade func(*sandbox.Topology, context.Context, *txnWriters), want int) {
	topo, cred := semiSyncTopology(t, replicas)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, w, dir, _ := startDegradedSluice(t, ctx, topo)
	degrade(topo, ctx, w)

	old := topo.Master
	killedAt := w.kill(t, old)
	before := receivedAll(t, ctx, cred, topo.Replicas)
	readAt := time.Now()
	wantMaster := topo.Replicas[want]
	for r, st := range before {
		t.Logf("%s after the kill: received %s, executed %s, IO %s, SQL running %v", r.Name, st.Replica.Received,
			st.Replica.Executed, st.Replica.IORunning, st.Replica.SQLRunning)
		// The setup must have left a gap: the wanted replica received strictly more.
		if r != wantMaster && (!before[wantMaster].Replica.Received.Contains(st.Replica.Received) ||
			st.Replica.Received.Contains(before[wantMaster].Replica.Received)) {
			t.Fatalf("setup: %s received %s, not strictly more than %s's %s", wantMaster.Name,
				before[wantMaster].Replica.Received, r.Name, st.Replica.Received)
		}
	}

	fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
	defer fcancel()
	st := recordedFailover(t, fctx, dir)
	res := st.History[len(st.History)-1]
	back := w.writesBackAfter(t, fctx)
	w.writeAWhile(t, fctx, 0, 50)
	w.halt()
	w.logErrors(t)
	t.Logf("failover %s: %s -> %s in %v (%s), skipped %v, repointed %v, not repointed %v; writes back after %v; %d acknowledged, %d failed attempts",
		res.Outcome, res.OldMaster, res.NewMaster, res.Finished.Sub(res.Started).Round(time.Millisecond), stepsString(&res),
		res.Skipped, res.Repointed, res.NotRepointed, back.Round(time.Millisecond), w.total.Load(), w.failed.Load())
	if !res.Started.After(readAt) {
		t.Fatalf("the replicas were read %v after the kill, after sluice began its failover (%v after)",
			readAt.Sub(killedAt), res.Started.Sub(killedAt))
	}
	newMaster := serverAt(t, topo, srv.Topology().Current().Cluster("main").Master.Address)
	if newMaster != wantMaster || st.Master != wantMaster.Addr() || res.Outcome != health.OutcomePromoted {
		t.Errorf("sluice promoted %s (state file: %s, %s), want %s: the only replica that received everything",
			newMaster.Name, st.Master, res.Outcome, wantMaster.Name)
	}

	t.Run("NoAcknowledgedTransactionLost", func(t *testing.T) {
		checkTxns(t, ctx, topo, newMaster, w)
	})

	t.Run("NoGTIDReused", func(t *testing.T) {
		promotedAt, err := res.PromotedPosition()
		if err != nil || promotedAt.IsEmpty() {
			t.Fatalf("promoted_at %q: %v", res.PromotedAt, err)
		}
		// MariaDB numbers a domain's transactions in sequence: the new master's own writes
		// come after promoted_at, so a received GTID beyond it is a number handed out twice.
		for _, r := range topo.Replicas {
			recv := before[r].Replica.Received
			if !promotedAt.Contains(recv) {
				t.Errorf("%s was promoted at %s, but %s had received %s: its new writes reuse %s",
					newMaster.Name, promotedAt, r.Name, recv, recv.Missing(promotedAt))
			}
		}
		now := controlState(t, ctx, newMaster.Addr(), cred).BinlogPos
		if !now.Contains(promotedAt) || promotedAt.Contains(now) {
			t.Errorf("the new master's binlog is at %s, promoted at %s: no writes after the promotion?", now, promotedAt)
		}
		t.Logf("promoted at %s, binlog now %s", promotedAt, now)
	})

	t.Run("SurvivorsConsistent", func(t *testing.T) {
		var others []*sandbox.Server
		for _, r := range topo.Replicas {
			if r != newMaster {
				others = append(others, r)
			}
		}
		survivorsConverge(t, ctx, cred, newMaster, others)
	})
}

// setMasterDelay gives r a MASTER_DELAY of secs seconds and waits until its IO thread is
// connected again. Unlike delayReplica it leaves the delay in place at the end: by then r may
// be the master.
func setMasterDelay(t *testing.T, ctx context.Context, cred health.Credentials, r *sandbox.Server, secs int) {
	t.Helper()
	if err := r.Exec(ctx, "STOP SLAVE", fmt.Sprintf("CHANGE MASTER TO MASTER_DELAY = %d", secs), "START SLAVE"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	eventually(t, wctx, r.Name+" replicates again after CHANGE MASTER TO MASTER_DELAY", func() error {
		if rs := controlState(t, wctx, r.Addr(), cred).Replica; !rs.IOConnected() || !rs.SQLRunning {
			return fmt.Errorf("IO %s, SQL running %v", rs.IORunning, rs.SQLRunning)
		}
		return nil
	})
}

// TestFailoverDelayedReplicaTie: r1 replicates with MASTER_DELAY=20, r2 without; both have
// received the same when the master is killed. The tie goes to r2, which applied everything:
// writes are back within 3 s (not after r1's delay) and nothing acknowledged is lost.
func TestFailoverDelayedReplicaTie(t *testing.T) {
	skipInEventLoopRun(t)
	topo, cred := semiSyncTopology(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r1, r2 := topo.Replicas[0], topo.Replicas[1]
	setMasterDelay(t, ctx, cred, r1, 20)
	srv, w, dir, _ := startDegradedSluice(t, ctx, topo)
	w.writeAWhile(t, ctx, time.Second, 100)

	// Both must have received the same when the master dies, so the writers are held back
	// (transactions in flight finish) until r1 received and r2 applied everything, and let go
	// right after the kill: their next transactions are the first ones after it.
	w.pause()
	paused := true
	defer func() {
		if paused {
			w.resume()
		}
	}()
	mpos := controlState(t, ctx, topo.Master.Addr(), cred).BinlogPos
	sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
	eventually(t, sctx, "r1 received and r2 applied everything", func() error {
		s1 := controlState(t, sctx, r1.Addr(), cred).Replica
		s2 := controlState(t, sctx, r2.Addr(), cred).Replica
		if !s1.Received.Contains(mpos) || !s2.Executed.Contains(mpos) {
			return fmt.Errorf("master at %s, %s received %s, %s executed %s", mpos, r1.Name, s1.Received, r2.Name, s2.Executed)
		}
		return nil
	})
	scancel()
	killedAt := w.kill(t, topo.Master)
	w.resume()
	paused = false
	before := receivedAll(t, ctx, cred, topo.Replicas)
	if s1, s2 := before[r1].Replica, before[r2].Replica; !s1.Received.Equal(s2.Received) || s1.Executed.Contains(s1.Received) {
		t.Fatalf("setup: %s received %s and executed %s (delayed), %s received %s: want the same received, %s behind",
			r1.Name, s1.Received, s1.Executed, r2.Name, s2.Received, r1.Name)
	}
	t.Logf("after the kill both received %s; %s (MASTER_DELAY=20) executed %s, %s executed %s", before[r1].Replica.Received,
		r1.Name, before[r1].Replica.Executed, r2.Name, before[r2].Replica.Executed)

	fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
	defer fcancel()
	back := w.writesBackAfter(t, fctx)
	st := recordedFailover(t, fctx, dir)
	res := st.History[len(st.History)-1]
	w.halt()
	w.logErrors(t)
	t.Logf("writes back after %v", back.Round(time.Millisecond))
	t.Logf("failover %s: %s -> %s %v after the kill (%s), skipped %v; %d acknowledged, %d failed attempts",
		res.Outcome, res.OldMaster, res.NewMaster, res.Finished.Sub(killedAt).Round(time.Millisecond), stepsString(&res),
		res.Skipped, w.total.Load(), w.failed.Load())
	newMaster := serverAt(t, topo, srv.Topology().Current().Cluster("main").Master.Address)
	if newMaster != r2 || res.NewMaster != r2.Addr() {
		t.Errorf("sluice promoted %s, want %s: it applied everything and has no MASTER_DELAY", newMaster.Name, r2.Name)
	}
	if back > 3*time.Second {
		t.Errorf("writes back after %v, want within 3s", back.Round(time.Millisecond))
	}
	checkTxns(t, ctx, topo, newMaster, w)
}

// TestFailoverDelayedOnlyFullReceiver: r1 replicates with MASTER_DELAY=20 and is the only
// replica that received everything (r2's IO thread stopped a second before the kill). r1 must
// be promoted with its delay lifted: writes are back well before the 20 s delay, nothing
// acknowledged is lost, and r1, now the master, replicates from no one (no delay left).
func TestFailoverDelayedOnlyFullReceiver(t *testing.T) {
	skipInEventLoopRun(t)
	topo, cred := semiSyncTopology(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r1, r2 := topo.Replicas[0], topo.Replicas[1]
	setMasterDelay(t, ctx, cred, r1, 20)
	srv, w, dir, _ := startDegradedSluice(t, ctx, topo)
	w.writeAWhile(t, ctx, time.Second, 100)
	if err := r2.Exec(ctx, "STOP SLAVE IO_THREAD"); err != nil {
		t.Fatal(err)
	}
	w.writeAWhile(t, ctx, time.Second, 50)

	killedAt := w.kill(t, topo.Master)
	before := receivedAll(t, ctx, cred, topo.Replicas)
	s1, s2 := before[r1].Replica, before[r2].Replica
	if !s1.Received.Contains(s2.Received) || s2.Received.Contains(s1.Received) || s1.Executed.Contains(s1.Received) {
		t.Fatalf("setup: %s received %s, executed %s; %s received %s: want %s ahead in what it received, behind in what it applied",
			r1.Name, s1.Received, s1.Executed, r2.Name, s2.Received, r1.Name)
	}
	t.Logf("after the kill %s (MASTER_DELAY=20) received %s and executed %s; %s received %s", r1.Name, s1.Received,
		s1.Executed, r2.Name, s2.Received)

	fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
	defer fcancel()
	back := w.writesBackAfter(t, fctx)
	st := recordedFailover(t, fctx, dir)
	res := st.History[len(st.History)-1]
	w.halt()
	w.logErrors(t)
	t.Logf("writes back after %v", back.Round(time.Millisecond))
	t.Logf("failover %s: %s -> %s %v after the kill (%s), skipped %v; %d acknowledged, %d failed attempts",
		res.Outcome, res.OldMaster, res.NewMaster, res.Finished.Sub(killedAt).Round(time.Millisecond), stepsString(&res),
		res.Skipped, w.total.Load(), w.failed.Load())
	newMaster := serverAt(t, topo, srv.Topology().Current().Cluster("main").Master.Address)
	if newMaster != r1 || res.NewMaster != r1.Addr() {
		t.Errorf("sluice promoted %s, want %s: the only replica that received everything", newMaster.Name, r1.Name)
	}
	if back >= 10*time.Second {
		t.Errorf("writes back after %v, want well under r1's 20s delay (< 10s)", back.Round(time.Millisecond))
	}
	checkTxns(t, ctx, topo, newMaster, w)
	if newMaster != r1 {
		return
	}
	rst := controlState(t, ctx, r1.Addr(), cred)
	if rst.ReadOnly {
		t.Errorf("%s, the new master, is read-only", r1.Name)
	}
	if rs, err := r1.ReplicaStatus(ctx); err != nil {
		t.Fatal(err)
	} else if rs != nil && rs["SQL_Delay"] != "0" {
		t.Errorf("%s, the new master, still has a replication configuration with SQL_Delay %s", r1.Name, rs["SQL_Delay"])
	}
	survivorsConverge(t, ctx, cred, r1, []*sandbox.Server{r2})
}

// TestFailoverRefusesToDiscard: the only replica that received everything (r1) cannot apply
// it: a row written on r1 alone makes its SQL thread stop with a duplicate-key error, and r2's
// IO thread was stopped earlier. Promoting r2 would discard what r1 received, promoting r1
// cannot complete, so sluice refuses the failover and alerts: sluice_failovers_total
// {outcome="refused_divergent"}, an error log line "failover refused"; no server becomes
// writable and r1 keeps what it received.
func TestFailoverRefusesToDiscard(t *testing.T) {
	skipInEventLoopRun(t)
	topo, cred := semiSyncTopology(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r1, r2 := topo.Replicas[0], topo.Replicas[1]
	old := topo.Master
	srv, w, _, logs := startDegradedSluice(t, ctx, topo)
	if err := r2.Exec(ctx, "STOP SLAVE IO_THREAD"); err != nil {
		t.Fatal(err)
	}
	w.writeAWhile(t, ctx, time.Second, 50)

	// The trap: rows -2 and -1 (transaction -1) exist on r1 alone, out of the binlog; the same
	// transaction committed through sluice reaches r1 (which acknowledges it) and stops its SQL
	// thread with a duplicate key.
	if err := r1.Exec(ctx, "SET SESSION sql_log_bin = 0", "INSERT INTO sluice_test.txn_rows (id, txn, writer) VALUES (-2, -1, -1)"); err != nil {
		t.Fatal(err)
	}
	db := sluiceTxnDB(t, topo, srv)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO txn_rows (id, txn, writer) VALUES (-2, -1, -1), (-1, -1, -1)"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
	eventually(t, sctx, r1.Name+"'s SQL thread stops on the duplicate key", func() error {
		rs := controlState(t, sctx, r1.Addr(), cred).Replica
		if rs.SQLRunning || rs.LastSQLErrno != 1062 {
			return fmt.Errorf("SQL running %v, error %d %s", rs.SQLRunning, rs.LastSQLErrno, rs.LastSQLError)
		}
		return nil
	})
	scancel()
	w.writeAWhile(t, ctx, time.Second, 50)

	epoch := srv.Topology().Current().Epoch
	killedAt := w.kill(t, old)
	before := receivedAll(t, ctx, cred, topo.Replicas)
	s1, s2 := before[r1].Replica, before[r2].Replica
	if !s1.Received.Contains(s2.Received) || s2.Received.Contains(s1.Received) || s1.SQLRunning {
		t.Fatalf("setup: %s received %s (SQL running %v), %s received %s: want %s strictly ahead and stopped", r1.Name,
			s1.Received, s1.SQLRunning, r2.Name, s2.Received, r1.Name)
	}
	ioPos := func() health.GTIDSet {
		rs, err := r1.ReplicaStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rs == nil {
			t.Fatalf("%s replicates from no one", r1.Name)
		}
		g, err := health.ParseGTID(health.FlavorMariaDB, rs["Gtid_IO_Pos"])
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	ioBefore := ioPos()
	t.Logf("after the kill %s received %s (Gtid_IO_Pos %s), executed %s, SQL error %d; %s received %s", r1.Name, s1.Received,
		ioBefore, s1.Executed, s1.LastSQLErrno, r2.Name, s2.Received)

	// Wait for the refusal; a promotion ends the wait at once, and the checks below show the
	// damage it did.
	const refused = `sluice_failovers_total{cluster="main",outcome="refused_divergent"}`
	deadline := time.Now().Add(20 * time.Second)
	var nRefused float64
	for {
		if e := srv.Topology().Current().Epoch; e != epoch {
			t.Errorf("sluice failed over to %s %v after the kill, although only %s holds every received transaction and cannot apply them",
				srv.Topology().Current().Cluster("main").Master.Address, time.Since(killedAt).Round(time.Millisecond), r1.Name)
			break
		}
		if nRefused = scrapeFrom(t, srv, refused); nRefused >= 1 {
			t.Logf("refused %v after the kill", time.Since(killedAt).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("no refusal counted (%s) within 20s of the kill", refused)
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	w.halt()

	// The log line comes with the counter; it gets a moment more only when the refusal was seen.
	lineWait := time.Duration(0)
	if nRefused >= 1 {
		lineWait = 5 * time.Second
	}
	lineDeadline := time.Now().Add(lineWait)
	for {
		found := logs.FilterLevelExact(zapcore.ErrorLevel).FilterMessageSnippet("failover refused").All()
		if len(found) > 0 {
			fields := found[0].ContextMap()
			t.Logf("logged: %s %v", found[0].Message, fields)
			if _, ok := fields["gtids"]; !ok {
				t.Errorf("the refusal's log line names no GTIDs: %v", fields)
			}
			break
		}
		if time.Now().After(lineDeadline) {
			t.Errorf("no error log line with \"failover refused\"")
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	// SHOW EVENTS on the admin port has the refusal, naming what is at stake.
	var kinds []string
	refusal := ""
	rows, err := adminDB(t, srv, adminPassword).QueryContext(ctx, "SHOW EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	cols, _ := rows.Columns()
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := map[string]string{}
		for i, c := range cols {
			row[c] = vals[i].String
		}
		kinds = append(kinds, row["kind"])
		if row["kind"] == "failover_refused" && refusal == "" {
			refusal = row["detail"]
		}
	}
	rows.Close()
	if !strings.Contains(refusal, "cannot apply") || !strings.Contains(refusal, r1.Addr()) {
		t.Errorf("SHOW EVENTS has no failover_refused row naming %s and what it cannot apply: kinds %v, detail %q", r1.Addr(), kinds, refusal)
	}
	for _, r := range topo.Replicas {
		if ro, err := r.Variable(ctx, "read_only"); err != nil || ro != "ON" {
			t.Errorf("%s read_only = %q (%v) after the refusal", r.Name, ro, err)
		}
	}
	if e := srv.Topology().Current().Epoch; e != epoch {
		t.Errorf("epoch %d -> %d after the refusal", epoch, e)
	}
	rs := controlState(t, ctx, r1.Addr(), cred).Replica
	if !rs.Configured || rs.MasterPort != old.Port {
		t.Errorf("%s was repointed (master port %d, configured %v): its relay log is gone", r1.Name, rs.MasterPort, rs.Configured)
	}
	if io := ioPos(); !io.Contains(ioBefore) {
		t.Errorf("%s's Gtid_IO_Pos went from %s to %s: what it received was discarded", r1.Name, ioBefore, io)
	}
}
