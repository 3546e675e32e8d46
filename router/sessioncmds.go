package router

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
)

// This file holds the statements about connections that the proxy answers
// from its own sessions: a client's connection id is a sluice session id,
// which means nothing to a backend, so KILL and the process list must never
// reach one as they are.

// Session commands, Plan.Local values the proxy serves from its session
// registry. They are numbered apart from the other LocalFunc values.
const (
	// LocalKill: a text holding a KILL statement in any form (KILL n, KILL
	// QUERY n, KILL HARD CONNECTION n, KILL USER u, inside an executable
	// comment, as one statement of several, or prepared by SQL PREPARE
	// from a literal). The proxy runs it or refuses it, never forwards it.
	LocalKill LocalFunc = 64 + iota
	// LocalShowProcesslist: SHOW PROCESSLIST.
	LocalShowProcesslist
	// LocalShowFullProcesslist: SHOW FULL PROCESSLIST.
	LocalShowFullProcesslist
	// LocalProcesslistTable: a statement that reads a table named
	// PROCESSLIST, in information_schema or unqualified (which is
	// information_schema's when that is the session's default schema):
	// RewriteProcesslist replaces it with the session list.
	LocalProcesslistTable
	// LocalThreadPlan: SHOW EXPLAIN FOR n, SHOW ANALYZE FOR n, EXPLAIN
	// [FORMAT=...] FOR CONNECTION n: a look at another connection's
	// running statement by its id, which names a sluice session; the proxy
	// refuses it, never forwards it to a backend, where the number names
	// an unrelated thread.
	LocalThreadPlan
	// LocalDynamicSQL: PREPARE ... FROM a variable, whose text the proxy
	// cannot read: it may be a KILL or a look at the process list by
	// backend thread ids. The proxy refuses it.
	LocalDynamicSQL
)

// killText reports whether any statement of sql starts with the KILL
// keyword, executable comments read as statement text.
func killText(sql string) bool {
	return anyStatement(sql, func(st string) bool { return wordsAre(leadingWords(st, 1), "KILL") })
}

// forConnection finds "FOR CONNECTION" in an EXPLAIN or ANALYZE text.
var forConnection = regexp.MustCompile(`(?i)\bFOR\s+CONNECTION\b`)

// threadPlanText reports whether any statement of sql looks at another
// connection's statement by id (LocalThreadPlan).
func threadPlanText(sql string) bool {
	return anyStatement(sql, func(st string) bool {
		w := leadingWords(st, 2)
		if wordsAre(w, "SHOW", "EXPLAIN") || wordsAre(w, "SHOW", "ANALYZE") {
			return true
		}
		if len(w) > 0 && (wordsAre(w[:1], "EXPLAIN") || wordsAre(w[:1], "DESCRIBE") || wordsAre(w[:1], "DESC") || wordsAre(w[:1], "ANALYZE")) {
			return forConnection.MatchString(st)
		}
		return false
	})
}

// anyStatement reports whether is holds for the text of any statement of
// sql (split at semicolons outside literals and comments).
func anyStatement(sql string, is func(st string) bool) bool {
	start := 0
	for i := 0; i <= len(sql); {
		if i == len(sql) || sql[i] == ';' {
			if is(sql[start:i]) {
				return true
			}
			i++
			start = i
			continue
		}
		switch c := sql[i]; {
		case c == '\'' || c == '"' || c == '`':
			i = skipQuoted(sql, i, c, c != '`')
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*' && !executableCommentAt(sql, i):
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				i = len(sql)
			} else {
				i += 2 + end + 2
			}
		case lineCommentAt(sql, i):
			end := strings.IndexByte(sql[i:], '\n')
			if end < 0 {
				i = len(sql)
			} else {
				i += end + 1
			}
		default:
			i++
		}
	}
	return false
}

