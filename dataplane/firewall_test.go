package dataplane

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/internal/promtest"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
)

// TestFirewallModes: a user's statements are learnt in learn mode,
// refused unless allowed in enforce mode (1142 naming the digest id and
// the user, counted under the entry's label), and neither in mode off; a
// new configuration (a reload) changes the mode at the next statement
// and keeps the allowlist.
func TestFirewallModes(t *testing.T) {
	e := offlineServerWith(t, "", 1, "[firewall]\nmode = \"off\"\n[[firewall.user]]\nname = \"app\"\nmode = \"learn\"\n")
	s := newSession(e, 1, &benchConn{})
	s.user = "app"
	plan := e.router.Classify(benchPointSelect)
	id := router.DigestID(plan.Digest)
	if err := s.firewallRefusal(plan, nil, false); err != nil {
		t.Fatalf("learn mode refused: %v", err)
	}
	if !e.Firewall().Allowed("app", id) || e.Firewall().Len() != 1 {
		t.Fatalf("learn mode did not learn %s", plan.Digest)
	}

	s.user = "other" // mode off: neither checked nor learnt
	other := e.router.Classify("DELETE FROM sbtest1")
	if err := s.firewallRefusal(other, nil, false); err != nil || e.Firewall().Len() != 1 {
		t.Fatalf("mode off: %v, %d digests", err, e.Firewall().Len())
	}

	cfg := *e.Config()
	cfg.Firewall = conf.Firewall{Mode: "off", Users: []conf.FirewallUser{{Name: "app", Mode: "enforce"}}}
	e.SetFirewall(&cfg)
	s.user = "app"
	if err := s.firewallRefusal(plan, nil, false); err != nil {
		t.Fatalf("enforce mode refused a learnt digest: %v", err)
	}
	err := s.firewallRefusal(other, nil, false)
	ids := router.FormatDigestID(router.DigestID(other.Digest))
	var se *protocol.SQLError
	if !errors.As(err, &se) || se.Code != 1142 || se.State != "42000" ||
		!strings.Contains(se.Message, "digest_id "+ids+" for user 'app'") {
		t.Fatalf("enforce mode, an unknown digest: %v, want 1142 naming %s and 'app'", err, ids)
	}
	if m := promtest.Sample(t, e.metrics.Reg, "sluice_firewall_refused_total", map[string]string{"user": "app"}); m.GetCounter().GetValue() != 1 {
		t.Errorf("sluice_firewall_refused_total{user=\"app\"} = %v, want 1", m.GetCounter().GetValue())
	}
	if m := promtest.Sample(t, e.metrics.Reg, "sluice_firewall_learned_digests", nil); m.GetGauge().GetValue() != 1 {
		t.Errorf("sluice_firewall_learned_digests = %v, want 1", m.GetGauge().GetValue())
	}
	if _, err := e.Firewall().Allow("app", router.DigestID(other.Digest), "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.firewallRefusal(other, nil, false); err != nil {
		t.Fatalf("an allowed digest refused: %v", err)
	}
	if es := e.Firewall().Entries("app"); len(es) != 2 || es[0].Digest != other.Digest {
		t.Errorf("the allowed digest's text was not taken from its refusal: %+v", es[0])
	}
}

// TestFirewallSQLPrepare: an SQL-level PREPARE … FROM 'text' is learnt
// and checked by its text's digest too, so allowing one PREPARE does not
// allow every text.
func TestFirewallSQLPrepare(t *testing.T) {
	e := offlineServerWith(t, "", 1, "[firewall]\nmode = \"learn\"\n")
	s := newSession(e, 1, &benchConn{})
	s.user = "app"
	learnt := e.router.Classify("PREPARE s FROM 'SELECT c FROM sbtest1 WHERE id = 1'")
	other := e.router.Classify("PREPARE s FROM 'DELETE FROM sbtest1'")
	if learnt.Digest != other.Digest || learnt.Access == nil || learnt.Access.InnerDigest == "" {
		t.Fatalf("want two PREPAREs of one digest with their texts' digests: %q %q %+v", learnt.Digest, other.Digest, learnt.Access)
	}
	if err := s.firewallRefusal(learnt, nil, false); err != nil || e.Firewall().Len() != 2 {
		t.Fatalf("learn mode: %v, %d digests learnt, want the PREPARE's and its text's", err, e.Firewall().Len())
	}
	cfg := *e.Config()
	cfg.Firewall = conf.Firewall{Mode: "enforce"}
	e.SetFirewall(&cfg)
	if err := s.firewallRefusal(learnt, nil, false); err != nil {
		t.Fatalf("enforce mode refused the learnt PREPARE: %v", err)
	}
	ids := router.FormatDigestID(router.DigestID(other.Access.InnerDigest))
	if err := s.firewallRefusal(other, nil, false); err == nil || err.Code != 1142 || !strings.Contains(err.Message, ids) {
		t.Fatalf("enforce mode, a PREPARE of another text: %v, want 1142 naming its text's digest_id %s", err, ids)
	}
}

