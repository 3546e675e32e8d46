package router

import (
	"slices"
	"strings"
)

// This file holds the few lexical checks the router makes on raw SQL text itself, without
// the TiDB parser: routing hints in leading comments, the first keywords of a statement,
// and constructs on which the TiDB lexer and MySQL/MariaDB may disagree.

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// lineCommentAt reports whether a MySQL line comment ("#", or "--" followed by a space,
// a control character or the end of the text) starts at s[i].
func lineCommentAt(s string, i int) bool {
	if s[i] == '#' {
		return true
	}
	return s[i] == '-' && i+1 < len(s) && s[i+1] == '-' && (i+2 == len(s) || s[i+2] <= ' ')
}

// executableCommentAt reports whether s[i:] starts a comment whose content the server
// executes: "/*!" (MySQL, optionally versioned) or "/*M!" (MariaDB).
func executableCommentAt(s string, i int) bool {
	rest := s[i:]
	return strings.HasPrefix(rest, "/*!") || strings.HasPrefix(rest, "/*M!")
}

// leadingHint returns the routing hint given in the comments that precede the statement.
//
// Only ordinary comments before the first token count: "/* sluice:master */",
// "/*sluice:replica*/", "-- sluice:master" or "# sluice:replica" (a line comment ends at the
// newline), with any spacing around the word and colon and in any letter case. Several
// comments may precede the statement; the first one that holds a hint wins. Executable
// comments ("/*!", "/*M!") are statement text, so scanning stops there.
func leadingHint(s string) Hint {
	i := 0
	for i < len(s) {
		switch c := s[i]; {
		case isSpace(c):
			i++
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			if executableCommentAt(s, i) {
				return HintNone
			}
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return HintNone
			}
			if h := matchHint(s[i+2 : i+2+end]); h != HintNone {
				return h
			}
			i += 2 + end + 2
		case lineCommentAt(s, i):
			start := i + 1
			if c == '-' {
				start = i + 2
			}
			end := strings.IndexByte(s[start:], '\n')
			if end < 0 {
				return matchHint(s[start:])
			}
			if h := matchHint(s[start : start+end]); h != HintNone {
				return h
			}
			i = start + end + 1
		default:
			return HintNone
		}
	}
	return HintNone
}

// matchHint parses a comment body of the form "sluice:master" or "sluice:replica".
func matchHint(body string) Hint {
	b := strings.TrimSpace(body)
	const prefix = "sluice"
	if len(b) <= len(prefix) || !strings.EqualFold(b[:len(prefix)], prefix) {
		return HintNone
	}
	b = strings.TrimLeft(b[len(prefix):], " \t\r\n\f\v")
	if b == "" || b[0] != ':' {
		return HintNone
	}
	switch b = strings.TrimSpace(b[1:]); {
	case strings.EqualFold(b, "master"):
		return HintMaster
	case strings.EqualFold(b, "replica"):
		return HintReplica
	}
	return HintNone
}

// leadingWords returns up to n leading keywords of s (as written), skipping whitespace,
// comments and the markers of executable comments ("/*!50001", "/*M!100100", "*/"), so that
// "/*!40101 SET NAMES utf8 */" starts with SET, NAMES. It stops at the first byte that is
// neither part of a word nor skippable.
func leadingWords(s string, n int) []string {
	words := make([]string, 0, n)
	i := 0
	for i < len(s) && len(words) < n {
		switch c := s[i]; {
		case isSpace(c):
			i++
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			if executableCommentAt(s, i) {
				i += strings.IndexByte(s[i:], '!') + 1
				for i < len(s) && s[i] >= '0' && s[i] <= '9' {
					i++
				}
				continue
			}
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return words
			}
			i += 2 + end + 2
		case c == '*' && i+1 < len(s) && s[i+1] == '/':
			i += 2
		case lineCommentAt(s, i):
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				return words
			}
			i += end + 1
		case isWordByte(c):
			start := i
			for i < len(s) && isWordByte(s[i]) {
				i++
			}
			words = append(words, s[start:i])
		default:
			return words
		}
	}
	return words
}

// wordsAre reports whether words starts with want, compared case-insensitively.
func wordsAre(words []string, want ...string) bool {
	if len(words) < len(want) {
		return false
	}
	for i, w := range want {
		if !strings.EqualFold(words[i], w) {
			return false
		}
	}
	return true
}

// textFlags records properties of the raw text on which classification by the TiDB
// lexer may not match what the server executes.
type textFlags uint8

