package dataplane

import (
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
	"github.com/sluice-proxy/sluice/rules"
)

// The statement firewall ([firewall]): each user's statements are checked
// against the user's allowlist of digests (rules.Allowlist), which learn
// mode fills and enforce mode holds them to.
//
// What is checked is SQL text: every COM_QUERY, after the grants check,
// and every COM_STMT_PREPARE, whose decision holds for the statement's
// executions (as the query rules'). Commands that carry no SQL text pass:
// COM_PING, COM_INIT_DB (the protocol's USE), COM_STMT_EXECUTE / FETCH /
// RESET / CLOSE of a statement that passed at PREPARE, COM_RESET_CONNECTION,
// COM_CHANGE_USER (a login, under [limits]) and COM_QUIT. Text that sluice
// answers itself (KILL, the process list, SELECT @@version_comment) is SQL
// the user sent, and is checked like any other, but for SHOW GRANTS of the
// session's own account, which the grants check answers before.

// fwMode is a user's firewall mode.
type fwMode uint8

const (
	fwOff fwMode = iota
	fwLearn
	fwEnforce
)

// firewallSet is one configuration's firewall modes. It is immutable but
// for each policy's atomics.
type firewallSet struct {
	// on: some user's mode is not off; when false the check is one load.
	on    bool
	def   *fwPolicy
	users map[string]*fwPolicy
}

// fwPolicy is the mode of one [[firewall.user]] entry, or of [firewall]
// for users without one.
type fwPolicy struct {
	mode fwMode
	// refused counts the statements refused under this policy; its user
	// label is the entry's name or "default".
	refused prometheus.Counter
	// fullLogged: a digest was not learnt because the allowlist was full,
	// and that was logged.
	fullLogged atomic.Bool
}

func (set *firewallSet) forUser(user string) *fwPolicy {
	if p, ok := set.users[user]; ok {
		return p
	}
	return set.def
}

// newFirewallSet resolves cfg's [firewall] for the data plane.
func (e *Env) newFirewallSet(cfg *conf.Config) *firewallSet {
	mk := func(mode, label string) *fwPolicy {
		p := &fwPolicy{refused: e.fwRefused.WithLabelValues(label)}
		switch mode {
		case conf.FirewallLearn:
			p.mode = fwLearn
		case conf.FirewallEnforce:
			p.mode = fwEnforce
		}
		return p
	}
	f := &cfg.Firewall
	set := &firewallSet{on: f.On(), def: mk(f.DefaultMode(), "default"), users: make(map[string]*fwPolicy, len(f.Users))}
	for _, u := range f.Users {
		set.users[u.Name] = mk(u.Mode, u.Name)
	}
	return set
}

// initFirewall builds the firewall's metrics and modes; NewEnv calls it.
// allow is the allowlist the server loaded, nil for a new empty one.
func (e *Env) initFirewall(cfg *conf.Config, allow *rules.Allowlist) {
	if allow == nil {
		allow = rules.NewAllowlist()
	}
	e.allow = allow
	e.fwRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_firewall_refused_total",
		Help: "Statements the firewall refused with ERR 1142 (enforce mode, digest not on the user's allowlist), by [[firewall.user]] name or \"default\".",
	}, []string{"user"})
	learned := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sluice_firewall_learned_digests",
		Help: "Digests on the firewall's allowlists, all users together (learnt and allowed on the admin port).",
	}, func() float64 { return float64(allow.Len()) })
	e.metrics.Reg.MustRegister(e.fwRefused, learned)
	e.firewall.Store(e.newFirewallSet(cfg))
}

// SetFirewall makes cfg's [firewall] modes those of the next statement of
// every session; the allowlists are kept.
func (e *Env) SetFirewall(cfg *conf.Config) { e.firewall.Store(e.newFirewallSet(cfg)) }

// Firewall is the firewall's allowlist, for the admin port and the server
// that persists it; safe for concurrent use.
func (e *Env) Firewall() *rules.Allowlist { return e.allow }