// TestFirewallHugeText: texts over 1 MiB, whose plans have no digest, are
// learnt and checked by their own digests: padding a statement does not
// pass it as another.
func TestFirewallHugeText(t *testing.T) {
	e := offlineServerWith(t, "", 1, "[firewall]\nmode = \"learn\"\n")
	s := newSession(e, 1, &benchConn{})
	s.user = "app"
	pad := strings.Repeat("x", 1<<20)
	learnt := []byte("INSERT INTO t (c) VALUES ('" + pad + "')")
	other := []byte("DELETE FROM t WHERE c = '" + pad + "'")
	lp, op := e.router.ClassifyBytes(learnt), e.router.ClassifyBytes(other)
	if lp.Digest != "" || op.Digest != "" {
		t.Fatalf("want plans without digests for texts over 1 MiB: %q %q", lp.Digest, op.Digest)
	}
	if err := s.firewallRefusal(lp, learnt, false); err != nil || !e.Firewall().Allowed("app", router.DigestID("insert into `t` ( `c` ) values ( ? )")) {
		t.Fatalf("learn mode: %v, learnt %+v", err, e.Firewall().Entries("app"))
	}
	cfg := *e.Config()
	cfg.Firewall = conf.Firewall{Mode: "enforce"}
	e.SetFirewall(&cfg)
	if err := s.firewallRefusal(lp, learnt, false); err != nil {
		t.Fatalf("enforce mode refused the learnt text: %v", err)
	}
	if err := s.firewallRefusal(op, other, false); err == nil || err.Code != 1142 {
		t.Fatalf("enforce mode let another huge text through: %v", err)
	}
}

// TestFirewallDoubt: in enforce mode a statement the server may read
// otherwise than sluice (lexDoubt) is refused even when its digest is
// allowed; learn mode lets it run.
func TestFirewallDoubt(t *testing.T) {
	e := offlineServerWith(t, "", 1, "[firewall]\nmode = \"enforce\"\n")
	s := newSession(e, 1, &benchConn{})
	s.user = "app"
	plan := e.router.Classify(benchPointSelect)
	if _, err := e.Firewall().Allow("app", router.DigestID(plan.Digest), "", time.Now()); err != nil {
		t.Fatal(err)
	}
	err := s.firewallRefusal(plan, nil, true)
	if err == nil || err.Code != 1142 || !strings.Contains(err.Message, "its digest cannot vouch for it") {
		t.Fatalf("enforce mode, a statement in doubt: %v, want 1142 saying why", err)
	}
	cfg := *e.Config()
	cfg.Firewall = conf.Firewall{Mode: "learn"}
	e.SetFirewall(&cfg)
	if err := s.firewallRefusal(plan, nil, true); err != nil {
		t.Fatalf("learn mode refused a statement in doubt: %v", err)
	}
}

// TestFirewallCheckAllocatesNothing: with every mode off, and in enforce
// mode for an allowed statement, the check allocates nothing.
func TestFirewallCheckAllocatesNothing(t *testing.T) {
	for _, mode := range []string{"off", "enforce"} {
		e := offlineServerWith(t, "", 1, "[firewall]\nmode = \""+mode+"\"\n")
		s := newSession(e, 1, &benchConn{})
		s.user = "app"
		plan := e.router.Classify(benchPointSelect)
		if _, err := e.Firewall().Allow("app", router.DigestID(plan.Digest), "", time.Now()); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(1000, func() {
			if err := s.firewallRefusal(plan, nil, false); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("mode %s: the check allocates %v times per statement", mode, n)
		}
	}
}

// benchFirewall puts the benchmarks' point select on the allowlist of s's
// user, whom the firewall holds to it.
func benchFirewall(b *testing.B, s *Session) {
	if s.user == "" {
		s.user = "sbtest"
	}
	id := router.DigestID(s.env.router.Classify(benchPointSelect).Digest)
	if _, err := s.env.Firewall().Allow(s.user, id, "", time.Now()); err != nil {
		b.Fatal(err)
	}
}
