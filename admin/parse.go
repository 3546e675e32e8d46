package admin

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// errAdminSyntax reports an admin command sluice cannot read; the message
// names the part that failed.
var errAdminSyntax = errors.New("admin command syntax")

// adminKind is which admin command a text asks for.
type adminKind uint8

const (
	adminHelp adminKind = iota + 1
	adminShowBackends
	adminShowClusters
	adminShowPools
	adminShowSessions
	adminShowDigests
	adminShowShards
	adminShowRules
	adminShowEvents
	adminShowConfig
	adminShowVersion
	adminSetOffline
	adminSetOnline
	adminSetWeight
	adminKillConnection
	adminKillQuery
	adminSwitchover
	adminFailover
	adminReload
	adminFlushPrivileges
	adminShowCache
	adminFlushCache
	adminShowFleet
	adminShowFirewall
	adminFirewallAllow
	adminFirewallForget
	adminFirewallForgetAll
	adminShowSessionsFleet
)

// adminCommand is one parsed admin command. Which fields matter depends on
// kind; values come from the client's text only through the tokenizer, never
// by pasting text into SQL.
type adminCommand struct {
	kind   adminKind
	limit  int    // SHOW QUERY DIGESTS LIMIT n; -1 when not given
	addr   string // SET BACKEND, SWITCHOVER ... TO
	weight int    // SET BACKEND ... WEIGHT n
	id     uint32 // KILL
	// instance is the fleet member of KILL '<instance>:<id>'; "" for a
	// session of this instance.
	instance string
	cluster  string // SWITCHOVER, FAILOVER
	// schema and table of FLUSH CACHE schema.table; both "" for all.
	schema, table string
	user          string // SHOW FIREWALL FOR, FIREWALL ... FOR
	digest        uint64 // FIREWALL ALLOW | FORGET <digest id>
}

// adminCommands lists the valid commands, for HELP and for the error an
// unknown command gets.
var adminCommands = [][2]string{
	{"SHOW BACKENDS", "every backend: cluster, address, role, state, weight, load, lag, connections, queries"},
	{"SHOW CLUSTERS", "every cluster: master, replicas, balance policy, epoch"},
	{"SHOW POOLS", "the data connection pool of every backend"},
	{"SHOW SESSIONS", "client sessions: id, user, client, schema, backend, state, time, digest, pins"},
	{"SHOW SESSIONS FLEET", "the client sessions of every fleet member ([fleet]), each row led by its instance"},
	{"SHOW QUERY DIGESTS [LIMIT n]", "statement digests by total time: count, times, rows, errors, route, digest_id"},
	{"SHOW SHARDS", "the shard and broadcast rules"},
	{"SHOW RULES", "the query rules in order: hits, last hit, actions, match fields"},
	{"SHOW CACHE [LIMIT n]", "the result cache: hits, misses, stores, evictions, invalidations, bytes; then its most hit entries"},
	{"SHOW EVENTS", "failovers, fencing, reloads, backends going up/down, with time and epoch"},
	{"SHOW CONFIG", "the running configuration, secrets redacted"},
	{"SHOW VERSION", "the sluice version"},
	{"SHOW FLEET", "the instances of the fleet ([fleet], etcd): addresses, version, config revision, start, lease left"},
	{"HELP", "this list (SHOW HELP in the mysql and mariadb clients, which answer HELP themselves)"},
	{"SET BACKEND '<addr>' OFFLINE | ONLINE | WEIGHT <n>", "drain a backend, put it back (also un-fences), or change its balancer weight"},
	{"KILL [CONNECTION | QUERY] <id>", "close a client session, or kill the statement it runs"},
	{"KILL [CONNECTION | QUERY] '<instance>:<id>'", "the same for a session of any fleet member, forwarded to its admin port"},
	{"SWITCHOVER CLUSTER <name> TO '<addr>'", "planned master switch with no lost writes"},
	{"FAILOVER CLUSTER <name>", "promote a replica of the cluster now"},
	{"RELOAD CONFIG", "load the configuration file again and apply it"},
	{"FLUSH PRIVILEGES", "read every account's grants again from the auth server, at each session's next statement"},
	{"FLUSH CACHE [schema.table]", "drop every result cache entry, or those that read one table"},
	{"SHOW FIREWALL [FOR '<user>']", "the firewall's allowlists: user, mode, digest_id, digest, source, learned_at, hits"},
	{"FIREWALL ALLOW <digest id> FOR '<user>'", "add a digest to the user's allowlist (enforce mode then lets it through)"},
	{"FIREWALL FORGET <digest id> | ALL FOR '<user>'", "remove one digest, or all, from the user's allowlist"},
}

