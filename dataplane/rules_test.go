package dataplane

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/observe"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
	"github.com/sluice-proxy/sluice/rules"
)

// TestRuleTargetNeverSendsAWriteToAReplica: whatever decision reaches it,
// the session sends a replica route's statement to a replica only when the
// router classifies it as a read and nothing else keeps it on the master;
// for anything else it warns once per rule and keeps the target.
func TestRuleTargetNeverSendsAWriteToAReplica(t *testing.T) {
	cfg, err := conf.Parse([]byte("[auth]\naddress = \"127.0.0.1:1\"\n[[cluster]]\nname = \"main\"\nuser = \"sluice\"\nmaster = \"127.0.0.1:2\"\n" +
		"  [[cluster.replica]]\n  address = \"127.0.0.1:3\"\n[[rule]]\nname = \"reads\"\nkind = \"read\"\nroute = \"replica\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, err := NewEnv(cfg, Options{Log: zap.New(core), Ctx: ctx, Host: testHost{}, Topo: health.NewTopology(cfg),
		Metrics: observe.NewMetrics(), Digests: observe.NewDigests()})
	if err != nil {
		t.Fatal(err)
	}
	s := newSession(env, 1, &benchConn{})
	s.cluster = env.topo.Current().Clusters[0] // as the handshake leaves it
	set := env.Rules()
	// A decision as if the rule had matched each statement.
	d := rules.Decision{Route: rules.RouteReplica, RouteRule: 0}
	for _, sql := range []string{"UPDATE t SET a = 1", "SELECT a FROM t FOR UPDATE", "SELECT @x", "BEGIN", "SET @x = 1",
		"CREATE TABLE x (a INT)", "/* sluice:master */ SELECT a FROM t"} {
		if got := s.ruleTarget(set, &d, env.router.Classify(sql), router.TargetMaster); got != router.TargetMaster {
			t.Errorf("%s: target %s, want the master", sql, got)
		}
	}
	if n := logs.FilterMessage("query rule routes a statement that is not a read to a replica: ignored, it runs on the master").Len(); n != 1 {
		t.Errorf("%d warnings, want one for the rule", n)
	}
	read := env.router.Classify("SELECT a FROM t WHERE id = 1")
	if got := s.ruleTarget(set, &d, read, router.TargetMaster); got != router.TargetReplica {
		t.Errorf("a read: target %s, want a replica", got)
	}
	s.pins |= router.PinTempTable
	if got := s.ruleTarget(set, &d, read, router.TargetMaster); got != router.TargetMaster {
		t.Errorf("a read of a session with a temporary table: target %s, want the master", got)
	}
	s.pins = 0
	master := rules.Decision{Route: rules.RouteMaster}
	if got := s.ruleTarget(set, &master, read, router.TargetReplica); got != router.TargetMaster {
		t.Errorf("a master route: target %s", got)
	}
}