const (
	// flagBackslash: the text holds a backslash, which the server reads as an escape
	// inside string literals unless the session has NO_BACKSLASH_ESCAPES.
	flagBackslash textFlags = 1 << iota
	// flagConditional: the text holds a versioned executable comment ("/*!50001 ...*/",
	// which the server skips when it is older than the version) or a MariaDB executable
	// comment ("/*M! ...*/", which the TiDB lexer skips but MariaDB executes).
	flagConditional
	// flagTiDBComment: the text holds "/*T!", which the TiDB lexer reads as
	// statement text and MariaDB as a plain comment.
	flagTiDBComment
	// flagDoubleQuote: the text holds a double quote, a string under the
	// default sql_mode and an identifier under ANSI_QUOTES.
	flagDoubleQuote
	// flagPipes: the text holds "||", OR by default and concatenation under
	// PIPES_AS_CONCAT.
	flagPipes
	// flagHazard: outside literals and comments, the text holds a byte the
	// two lexers may read differently (see codeHazard).
	flagHazard
	// flagNonASCII: the text holds a byte of 0x80 or above; under a client
	// character set such as gbk that alone makes its reading uncertain.
	flagNonASCII
	// flagAmbiguousCall: the text calls a function MariaDB may resolve to a
	// stored one where the parser sees a built-in (see ambiguousCalls):
	// its digest does not tell it from a plain call.
	flagAmbiguousCall
)

// bypassFlags are the flags of texts that the digest and shape levels do not
// serve: their plan depends on more than their digest.
const bypassFlags = flagBackslash | flagConditional | flagTiDBComment | flagDoubleQuote | flagPipes | flagHazard | flagAmbiguousCall

// modeFlags are the flags of texts whose reading may change with sql_mode.
const modeFlags = flagBackslash | flagDoubleQuote | flagPipes

func scanTextFlags(s string) textFlags {
	var f textFlags
	if strings.IndexByte(s, '\\') >= 0 {
		f |= flagBackslash
	}
	if strings.IndexByte(s, '"') >= 0 && outsideLiterals(s, f, `"`) {
		f |= flagDoubleQuote
	}
	if strings.Contains(s, "||") && outsideLiterals(s, f, "||") {
		f |= flagPipes
	}
	for i := 0; ; {
		j := strings.Index(s[i:], "/*")
		if j < 0 {
			break
		}
		i += j + 2
		rest := s[i:]
		if strings.HasPrefix(rest, "M!") || len(rest) > 1 && rest[0] == '!' && rest[1] >= '0' && rest[1] <= '9' {
			f |= flagConditional
		} else if strings.HasPrefix(rest, "T!") {
			f |= flagTiDBComment
		}
	}
	odd, nonASCII := oddBytes(s)
	if nonASCII {
		f |= flagNonASCII
	}
	if odd && codeHazard(s) {
		f |= flagHazard
	}
	if (strings.IndexByte(s, '`') >= 0 || spacedParen(s)) && ambiguousCalls(s) != nil {
		f |= flagAmbiguousCall
	}
	return f
}

// spacedParen reports whether a "(" in s follows whitespace or a comment.
func spacedParen(s string) bool {
	for i := 0; ; i++ {
		j := strings.IndexByte(s[i:], '(')
		if j < 0 {
			return false
		}
		i += j
		if i > 0 && (isSpace(s[i-1]) || s[i-1] == '/') {
			return true
		}
	}
}

// oddBytes reports whether s holds a byte that is not printable ASCII or
// whitespace both lexers agree on (odd), and whether any is 0x80 or above.
// It looks at eight bytes at a time: most texts hold neither.
func oddBytes(s string) (odd, nonASCII bool) {
	const (
		high  = 0x8080808080808080
		ones  = 0x0101010101010101
		space = 0x2020202020202020
		del   = 0x7f7f7f7f7f7f7f7f
	)
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		// A byte of 0x80 or above, one below 0x20, or 0x7f, in the word.
		if x&high != 0 || (x-space)&^x&high != 0 || (x^del-ones)&^(x^del)&high != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 0x80:
			odd, nonASCII = true, true
		case c == 0x7f || c < ' ' && !isSpace(c):
			odd = true
		}
	}
	return odd, nonASCII
}

// outsideLiterals reports whether sub occurs in s outside single-quoted
// strings, quoted names and plain comments, as every sql_mode reads them:
// a text without backslashes (f) splits the same way under all of them.
// With backslashes it answers true, so that the caller looks further.
func outsideLiterals(s string, f textFlags, sub string) bool {
	if f&flagBackslash != 0 {
		return true
	}
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case strings.HasPrefix(s[i:], sub):
			return true
		case c == '\'' || c == '`' || c == '"' && sub != `"`:
			i = skipQuoted(s, i, c, false)
		case c == '/' && strings.HasPrefix(s[i:], "/*") && !strings.HasPrefix(s[i:], "/*!") && !strings.HasPrefix(s[i:], "/*M!"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return false
			}
			i += 2 + end + 2
		default:
			i++
		}
	}
	return false
}

