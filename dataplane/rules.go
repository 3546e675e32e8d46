package dataplane

import (
	"net"
	"net/netip"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
	"github.com/sluice-proxy/sluice/rules"
)

// SetRules makes set the query rules the next statement of every session
// is matched against (rules.Compile keeps the hit counters of the rules
// that keep their name).
func (e *Env) SetRules(set *rules.Set) { e.rules.Store(set) }

// Rules returns the query rules in force; safe for concurrent use.
func (e *Env) Rules() *rules.Set { return e.rules.Load() }

// matchRules matches a statement of plan and text against the rules in
// force and, with count, counts the hits (a prepared statement counts at
// each execution, not at PREPARE). With none loaded, or none matching, it
// allocates nothing. set is the Set the decision's rule indexes refer to.
func (s *Session) matchRules(plan *router.Plan, text []byte, count bool) (d rules.Decision, set *rules.Set) {
	set = s.env.rules.Load()
	if set.Len() == 0 {
		return d, set
	}
	in := rules.Input{Plan: plan, Text: text, User: s.user, Schema: s.schema, Cluster: s.clusterName()}
	if set.NeedsAddr() {
		in.Addr = s.clientAddr()
	}
	d = set.Match(&in)
	if count && d.Matched() {
		s.countRules(set, &d, plan)
	}
	return d, set
}

// applyRules matches a text statement against the rules; refused: a rule
// refused it, and err is what writing the error to the client returned.
func (s *Session) applyRules(plan *router.Plan, text []byte) (d rules.Decision, set *rules.Set, refused bool, err error) {
	d, set = s.matchRules(plan, text, true)
	if d.Err {
		e := ruleError(set, &d, plan)
		s.noteResult(protocol.RelayResult{Err: e})
		return d, set, true, s.client.WriteErr(e)
	}
	return d, set, false, nil
}

// countRules counts a statement of plan that d matched (again, for each
// execution of a prepared statement) and logs it when a rule asks to.
func (s *Session) countRules(set *rules.Set, d *rules.Decision, plan *router.Plan) {
	set.Count(d, time.Now())
	if d.Log {
		s.log().Info("query rule matched", zap.String("rule", set.Rule(d.LogRule).Name), zap.String("digest", plan.Digest),
			zap.String("digest_id", router.FormatDigestID(router.DigestID(plan.Digest))))
	}
}

// ruleError is the error a matched rule refuses a statement with: the
// rule's error_code and error_message, else 1142 naming the rule.
func ruleError(set *rules.Set, d *rules.Decision, plan *router.Plan) *protocol.SQLError {
	if d.ErrMsg != "" {
		return protocol.NewError(d.ErrCode, "%s", d.ErrMsg)
	}
	return protocol.NewError(d.ErrCode, "sluice: statement refused by query rule %q (digest_id %s)",
		set.Rule(d.ErrRule).Name, router.FormatDigestID(router.DigestID(plan.Digest)))
}

// ruleTarget applies a matched rule's route to target, where the session
// would send a statement of plan. A master route always holds. A replica
// route holds only for a read the session could safely run on a replica
// and that no sluice:master hint keeps on the master (outside a
// transaction, without temporary tables or untracked state,
// read the way the server reads it, calling no function that may write):
// it overrides the cluster's consistency, never safety. For anything the
// router does not classify as a read it is ignored, with a warning logged
// once per rule.
func (s *Session) ruleTarget(set *rules.Set, d *rules.Decision, plan *router.Plan, target router.Target) router.Target {
	switch d.Route {
	case rules.RouteMaster:
		return router.TargetMaster
	case rules.RouteReplica:
		if plan.Kind != router.KindRead {
			if r := set.Rule(d.RouteRule); r.WarnOnce() {
				s.log().Warn("query rule routes a statement that is not a read to a replica: ignored, it runs on the master",
					zap.String("rule", r.Name), zap.String("digest", plan.Digest))
			}
			return target
		}
		temp := s.pins&(router.PinTempTable|router.PinUntracked) != 0
		// A sluice:master hint is the application's own word: it wins.
		if plan.Hint == router.HintMaster || plan.FollowsPrevious || s.inTransaction() || temp || s.lexDoubt(plan) || s.funcsMayWrite(plan) {
			return target
		}
		return router.TargetReplica
	}
	return target
}

// clusterName names the cluster the session's statements run on now.
func (s *Session) clusterName() string {
	if s.clusterLeg != nil && s.cluster != nil {
		return s.cluster.Name
	}
	return s.env.config().DefaultCluster()
}

// clientAddr is the client's IP address, read once per session; the zero
// Addr (which no rule's prefix contains) for a client without one.
func (s *Session) clientAddr() netip.Addr {
	if !s.addrKnown {
		s.addrKnown = true
		if ta, ok := s.client.NetConn().RemoteAddr().(*net.TCPAddr); ok {
			s.addr = ta.AddrPort().Addr().Unmap()
		}
	}
	return s.addr
}
