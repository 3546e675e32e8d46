package rules

import (
	"math/bits"
	"time"

	"github.com/sluice-proxy/sluice/router"
)

// Decision is what the rules that matched a statement decided. Its zero
// value is "no rule matched". A Decision is a small value: a prepared
// statement keeps the one of its PREPARE and counts it again at each
// execution (Count).
type Decision struct {
	// Route is the first route a matched rule set.
	Route Route
	// RouteRule is the index of the rule that set Route.
	RouteRule int16
	// Err: a matched rule refuses the statement with ErrCode and ErrMsg
	// (empty: the caller words the default message); ErrRule is its index.
	Err     bool
	ErrCode uint16
	ErrMsg  string
	ErrRule int16
	// Log: a matched rule asks for the statement to be logged; LogRule
	// is the first such rule's index.
	Log     bool
	LogRule int16
	// Timeout is the first query timeout a matched rule set (0: none);
	// Mirror: a matched rule copies the statement to another cluster,
	// MirrorRule is the first such rule's index.
	Timeout    time.Duration
	Mirror     bool
	MirrorRule int16
	// CacheTTL is the first cache_ttl a matched rule set (0: none).
	CacheTTL time.Duration
	// matched are the indexes of the rules that matched.
	matched [MaxRules / 64]uint64
}

// Matched reports whether any rule matched.
func (d *Decision) Matched() bool {
	for _, w := range d.matched {
		if w != 0 {
			return true
		}
	}
	return false
}

// Match tries s's rules on in, in order, and returns their decision: the
// first matching rule's actions, and those of the rules after it as long
// as each matching rule says continue; an action already set is kept. It
// counts nothing (see Count) and allocates nothing.
func (s *Set) Match(in *Input) Decision {
	var d Decision
	if s == nil {
		return d
	}
	routeSet, errSet := false, false
	// The digest's id, hashed once per statement, when a rule needs it.
	var id digestID
	for i := range s.rules {
		r := &s.rules[i]
		if !r.matches(in, &id) {
			continue
		}
		d.matched[i/64] |= 1 << (i % 64)
		if r.Route != RouteNone && !routeSet && !errSet {
			d.Route, d.RouteRule, routeSet = r.Route, int16(i), true
		}
		if r.Err && !errSet && !routeSet {
			d.Err, d.ErrCode, d.ErrMsg, d.ErrRule, errSet = true, r.ErrCode, r.ErrMsg, int16(i), true
		}
		if r.CacheTTL > 0 && d.CacheTTL == 0 {
			d.CacheTTL = r.CacheTTL
		}
		if r.Log && !d.Log {
			d.Log, d.LogRule = true, int16(i)
		}
		if r.Timeout > 0 && d.Timeout == 0 {
			d.Timeout = r.Timeout
		}
		if r.Mirror != "" && !d.Mirror {
			d.Mirror, d.MirrorRule = true, int16(i)
		}
		if !r.Continue {
			break
		}
	}
	return d
}

// Count adds one hit, at now, to every rule of s that d matched. d must
// come from s or from a Set compiled after it (rule indexes past s's end
// are ignored).
func (s *Set) Count(d *Decision, now time.Time) {
	if s == nil {
		return
	}
	ns := now.UnixNano()
	for w, b := range d.matched {
		for b != 0 {
			i := w*64 + bits.TrailingZeros64(b)
			b &= b - 1
			if i < len(s.rules) {
				st := s.rules[i].stats
				st.hits.Add(1)
				st.last.Store(ns)
			}
		}
	}
}

// Rule returns the rule at index i (a Decision's RouteRule, ErrRule,
// LogRule or MirrorRule).
func (s *Set) Rule(i int16) *Rule { return &s.rules[i] }

// matches reports whether every match field of r holds for in. The cheap
// comparisons come first, the regular expression last.
func (r *Rule) matches(in *Input, id *digestID) bool {
	if r.user != "" && r.user != in.User {
		return false
	}
	if r.schema != "" && r.schema != in.Schema {
		return false
	}
	if r.cluster != "" && r.cluster != in.Cluster {
		return false
	}
	if r.kind != "" && !kindMatches(r.kind, in.Plan) {
		return false
	}
	if r.hasAddr && !r.prefix.Contains(in.Addr.Unmap()) {
		return false
	}
	if r.byID {
		if id.of(in.Plan.Digest) != r.digestID {
			return false
		}
	} else if r.digest != "" && r.digest != in.Plan.Digest {
		return false
	}
	if r.pattern != nil && (r.pre != nil && !r.pre.mayMatch(in.Text) || !r.pattern.Match(in.Text)) {
		return false
	}
	return true
}

// digestID is a statement's digest id, computed on first use.
type digestID struct {
	v    uint64
	done bool
}

func (d *digestID) of(digest string) uint64 {
	if !d.done {
		d.v, d.done = router.DigestID(digest), true
	}
	return d.v
}

// kindMatches reports whether a plan is of a rule's kind: "write" is any
// KindWrite statement (DDL included), "ddl" only those that change what a
// schema holds.
func kindMatches(kind string, p *router.Plan) bool {
	switch kind {
	case "read":
		return p.Kind == router.KindRead
	case "write":
		return p.Kind == router.KindWrite
	case "ddl":
		return p.DDL && p.Kind == router.KindWrite
	case "use":
		return p.Kind == router.KindUse
	case "set":
		return p.Kind == router.KindSet
	case "txn":
		return p.Kind == router.KindTxn
	}
	return false
}
