// Package rules holds sluice's query rules: the [[rule]] entries of the
// configuration compiled into a Set that decides, for one statement, which
// rules match it and what they do (route it, refuse it, log it).
//
// Matching is pure: it reads the statement's plan, text and session facts
// given in an Input and does no I/O. The only state is each rule's hit
// counter and last-hit time, updated with atomics. A Set is immutable
// after Compile and safe for concurrent use by any number of sessions; a
// reload compiles a new Set, which keeps the counters of the rules it
// shares by name with the one it replaces.
package rules

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/router"
)

// Route is where a rule sends a statement.
type Route uint8

const (
	// RouteNone leaves routing to the router and the session.
	RouteNone Route = iota
	// RouteMaster sends the statement to the master.
	RouteMaster
	// RouteReplica sends a read to a replica, whatever the cluster's
	// consistency says; it is ignored for anything else.
	RouteReplica
	// RouteCluster sends the statement to another cluster (the rule's
	// RouteTo), which picks its master or, for a read, a replica by its
	// own consistency.
	RouteCluster
)

func (r Route) String() string {
	switch r {
	case RouteMaster:
		return conf.RouteMaster
	case RouteReplica:
		return conf.RouteReplica
	case RouteCluster:
		return "cluster"
	}
	return ""
}

// Input is what a statement is matched on. Text may alias a buffer the
// caller reuses: Match keeps nothing of it.
type Input struct {
	Plan   *router.Plan
	Text   []byte
	User   string
	Schema string
	// Cluster is the name of the cluster the statement runs on.
	Cluster string
	// Addr is the client's address; it is read only when a rule has a
	// client_address (see Set.NeedsAddr).
	Addr netip.Addr
}

// Rule is one compiled [[rule]].
type Rule struct {
	Name string
	// The match fields; a zero field matches everything.
	digest   string
	digestID uint64
	byID     bool
	pattern  *regexp.Regexp
	pre      *prefilter
	user     string
	schema   string
	prefix   netip.Prefix
	hasAddr  bool
	kind     string
	cluster  string
	// The actions.
	Route    Route
	Err      bool
	ErrCode  uint16
	ErrMsg   string
	Log      bool
	Continue bool
	// RouteTo is the cluster a RouteCluster route sends statements to,
	// RouteToIdx its index in the configuration's clusters (and every
	// topology snapshot's).
	RouteTo    string
	RouteToIdx int
	// Timeout is the query timeout of the statements the rule matches; 0
	// for none.
	Timeout time.Duration
	// Mirror is the cluster that gets a copy of each matched statement,
	// MirrorIdx its index; "" for none.
	Mirror    string
	MirrorIdx int
	// CacheTTL: the answers of matched cacheable statements are cached
	// this long (0: not cached).
	CacheTTL time.Duration

	stats *stats
}

// stats are a rule's counters, carried from Set to Set by name.
type stats struct {
	hits atomic.Uint64
	last atomic.Int64 // unix nanoseconds of the last hit, 0 for none
	// warned: a replica route was ignored for a statement that is not a
	// read, and that was logged once.
	warned atomic.Bool
	// The rule's mirror copies: run, dropped on a full queue, failed.
	mirrored, mirrorDropped, mirrorFailed atomic.Uint64
}

// Hits returns how many statements the rule has matched.
func (r *Rule) Hits() uint64 { return r.stats.hits.Load() }

