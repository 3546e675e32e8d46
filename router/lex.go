package router

import "strings"

// This file holds what the router knows of the ways MariaDB's lexer and the
// TiDB lexer can read one text differently: the sql_mode flags that change
// lexing, and a scan of the text as MariaDB reads it that finds bytes the two
// lexers may not agree on. A statement whose reading is in doubt never goes to
// a replica on the strength of the TiDB parser's view of it.

// LexModes is a set of sql_mode flags that change how the server reads a
// statement's text, and so what it executes.
type LexModes uint8

const (
	// LexNoBackslashEscapes: NO_BACKSLASH_ESCAPES, a backslash in a string
	// literal is an ordinary character.
	LexNoBackslashEscapes LexModes = 1 << iota
	// LexANSIQuotes: ANSI_QUOTES, "x" is an identifier, not a string.
	LexANSIQuotes
	// LexPipesAsConcat: PIPES_AS_CONCAT, || concatenates instead of OR.
	LexPipesAsConcat
	// LexOracle: ORACLE, MariaDB's Oracle-compatible grammar (seq.nextval,
	// PL/SQL), which the TiDB parser does not know at all.
	LexOracle
	// LexHighNotPrecedence: HIGH_NOT_PRECEDENCE, NOT binds tighter than
	// comparisons. It changes what a statement computes, not how it is
	// split into tokens, so the router's own reading does not depend on
	// it; a rewrite of the statement (sharding) does.
	LexHighNotPrecedence
)

// LexUnknown is the set to assume when a session's sql_mode is not known:
// every flag that changes lexing. ORACLE is left out, since it would pin
// every session until the server's mode is known; see the proxy's use.
const LexUnknown = LexNoBackslashEscapes | LexANSIQuotes | LexPipesAsConcat

// lexModeNames maps the sql_mode words (and the combination modes that
// imply them) to the LexModes they switch on.
var lexModeNames = map[string]LexModes{
	"NO_BACKSLASH_ESCAPES": LexNoBackslashEscapes,
	"ANSI_QUOTES":          LexANSIQuotes,
	"PIPES_AS_CONCAT":      LexPipesAsConcat,
	"HIGH_NOT_PRECEDENCE":  LexHighNotPrecedence,
	"ANSI":                 LexANSIQuotes | LexPipesAsConcat,
	"DB2":                  LexANSIQuotes | LexPipesAsConcat,
	"MAXDB":                LexANSIQuotes | LexPipesAsConcat,
	"MSSQL":                LexANSIQuotes | LexPipesAsConcat,
	"POSTGRESQL":           LexANSIQuotes | LexPipesAsConcat,
	"ORACLE":               LexOracle | LexANSIQuotes | LexPipesAsConcat,
}

// ParseSQLMode returns the lexing flags of an sql_mode value as the server
// reports or accepts it: a comma-separated list of mode names in any letter
// case. Unknown words change nothing; a number (the bit form) is not
// decoded and gives LexUnknown.
func ParseSQLMode(v string) LexModes {
	var m LexModes
	for w := range strings.SplitSeq(v, ",") {
		w = strings.TrimSpace(w)
		if w == "" {
			continue
		}
		if w[0] >= '0' && w[0] <= '9' {
			return LexUnknown
		}
		m |= lexModeNames[strings.ToUpper(w)]
	}
	return m
}

// lexReading is one way the server may read string literals: with or
// without backslash escapes, and with "..." as a string or an identifier.
type lexReading struct {
	backslash  bool
	ansiQuotes bool
}

// codeHazard reports whether s holds, where MariaDB would read it as
// statement text (outside string literals, quoted identifiers and plain
// comments), a byte the two lexers may treat differently: any byte of 0x80
// or above (the TiDB lexer takes 0x85 and 0xA0 for whitespace, so "--\x85"
// starts a comment there and not in MariaDB), or an ASCII control byte
// other than the whitespace both agree on (tab, newline, vertical tab, form
// feed, carriage return). Every reading of quotes the session's sql_mode
// could select is tried, so the answer does not depend on the mode.
func codeHazard(s string) bool {
	readings := [...]lexReading{{true, false}, {false, false}, {true, true}, {false, true}}
	n := 1
	if strings.IndexByte(s, '\\') >= 0 || strings.IndexByte(s, '"') >= 0 {
		n = len(readings)
	}
	for _, r := range readings[:n] {
		if hazardIn(s, r) {
			return true
		}
	}
	return false
}