// TestRuleClusterRefusesWhatItCannotMove: a route to another cluster moves
// a read or write the session can run there exactly as at home, leaves
// session-state statements where they are, and refuses (naming the rule
// and the reason) inside a transaction, with unreplayable session state,
// for a statement that would leave such state, and for several statements
// in one text.
func TestRuleClusterRefusesWhatItCannotMove(t *testing.T) {
	cfg, err := conf.Parse([]byte("[auth]\naddress = \"127.0.0.1:1\"\n" +
		"[[cluster]]\nname = \"main\"\nuser = \"sluice\"\nmaster = \"127.0.0.1:2\"\n" +
		"[[cluster]]\nname = \"other\"\nuser = \"sluice\"\nmaster = \"127.0.0.1:4\"\n" +
		"[[rule]]\nname = \"away\"\nroute = \"other\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, err := NewEnv(cfg, Options{Log: zap.NewNop(), Ctx: ctx, Host: testHost{}, Topo: health.NewTopology(cfg),
		Metrics: observe.NewMetrics(), Digests: observe.NewDigests()})
	if err != nil {
		t.Fatal(err)
	}
	s := newSession(env, 1, &benchConn{})
	s.useCluster(0) // as the handshake leaves it
	set := env.Rules()
	d := rules.Decision{Route: rules.RouteCluster, RouteRule: 0}
	move := func(sql string) (bool, string) {
		t.Helper()
		routed, back, e := s.ruleCluster(set, &d, env.router.Classify(sql), sql)
		if e != nil {
			if s.clusterIdx != 0 {
				t.Errorf("%s: refused, yet the session moved to cluster %d", sql, s.clusterIdx)
			}
			return false, e.Message
		}
		if routed {
			if s.clusterIdx != 1 || s.cluster.Name != "other" || back != 0 {
				t.Errorf("%s: routed to cluster %d (%s), back to %d", sql, s.clusterIdx, s.cluster.Name, back)
			}
			s.useCluster(back)
		}
		return routed, ""
	}
	for _, sql := range []string{"SELECT a FROM t WHERE id = 1", "UPDATE t SET a = 1", "CREATE TABLE x (a INT)"} {
		if routed, msg := move(sql); !routed {
			t.Errorf("%s: not moved (%s)", sql, msg)
		}
	}
	for _, sql := range []string{"BEGIN", "SET NAMES utf8mb4", "USE db2", "COMMIT"} {
		if routed, msg := move(sql); routed || msg != "" {
			t.Errorf("%s: routed %v, refused %q; want it left on the session's cluster", sql, routed, msg)
		}
	}
	refused := func(what, sql, why string) {
		t.Helper()
		routed, msg := move(sql)
		if routed || !strings.Contains(msg, `query rule "away" routes this statement to cluster other, but `) || !strings.Contains(msg, why) {
			t.Errorf("%s: routed %v, message %q; want a refusal saying %q", what, routed, msg, why)
		}
	}
	refused("a statement that sets a user variable", "SELECT @x := 1", "the statement would leave state on its connection: user_variables")
	refused("a statement taking a lock", "SELECT GET_LOCK('a', 1)", "locks")
	refused("several statements", "SELECT 1; SELECT 2", "untracked_state")
	s.pins |= router.PinTempTable
	refused("a session with a temporary table", "SELECT a FROM t", "state on cluster main that cannot be replayed elsewhere: temporary_table")
	s.pins = 0
	s.txBegin = "BEGIN"
	refused("inside a transaction", "SELECT a FROM t", "a transaction is open on cluster main")
	s.txBegin = ""
}

// TestRuleTimeoutTakesTheSmaller: a rule's timeout arms the query timer
// unless the user's query_timeout, already armed, is no longer.
func TestRuleTimeoutTakesTheSmaller(t *testing.T) {
	s := &Session{}
	s.lims.lim = &userLimits{queryTimeout: 2 * time.Second}
	s.applyRuleTimeout(5 * time.Second)
	if s.lims.ruleTimed {
		t.Errorf("a rule's 5s armed the timer over the user's 2s")
	}
	s.client = protocol.NewLeanConn(&benchConn{})
	s.applyRuleTimeout(time.Second)
	if !s.lims.ruleTimed || time.Duration(s.lims.armedFor.Load()) != time.Second {
		t.Errorf("a rule's 1s under the user's 2s: armed %v for %v", s.lims.ruleTimed, time.Duration(s.lims.armedFor.Load()))
	}
	s.disarmQueryTimer()
	s.lims.lim = &userLimits{}
	s.applyRuleTimeout(3 * time.Second)
	if !s.lims.ruleTimed || time.Duration(s.lims.armedFor.Load()) != 3*time.Second {
		t.Errorf("a rule's 3s without a user limit: armed %v for %v", s.lims.ruleTimed, time.Duration(s.lims.armedFor.Load()))
	}
	s.disarmQueryTimer()
}
