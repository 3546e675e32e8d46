package fleetha

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/sandbox"
	ft "github.com/sluice-proxy/sluice/tests/internal/failovertest"
)

// Bounds of the tests, from the master's kill -9 (detection takes about
// 1.5 s: probes every 500 ms, down after 3 failures).
const (
	// resumeWithin is issue 27's bound for writes through every sluice.
	resumeWithin = 3 * time.Second
	// stopFor is how long the prober-leader stays stopped (issue 27).
	stopFor = 10 * time.Second
	// quietFor is the window in which, without an etcd quorum, nothing
	// may be promoted: about 3x the normal detection and failover time.
	quietFor = 8 * time.Second
	// etcdLostLog is what the fleet logs when etcd stops answering.
	etcdLostLog = "etcd does not answer"
)

var all = []int{0, 1, 2}

// TestFleetOnePromotion: 8 writers spread over 3 sluices that share a
// 3-member etcd cluster, in front of a master and 2 semi-synchronous
// replicas; the master gets kill -9. Exactly one history entry records a
// change of master after the kill (and exactly one topology write happens,
// as an etcd watch sees it), one instance counts a promotion, writes resume
// through all 3 sluices within 3 s of the kill, and every acknowledged
// transaction is on the new master.
func TestFleetOnePromotion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := newRig(t, ctx)
	old := r.topo.Master
	if n, each, err := r.promoted(r.sluices); err != nil || n != 0 {
		t.Fatalf("before the kill: promotions %v (%v), err %v", n, each, err)
	}
	killRev, err := r.revision()
	if err != nil {
		t.Fatal(err)
	}
	w := r.watchCluster(killRev)
	sampler := ft.StartSampler(r.topo.Replicas, 200*time.Millisecond)
	defer sampler.Stop()

	killedAt := time.Now()
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	// Marked once the master is gone: a transaction begun before could
	// still have been acknowledged by it.
	r.markAll()
	took := r.resumed(all, killedAt, 20*time.Second)
	r.checkResumed("after the master's kill -9", all, took, resumeWithin)
	master, top := r.newMaster(old, 15*time.Second)
	if err := ft.Eventually(ctx, 5*time.Second, "every sluice applies the new topology", func() error {
		return r.allApplied(top.ModRev, r.sluices)
	}); err != nil {
		t.Error(err)
	}
	// More writes through every sluice, so that a second promotion, late
	// or by a second instance, has time to show in etcd and the metrics.
	r.markAll()
	if err := ft.Eventually(ctx, 15*time.Second, "200 more writes through every sluice", func() error {
		for i, w := range r.writers {
			if n := w.AfterMark(); n < 200 {
				return fmt.Errorf("%s: %d", r.names[i], n)
			}
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	r.checkNoLoss(master)

	hist, err := r.historyAfter(killRev)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("history after the kill: %v", hist)
	if len(hist) != 1 {
		t.Fatalf("%d history entries after the kill, want exactly 1: %v", len(hist), hist)
	}
	h := hist[0]
	if h.Outcome != "promoted" || h.Master != master.Addr() || h.OldMaster != old.Addr() || r.index(h.By) < 0 {
		t.Errorf("the history entry %s: want promoted from %s to %s by one of %v", h, old.Addr(), master.Addr(), r.names)
	}
	checkWatched(t, w, 1, "")
	n, each, err := r.promoted(r.sluices)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || r.index(h.By) >= 0 && each[r.index(h.By)] != 1 {
		t.Errorf(`sluice_failovers_total{outcome="promoted"} per sluice %v, want 1 in all, by %s`, each, h.By)
	}
	if _, followed, err := r.sumMetric(r.sluices, "sluice_failovers_total", map[string]string{"cluster": cluster, "outcome": "followed"}); err == nil {
		t.Logf(`sluice_failovers_total{outcome="followed"} per sluice: %v`, followed)
	}
	if rounds, violations := sampler.Stop(); len(violations) > 0 {
		t.Errorf("more than one writable server in %d of %d samples: %v", len(violations), rounds, ft.First(violations, 5))
	}
	if t.Failed() {
		t.Log(r.tails(30))
	}
}

// checkWatched checks what the watch saw: exactly n topology writes, each
// with its history entry, none by instance notBy.
func checkWatched(t *testing.T, w *watch, n int, notBy string) {
	t.Helper()
	events, errs := w.seen()
	if len(errs) > 0 {
		t.Errorf("watching the cluster's keys: %v", errs)
	}
	var topo, hist int
	for _, ev := range events {
		if ev.By == notBy && notBy != "" {
			t.Errorf("%s wrote %s", notBy, ev)
		}
		if slices.ContainsFunc(events, func(o record) bool { return o.ModRev == ev.ModRev && o.Key != ev.Key }) {
			if strings.HasSuffix(ev.Key, "/topology") {
				topo++
			} else {
				hist++
			}
			continue
		}
		t.Errorf("%s was written without its topology or history twin in the same transaction", ev)
	}
	if topo != n || hist != n {
		t.Errorf("the watch saw %d topology and %d history writes, want %d each: %v", topo, hist, n, events)
	}
}

// TestFleetStoppedLeader: the prober-leader sluice gets SIGSTOP and the
// master kill -9 while it is stopped. Another instance promotes a replica
// within the 10 s the leader stays stopped; after SIGCONT, etcd holds no
// topology or history write by the old leader from the SIGSTOP on, and the
// old leader applies the new topology and sends its writes to the new
// master.
func TestFleetStoppedLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := newRig(t, ctx)
	old := r.topo.Master
	leader := r.waitLeader()
	li := r.index(leader)
	L := r.sluices[li]
	others := slices.DeleteFunc(slices.Clone(all), func(i int) bool { return i == li })
	stopRev, err := r.revision()
	if err != nil {
		t.Fatal(err)
	}
	w := r.watchCluster(stopRev)

	if err := L.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	// A failing test must not leave it stopped: SIGTERM at the cleanup would not end it.
	t.Cleanup(func() { _ = L.Cmd.Process.Signal(syscall.SIGCONT) })
	killedAt := time.Now()
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	r.markAll() // once the master is gone, as in TestFleetOnePromotion
	var promotion record
	if err := ft.Eventually(ctx, time.Until(stoppedAt.Add(stopFor)), "another instance promotes while the leader is stopped", func() error {
		hist, err := r.historyAfter(stopRev)
		if err != nil {
			return err
		}
		for _, h := range hist {
			if h.Master != old.Addr() {
				promotion = h
				return nil
			}
		}
		return fmt.Errorf("history after the stop: %v", hist)
	}); err != nil {
		t.Fatalf("%v\n%s", err, r.tails(30))
	}
	t.Logf("%s (stopped leader %s) promoted %v after the master's kill: %s", promotion.By, leader, time.Since(killedAt).Round(time.Millisecond), promotion)
	if promotion.By == leader || r.index(promotion.By) < 0 {
		t.Errorf("the promotion is by %q, want another instance than the stopped %s", promotion.By, leader)
	}
	took := r.resumed(others, killedAt, time.Until(stoppedAt.Add(stopFor)))
	r.checkResumed("while the leader is stopped", others, took, stopFor)

	// The old leader stays stopped for the whole 10 s on purpose: the
	// scenario is a leader that wakes up after the others moved on.
	time.Sleep(time.Until(stoppedAt.Add(stopFor)))
	if err := L.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	contAt := time.Now()
	r.writers[li].Mark()
	master, top := r.newMaster(old, 5*time.Second)
	if err := ft.Eventually(ctx, 10*time.Second, "the old leader follows the new master", func() error {
		if err := r.allApplied(top.ModRev, []*ft.Sluice{L}); err != nil {
			return err
		}
		if n := r.writers[li].AfterMark(); n < 20 {
			return fmt.Errorf("%d writes through %s acknowledged since SIGCONT (%d failed: %v)", n, leader, r.writers[li].Failed(), ft.First(r.writers[li].Errors(), 3))
		}
		return nil
	}); err != nil {
		t.Errorf("%v\n%s", err, L.Log.Tail(30))
	}
	t.Logf("the old leader %s applied revision %d and had 20 writes acknowledged %v after SIGCONT", leader, top.ModRev, time.Since(contAt).Round(time.Millisecond))
	if err := markLands(ctx, ft.ClientDSN(r.topo, L.Addr), master); err != nil {
		t.Error(err)
	}
	r.checkNoLoss(master)

	hist, err := r.historyAfter(stopRev)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hist {
		if h.By == leader {
			t.Errorf("the old leader %s wrote a history entry after its SIGSTOP (revision %d): %s", leader, stopRev, h)
		}
	}
	if top, err := r.topology(); err != nil || top.ModRev > stopRev && top.By == leader {
		t.Errorf("the topology key after the test: %s (%v), written by the old leader after its SIGSTOP", top, err)
	}
	if len(hist) != 1 {
		t.Errorf("%d history entries after the stop, want exactly 1 (the promotion): %v", len(hist), hist)
	}
	checkWatched(t, w, 1, leader)
	if n, each, err := r.promoted(r.sluices); err != nil || n != 1 || each[li] != 0 {
		t.Errorf(`sluice_failovers_total{outcome="promoted"} per sluice %v (err %v), want 1 in all, 0 on the old leader %s`, each, err, leader)
	}
	if t.Failed() {
		t.Log(r.tails(30))
	}
}

// waitLeader waits until one instance holds the cluster's election and
// the metrics agree: sluice_fleet_leader is 1 on it and 0 on the others.
func (r *rig) waitLeader() string {
	r.t.Helper()
	var leader string
	if err := ft.Eventually(r.ctx, 15*time.Second, "one prober-leader, in etcd and in the metrics", func() error {
		var err error
		if leader, err = r.leader(); err != nil {
			return err
		}
		if r.index(leader) < 0 {
			return fmt.Errorf("the election key's value %q names no instance of %v", leader, r.names)
		}
		_, each, err := r.sumMetric(r.sluices, "sluice_fleet_leader", map[string]string{"cluster": cluster})
		if err != nil {
			return err
		}
		for i, v := range each {
			if want := r.names[i] == leader; (v == 1) != want || v != 0 && v != 1 {
				return fmt.Errorf("etcd's leader is %s; sluice_fleet_leader per sluice %v", leader, each)
			}
		}
		return nil
	}); err != nil {
		r.t.Fatalf("%v\n%s", err, r.tails(20))
	}
	r.t.Logf("the prober-leader is %s", leader)
	return leader
}

// markLands writes a row through the sluice at dsn and checks it is on master.
func markLands(ctx context.Context, dsn string, master *sandbox.Server) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	const id = 27
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(wctx, "INSERT INTO marks (id) VALUES (?)", id); err != nil {
		return fmt.Errorf("writing a mark through the old leader: %w", err)
	}
	root, err := master.RootDB()
	if err != nil {
		return err
	}
	var n int
	if err := root.QueryRowContext(wctx, "SELECT COUNT(*) FROM "+sandbox.TestDatabase+".marks WHERE id = ?", id).Scan(&n); err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("the mark written through the old leader is not on the new master %s", master.Name)
	}
	return nil
}