// HazardUnder reports whether s holds, where MariaDB reads statement text
// under the sql_mode flags m, a byte the two lexers may treat differently
// (see codeHazard, which tries every reading of quotes instead).
func HazardUnder(s string, m LexModes) bool {
	return hazardIn(s, lexReading{backslash: m&LexNoBackslashEscapes == 0, ansiQuotes: m&LexANSIQuotes != 0})
}

// hazardIn scans s the way MariaDB's lexer splits it into string literals,
// quoted identifiers, comments and the rest, under reading r.
func hazardIn(s string, r lexReading) bool {
	inExec := false // inside an executable comment: its body is code
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\'' || c == '"' && !r.ansiQuotes:
			i = skipQuoted(s, i, c, r.backslash)
		case c == '`' || c == '"':
			i = skipQuoted(s, i, c, false)
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			rest := s[i+2:]
			switch {
			case !inExec && strings.HasPrefix(rest, "!"):
				i = skipDigits(s, i+3)
				inExec = true
			case !inExec && strings.HasPrefix(rest, "M!"):
				i = skipDigits(s, i+4)
				inExec = true
			default:
				end := strings.Index(rest, "*/")
				if end < 0 {
					return false
				}
				i += 2 + end + 2
			}
		case c == '*' && inExec && i+1 < len(s) && s[i+1] == '/':
			inExec = false
			i += 2
		case c == '#' || c == '-' && i+2 <= len(s) && strings.HasPrefix(s[i:], "--") && (i+2 == len(s) || s[i+2] <= ' ' || s[i+2] == 0x7f):
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				return false
			}
			i += end + 1
		case c >= 0x80 || c == 0x7f || c < ' ' && !isSpace(c):
			return true
		default:
			i++
		}
	}
	return false
}

// skipQuoted returns the index after the quoted run that starts at s[i]
// with quote q (doubled quotes stay inside; backslash escapes the next byte
// when backslash is set), or len(s) when it does not end.
func skipQuoted(s string, i int, q byte, backslash bool) int {
	for i++; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if backslash {
				i++
			}
		case q:
			if i+1 < len(s) && s[i+1] == q {
				i++
				continue
			}
			return i + 1
		}
	}
	return len(s)
}

func skipDigits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// unsafeClientCharsets are the client character sets in which the second
// byte of a multi-byte character can be an ASCII byte the lexer gives a
// meaning (0x5C, the backslash, or 0x60, the backquote): a lexer that reads
// the text byte by byte, as the TiDB lexer does, splits it differently from
// the server.
var unsafeClientCharsets = map[string]bool{
	"big5":    true,
	"cp932":   true,
	"gbk":     true,
	"sjis":    true,
	"gb18030": true,
}

// UnsafeClientCharset reports whether the client character set name (any
// letter case) is one in which a non-ASCII statement may lex differently in
// the TiDB parser and in the server. An empty name is not known, and unsafe.
func UnsafeClientCharset(name string) bool {
	if name == "" {
		return true
	}
	return unsafeClientCharsets[strings.ToLower(name)]
}

// unsafeCollationIDs are the handshake collation ids (one byte) of the
// unsafe character sets: big5, sjis, gbk, cp932, and MySQL's gb18030.
var unsafeCollationIDs = [256]bool{1: true, 13: true, 28: true, 84: true, 87: true, 88: true, 95: true, 96: true, 248: true, 249: true, 250: true}

// UnsafeCollation is UnsafeClientCharset for a handshake collation id.
func UnsafeCollation(id uint8) bool { return unsafeCollationIDs[id] }
