package conf

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
)

// MaxRules bounds the [[rule]] entries of one configuration.
const MaxRules = 256

// Rule is one [[rule]] entry: a query rule. The rules are tried in file
// order on every statement; the first whose match fields all hold decides
// its actions, and with Continue the rules after it may add the actions
// it leaves unset. A match field left empty matches everything.
type Rule struct {
	// Name identifies the rule in SHOW RULES and in the
	// sluice_rule_hits_total metric; required and unique.
	Name string `toml:"name"`
	// Digest matches the statement's digest: its normalised text as SHOW
	// QUERY DIGESTS prints it, or its 16-hex-digit id (digest_id).
	Digest string `toml:"digest"`
	// Pattern is an RE2 regular expression matched against the
	// statement's text.
	Pattern string `toml:"pattern"`
	// User and Schema match the session's user and current database.
	User   string `toml:"user"`
	Schema string `toml:"schema"`
	// ClientAddress is a CIDR prefix (or one address) the client's
	// address must be in.
	ClientAddress string `toml:"client_address"`
	// Kind is what the statement does as the router classifies it: read,
	// write (DDL included), ddl, use, set or txn.
	Kind string `toml:"kind"`
	// Cluster matches the cluster the session's statement runs on.
	Cluster string `toml:"cluster"`
	// Route sends a matched statement to the "master" or, for reads
	// only, a "replica" (whatever the cluster's consistency says), or to
	// another [[cluster]] by its name.
	Route string `toml:"route"`
	// Error refuses a matched statement: with ErrorCode and ErrorMessage
	// when set, else with error 1142.
	Error        bool   `toml:"error"`
	ErrorCode    int    `toml:"error_code"`
	ErrorMessage string `toml:"error_message"`
	// Log logs each matched statement's digest and the rule at info level.
	Log bool `toml:"log"`
	// Continue lets the rules after this one add actions to a statement
	// it matched.
	Continue bool `toml:"continue"`
	// Timeout is a matched statement's query timeout, as [limits]
	// query_timeout (the smaller of the two applies); 0: none.
	Timeout Duration `toml:"timeout"`
	// Mirror names a [[cluster]] that gets a copy of each matched
	// statement, run asynchronously, its result discarded.
	Mirror string `toml:"mirror"`
	// CacheTTL caches the answers of the matched statements that are
	// cacheable for this long (0: not cached); see [cache].
	CacheTTL Duration `toml:"cache_ttl"`
}

// RuleKinds are the values of a rule's kind.
var RuleKinds = []string{"read", "write", "ddl", "use", "set", "txn"}

// Rule routes.
const (
	RouteMaster  = "master"
	RouteReplica = "replica"
)

// validateRules checks the [[rule]] entries: names, match fields and
// actions, and that no rule can send a write to a replica.
func (c *Config) validateRules(p *problems) {
	if len(c.Rules) > MaxRules {
		p.add("rule: at most %d [[rule]] entries are allowed (got %d)", MaxRules, len(c.Rules))
	}
	first := make(map[string]int, len(c.Rules))
	for i := range c.Rules {
		r := &c.Rules[i]
		label := fmt.Sprintf("rule[%d]", i)
		if r.Name != "" {
			label += fmt.Sprintf(" (%q)", r.Name)
		}
		switch j, dup := first[r.Name]; {
		case r.Name == "":
			p.add("%s: name is required", label)
		case !isName(r.Name):
			p.add("%s: name may hold only letters, digits, _ and - (it labels a metric)", label)
		case dup:
			p.add("%s: name %q is already used by rule[%d]", label, r.Name, j)
		default:
			first[r.Name] = i
		}
		c.validateRuleMatch(p, label, r)
		c.validateRuleActions(p, label, r)
		validateRuleCache(p, label, r)
	}
}

func (c *Config) validateRuleMatch(p *problems, label string, r *Rule) {
	if r.Pattern != "" {
		if _, err := regexp.Compile(r.Pattern); err != nil {
			p.add("%s: pattern is not a valid RE2 expression: %v", label, err)
		}
	}
	if r.ClientAddress != "" {
		if _, err := ParseClientAddress(r.ClientAddress); err != nil {
			p.add("%s: client_address: %v", label, err)
		}
	}
	if r.Kind != "" && !slices.Contains(RuleKinds, r.Kind) {
		p.add("%s: kind must be %s (got %q)", label, oneOf(RuleKinds), r.Kind)
	}
	if r.Cluster != "" && c.Cluster(r.Cluster) == nil {
		p.add("%s: cluster: no [[cluster]] is named %q", label, r.Cluster)
	}
	if r.Digest != "" && strings.TrimSpace(r.Digest) == "" {
		p.add("%s: digest must not be blank", label)
	}
}

