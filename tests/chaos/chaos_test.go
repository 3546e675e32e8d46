package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/sandbox"
	ft "github.com/sluice-proxy/sluice/tests/internal/failovertest"
	"github.com/sluice-proxy/sluice/tests/internal/sluicebin"
)

// Environment of the chaos loop.
const (
	// IterationsEnv is how many iterations run; without it the test skips itself.
	IterationsEnv = "SLUICE_CHAOS_ITERATIONS"
	// SeedEnv fixes the random seed (default: the clock); iteration i uses seed+i, so one
	// iteration is replayed with SLUICE_CHAOS_SEED=<its seed> SLUICE_CHAOS_ITERATIONS=1.
	SeedEnv = "SLUICE_CHAOS_SEED"
)

// Bounds of one iteration.
const (
	writers = 4
	// outcomeWithin: from the events to writes taken by a new master (or a refusal logged).
	outcomeWithin = 45 * time.Second
	// convergeWithin: from the test healing what it degraded to every replica following the
	// master with everything applied.
	convergeWithin = 30 * time.Second
	iterationLimit = 3 * time.Minute
	sampleEvery    = 100 * time.Millisecond
	// refusedLine starts the error line of a failover refused because promoting any replica
	// would discard transactions another received.
	refusedLine = "failover refused"
)

// failpoints are the failover steps a sluice of an iteration may die at.
var failpoints = []string{"failover.chosen", "failover.stopped", "failover.reset", "failover.promoted",
	"failover.repointed#1", "failover.recorded"}

// TestChaos runs SLUICE_CHAOS_ITERATIONS iterations of random faults against sluice's
// automatic failover (see runIteration) and fails when an iteration loses an acknowledged
// transaction, ever has two writable servers, or leaves a replica that does not converge.
// Every iteration runs even after one failed; each failed one logs how to replay it.
func TestChaos(t *testing.T) {
	iterations := os.Getenv(IterationsEnv)
	if iterations == "" {
		t.Skip(IterationsEnv + " is not set (make chaos sets it)")
	}
	n, err := strconv.Atoi(iterations)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", IterationsEnv, iterations)
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv(SeedEnv); s != "" {
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", SeedEnv, s, err)
		}
	}
	t.Logf("chaos: seed %d, %d iterations (replay: %s=%d %s=%d)", seed, n, SeedEnv, seed, IterationsEnv, n)
	bin := sluicebin.BuildTags(t, "failpoint")
	var lines []string
	failed := 0
	for i := range n {
		s := seed + int64(i)
		var r result
		begin := time.Now()
		ok := t.Run(fmt.Sprintf("iteration%02d", i), func(t *testing.T) {
			t.Logf("seed %d (replay alone: %s=%d %s=1)", s, SeedEnv, s, IterationsEnv)
			runIteration(t, bin, s, &r)
		})
		took := time.Since(begin)
		status := "ok"
		if !ok {
			status = "FAILED"
			failed++
		}
		lines = append(lines, fmt.Sprintf("chaos: iteration %2d seed %d %-6s %5.1fs  %s", i, s, status, took.Seconds(), r))
	}
	for _, l := range lines {
		t.Log(l)
	}
	t.Logf("chaos: %d of %d iterations failed (seed %d)", failed, n, seed)
}

// degradation is what the test does to a replica before the events.
type degradation int

const (
	healthy degradation = iota
	ioStopped
	sqlStopped
	delayed
)

func (d degradation) String() string {
	return [...]string{"healthy", "IO thread stopped", "SQL thread stopped", "delayed"}[d]
}

// plan is one iteration's random choices, all drawn from its seed before anything runs.
type plan struct {
	replicas int
	degrade  []degradation
	delay    []int // MASTER_DELAY seconds of the delayed replicas
	// killMaster: kill -9 the master (restarted read-only once the failover is through).
	killMaster bool
	// killReplica is the replica to kill -9 (-1: none), before the master's kill or after
	// it; it is restarted once the failover is through.
	killReplica       int
	replicaKillBefore bool
	// failpoint: the first sluice dies at this failover step ("" for none).
	failpoint string
	// sluiceKillAt: kill -9 sluice this long after the events (negative: never).
	sluiceKillAt time.Duration
	// replicaKillAt: when a replica killed after the master dies, after the events.
	replicaKillAt time.Duration
	// warmup, settle and ioLead are the pauses before the degradations, between the SQL
	// thread and delay degradations and the IO thread ones, and before the events.
	warmup, settle, ioLead time.Duration
	// restartPauses are how long the supervisor waits before restarting a dead sluice.
	restartPauses []time.Duration
}