// adminUsage is the list of valid commands in one line, for errors.
var adminUsage = func() string {
	var b strings.Builder
	for i, c := range adminCommands {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(c[0])
	}
	return b.String()
}()

// tokKind is the kind of an admin token.
type tokKind uint8

const (
	tokWord tokKind = iota + 1
	tokString
	tokNumber
)

type adminToken struct {
	kind tokKind
	text string // a word as written, a string's value unquoted
}

// maxAdminWeight bounds SET BACKEND ... WEIGHT.
const maxAdminWeight = 1_000_000

// tokenizeAdmin splits an admin command into words, numbers and quoted
// strings. One or more trailing semicolons and any whitespace are allowed;
// anything else that is not a token is an error naming it.
func tokenizeAdmin(q string) ([]adminToken, error) {
	var toks []adminToken
	s := strings.TrimRight(q, " \t\r\n;")
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			i++
		case c == '\'' || c == '"':
			var b strings.Builder
			j := i + 1
			closed := false
			for j < len(s) {
				if s[j] == c {
					if j+1 < len(s) && s[j+1] == c {
						b.WriteByte(c)
						j += 2
						continue
					}
					closed = true
					j++
					break
				}
				b.WriteByte(s[j])
				j++
			}
			if !closed {
				return nil, fmt.Errorf("%w: unterminated string starting at offset %d", errAdminSyntax, i)
			}
			toks = append(toks, adminToken{kind: tokString, text: b.String()})
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			if j < len(s) && isWordByte(s[j]) {
				// Letters after digits: a hex digest id, or a bad
				// number (number says so).
				w := wordAt(s, i)
				toks = append(toks, adminToken{kind: tokWord, text: w})
				i += len(w)
				continue
			}
			toks = append(toks, adminToken{kind: tokNumber, text: s[i:j]})
			i = j
		case isWordByte(c):
			j := i
			// A dot between word bytes joins a qualified name (FLUSH
			// CACHE db.t) into one word.
			for j < len(s) && (isWordByte(s[j]) || s[j] == '.' && j+1 < len(s) && isWordByte(s[j+1]) && j > i) {
				j++
			}
			toks = append(toks, adminToken{kind: tokWord, text: s[i:j]})
			i = j
		default:
			return nil, fmt.Errorf("%w: unexpected %q at offset %d", errAdminSyntax, c, i)
		}
	}
	return toks, nil
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// wordAt returns the run of word bytes at s[i:] for messages.
func wordAt(s string, i int) string {
	j := i
	for j < len(s) && isWordByte(s[j]) {
		j++
	}
	return s[i:j]
}

// parseAdmin reads one admin command. Errors wrap errAdminSyntax and say
// what was expected.
func parseAdmin(q string) (adminCommand, error) {
	toks, err := tokenizeAdmin(q)
	if err != nil {
		return adminCommand{}, err
	}
	if len(toks) == 0 {
		return adminCommand{}, fmt.Errorf("%w: empty command", errAdminSyntax)
	}
	p := adminParser{toks: toks}
	cmd := adminCommand{limit: -1}
	switch first := p.word(); first {
	case "HELP":
		cmd.kind = adminHelp
	case "SHOW":
		if err := p.show(&cmd); err != nil {
			return cmd, err
		}
	case "SET":
		if !p.accept("BACKEND") {
			return cmd, p.expected("BACKEND after SET")
		}
		addr, err := p.str("the backend address")
		if err != nil {
			return cmd, err
		}
		cmd.addr = addr
		switch w := p.word(); w {
		case "OFFLINE":
			cmd.kind = adminSetOffline
		case "ONLINE":
			cmd.kind = adminSetOnline
		case "WEIGHT":
			n, err := p.number("WEIGHT", maxAdminWeight)
			if err != nil {
				return cmd, err
			}
			if n < 1 {
				return cmd, fmt.Errorf("%w: WEIGHT must be between 1 and %d, not %d", errAdminSyntax, maxAdminWeight, n)
			}
			cmd.kind, cmd.weight = adminSetWeight, n
		default:
			return cmd, p.expected("OFFLINE, ONLINE or WEIGHT <n> after SET BACKEND '<addr>'")
		}
	case "KILL":
		cmd.kind = adminKillConnection
		if p.accept("QUERY") {
			cmd.kind = adminKillQuery
		} else {
			p.accept("CONNECTION")
		}
		if err := p.killTarget(&cmd); err != nil {
			return cmd, err
		}
	case "SWITCHOVER", "FAILOVER":
		if err := p.masterChange(first, &cmd); err != nil {
			return cmd, err
		}
	case "FIREWALL":
		if err := p.firewall(&cmd); err != nil {
			return cmd, err
		}
	case "RELOAD", "FLUSH":
		if first == "FLUSH" && p.accept("CACHE") {
			cmd.kind = adminFlushCache
			if p.i < len(p.toks) {
				var err error
				if cmd.schema, cmd.table, err = p.tableName(); err != nil {
					return cmd, err
				}
			}
			break
		}
		var err error
		if cmd.kind, err = p.reloadOrFlush(first); err != nil {
			return cmd, err
		}
	default:
		return cmd, p.unknown()
	}
	if p.i < len(p.toks) {
		return cmd, fmt.Errorf("%w: unexpected %q after the command", errAdminSyntax, p.toks[p.i].text)
	}
	return cmd, nil
}