func (c *Config) validateRuleActions(p *problems, label string, r *Rule) {
	switch r.Route {
	case "", RouteMaster:
	case RouteReplica:
		// Safety by construction: only reads may be routed to a
		// replica, and the rule must say so itself.
		if r.Kind != "read" {
			p.add("%s: route = \"replica\" needs kind = \"read\": without it the rule could send writes to a replica (got kind %q)", label, r.Kind)
		}
	default:
		switch {
		case c.Cluster(r.Route) == nil:
			p.add("%s: route must be \"master\", \"replica\" or the name of a [[cluster]] (got %q, and no [[cluster]] is named so)", label, r.Route)
		case r.Cluster == r.Route:
			p.add("%s: route = %q sends statements to the cluster the rule's cluster key already matches: use route = \"master\" or \"replica\"", label, r.Route)
		}
	}
	if r.Error && r.Route != "" {
		p.add("%s: error and route exclude each other: a refused statement goes nowhere", label)
	}
	if r.Error && r.Timeout.Duration != 0 {
		p.add("%s: error and timeout exclude each other: a refused statement never runs", label)
	}
	if r.Error && r.Mirror != "" {
		p.add("%s: error and mirror exclude each other: a refused statement is not copied", label)
	}
	if !r.Error && (r.ErrorCode != 0 || r.ErrorMessage != "") {
		p.add("%s: error_code and error_message need error = true", label)
	}
	if r.ErrorCode != 0 && (r.ErrorCode < 1000 || r.ErrorCode > 65535) {
		p.add("%s: error_code must be a MySQL error code between 1000 and 65535 (got %d)", label, r.ErrorCode)
	}
	if r.Timeout.Duration < 0 {
		p.add("%s: timeout must be > 0 (got %s)", label, r.Timeout)
	}
	if r.Mirror != "" {
		c.validateRuleMirror(p, label, r)
	}
}

// validateRuleMirror checks a rule's mirror: a configured cluster other
// than the one the matched statements run on, since a copy there would run
// every write twice.
func (c *Config) validateRuleMirror(p *problems, label string, r *Rule) {
	own := r.Cluster
	if own == "" && len(c.Shards) == 0 && len(c.Broadcast) == 0 {
		// Unsharded, every statement runs on the default cluster.
		own = c.DefaultCluster()
	}
	switch {
	case c.Cluster(r.Mirror) == nil:
		p.add("%s: mirror: no [[cluster]] is named %q", label, r.Mirror)
	case r.Mirror == own:
		p.add("%s: mirror = %q is the cluster the rule's statements run on: the copy would run every write twice there", label, r.Mirror)
	case r.Mirror == r.Route:
		p.add("%s: mirror = %q is also the rule's route: the copy would run every write twice there", label, r.Mirror)
	case len(c.Broadcast) > 0:
		// The copy is made before sharding places the statement.
		p.add("%s: mirror cannot be used with [[broadcast]] tables: a write to one runs on every cluster, %q included, and its copy would run there again", label, r.Mirror)
	case len(c.Shards) > 0 && r.Mirror == c.DefaultCluster():
		p.add("%s: mirror = %q is the default cluster, where unsharded statements run: the copy would run every write twice there", label, r.Mirror)
	case len(c.Shards) > 0 && slices.ContainsFunc(c.Shards, func(sh Shard) bool { return slices.Contains(sh.Clusters, r.Mirror) }):
		p.add("%s: mirror = %q holds shards of a [[shard]] rule: a write the rule places there would run twice", label, r.Mirror)
	}
}

// ParseClientAddress reads a rule's client_address: a CIDR prefix such
// as "10.0.0.0/8", or one address, which is its own /32 or /128.
func ParseClientAddress(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR prefix such as \"10.0.0.0/8\": %w", s, err)
		}
		return pfx.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is neither an address nor a CIDR prefix such as \"10.0.0.0/8\": %w", s, err)
	}
	return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
}

// describeRule prints a rule's match keys and actions for Describe:
// `user="app" kind="read" -> route replica, log`.
func describeRule(r *Rule) string {
	var match, acts []string
	for _, f := range [][2]string{{"digest", r.Digest}, {"pattern", r.Pattern}, {"user", r.User}, {"schema", r.Schema},
		{"client_address", r.ClientAddress}, {"kind", r.Kind}, {"cluster", r.Cluster}} {
		if f[1] != "" {
			match = append(match, fmt.Sprintf("%s=%q", f[0], f[1]))
		}
	}
	if len(match) == 0 {
		match = []string{"every statement"}
	}
	if r.Route != "" {
		acts = append(acts, "route "+r.Route)
	}
	if r.Error {
		code := r.ErrorCode
		if code == 0 {
			code = 1142
		}
		acts = append(acts, fmt.Sprintf("error %d", code))
	}
	if r.Log {
		acts = append(acts, "log")
	}
	if r.Timeout.Duration > 0 {
		acts = append(acts, "timeout "+r.Timeout.String())
	}
	if r.Mirror != "" {
		acts = append(acts, "mirror "+r.Mirror)
	}
	if r.Continue {
		acts = append(acts, "continue")
	}
	if r.CacheTTL.Duration > 0 {
		acts = append(acts, "cache "+r.CacheTTL.Duration.String())
	}
	if len(acts) == 0 {
		acts = []string{"count only"}
	}
	return strings.Join(match, " ") + " -> " + strings.Join(acts, ", ")
}
