package router

import "strings"

// ReplaySQL is the statement that re-applies, on another connection, the
// value v's assignment left on the connection that ran it: lit is that value
// read back (SELECT @@SESSION.<ReadBack>) and written as an SQL literal.
func (v SessionVar) ReplaySQL(lit string) string {
	name := v.ReadBack
	if name == "" {
		name = v.Name
	}
	return "SET SESSION " + quoteVarName(name) + " = " + lit
}

// ReadBackQuery is the query that reads the value v's assignment left.
func (v SessionVar) ReadBackQuery() string {
	name := v.ReadBack
	if name == "" {
		name = v.Name
	}
	return "SELECT @@SESSION." + quoteVarName(name)
}

// SelfAccountStatement reports whether sql changes the account it runs as,
// or names one of serviceUsers: SET DEFAULT ROLE or SET PASSWORD without
// FOR or FOR CURRENT_USER, ALTER USER, DROP USER or RENAME USER of
// CURRENT_USER() / USER() or of a service user. On a backend the current
// account is the proxy's service account, not the client's: such a
// statement would change (or lock out) the account every backend
// connection uses. what names the statement for the refusal. The text is
// read as tokens, comments (executable ones excepted) as spaces and quoted
// names as their content, so a comment cannot hide a FOR.
func SelfAccountStatement(sql string, serviceUsers []string) (what string, self bool) {
	toks := accountTokens(sql, 64)
	at := func(i int, words ...string) bool {
		for k, w := range words {
			if i+k >= len(toks) || !strings.EqualFold(toks[i+k], w) {
				return false
			}
		}
		return true
	}
	// isSelf reports whether the account at toks[i] is the current or a
	// service account.
	isSelf := func(i int) bool {
		if i >= len(toks) {
			return true
		}
		if strings.EqualFold(toks[i], "CURRENT_USER") || strings.EqualFold(toks[i], "USER") && at(i+1, "(") {
			return true
		}
		name := strings.TrimPrefix(toks[i], "\x00")
		for _, u := range serviceUsers {
			if strings.EqualFold(name, u) {
				return true
			}
		}
		return false
	}
	forAccount := func(from int) bool {
		for i := from; i < len(toks); i++ {
			if strings.EqualFold(toks[i], "FOR") {
				return isSelf(i + 1)
			}
		}
		return true
	}
	// accounts reports whether any account of a list starting at from
	// (separated by commas, each maybe with @host or TO name) is self.
	accounts := func(from int) bool {
		i := from
		if at(i, "IF", "EXISTS") || at(i, "IF", "NOT", "EXISTS") {
			i += 2
			if strings.EqualFold(toks[i-1], "NOT") {
				i++
			}
		}
		expect := true
		for ; i < len(toks); i++ {
			switch {
			case toks[i] == ",":
				expect = true
			case expect:
				if isSelf(i) {
					return true
				}
				expect = false
			}
		}
		return false
	}
	switch {
	case at(0, "SET", "DEFAULT", "ROLE"):
		return "SET DEFAULT ROLE", forAccount(3)
	case at(0, "SET", "PASSWORD"):
		return "SET PASSWORD", forAccount(2)
	case at(0, "ALTER", "USER"):
		return "ALTER USER", accounts(2)
	case at(0, "DROP", "USER"):
		return "DROP USER", accounts(2)
	case at(0, "RENAME", "USER"):
		return "RENAME USER", accounts(2)
	}
	return "", false
}

// accountTokens splits up to max tokens off sql: words, quoted names and
// strings (their content after a NUL byte), and single punctuation bytes; comments and
// spaces separate them, the markers of executable comments too.
func accountTokens(sql string, max int) []string {
	var toks []string
	for i := 0; i < len(sql) && len(toks) < max; {
		c := sql[i]
		switch {
		case isSpace(c):
			i++
		case c == '\'' || c == '"' || c == '`':
			end := skipQuoted(sql, i, c, c != '`')
			// Marked quoted: a string is never a keyword (FOR).
			toks = append(toks, "\x00"+strings.ReplaceAll(sql[i+1:max2(i+1, end-1)], string([]byte{c, c}), string(c)))
			i = end
		case executableCommentAt(sql, i):
			i += strings.IndexByte(sql[i:], '!') + 1
			for i < len(sql) && sql[i] >= '0' && sql[i] <= '9' {
				i++
			}
		case c == '*' && strings.HasPrefix(sql[i:], "*/"):
			i += 2
		case c == '/' && strings.HasPrefix(sql[i:], "/*"):
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				return toks
			}
			i += 2 + end + 2
		case lineCommentAt(sql, i):
			end := strings.IndexByte(sql[i:], '\n')
			if end < 0 {
				return toks
			}
			i += end + 1
		case isWordByte(c):
			start := i
			for i < len(sql) && isWordByte(sql[i]) {
				i++
			}
			toks = append(toks, sql[start:i])
		default:
			toks = append(toks, sql[i:i+1])
			i++
		}
	}
	return toks
}

func max2(a, b int) int {
	if a > b {
		return a
	}
	return b
}