// show parses the rest of a SHOW command into cmd.
func (p *adminParser) show(cmd *adminCommand) error {
	switch w := p.word(); w {
	case "BACKENDS":
		cmd.kind = adminShowBackends
	case "CLUSTERS":
		cmd.kind = adminShowClusters
	case "POOLS":
		cmd.kind = adminShowPools
	case "SESSIONS", "PROCESSLIST":
		cmd.kind = adminShowSessions
		if p.accept("FLEET") {
			cmd.kind = adminShowSessionsFleet
		}
	case "QUERY":
		if !p.accept("DIGESTS") {
			return p.expected("DIGESTS after SHOW QUERY")
		}
		cmd.kind = adminShowDigests
		if p.accept("LIMIT") {
			n, err := p.number("LIMIT", 1<<20)
			if err != nil {
				return err
			}
			cmd.limit = n
		}
	case "SHARDS":
		cmd.kind = adminShowShards
	case "RULES":
		cmd.kind = adminShowRules
	case "CACHE":
		cmd.kind = adminShowCache
		if p.accept("LIMIT") {
			n, err := p.number("LIMIT", 1<<20)
			if err != nil {
				return err
			}
			cmd.limit = n
		}
	case "EVENTS":
		cmd.kind = adminShowEvents
	case "CONFIG":
		cmd.kind = adminShowConfig
	case "VERSION":
		cmd.kind = adminShowVersion
	case "FLEET":
		cmd.kind = adminShowFleet
	case "FIREWALL":
		return p.showFirewall(cmd)
	case "HELP":
		cmd.kind = adminHelp
	default:
		return p.unknown()
	}
	return nil
}

// killTarget reads the session of KILL: a number for a session of this
// instance, or '<instance>:<id>' for one of any fleet member. Instance
// names hold colons (host:port), so the id follows the last one.
func (p *adminParser) killTarget(cmd *adminCommand) error {
	if p.i >= len(p.toks) || p.toks[p.i].kind != tokString {
		n, err := p.number("the session id of KILL", 1<<32-1)
		cmd.id = uint32(n)
		return err
	}
	t := p.toks[p.i].text
	p.i++
	i := strings.LastIndexByte(t, ':')
	if i <= 0 {
		return fmt.Errorf("%w: KILL takes '<instance>:<id>' (as SHOW SESSIONS FLEET lists them), not %q", errAdminSyntax, t)
	}
	n, err := strconv.ParseUint(t[i+1:], 10, 32)
	if err != nil {
		return fmt.Errorf("%w: bad session id %q in KILL '%s'", errAdminSyntax, t[i+1:], t)
	}
	cmd.instance, cmd.id = t[:i], uint32(n)
	return nil
}