// grantsAndFirewall checks a text statement of plan against the grants
// (grantsGate), then the firewall; done: it was answered (refused, or
// answered by the grants check), and err is what writing to the client
// returned. The firewall comes second so that a statement the account
// may not run is refused as MariaDB would, and never learnt.
func (s *Session) grantsAndFirewall(plan *router.Plan, text []byte, doubt bool) (done bool, err error) {
	if done, err := s.grantsGate(plan, doubt); done {
		return true, err
	}
	if e := s.firewallRefusal(plan, text, doubt); e != nil {
		s.noteResult(protocol.RelayResult{Err: e})
		return true, s.client.WriteErr(e)
	}
	return false, nil
}

// preparedRefusal checks a statement to prepare against the grants
// (allowedPrepared), then the firewall: nil lets it be prepared. Its
// executions follow the firewall's decision at PREPARE.
func (s *Session) preparedRefusal(plan *router.Plan, text string) *protocol.SQLError {
	if e := s.allowedPrepared(plan); e != nil {
		return e
	}
	return s.firewallRefusal(plan, unsafe.Slice(unsafe.StringData(text), len(text)), s.lexDoubt(plan))
}

// firewallRefusal checks a statement of plan against the session user's
// firewall mode: nil lets it run. In learn mode it adds the digest to the
// allowlist; in enforce mode a digest not on it gets ERR 1142 naming the
// digest id and the user. An SQL-level PREPARE … FROM 'text' is checked
// for the text's digest too, which its own digest hides as a literal.
// text is the statement's, read only for a plan without a digest (a text
// over 1 MiB, which the router does not parse): such texts would
// otherwise share one digest, and padding a statement would pass it as
// any other. doubt: the server may read the text otherwise than the
// router did (lexDoubt), so its digest vouches for nothing, and enforce
// mode refuses it. With every mode off it is one atomic load; an allowed
// statement allocates nothing.
func (s *Session) firewallRefusal(plan *router.Plan, text []byte, doubt bool) *protocol.SQLError {
	set := s.env.firewall.Load()
	if !set.on {
		return nil
	}
	p := set.forUser(s.user)
	if p.mode == fwOff {
		return nil
	}
	digest := plan.Digest
	if digest == "" && len(text) > 0 {
		digest = router.DigestOf(string(text))
	}
	if doubt && p.mode == fwEnforce {
		p.refused.Inc()
		return protocol.ERTableAccessDenied.New("sluice: firewall refused the statement with digest_id %s for user '%s': "+
			"under the session's sql_mode or character set the server may read the text otherwise than sluice does, so its digest cannot vouch for it",
			router.FormatDigestID(router.DigestID(digest)), s.user)
	}
	if e := s.firewallDigest(p, digest); e != nil {
		return e
	}
	if acc := plan.Access; acc != nil && acc.InnerDigest != "" {
		return s.firewallDigest(p, acc.InnerDigest)
	}
	return nil
}

// firewallDigest learns or enforces one digest under p, which is not off.
func (s *Session) firewallDigest(p *fwPolicy, digest string) *protocol.SQLError {
	a := s.env.allow
	id := router.DigestID(digest)
	if a.Allowed(s.user, id) {
		return nil
	}
	if p.mode == fwLearn {
		if _, err := a.Learn(s.user, id, digest, time.Now()); err != nil && p.fullLogged.CompareAndSwap(false, true) {
			s.log().Warn("firewall: the user's allowlist is full: digests are no longer learnt",
				zap.Int("max_digests", rules.MaxAllowedDigests), zap.String("digest_id", router.FormatDigestID(id)), zap.Error(err))
		}
		return nil
	}
	p.refused.Inc()
	a.NoteRefused(s.user, id, digest)
	ids := router.FormatDigestID(id)
	return protocol.ERTableAccessDenied.New("sluice: firewall refused the statement with digest_id %s for user '%s': "+
		"it is not on the user's allowlist (FIREWALL ALLOW %s FOR '%s' on the admin port admits it)", ids, s.user, ids, s.user)
}
