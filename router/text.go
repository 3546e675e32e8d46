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
	// flagQuotedCall: the text calls a function by a name in backquotes
	// (see quotedCalls), which its digest does not tell from a bare call.
	flagQuotedCall
)

// bypassFlags are the flags of texts that the digest and shape levels do not
// serve: their plan depends on more than their digest.
const bypassFlags = flagBackslash | flagConditional | flagTiDBComment | flagDoubleQuote | flagPipes | flagHazard | flagQuotedCall

// modeFlags are the flags of texts whose reading may change with sql_mode.
const modeFlags = flagBackslash | flagDoubleQuote | flagPipes

func scanTextFlags(s string) textFlags {
	var f textFlags
	odd := false // a byte that is not printable ASCII or agreed whitespace
	backquote := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			f |= flagBackslash
		case '"':
			f |= flagDoubleQuote
		case '`':
			backquote = true
		case '|':
			if i+1 < len(s) && s[i+1] == '|' {
				f |= flagPipes
			}
		case '/':
			if i+2 < len(s) && s[i+1] == '*' {
				rest := s[i+2:]
				if strings.HasPrefix(rest, "M!") || len(rest) > 1 && rest[0] == '!' && rest[1] >= '0' && rest[1] <= '9' {
					f |= flagConditional
				} else if strings.HasPrefix(rest, "T!") {
					f |= flagTiDBComment
				}
			}
		default:
			if c >= 0x80 {
				f |= flagNonASCII
				odd = true
			} else if c == 0x7f || c < ' ' && !isSpace(c) {
				odd = true
			}
		}
	}
	if odd && codeHazard(s) {
		f |= flagHazard
	}
	if backquote && quotedCalls(s) != nil {
		f |= flagQuotedCall
	}
	return f
}

// quotedCalls returns, in lower case, the unqualified names in backquotes
// that are followed by "(" in s, outside string literals and comments: calls
// of `name`(...), which MariaDB resolves to a stored function even where
// the bare name is a keyword function.
func quotedCalls(s string) []string {
	var names []string
	prev := byte(0) // the last byte of code before the current position
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			i = skipQuoted(s, i, c, true)
			prev = c
		case c == '`':
			end := skipQuoted(s, i, '`', false)
			j := end
			for j < len(s) && isSpace(s[j]) {
				j++
			}
			if prev != '.' && j < len(s) && s[j] == '(' && end-1 > i+1 {
				name := strings.ToLower(strings.ReplaceAll(s[i+1:end-1], "``", "`"))
				if !slices.Contains(names, name) {
					names = append(names, name)
				}
			}
			i, prev = end, '`'
		case c == '/' && i+1 < len(s) && s[i+1] == '*' && i+2 < len(s) && s[i+2] != '!' && !strings.HasPrefix(s[i+2:], "M!"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return names
			}
			i += 2 + end + 2
		case c == '#' || c == '-' && strings.HasPrefix(s[i:], "-- "):
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				return names
			}
			i += end + 1
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