// sessionCommandOf returns the session command stmt is, LocalNone for
// others.
func sessionCommandOf(stmt ast.StmtNode) LocalFunc {
	switch s := stmt.(type) {
	case *ast.ShowStmt:
		if s.Tp == ast.ShowProcessList {
			if s.Full {
				return LocalShowFullProcesslist
			}
			return LocalShowProcesslist
		}
	case *ast.KillStmt:
		return LocalKill
	case *ast.PrepareStmt:
		if s.SQLVar != nil {
			return LocalDynamicSQL
		}
		if killText(s.SQLText) {
			return LocalKill
		}
	}
	var f processlistFinder
	stmt.Accept(&f)
	if f.found {
		return LocalProcesslistTable
	}
	return LocalNone
}

// processlistFinder looks for a table reference PROCESSLIST (any schema
// the rewrite may replace; the proxy decides with the session's schema).
type processlistFinder struct{ found bool }

func (f *processlistFinder) Enter(n ast.Node) (ast.Node, bool) {
	if t, ok := n.(*ast.TableName); ok && t.Name.L == "processlist" && (t.Schema.L == "" || t.Schema.L == "information_schema") {
		f.found = true
	}
	return n, f.found
}

func (*processlistFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// Kill is a KILL statement as MariaDB reads it:
// KILL [HARD | SOFT] [CONNECTION | QUERY [ID]] expr and
// KILL [HARD | SOFT] [CONNECTION | QUERY] USER user.
type Kill struct {
	// Query: KILL QUERY (the running statement), not the connection.
	Query bool
	// QueryID: KILL QUERY ID n, whose n is a query id, not a thread id.
	QueryID bool
	// ID is the thread id, when IDKnown; Self marks CONNECTION_ID().
	ID      uint64
	IDKnown bool
	Self    bool
	// Expr is the id's expression as written, when it is neither a
	// literal nor CONNECTION_ID().
	Expr string
	// ByUser: KILL ... USER; User and Host name the account (Host "" when
	// not given; CurrentUser for CURRENT_USER).
	ByUser      bool
	User, Host  string
	CurrentUser bool
}

// ErrNotKill is returned by ParseKill for a text that is not one KILL
// statement (a KILL inside a multi-statement text or a PREPARE).
var ErrNotKill = errors.New("not a single KILL statement")

// killScanner reads the words and literals of a KILL statement.
type killScanner struct {
	s string
	i int
}

// skip moves past whitespace, comments and executable comment markers.
func (k *killScanner) skip() {
	for k.i < len(k.s) {
		switch c := k.s[k.i]; {
		case isSpace(c):
			k.i++
		case c == '/' && k.i+1 < len(k.s) && k.s[k.i+1] == '*':
			if executableCommentAt(k.s, k.i) {
				k.i += strings.IndexByte(k.s[k.i:], '!') + 1
				for k.i < len(k.s) && k.s[k.i] >= '0' && k.s[k.i] <= '9' {
					k.i++
				}
				continue
			}
			end := strings.Index(k.s[k.i+2:], "*/")
			if end < 0 {
				k.i = len(k.s)
				return
			}
			k.i += 2 + end + 2
		case c == '*' && k.i+1 < len(k.s) && k.s[k.i+1] == '/':
			k.i += 2
		case lineCommentAt(k.s, k.i):
			end := strings.IndexByte(k.s[k.i:], '\n')
			if end < 0 {
				k.i = len(k.s)
				return
			}
			k.i += end + 1
		default:
			return
		}
	}
}

// word consumes the next word when it is w (any letter case).
func (k *killScanner) word(w string) bool {
	k.skip()
	j := k.i
	for j < len(k.s) && isWordByte(k.s[j]) {
		j++
	}
	if strings.EqualFold(k.s[k.i:j], w) {
		k.i = j
		return true
	}
	return false
}

// rest returns what is left, without trailing blanks, comments and one ;.
func (k *killScanner) rest() string {
	k.skip()
	r := strings.TrimRight(withoutComments(k.s[k.i:]), " \t\r\n\f\v")
	r = strings.TrimSuffix(r, "*/") // the end of an executable comment
	r = strings.TrimRight(r, " \t\r\n\f\v")
	r = strings.TrimSuffix(r, ";")
	return strings.TrimRight(r, " \t\r\n\f\v")
}

// ParseKill reads the KILL statement sql. Its error names what is wrong;
// ErrNotKill is wrapped for a text that is not a single KILL.
func ParseKill(sql string) (Kill, error) {
	var k Kill
	sc := killScanner{s: sql}
	if !sc.word("KILL") {
		return k, ErrNotKill
	}
	if !sc.word("HARD") {
		sc.word("SOFT")
	}
	switch {
	case sc.word("CONNECTION"):
	case sc.word("QUERY"):
		k.Query = true
		// ID is a keyword only before a number: KILL QUERY ID 5.
		save := sc.i
		if sc.word("ID") {
			sc.skip()
			if sc.i < len(sql) && (sql[sc.i] >= '0' && sql[sc.i] <= '9' || sql[sc.i] == '@' || sql[sc.i] == '(') {
				k.QueryID = true
			} else {
				sc.i = save
			}
		}
	}
	if save := sc.i; !k.QueryID && sc.word("USER") {
		sc.skip()
		if sc.i < len(sql) && sql[sc.i] != '(' {
			k.ByUser = true
			return k, parseKillUser(&k, sc.rest())
		}
		sc.i = save
	}
	expr := sc.rest()
	if expr == "" {
		return k, fmt.Errorf("KILL needs a thread id")
	}
	if strings.ContainsRune(expr, ';') && !strings.ContainsAny(expr, "'\"`") {
		return k, fmt.Errorf("%w: more than one statement", ErrNotKill)
	}
	k.ID, k.IDKnown, k.Self = killValue(expr)
	if !k.IDKnown && !k.Self {
		k.Expr = expr
	}
	return k, nil
}

// killValue evaluates the thread id expression e when it is a literal
// (as MariaDB converts it: a decimal rounds, a negative number wraps, a
// string takes its leading number, NULL is 0) or CONNECTION_ID().
func killValue(e string) (id uint64, known, self bool) {
	for len(e) > 1 && e[0] == '(' && e[len(e)-1] == ')' {
		e = strings.TrimSpace(e[1 : len(e)-1])
	}
	if strings.EqualFold(strings.Join(strings.Fields(e), ""), "CONNECTION_ID()") {
		return 0, false, true
	}
	if strings.EqualFold(e, "NULL") {
		return 0, true, false
	}
	if len(e) >= 2 && (e[0] == '\'' || e[0] == '"') && e[len(e)-1] == e[0] &&
		!strings.ContainsRune(e[1:len(e)-1], rune(e[0])) && !strings.ContainsRune(e, '\\') {
		s := strings.TrimLeft(e[1:len(e)-1], " \t\r\n")
		j := 0
		if j < len(s) && (s[j] == '-' || s[j] == '+') {
			j++
		}
		for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.') {
			j++
		}
		e = s[:j]
		if e == "" || e == "-" || e == "+" {
			return 0, true, false
		}
	}
	if f, err := strconv.ParseFloat(e, 64); err == nil && !strings.ContainsAny(e, "xXeEnN_") {
		if n, err := strconv.ParseUint(e, 10, 64); err == nil {
			return n, true, false
		}
		if n, err := strconv.ParseInt(e, 10, 64); err == nil {
			return uint64(n), true, false
		}
		r := math.Round(f)
		switch {
		case r >= 0 && r < math.MaxUint64:
			return uint64(r), true, false
		case r < 0 && r >= math.MinInt64:
			return uint64(int64(r)), true, false
		}
	}
	return 0, false, false
}