func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}

func newPlan(r *rand.Rand) plan {
	p := plan{replicas: 2 + r.IntN(2), killReplica: -1, sluiceKillAt: -1}
	p.degrade = make([]degradation, p.replicas)
	p.delay = make([]int, p.replicas)
	for i := range p.replicas {
		switch x := r.IntN(10); {
		case x < 4:
			p.degrade[i] = healthy
		case x < 6:
			p.degrade[i] = ioStopped
		case x < 8:
			p.degrade[i] = sqlStopped
		default:
			p.degrade[i] = delayed
			p.delay[i] = 2 + r.IntN(3)
		}
	}
	p.killMaster = r.IntN(10) < 9
	if r.IntN(10) < 4 {
		p.killReplica = r.IntN(p.replicas)
		p.replicaKillBefore = r.IntN(2) == 0
	}
	// Semi-sync acknowledges a commit once one replica has it: some replica must receive
	// everything to the end, or the acknowledged transactions may live on a dead server only
	// and no failover could keep them. A replica that is killed does not count.
	receivers := 0
	for i, d := range p.degrade {
		if d != ioStopped && i != p.killReplica {
			receivers++
		}
	}
	if receivers == 0 {
		for i := range p.degrade {
			if i != p.killReplica {
				p.degrade[i] = healthy
				break
			}
		}
	}
	switch x := r.IntN(10); {
	case x < 4 && p.killMaster:
		fps := failpoints
		if p.replicas == 3 {
			fps = append(slices.Clone(fps), "failover.repointed#2")
		}
		p.failpoint = fps[r.IntN(len(fps))]
	case x < 7:
		p.sluiceKillAt = between(r, 0, 3*time.Second)
	}
	p.replicaKillAt = between(r, 0, 1500*time.Millisecond)
	p.warmup = between(r, 200*time.Millisecond, 800*time.Millisecond)
	p.settle = between(r, 300*time.Millisecond, time.Second)
	p.ioLead = between(r, 500*time.Millisecond, 1500*time.Millisecond)
	for range 4 {
		p.restartPauses = append(p.restartPauses, between(r, 0, time.Second))
	}
	return p
}

func (p plan) String() string {
	var parts []string
	for i, d := range p.degrade {
		s := fmt.Sprintf("replica%d %s", i+1, d)
		if d == delayed {
			s += fmt.Sprintf(" %ds", p.delay[i])
		}
		parts = append(parts, s)
	}
	desc := fmt.Sprintf("%d replicas (%s)", p.replicas, strings.Join(parts, ", "))
	if p.killMaster {
		desc += "; kill -9 master"
	}
	if p.killReplica >= 0 {
		when := "before the master's kill"
		if !p.replicaKillBefore {
			when = fmt.Sprintf("%v after the events", p.replicaKillAt.Round(time.Millisecond))
		}
		desc += fmt.Sprintf("; kill -9 replica%d %s", p.killReplica+1, when)
	}
	switch {
	case p.failpoint != "":
		desc += "; sluice dies at " + p.failpoint
	case p.sluiceKillAt >= 0:
		desc += fmt.Sprintf("; kill -9 sluice %v after the events", p.sluiceKillAt.Round(time.Millisecond))
	}
	return desc
}

// result sums up an iteration for the final table.
type result struct {
	plan    string
	outcome string
	figures []string
}

func (r result) String() string {
	return r.outcome + "; " + strings.Join(r.figures, ", ") + " | " + r.plan
}

func (r *result) add(format string, args ...any) {
	r.figures = append(r.figures, fmt.Sprintf(format, args...))
}

// pause waits d unless ctx ends first. It paces the faults; it never waits for a condition.
func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// freeAddr returns a loopback address with a port free right now, so that every sluice of an
// iteration listens where the writers connect.
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// onlyCopy describes what victim received that no other running replica has, "" when
// nothing: then killing it loses no transaction that a failover could keep.
func onlyCopy(ctx context.Context, victim *sandbox.Server, replicas []*sandbox.Server) string {
	v := ft.Look(ctx, victim)
	if v.Err != nil {
		return ""
	}
	best, bestName := uint64(0), "no other replica"
	for _, r := range replicas {
		if r == victim || !r.Running() {
			continue
		}
		o := ft.Look(ctx, r)
		if o.Err == nil && o.ReceivedSeq() >= best {
			best, bestName = o.ReceivedSeq(), r.Name
		}
	}
	if v.ReceivedSeq() <= best {
		return ""
	}
	return fmt.Sprintf("it received up to seq %d, %s only up to %d", v.ReceivedSeq(), bestName, best)
}

