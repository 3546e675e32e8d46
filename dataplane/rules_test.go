package dataplane

import (
	"context"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/observe"
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