// parseKillUser reads the account of KILL ... USER: a name, quoted or not,
// with an optional @host, or CURRENT_USER [()].
func parseKillUser(k *Kill, s string) error {
	if w := strings.Join(strings.Fields(s), ""); strings.EqualFold(w, "CURRENT_USER") || strings.EqualFold(w, "CURRENT_USER()") {
		k.CurrentUser = true
		return nil
	}
	name, rest, err := killName(s)
	if err != nil {
		return fmt.Errorf("KILL USER: %w", err)
	}
	k.User = name
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return nil
	}
	if rest[0] != '@' {
		return fmt.Errorf("KILL USER: unexpected %q after the user name", rest)
	}
	host, rest, err := killName(strings.TrimSpace(rest[1:]))
	if err != nil || strings.TrimSpace(rest) != "" {
		return fmt.Errorf("KILL USER: cannot read the host part of %q", s)
	}
	k.Host = host
	return nil
}

// killName reads one name, bare or quoted with ', " or `.
func killName(s string) (name, rest string, err error) {
	if s == "" {
		return "", "", errors.New("missing user name")
	}
	if q := s[0]; q == '\'' || q == '"' || q == '`' {
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			switch c := s[i]; {
			case c == q && i+1 < len(s) && s[i+1] == q:
				b.WriteByte(q)
				i++
			case c == q:
				return b.String(), s[i+1:], nil
			case c == '\\' && q != '`' && i+1 < len(s):
				i++
				b.WriteByte(s[i])
			default:
				b.WriteByte(c)
			}
		}
		return "", "", fmt.Errorf("unterminated name %s", s)
	}
	j := 0
	for j < len(s) && (isWordByte(s[j]) || s[j] == '.' || s[j] == '%' || s[j] == '-') {
		j++
	}
	if j == 0 {
		return "", "", fmt.Errorf("cannot read a user name from %q", s)
	}
	return s[:j], s[j:], nil
}