// LastHit returns when the rule last matched a statement, zero if never.
func (r *Rule) LastHit() time.Time {
	if ns := r.stats.last.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// NoteMirrored, NoteMirrorDropped and NoteMirrorFailed count one copy of
// a statement the rule mirrors: run on the mirror cluster, dropped because
// the mirror's queue was full, or not run (no master, a broken
// connection). Safe for concurrent use; the counts carry over reloads
// that keep the rule's name, as hits do.
func (r *Rule) NoteMirrored()      { r.stats.mirrored.Add(1) }
func (r *Rule) NoteMirrorDropped() { r.stats.mirrorDropped.Add(1) }
func (r *Rule) NoteMirrorFailed()  { r.stats.mirrorFailed.Add(1) }

// MirrorCounts returns the rule's copies run, dropped and failed.
func (r *Rule) MirrorCounts() (mirrored, dropped, failed uint64) {
	return r.stats.mirrored.Load(), r.stats.mirrorDropped.Load(), r.stats.mirrorFailed.Load()
}

// WarnOnce reports true the first time it is called for the rule (and its
// successors in later Sets): the caller logs that a replica route was
// ignored for a statement that is not a read.
func (r *Rule) WarnOnce() bool { return !r.stats.warned.Swap(true) }

// Actions spells the rule's actions for SHOW RULES: "route=replica",
// "route=<cluster>", "error=1142", "log", "timeout=2s", "mirror=<cluster>",
// "continue", joined with commas.
func (r *Rule) Actions() string {
	var a []string
	switch r.Route {
	case RouteNone:
	case RouteCluster:
		a = append(a, "route="+r.RouteTo)
	default:
		a = append(a, "route="+r.Route.String())
	}
	if r.Err {
		a = append(a, fmt.Sprintf("error=%d", r.ErrCode))
	}
	if r.Log {
		a = append(a, "log")
	}
	if r.Timeout > 0 {
		a = append(a, "timeout="+r.Timeout.String())
	}
	if r.Mirror != "" {
		a = append(a, "mirror="+r.Mirror)
	}
	if r.Continue {
		a = append(a, "continue")
	}
	if r.CacheTTL > 0 {
		a = append(a, "cache_ttl="+r.CacheTTL.String())
	}
	return strings.Join(a, ",")
}

// Set is the compiled rules of one configuration, in order.
type Set struct {
	rules    []Rule
	needAddr bool
}

// Compile builds the Set of cfg's rules, which Validate accepted. Rules
// of prev (may be nil) with the same name keep their counters.
func Compile(cfg *conf.Config, prev *Set) (*Set, error) {
	if len(cfg.Rules) > MaxRules {
		return nil, fmt.Errorf("rules: %d rules, at most %d", len(cfg.Rules), MaxRules)
	}
	s := &Set{rules: make([]Rule, len(cfg.Rules))}
	for i := range cfg.Rules {
		c := &cfg.Rules[i]
		r := &s.rules[i]
		r.Name, r.user, r.schema, r.kind, r.cluster = c.Name, c.User, c.Schema, c.Kind, c.Cluster
		if c.Digest != "" {
			if id, ok := router.ParseDigestID(c.Digest); ok {
				r.digestID, r.byID = id, true
			} else {
				r.digest = c.Digest
			}
		}
		if c.Pattern != "" {
			re, err := regexp.Compile(c.Pattern)
			if err != nil {
				return nil, fmt.Errorf("rule %q: pattern: %w", c.Name, err)
			}
			r.pattern, r.pre = re, newPrefilter(c.Pattern)
		}
		if c.ClientAddress != "" {
			p, err := conf.ParseClientAddress(c.ClientAddress)
			if err != nil {
				return nil, fmt.Errorf("rule %q: %w", c.Name, err)
			}
			r.prefix, r.hasAddr, s.needAddr = p, true, true
		}
		switch c.Route {
		case conf.RouteMaster:
			r.Route = RouteMaster
		case conf.RouteReplica:
			if c.Kind != "read" {
				return nil, fmt.Errorf("rule %q: route = \"replica\" needs kind = \"read\"", c.Name)
			}
			r.Route = RouteReplica
		case "":
		default:
			i := clusterIndex(cfg, c.Route)
			if i < 0 {
				return nil, fmt.Errorf("rule %q: route: no [[cluster]] is named %q", c.Name, c.Route)
			}
			r.Route, r.RouteTo, r.RouteToIdx = RouteCluster, c.Route, i
		}
		r.Timeout = c.Timeout.Duration
		if c.Mirror != "" {
			i := clusterIndex(cfg, c.Mirror)
			if i < 0 {
				return nil, fmt.Errorf("rule %q: mirror: no [[cluster]] is named %q", c.Name, c.Mirror)
			}
			r.Mirror, r.MirrorIdx = c.Mirror, i
		}
		r.Err, r.ErrMsg, r.Log, r.Continue = c.Error, c.ErrorMessage, c.Log, c.Continue
		r.CacheTTL = c.CacheTTL.Duration
		if c.Error {
			r.ErrCode = DefaultErrorCode
			if c.ErrorCode != 0 {
				r.ErrCode = uint16(c.ErrorCode)
			}
		}
		r.stats = prev.statsOf(c.Name)
	}
	return s, nil
}

// MaxRules is how many rules a Set holds at most (a Decision's bit set).
const MaxRules = conf.MaxRules

// DefaultErrorCode is the code of a rule's error without error_code:
// ER_TABLEACCESS_DENIED_ERROR, as a firewall deny.
const DefaultErrorCode = 1142

// clusterIndex is the index of the cluster called name in cfg, -1 if none.
func clusterIndex(cfg *conf.Config, name string) int {
	for i := range cfg.Clusters {
		if cfg.Clusters[i].Name == name {
			return i
		}
	}
	return -1
}

func (s *Set) statsOf(name string) *stats {
	if s != nil {
		for i := range s.rules {
			if s.rules[i].Name == name {
				return s.rules[i].stats
			}
		}
	}
	return new(stats)
}

// Rules returns the rules in order; the caller must not modify them.
func (s *Set) Rules() []Rule {
	if s == nil {
		return nil
	}
	return s.rules
}

// Len returns how many rules the set holds; a nil Set holds none.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.rules)
}

// NeedsAddr reports whether a rule matches on the client's address, which
// the caller must then put in Input.Addr.
func (s *Set) NeedsAddr() bool { return s != nil && s.needAddr }
