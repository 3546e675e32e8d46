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

// applyRules matches a text statement against the rules and applies the
// actions it takes before it runs: a refusal, a route to another cluster
// (ruleCluster; back is the cluster to return to afterwards, -1 when the
// session stays on its own), a timeout, a mirror copy. refused: the
// statement is not to run, and err is what writing the error to the
// client returned. sql is the statement's text under sharding.
func (s *Session) applyRules(plan *router.Plan, text []byte, sql string) (d rules.Decision, set *rules.Set, back int, refused bool, err error) {
	d, set = s.matchRules(plan, text, true)
	back = -1
	if !d.Matched() {
		return d, set, back, false, nil
	}
	if d.Err {
		e := ruleError(set, &d, plan)
		s.noteResult(protocol.RelayResult{Err: e})
		return d, set, back, true, s.client.WriteErr(e)
	}
	routed, from, e := s.ruleCluster(set, &d, plan, sql)
	if e != nil {
		s.noteResult(protocol.RelayResult{Err: e})
		return d, set, back, true, s.client.WriteErr(e)
	}
	if routed {
		back = from
	}
	s.applyRuleTimeout(d.Timeout)
	s.mirrorStatement(set, &d, plan, text, s.schema)
	return d, set, back, false, nil
}

// prepareRules matches a statement being prepared against the rules: their
// decision is kept with the statement, and counted at each execution. A
// refusal (counted once, as the statement never executes) and a route to
// another cluster (back, as for applyRules) apply at once: the statement
// is prepared where it will run.
func (s *Session) prepareRules(plan *router.Plan, text []byte, sql string) (d rules.Decision, set *rules.Set, back int, refused bool, err error) {
	d, set = s.matchRules(plan, text, false)
	back = -1
	if d.Err {
		s.countRules(set, &d, plan)
		return d, set, back, true, s.client.WriteErr(ruleError(set, &d, plan))
	}
	if d.Route == rules.RouteCluster && s.env.shards() != nil {
		return d, set, back, true, s.client.WriteErr(protocol.ERNotSupportedYet.New(
			"sluice: query rule %q routes this statement to cluster %s, but under sharding only text statements are routed to a cluster; send it as text",
			set.Rule(d.RouteRule).Name, set.Rule(d.RouteRule).RouteTo))
	}
	routed, from, e := s.ruleCluster(set, &d, plan, sql)
	if e != nil {
		return d, set, back, true, s.client.WriteErr(e)
	}
	if routed {
		back = from
	}
	return d, set, back, false, nil
}

// executeRules counts an execution of prepared statement st (packet p,
// parsed as ex) against the rules its PREPARE matched and applies their
// route to another cluster (checked again: the session may have opened a
// transaction since; back as for applyRules), timeout and mirror.
func (s *Session) executeRules(st *preparedStmt, p []byte, ex protocol.Execute) (back int, refused bool, err error) {
	back = -1
	if !st.rule.Matched() {
		return back, false, nil
	}
	s.countRules(st.ruleSet, &st.rule, st.plan)
	routed, from, e := s.ruleCluster(st.ruleSet, &st.rule, st.plan, st.sql)
	if e != nil {
		s.noteResult(protocol.RelayResult{Err: e})
		return back, true, s.client.WriteErr(e)
	}
	if routed {
		back = from
	}
	s.applyRuleTimeout(st.rule.Timeout)
	s.mirrorExecution(st, p, ex)
	return back, false, nil
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

// applyRuleTimeout arms the query timer for a statement a rule gives
// timeout d: the statement is killed on its backend after d and the client
// gets ERR 3024, as under [limits] query_timeout. A user query_timeout no
// longer than d, already armed for the command, stands.
func (s *Session) applyRuleTimeout(d time.Duration) {
	if d <= 0 {
		return
	}
	if q := s.lims.lim.queryTimeout; q > 0 && q <= d {
		return
	}
	s.armQueryTimerFor(d)
	s.lims.ruleTimed = true
}

// ruleCluster makes the cluster a matched rule routes a statement of plan
// to (route = "<cluster>") the session's active one. routed reports that
// it did; the caller runs the statement and then returns the session to
// cluster back. Statements that change only the session's state (USE,
// SET, transaction control) are not moved: they run on the session's own
// cluster, and the schema and variables they set are replayed on the
// other cluster's connection before a routed statement, as for any
// pooled connection. sql is the statement's text under sharding.
//
// When the statement could not run there exactly as on its own cluster,
// it is refused, the ERR naming the rule: inside a transaction, with
// state on the session's connections that cannot be replayed (temporary
// tables, user variables, locks, SET ROLE, ...) or that the statement
// itself would leave, or a text the session's sql_mode may make the
// server read otherwise; under sharding, a statement that may reach a
// sharded table.
func (s *Session) ruleCluster(set *rules.Set, d *rules.Decision, plan *router.Plan, sql string) (routed bool, back int, e *protocol.SQLError) {
	if d.Route != rules.RouteCluster || plan.Kind != router.KindRead && plan.Kind != router.KindWrite {
		return false, 0, nil
	}
	r := set.Rule(d.RouteRule)
	why := ""
	switch {
	case s.inTransaction():
		why = "a transaction is open on cluster " + s.clusterName() + " (or autocommit is off)"
	case s.pins != 0 || s.replay.insertID != 0 || s.cursors != 0:
		why = "the session holds state on cluster " + s.clusterName() + " that cannot be replayed elsewhere: " + s.heldState()
	case plan.Pins&^router.PinFoundRows != 0:
		why = "the statement would leave state on its connection: " + pinNames(plan.Pins&^router.PinFoundRows, false)
	case plan.Multi || s.lexDoubt(plan):
		why = "sluice cannot be sure how the server reads the text (several statements, or the session's sql_mode or character set)"
	}
	if why == "" && s.env.shards() != nil {
		if err := s.env.shards().CheckDefault(s.schema, sql, s.shardMode()); err != nil {
			why = "the statement may reach a sharded or broadcast table, which only sharding places"
		}
	}
	if why != "" {
		return false, 0, protocol.ERNotSupportedYet.New("sluice: query rule %q routes this statement to cluster %s, but %s; it was not run (digest_id %s)",
			r.Name, r.RouteTo, why, router.FormatDigestID(router.DigestID(plan.Digest)))
	}
	back = s.clusterIdx
	s.useCluster(r.RouteToIdx)
	return true, back, nil
}

// heldState names the session's pins and other unreplayable state.
func (s *Session) heldState() string {
	n := pinNames(s.pins, false)
	if s.replay.insertID != 0 {
		n = joinName(n, "insert_id")
	}
	if s.cursors != 0 {
		n = joinName(n, "open cursors")
	}
	return n
}

func joinName(a, b string) string {
	if a == "" {
		return b
	}
	return a + "," + b
}
