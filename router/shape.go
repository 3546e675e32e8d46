package router

import "strings"

// literalShape appends to dst the shape of the statement text s: s with each
// quoted string replaced by the marker '?' and each plain number by '0', and
// every other byte (keywords, names, spacing, comments) kept as it is. It
// reports false, and the caller must not use dst, for text it cannot take
// apart with certainty: an unterminated quote or comment. The caller has
// already refused text with a backslash (an escape whose meaning depends on
// sql_mode).
//
// Why it is safe as a cache key in front of the digest level: the shape is
// itself SQL that the TiDB normalizer digests exactly as it digests s (a
// string literal and a ? marker both become ?, and a number stays a number,
// whose sign the normalizer drops alike), so two texts of one shape have one
// digest, and the digest level's plan is the plan of both.
// FuzzLiteralShapeDigest checks this. Where the lexer could read the bytes
// around a literal differently once it is replaced (a number glued to a
// name or a dot, a string with a prefix such as X'1F' or @'v'), the literal
// is kept as it is. The shape also keeps what the normalizer folds (letter
// case, spacing, NULL, IN-list length), which only splits one digest over
// several shapes. The one place the normalizer keeps a literal is an integer
// in an ORDER BY or GROUP BY list ("ORDER BY 2" is a column position); the
// shape keeps every number after the word BY, which covers it.
func literalShape(dst []byte, s string) ([]byte, bool) {
	afterBy := false
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			end, ok := quotedEnd(s, i)
			if !ok {
				return dst, false
			}
			switch {
			case i > 0 && (isWordByte(s[i-1]) || s[i-1] == '@'):
				// Not a plain string: a user variable's name (@'v'),
				// or a literal with a prefix (X'1F', B'01', N'x',
				// _utf8mb4'x') that the lexer checks and types by
				// its content.
				dst = append(dst, s[i:end]...)
			case end-i == 3 && s[i+1] == '*':
				// The normalizer takes a string holding just * for
				// the star of SELECT *, and keeps it.
				dst = append(dst, s[i:end]...)
			default:
				dst = append(dst, '?')
			}
			i = end
		case c == '`':
			end, ok := quotedEnd(s, i)
			if !ok {
				return dst, false
			}
			dst = append(dst, s[i:end]...)
			i = end
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			end := indexFrom(s, i+2, "*/")
			if end < 0 {
				return dst, false
			}
			dst = append(dst, s[i:end+2]...)
			i = end + 2
		case lineCommentAt(s, i):
			end := len(s)
			if j := indexByteFrom(s, i, '\n'); j >= 0 {
				end = j
			}
			dst = append(dst, s[i:end]...)
			i = end
		case c >= '0' && c <= '9':
			end := numberEnd(s, i)
			// A number ending in a dot (1.) stays: the dot decides how
			// the lexer reads the next word (a name after a dot).
			literal := !afterBy && numberMayStart(s, i) && s[end-1] != '.' &&
				(end == len(s) || !isWordByte(s[end]) && s[end] != '.')
			if !literal {
				// Part of a name (1st_table, 0x1F, t.5, @1), a run the
				// lexer splits otherwise (1.2.3), or after BY: kept as
				// it is, to the end of the word.
				for end < len(s) && (isWordByte(s[end]) || s[end] == '.') {
					end++
				}
				dst = append(dst, s[i:end]...)
			} else {
				dst = append(dst, '0')
			}
			i = end
		case isWordByte(c):
			end := i + 1
			for end < len(s) && isWordByte(s[end]) {
				end++
			}
			if end-i == 2 && (s[i]|0x20) == 'b' && (s[i+1]|0x20) == 'y' {
				afterBy = true
			}
			dst = append(dst, s[i:end]...)
			i = end
		default:
			dst = append(dst, c)
			i++
		}
	}
	return dst, true
}

// numberMayStart reports whether a number the lexer reads as one literal of
// its own can start at s[i]: after nothing, a space or one of ( , = < >, or
// after a sign that follows one of those. Elsewhere the digits may belong to
// a name (t.5, @1) or continue a token that starts before them (1e+5 seen
// from the 5), and the shape keeps them as they are.
func numberMayStart(s string, i int) bool {
	delimiter := func(j int) bool {
		if j < 0 {
			return true
		}
		c := s[j]
		return isSpace(c) || c == '(' || c == ',' || c == '=' || c == '<' || c == '>'
	}
	if i > 0 && (s[i-1] == '-' || s[i-1] == '+') {
		return delimiter(i - 2)
	}
	return delimiter(i - 1)
}

// quotedEnd returns the index just past the quote (', " or `) that closes the
// one at s[i]; a doubled quote inside stands for the quote itself.
func quotedEnd(s string, i int) (int, bool) {
	q := s[i]
	for j := i + 1; ; {
		k := indexByteFrom(s, j, q)
		if k < 0 {
			return 0, false
		}
		if k+1 < len(s) && s[k+1] == q {
			j = k + 2
			continue
		}
		return k + 1, true
	}
}

// numberEnd returns the end of the decimal number starting at s[i]: digits,
// an optional fraction and an optional exponent (1, 1.5, 1., 1e5, 1.5E-3).
func numberEnd(s string, i int) int {
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j < len(s) && s[j] == '.' {
		j++
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && s[k] >= '0' && s[k] <= '9' {
			for k < len(s) && s[k] >= '0' && s[k] <= '9' {
				k++
			}
			j = k
		}
	}
	return j
}

func indexByteFrom(s string, from int, c byte) int {
	if k := strings.IndexByte(s[from:], c); k >= 0 {
		return from + k
	}
	return -1
}

func indexFrom(s string, from int, sub string) int {
	if k := strings.Index(s[from:], sub); k >= 0 {
		return from + k
	}
	return -1
}