// masterChange parses the rest of SWITCHOVER CLUSTER <name> TO '<addr>'
// or FAILOVER CLUSTER <name> into cmd, first being the command's first word.
func (p *adminParser) masterChange(first string, cmd *adminCommand) error {
	name, err := p.clusterName(first)
	if err != nil {
		return err
	}
	if first == "FAILOVER" {
		cmd.kind, cmd.cluster = adminFailover, name
		return nil
	}
	if !p.accept("TO") {
		return p.expected("TO '<addr>' after SWITCHOVER CLUSTER <name>")
	}
	addr, err := p.str("the target address")
	if err != nil {
		return err
	}
	cmd.kind, cmd.cluster, cmd.addr = adminSwitchover, name, addr
	return nil
}

// reloadOrFlush parses the rest of RELOAD CONFIG or FLUSH PRIVILEGES,
// first being the command's first word.
func (p *adminParser) reloadOrFlush(first string) (adminKind, error) {
	if first == "RELOAD" {
		if !p.accept("CONFIG") {
			return 0, p.expected("CONFIG after RELOAD")
		}
		return adminReload, nil
	}
	if !p.accept("PRIVILEGES") {
		return 0, p.expected("PRIVILEGES after FLUSH")
	}
	return adminFlushPrivileges, nil
}

// adminParser walks the tokens of one command.
type adminParser struct {
	toks []adminToken
	i    int
}

// word returns the next token upper-cased when it is a word, else "".
func (p *adminParser) word() string {
	if p.i >= len(p.toks) || p.toks[p.i].kind != tokWord {
		return ""
	}
	p.i++
	return strings.ToUpper(p.toks[p.i-1].text)
}

// accept consumes the next token when it is the word w (case-insensitive).
func (p *adminParser) accept(w string) bool {
	if p.i < len(p.toks) && p.toks[p.i].kind == tokWord && strings.EqualFold(p.toks[p.i].text, w) {
		p.i++
		return true
	}
	return false
}

// str reads a quoted string naming what.
func (p *adminParser) str(what string) (string, error) {
	if p.i >= len(p.toks) || p.toks[p.i].kind != tokString {
		return "", p.expected(what + " as a quoted string")
	}
	p.i++
	return p.toks[p.i-1].text, nil
}

// tableName reads the schema.table of FLUSH CACHE, as one word or a
// quoted string.
func (p *adminParser) tableName() (schema, table string, err error) {
	if p.i >= len(p.toks) || p.toks[p.i].kind == tokNumber {
		return "", "", p.expected("schema.table after FLUSH CACHE")
	}
	t := p.toks[p.i].text
	p.i++
	schema, table, ok := strings.Cut(t, ".")
	if !ok || schema == "" || table == "" || strings.Contains(table, ".") {
		return "", "", fmt.Errorf("%w: FLUSH CACHE takes schema.table, not %q", errAdminSyntax, t)
	}
	return schema, table, nil
}

// number reads a decimal number between 0 and maxV.
func (p *adminParser) number(what string, maxV int) (int, error) {
	if p.i < len(p.toks) && p.toks[p.i].kind == tokWord && p.toks[p.i].text[0] >= '0' && p.toks[p.i].text[0] <= '9' {
		return 0, fmt.Errorf("%w: bad number %q for %s", errAdminSyntax, p.toks[p.i].text, what)
	}
	if p.i >= len(p.toks) || p.toks[p.i].kind != tokNumber {
		return 0, p.expected("a number for " + what)
	}
	t := p.toks[p.i].text
	p.i++
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil || n > uint64(maxV) {
		return 0, fmt.Errorf("%w: %s %s is out of range (0..%d)", errAdminSyntax, what, t, maxV)
	}
	return int(n), nil
}

// clusterName reads CLUSTER <name>; the name is a word or a quoted string.
func (p *adminParser) clusterName(cmd string) (string, error) {
	if !p.accept("CLUSTER") {
		return "", p.expected("CLUSTER <name> after " + cmd)
	}
	if p.i < len(p.toks) && (p.toks[p.i].kind == tokWord || p.toks[p.i].kind == tokString) {
		p.i++
		return p.toks[p.i-1].text, nil
	}
	return "", p.expected("a cluster name after " + cmd + " CLUSTER")
}

func (p *adminParser) expected(what string) error {
	got := "the end of the command"
	if p.i < len(p.toks) {
		got = fmt.Sprintf("%q", p.toks[p.i].text)
	}
	return fmt.Errorf("%w: expected %s, got %s", errAdminSyntax, what, got)
}

func (p *adminParser) unknown() error {
	return fmt.Errorf("%w: unknown command; valid commands: %s", errAdminSyntax, adminUsage)
}