// ProcesslistMarker names the table RewriteProcesslist puts where the
// process list was; the proxy's derived table replaces the quoted name.
const processlistMarker = "sluice_processlist_b1c9e4"

// RewriteProcesslist rewrites a statement that reads PROCESSLIST so that
// it reads derived instead: every reference to information_schema's
// PROCESSLIST (unqualified too when schema, the session's default schema,
// is information_schema) becomes "(derived) AS <alias>", the alias being
// the one written or the table's name as written. modes are the session's
// lexing flags, which the parse and the restored text follow. ok is false
// when the text refers to no such table (an unqualified PROCESSLIST in
// another schema): it is then run as it is.
func RewriteProcesslist(sql string, modes LexModes, schema, derived string) (out string, ok bool, err error) {
	p := parserPool.Get().(*parser.Parser)
	p.SetSQLMode(sqlModeOf(modes))
	stmts, broken, err := parseSafe(p, sql)
	if !broken {
		// The parser reuses its nodes' memory: back to the pool only once the tree is read.
		defer func() {
			p.SetSQLMode(defaultSQLMode)
			parserPool.Put(p)
		}()
	}
	if err != nil {
		return "", false, fmt.Errorf("%w: %v", ErrParse, err)
	}
	inIS := strings.EqualFold(schema, "information_schema")
	r := processlistRewriter{inIS: inIS}
	for _, st := range stmts {
		st.Accept(&r)
	}
	if r.n == 0 {
		return "", false, nil
	}
	if r.unqualified == 0 {
		// Replace the references in the text as written, so that
		// everything else (the names of expression columns above all)
		// stays the client's.
		if out, n, aliased := replaceQualifiedProcesslist(sql, modes, derived); n == r.n && aliased == r.aliased {
			return out, true, nil
		}
	}
	flags := format.RestoreStringSingleQuotes | format.RestoreKeyWordUppercase | format.RestoreNameBackQuotes |
		format.RestoreStringWithoutDefaultCharset
	if modes&LexNoBackslashEscapes == 0 {
		flags |= format.RestoreStringEscapeBackslash
	}
	var sb strings.Builder
	for i, st := range stmts {
		if i > 0 {
			sb.WriteString("; ")
		}
		if err := st.Restore(format.NewRestoreCtx(flags, &sb)); err != nil {
			return "", false, fmt.Errorf("cannot write the statement back: %w", err)
		}
	}
	return strings.ReplaceAll(sb.String(), "`"+processlistMarker+"`", "("+derived+")"), true, nil
}

