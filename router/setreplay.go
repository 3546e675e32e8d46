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

// DefaultRoleOfSelf reports whether sql is SET DEFAULT ROLE for the
// current account (no FOR, or FOR CURRENT_USER): on a backend that account
// is the proxy's service account, not the client's. Quoted names are
// stepped over; a comment counts as a space.
func DefaultRoleOfSelf(sql string) bool {
	if !wordsAre(leadingWords(sql, 3), "SET", "DEFAULT", "ROLE") {
		return false
	}
	afterFor := false
	for i := 0; i < len(sql); {
		switch c := sql[i]; {
		case c == '\'' || c == '"' || c == '`':
			end := strings.IndexByte(sql[i+1:], c)
			if end < 0 {
				return true
			}
			i += end + 2
			if afterFor {
				return false
			}
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*' && !executableCommentAt(sql, i):
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				return true
			}
			i += end + 4
		case isWordByte(c):
			start := i
			for i < len(sql) && isWordByte(sql[i]) {
				i++
			}
			w := sql[start:i]
			if afterFor {
				return strings.EqualFold(w, "CURRENT_USER")
			}
			afterFor = strings.EqualFold(w, "FOR")
		default:
			i++
		}
	}
	return true
}