// spacedKeywordFuncs are the built-ins MariaDB's lexer takes for a function
// keyword only when "(" follows the name at once: with a space or a comment
// in between (NOW (), COUNT /**/ (a)) the name is an identifier, and the
// call goes to a stored function of that name. Found on MariaDB 10.11 by
// calling each name of information_schema.SQL_FUNCTIONS that way with a
// stored function of the same name in the schema.
var spacedKeywordFuncs = map[string]bool{
	"adddate": true, "bit_and": true, "bit_or": true, "bit_xor": true, "cast": true, "count": true,
	"cume_dist": true, "curdate": true, "curtime": true, "date_add": true, "date_sub": true,
	"dense_rank": true, "extract": true, "first_value": true, "group_concat": true,
	"json_arrayagg": true, "json_objectagg": true, "lag": true, "last_value": true, "lead": true,
	"max": true, "median": true, "mid": true, "min": true, "now": true, "nth_value": true, "ntile": true,
	"percentile_cont": true, "percentile_disc": true, "percent_rank": true, "position": true,
	"rank": true, "row_number": true, "session_user": true, "std": true, "stddev": true,
	"stddev_pop": true, "stddev_samp": true, "subdate": true, "substr": true, "substring": true,
	"sum": true, "sysdate": true, "system_user": true, "trim": true, "trim_oracle": true,
	"variance": true, "var_pop": true, "var_samp": true,
}

// ambiguousCalls returns, in lower case, the unqualified function names in
// s that MariaDB may resolve to a stored function although the TiDB parser
// reports a built-in: a name in quotes followed by "(" (`now`(), and "now"()
// under ANSI_QUOTES), and a spacedKeywordFuncs name with a space or comment
// before its "(". Every reading of quotes the session's sql_mode could
// select is tried. It allocates only when it finds something.
func ambiguousCalls(s string) []string {
	readings := [...]lexReading{{true, false}, {false, false}, {true, true}, {false, true}}
	n := 1
	if strings.IndexByte(s, '\\') >= 0 || strings.IndexByte(s, '"') >= 0 {
		n = len(readings)
	}
	var names []string
	for _, r := range readings[:n] {
		names = ambiguousCallsIn(s, r, names)
	}
	return names
}

// ambiguousCallsIn adds to names the calls ambiguousCalls looks for, as
// MariaDB splits s under reading r.
func ambiguousCallsIn(s string, r lexReading, names []string) []string {
	add := func(name string) {
		name = strings.ToLower(name)
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	// parenAfter reports whether "(" follows s[i:] after whitespace and
	// plain comments, and whether anything came between.
	parenAfter := func(i int) (paren, spaced bool) {
		for i < len(s) {
			switch {
			case isSpace(s[i]):
				i++
			case strings.HasPrefix(s[i:], "/*") && !strings.HasPrefix(s[i:], "/*!") && !strings.HasPrefix(s[i:], "/*M!"):
				end := strings.Index(s[i+2:], "*/")
				if end < 0 {
					return false, false
				}
				i += 2 + end + 2
			default:
				return s[i] == '(', spaced
			}
			spaced = true
		}
		return false, false
	}
	prev := byte(0) // the last byte of statement text before position i
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\'' || c == '"' && !r.ansiQuotes:
			i = skipQuoted(s, i, c, r.backslash)
			prev = c
		case c == '`' || c == '"':
			end := skipQuoted(s, i, c, false)
			if paren, _ := parenAfter(end); paren && prev != '.' && end-1 > i+1 {
				add(strings.ReplaceAll(s[i+1:end-1], string([]byte{c, c}), string(c)))
			}
			i, prev = end, c
		case c == '/' && i+1 < len(s) && s[i+1] == '*' && !strings.HasPrefix(s[i:], "/*!") && !strings.HasPrefix(s[i:], "/*M!"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return names
			}
			i += 2 + end + 2
		case c == '#' || c == '-' && strings.HasPrefix(s[i:], "--") && (i+2 == len(s) || s[i+2] <= ' '):
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				return names
			}
			i += end + 1
		case isWordByte(c) && c < 0x80:
			start := i
			for i < len(s) && isWordByte(s[i]) && s[i] < 0x80 {
				i++
			}
			if paren, spaced := parenAfter(i); paren && spaced && prev != '.' && i-start <= 16 {
				var lower [16]byte
				w := lower[:i-start]
				for k := range w {
					w[k] = lowerASCII(s[start+k])
				}
				if spacedKeywordFuncs[string(w)] {
					add(s[start:i])
				}
			}
			prev = s[i-1]
		default:
			if !isSpace(c) {
				prev = c
			}
			i++
		}
	}
	return names
}

// singleStatementText reports whether s holds no semicolon except trailing ones: a cheap
// check used only for statements the TiDB parser rejected.
func singleStatementText(s string) bool {
	return strings.IndexByte(strings.TrimRight(s, " \t\r\n\f\v;"), ';') < 0
}