// processlistRewriter points every TableSource of the process list at the
// marker, keeping the alias the statement's column references use.
type processlistRewriter struct {
	inIS bool
	// n references, of which unqualified have no schema and aliased an
	// alias.
	n, unqualified, aliased int
}

func (r *processlistRewriter) Enter(n ast.Node) (ast.Node, bool) {
	ts, ok := n.(*ast.TableSource)
	if !ok {
		return n, false
	}
	t, ok := ts.Source.(*ast.TableName)
	if !ok || t.Name.L != "processlist" || !(t.Schema.L == "information_schema" || t.Schema.L == "" && r.inIS) {
		return n, false
	}
	if t.Schema.L == "" {
		r.unqualified++
	}
	if ts.AsName.L == "" {
		ts.AsName = t.Name
	} else {
		r.aliased++
	}
	ts.Source = &ast.TableName{Name: ast.NewCIStr(processlistMarker)}
	r.n++
	return n, true
}

func (*processlistRewriter) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// replaceQualifiedProcesslist replaces each information_schema.PROCESSLIST
// (any letter case, names bare or quoted) written in sql outside literals
// and comments with "(derived)", adding the table's name as written as the
// alias where none follows. It returns how many it replaced and how many of
// those had an alias, for the caller to check against the parse.
func replaceQualifiedProcesslist(sql string, modes LexModes, derived string) (out string, n, aliased int) {
	var b strings.Builder
	last := 0
	backslash := modes&LexNoBackslashEscapes == 0
	ident := func(i int) (name string, end int) {
		if i >= len(sql) {
			return "", i
		}
		if q := sql[i]; q == '`' || q == '"' && modes&LexANSIQuotes != 0 {
			end = skipQuoted(sql, i, q, false)
			if end > len(sql) || end-i < 2 {
				return "", i
			}
			return strings.ReplaceAll(sql[i+1:end-1], string(q)+string(q), string(q)), end
		}
		end = i
		for end < len(sql) && isWordByte(sql[end]) {
			end++
		}
		return sql[i:end], end
	}
	skipSpace := func(i int) int {
		for i < len(sql) && isSpace(sql[i]) {
			i++
		}
		return i
	}
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '\'' || c == '"' && modes&LexANSIQuotes == 0:
			i = skipQuoted(sql, i, c, backslash)
			continue
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*' && !executableCommentAt(sql, i):
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				i = len(sql)
			} else {
				i += 2 + end + 2
			}
			continue
		case lineCommentAt(sql, i):
			end := strings.IndexByte(sql[i:], '\n')
			if end < 0 {
				i = len(sql)
			} else {
				i += end + 1
			}
			continue
		}
		if i > 0 && (isWordByte(sql[i-1]) || sql[i-1] == '.') || !(isWordByte(c) || c == '`' || c == '"') {
			i++
			continue
		}
		schema, end := ident(i)
		if end == i {
			i++
			continue
		}
		if !strings.EqualFold(schema, "information_schema") {
			i = end
			continue
		}
		dot := skipSpace(end)
		if dot >= len(sql) || sql[dot] != '.' {
			i = end
			continue
		}
		tstart := skipSpace(dot + 1)
		table, tend := ident(tstart)
		if !strings.EqualFold(table, "processlist") || tend < len(sql) && isWordByte(sql[tend]) {
			i = end
			continue
		}
		b.WriteString(sql[last:i])
		b.WriteString("(" + derived + ")")
		if hasAlias(sql[tend:]) {
			aliased++
		} else {
			b.WriteString(" AS `" + strings.ReplaceAll(table, "`", "``") + "`")
		}
		n++
		last, i = tend, tend
	}
	b.WriteString(sql[last:])
	return b.String(), n, aliased
}