// runIteration is one iteration: a semi-sync sandbox with 2 or 3 replicas; sluice (failpoint
// build) as a supervised process with a state directory; writers through it; some replicas
// degraded (IO thread stopped, SQL thread stopped, MASTER_DELAY), always leaving one that
// receives everything; then the events: kill -9 of the master, of a replica (before or after
// the master's), of sluice (at a failpoint or at a random moment; the supervisor restarts
// it). Once writes go to a new master (or sluice refused the failover as divergent), the
// killed servers come back (the old master read-only, as its my.cnf would have it) and the
// test heals what it degraded, as a DBA would. Then: no acknowledged transaction missing or
// torn on the master and the replicas (refused: nothing promoted, none missing from the union
// of the servers), never two writable servers at one time (sampled every 100 ms), every live
// replica other than a fenced old master replicating from the master with everything applied,
// the old master read-only and never serving reads, the state file naming the new master.
func runIteration(t *testing.T, bin string, seed int64, res *result) {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(seed)>>32^0x5eed))
	p := newPlan(rng)
	res.plan = p.String()
	t.Logf("plan: %s", p)
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), iterationLimit)
	defer cancel()

	topo, err := sandbox.Start(ctx, sandbox.Options{Replicas: p.replicas, SemiSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := topo.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err := ft.CreateSchema(ctx, topo); err != nil {
		t.Fatal(err)
	}
	res.add("setup %.1fs", time.Since(begin).Seconds())
	master := topo.Master
	data := append([]*sandbox.Server{master}, topo.Replicas...)
	stateDir := t.TempDir()
	addr := freeAddr(t)
	cfg := sluicebin.WriteConfig(t, ft.Config(topo, addr, stateDir))
	sup, err := startSupervisor(t, bin, cfg, p.failpoint, p.restartPauses)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			_, _, tails := sup.report(25)
			t.Logf("sluice logs:\n%s", tails)
			t.Logf("servers at the end:\n%s", ft.Describe(ft.LookAll(context.Background(), data)))
		}
	}()
	sampler := ft.StartSampler(data, sampleEvery)
	// Checked on every way out, a t.Fatal's included.
	defer func() {
		rounds, twoWritable := sampler.Stop()
		res.add("%d samples", rounds)
		if len(twoWritable) > 0 {
			t.Errorf("two servers writable at once in %d of %d samples, first: %v", len(twoWritable), rounds, ft.First(twoWritable, 5))
		}
		sup.Stop()
		notes, unwanted, _ := sup.report(0)
		for _, u := range unwanted {
			t.Errorf("sluice: %s", u)
		}
		t.Logf("sluice processes:\n  %s", strings.Join(notes, "\n  "))
	}()
	dsn := ft.ClientDSN(topo, addr)
	w, err := ft.StartWriters(ctx, dsn, writers, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Halt()
	if err := ft.Eventually(ctx, 30*time.Second, "writers get going", func() error {
		if n := w.Total(); n < 100 {
			return fmt.Errorf("%d transactions acknowledged", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Degradations: the ones that still receive first, the IO threads last, so the stopped
	// receivers miss the writes of the last second or so.
	exec := func(s *sandbox.Server, stmts ...string) {
		if err := s.Exec(ctx, stmts...); err != nil {
			t.Fatal(err)
		}
	}
	pause(ctx, p.warmup)
	for i, d := range p.degrade {
		switch d {
		case sqlStopped:
			exec(topo.Replicas[i], "STOP SLAVE SQL_THREAD")
		case delayed:
			exec(topo.Replicas[i], "STOP SLAVE", fmt.Sprintf("CHANGE MASTER TO MASTER_DELAY = %d", p.delay[i]), "START SLAVE")
		}
	}
	pause(ctx, p.settle)
	for i, d := range p.degrade {
		if d == ioStopped {
			exec(topo.Replicas[i], "STOP SLAVE IO_THREAD")
		}
	}
	var killedReplica *sandbox.Server
	if p.killReplica >= 0 {
		killedReplica = topo.Replicas[p.killReplica]
	}
	if killedReplica != nil && p.replicaKillBefore {
		if err := killedReplica.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	pause(ctx, p.ioLead)

	// The events.
	eventsAt := time.Now()
	w.Mark()
	ackedBefore := w.Total()
	if p.killMaster {
		master.SetReadOnlyAtStart(true)
		if err := master.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	type timed struct {
		at time.Duration
		do func()
	}
	var later []timed
	if p.sluiceKillAt >= 0 {
		later = append(later, timed{p.sluiceKillAt, func() { sup.kill() }})
	}
	if killedReplica != nil && !p.replicaKillBefore {
		later = append(later, timed{p.replicaKillAt, func() {
			// Semi-sync guarantees an acknowledged transaction on one replica, not on a given
			// one: the last ones may have reached only this replica before the master died.
			// Killed, it would take them along whatever sluice does; the test spares it then.
			if why := onlyCopy(ctx, killedReplica, topo.Replicas); why != "" {
				t.Logf("kill -9 %s skipped: %s", killedReplica.Name, why)
				res.add("kill -9 %s skipped (only copy)", killedReplica.Name)
				killedReplica = nil
				return
			}
			if err := killedReplica.Kill(); err != nil {
				t.Error(err)
			}
		}})
	}
	slices.SortFunc(later, func(a, b timed) int { return int(a.at - b.at) })
	for _, e := range later {
		pause(ctx, time.Until(eventsAt.Add(e.at)))
		e.do()
	}

	// The outcome: writes back on a master other than a killed one, or the failover refused.
	refused := false
	var newMaster *sandbox.Server
	err = ft.Eventually(ctx, outcomeWithin, "writes taken again", func() error {
		refused = len(sup.grep(refusedLine)) > 0
		if refused {
			return nil
		}
		views := ft.LookAll(ctx, data)
		wr := ft.Writable(views)
		switch {
		case len(wr) != 1:
			return fmt.Errorf("%d writable servers:\n%s", len(wr), ft.Describe(views))
		case p.killMaster && wr[0] == master:
			return fmt.Errorf("the killed master is writable:\n%s", ft.Describe(views))
		case w.AfterMark() == 0:
			return fmt.Errorf("%s is writable, no transaction begun after the events acknowledged yet (%d failed: %v)",
				wr[0].Name, w.Failed(), ft.First(w.Errors(), 3))
		}
		newMaster = wr[0]
		return nil
	})
	outcomeAfter := time.Since(eventsAt)
	res.add("writes back %.1fs after the events", outcomeAfter.Seconds())
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case refused:
		res.outcome = "refused_divergent"
		t.Logf("sluice refused the failover %v after the events: %v", outcomeAfter.Round(time.Millisecond), sup.grep(refusedLine))
	case newMaster != master:
		res.outcome = "promoted " + newMaster.Name
	default:
		res.outcome = "no failover"
	}
	t.Logf("%s; writes taken %v after the events", res.outcome, outcomeAfter.Round(time.Millisecond))

	// The killed replica comes back; the test heals what it degraded. The old master comes
	// back only once the replicas have converged without it: a replica still pointing at it
	// would otherwise fetch its unacknowledged last transactions and diverge, which no
	// failover can undo.
	if killedReplica != nil {
		if err := killedReplica.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	healedAt := time.Now()
	for i, d := range p.degrade {
		r := topo.Replicas[i]
		v := ft.Look(ctx, r)
		if d == healthy || v.Err != nil || !v.ReadOnly || v.Replica == nil {
			continue // as healthy, promoted, or gone
		}
		stmts := []string{"START SLAVE"}
		if d == delayed {
			stmts = []string{"STOP SLAVE", "CHANGE MASTER TO MASTER_DELAY = 0", "START SLAVE"}
		}
		if err := r.Exec(ctx, stmts...); err != nil {
			t.Logf("healing %s (%s): %v", r.Name, d, err)
		}
	}

	// Convergence.
	fenced := func(s *sandbox.Server) bool { return p.killMaster && s == master && !refused }
	var followers []*sandbox.Server
	converged := func() error {
		views := ft.LookAll(ctx, data)
		wr := ft.Writable(views)
		if refused {
			if len(wr) != 0 {
				return fmt.Errorf("the failover was refused but %d servers are writable:\n%s", len(wr), ft.Describe(views))
			}
			return nil
		}
		if len(wr) != 1 || wr[0] != newMaster {
			return fmt.Errorf("writable: %d servers, want %s alone:\n%s", len(wr), newMaster.Name, ft.Describe(views))
		}
		pos := ""
		for _, v := range views {
			if v.Server == newMaster {
				pos = v.BinlogPos
			}
		}
		followers = followers[:0]
		for _, v := range views {
			switch {
			case v.Server == newMaster:
			case fenced(v.Server):
				if v.Server.Running() && (v.Err != nil || !v.ReadOnly) {
					return fmt.Errorf("the old master is not read-only: %s", v)
				}
			default:
				if err := v.ReplicatesFrom(newMaster); err != nil {
					return fmt.Errorf("%w:\n%s", err, ft.Describe(views))
				}
				if ok, err := ft.Applied(ctx, v.Server, pos, time.Second); !ok {
					return fmt.Errorf("%s has not applied %s (%v):\n%s", v.Server.Name, pos, err, ft.Describe(views))
				}
				followers = append(followers, v.Server)
			}
		}
		if newMaster != master {
			st, ok, err := ft.ReadStateFile(stateDir)
			switch {
			case err != nil:
				return err
			case !ok:
				return errors.New("no state file")
			}
			if err := st.RecordsFailoverTo(newMaster.Addr()); err != nil {
				return err
			}
		}
		return nil
	}
	convErr := ft.Eventually(ctx, convergeWithin, "every replica converges", converged)
	convergedAfter := time.Since(healedAt)
	res.add("converged %.1fs after the heal", convergedAfter.Seconds())
	if convErr != nil {
		t.Error(convErr)
	} else {
		t.Logf("converged %v after the heal", convergedAfter.Round(time.Millisecond))
	}
	if p.killMaster {
		// As its my.cnf has it after a crash: read-only. It must stay so, and the replicas
		// must stay with the new master.
		if err := master.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if convErr == nil {
			convErr = ft.Eventually(ctx, 15*time.Second, "every replica still converged after the old master's return", converged)
			if convErr != nil {
				t.Error(convErr)
			}
		}
	}

	// Reads through sluice see a write acknowledged before them: none comes from a fenced
	// old master or a replica that follows it.
	reads := ""
	if !refused && convErr == nil {
		rc, err := ft.ReadsSee(ctx, dsn, newMaster, followers, seed, 10, time.Second)
		switch {
		case err != nil:
			t.Error(err)
		case rc.Misses() > 0:
			t.Errorf("%d of 10 reads through sluice missed an acknowledged write (misses by server_id %v, errors %v)", rc.Misses(), rc.Missed, rc.Errors)
		}
		reads = fmt.Sprintf(", reads by server_id %v", rc.Served)
	}
	w.Halt()

	// No acknowledged transaction lost.
	acked := w.IDs()
	if refused {
		union := map[int64]bool{}
		for _, s := range data {
			c, err := ft.ReadContents(ctx, s)
			if err != nil {
				t.Errorf("%s: %v", s.Name, err)
				continue
			}
			for id := range c.Acked {
				union[id] = true
			}
			if torn := c.Torn(); len(torn) > 0 {
				t.Errorf("%s holds %d torn transactions, first: %v", s.Name, len(torn), ft.First(torn, 5))
			}
		}
		var missing []int64
		for _, id := range acked {
			if !union[id] {
				missing = append(missing, id)
			}
		}
		t.Logf("refused_divergent: nothing promoted; %d acknowledged transactions checked against the union of the %d servers", len(acked), len(data))
		if len(missing) > 0 {
			t.Errorf("%d of %d acknowledged transactions are on no server, first: %v", len(missing), len(acked), ft.First(missing, 10))
		}
	} else {
		pos, perr := ft.BinlogPos(ctx, newMaster)
		if perr != nil {
			t.Fatal(perr)
		}
		for _, s := range append([]*sandbox.Server{newMaster}, followers...) {
			if s != newMaster {
				if err := ft.Eventually(ctx, 10*time.Second, s.Name+" applies the last writes", func() error {
					if ok, err := ft.Applied(ctx, s, pos, 0); !ok {
						return fmt.Errorf("not at %s (%v)", pos, err)
					}
					return nil
				}); err != nil {
					t.Error(err)
					continue
				}
			}
			c, err := ft.ReadContents(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			if missing := c.Missing(acked); len(missing) > 0 {
				t.Errorf("%s lacks %d of %d acknowledged transactions, first: %v", s.Name, len(missing), len(acked), ft.First(missing, 10))
			}
			if torn := c.Torn(); len(torn) > 0 {
				t.Errorf("%s holds %d torn transactions, first: %v", s.Name, len(torn), ft.First(torn, 5))
			}
		}
	}
	res.add("%d acked (%d before the events)%s", len(acked), ackedBefore, reads)
}