// TestFleetNoPromotionWithoutQuorum: 2 of the 3 etcd members get kill -9.
// Every sluice reports etcd lost (metric and log) and keeps serving reads
// and writes; then the master gets kill -9 and for 8 s (3x the normal
// detection and failover time) both replicas stay read-only and no
// instance promotes. With the 2 members back, every sluice sees etcd again
// without a restart, the leader promotes a replica and writes resume
// through all 3 sluices, with no acknowledged transaction lost.
func TestFleetNoPromotionWithoutQuorum(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := newRig(t, ctx)
	old := r.topo.Master
	lost := r.etcd.Members[1:]
	for _, m := range lost {
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	lostAt := time.Now()
	r.waitEtcd(0, 20*time.Second)
	t.Logf("every sluice reported etcd lost %v after 2 of 3 members were killed", time.Since(lostAt).Round(time.Millisecond))
	r.checkServing("without an etcd quorum")

	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	r.checkNothingPromoted(killedAt)

	restoredAt := time.Now()
	r.markAll()
	for _, m := range lost {
		if _, err := m.StartNoWait(); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range lost {
		if err := m.WaitHealthy(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("etcd members healthy again %v after their restart", time.Since(restoredAt).Round(time.Millisecond))
	r.waitEtcd(1, 20*time.Second)
	t.Logf("every sluice reported etcd back %v after the restart", time.Since(restoredAt).Round(time.Millisecond))
	r.waitLeader()
	took := r.resumed(all, restoredAt, 30*time.Second)
	r.checkResumed("after etcd's restart", all, took, 30*time.Second)
	master, top := r.newMaster(old, 10*time.Second)
	if err := ft.Eventually(ctx, 5*time.Second, "every sluice applies the new topology", func() error {
		return r.allApplied(top.ModRev, r.sluices)
	}); err != nil {
		t.Error(err)
	}
	r.checkNoLoss(master)
	hist, err := r.history()
	if err != nil {
		t.Fatal(err)
	}
	changes := slices.DeleteFunc(hist, func(h record) bool { return h.Outcome == "initial" })
	if len(changes) != 1 || changes[0].Outcome != "promoted" || changes[0].Master != master.Addr() {
		t.Errorf("history entries after the initial one: %v, want one promotion to %s", changes, master.Addr())
	}
	if n, each, err := r.promoted(r.sluices); err != nil || n != 1 {
		t.Errorf(`sluice_failovers_total{outcome="promoted"} per sluice %v (err %v), want 1 in all`, each, err)
	}
	// Resynchronised without a restart: the processes started at the
	// beginning still run.
	for _, s := range r.sluices {
		select {
		case <-s.Done():
			t.Errorf("%s exited (%v); log tail:\n%s", s.Name, s.Err(), s.Log.Tail(20))
		default:
		}
	}
	if t.Failed() {
		t.Log(r.tails(30))
	}
}

// waitEtcd waits until every sluice reports sluice_fleet_etcd_up == up;
// for 0 also that none is a prober-leader and each logged etcd lost.
func (r *rig) waitEtcd(up float64, bound time.Duration) {
	r.t.Helper()
	if err := ft.Eventually(r.ctx, bound, fmt.Sprintf("sluice_fleet_etcd_up %v on every sluice", up), func() error {
		for _, s := range r.sluices {
			m, err := r.scrape(s)
			if err != nil {
				return err
			}
			if v, ok := m.value("sluice_fleet_etcd_up", nil); !ok || v != up {
				return fmt.Errorf("%s: sluice_fleet_etcd_up = %v (present %v)", s.Name, v, ok)
			}
			if up != 0 {
				continue
			}
			if v, _ := m.value("sluice_fleet_leader", map[string]string{"cluster": cluster}); v != 0 {
				return fmt.Errorf("%s: still prober-leader (sluice_fleet_leader 1) without an etcd quorum", s.Name)
			}
			if len(s.Log.Grep(etcdLostLog)) == 0 {
				return fmt.Errorf("%s has not logged %q", s.Name, etcdLostLog)
			}
		}
		return nil
	}); err != nil {
		r.t.Fatalf("%v\n%s", err, r.tails(20))
	}
}

// checkServing checks that writes and reads go through every sluice.
func (r *rig) checkServing(what string) {
	r.t.Helper()
	r.markAll()
	if err := ft.Eventually(r.ctx, 10*time.Second, "writes through every sluice "+what, func() error {
		for i, w := range r.writers {
			if n := w.AfterMark(); n < 20 {
				return fmt.Errorf("%s: %d writes acknowledged (%d failed: %v)", r.names[i], n, w.Failed(), ft.First(w.Errors(), 3))
			}
		}
		return nil
	}); err != nil {
		r.t.Error(err)
	}
	for _, s := range r.sluices {
		db, err := sql.Open("mysql", ft.ClientDSN(r.topo, s.Addr))
		if err != nil {
			r.t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
		var n int64
		var sid uint32
		err = db.QueryRowContext(ctx, "SELECT COUNT(*), @@server_id FROM acked").Scan(&n, &sid)
		cancel()
		db.Close()
		if err != nil {
			r.t.Errorf("a read through %s %s: %v", s.Name, what, err)
		} else {
			r.t.Logf("a read through %s %s: %d rows, served by server_id %d", s.Name, what, n, sid)
		}
	}
}

// checkNothingPromoted watches, until quietFor after killedAt, that both
// replicas stay read-only (asked directly) and that no sluice counts a
// promotion. The window is deliberate: it shows that nothing happens.
func (r *rig) checkNothingPromoted(killedAt time.Time) {
	r.t.Helper()
	samples := 0
	for time.Since(killedAt) < quietFor && r.ctx.Err() == nil {
		views := ft.LookAll(r.ctx, r.topo.Replicas)
		for _, v := range views {
			if v.Err != nil || !v.ReadOnly {
				r.t.Fatalf("%v after the master's kill without an etcd quorum: %s\n%s", time.Since(killedAt).Round(time.Millisecond), v, r.tails(30))
			}
		}
		if n, each, err := r.promoted(r.sluices); err != nil || n != 0 {
			r.t.Fatalf("without an etcd quorum: promotions per sluice %v (err %v)\n%s", each, err, r.tails(30))
		}
		samples++
		time.Sleep(200 * time.Millisecond) // the sampling period of the window
	}
	r.t.Logf("for %v after the master's kill without an etcd quorum, %d samples: both replicas read-only, no promotion", quietFor, samples)
}