// notAliases are the words that may follow a table reference without being
// its alias.
var notAliases = map[string]bool{
	"WHERE": true, "JOIN": true, "INNER": true, "LEFT": true, "RIGHT": true, "CROSS": true, "NATURAL": true,
	"STRAIGHT_JOIN": true, "ON": true, "USING": true, "GROUP": true, "ORDER": true, "LIMIT": true, "HAVING": true,
	"UNION": true, "EXCEPT": true, "INTERSECT": true, "WINDOW": true, "FOR": true, "LOCK": true, "INTO": true,
	"PROCEDURE": true, "USE": true, "IGNORE": true, "FORCE": true, "PARTITION": true, "SET": true,
	"RETURNING": true, "VALUES": true, "SELECT": true, "WITH": true, "OFFSET": true, "FETCH": true, "FULL": true,
}

// hasAlias reports whether the text after a table reference starts with
// its alias (AS, or a name that is not a clause keyword).
func hasAlias(rest string) bool {
	w := leadingWords(rest, 1)
	t := strings.TrimLeft(rest, " \t\r\n\f\v")
	if t != "" && t[0] == '`' {
		return true
	}
	if len(w) == 0 || !strings.HasPrefix(t, w[0]) {
		return false
	}
	return strings.EqualFold(w[0], "AS") || !notAliases[strings.ToUpper(w[0])]
}

// connectionWords are the words of statements about connections by id and
// of dynamic SQL, in any letter case, as whole words.
var connectionWords = regexp.MustCompile(`(?i)\b(KILL|PROCESSLIST|PREPARE|IMMEDIATE)\b|\bSHOW\s+(EXPLAIN|ANALYZE)\b|\bFOR\s+CONNECTION\b`)

// literalDynamic matches dynamic SQL whose text is a string literal
// (PREPARE s FROM '...', EXECUTE IMMEDIATE '...'), which
// UnsureConnectionCommand can read.
var literalDynamic = regexp.MustCompile(`(?i)\b(PREPARE\s+\S+\s+FROM|EXECUTE\s+IMMEDIATE)\s*(\S)`)

// UnsureConnectionCommand reports whether a text the proxy cannot be sure
// it read as the server will (Plan.Opaque, or a session whose sql_mode or
// character set casts doubt on it) may hold a statement about connections
// by id (KILL, the process list, SHOW EXPLAIN FOR) or dynamic SQL whose
// text is not a literal there to read (PREPARE ... FROM @v, EXECUTE
// IMMEDIATE CONCAT(...)). Such a text must not reach a backend: the ids
// are sluice's, and the service account may kill or see any thread. The
// words are searched anywhere in the text, literals and comments too:
// erring towards a refusal only costs such rare texts.
func UnsureConnectionCommand(sql string) bool {
	for _, m := range connectionWords.FindAllStringSubmatch(sql, -1) {
		switch strings.ToUpper(m[1]) {
		case "PREPARE", "IMMEDIATE":
			continue // judged below by their argument
		}
		return true
	}
	for _, m := range literalDynamic.FindAllStringSubmatch(sql, -1) {
		if q := m[2]; q != "'" && q != "\"" {
			return true
		}
	}
	return false
}

// withoutComments is s with its plain comments (/* */, # and -- to the end
// of the line) replaced by a space; quoted text and executable comments
// stay as they are.
func withoutComments(s string) string {
	if !strings.Contains(s, "/*") && !strings.Contains(s, "#") && !strings.Contains(s, "--") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			end := skipQuoted(s, i, c, c != '`')
			b.WriteString(s[i:end])
			i = end
		case c == '/' && strings.HasPrefix(s[i:], "/*") && !executableCommentAt(s, i):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return b.String()
			}
			b.WriteByte(' ')
			i += 2 + end + 2
		case lineCommentAt(s, i):
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				return b.String()
			}
			b.WriteByte(' ')
			i += end + 1
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}
