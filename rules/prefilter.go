package rules

import (
	"bytes"
	"regexp/syntax"
	"unicode/utf8"
)

// A prefilter is a literal every text a rule's pattern matches contains:
// checking for it first spares the regular expression most statements a
// pattern rule leaves alone (4 patterns cost a point select about 3 µs,
// the substring search tens of nanoseconds). It never decides a match,
// only rules one out.
type prefilter struct {
	lit []byte
	// fold: the literal matches in any case (the pattern's (?i)); it is
	// then upper case ASCII.
	fold bool
}

// newPrefilter finds the longest ASCII literal pattern requires; nil when
// there is none of at least 3 bytes (too weak to be worth a search).
func newPrefilter(pattern string) *prefilter {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil
	}
	p := required(re.Simplify())
	if p == nil || len(p.lit) < 3 {
		return nil
	}
	return p
}

// required is the longest literal every match of re contains, nil if none
// is known. Only a concatenation's parts, captures and repeats of at least
// one carry a requirement; an alternation or anything optional does not.
func required(re *syntax.Regexp) *prefilter {
	switch re.Op {
	case syntax.OpLiteral:
		return literalOf(re)
	case syntax.OpCapture, syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0])
		}
	case syntax.OpConcat:
		var best *prefilter
		for _, sub := range re.Sub {
			if p := required(sub); p != nil && (best == nil || len(p.lit) > len(best.lit)) {
				best = p
			}
		}
		return best
	}
	return nil
}

// literalOf is an ASCII literal node as a prefilter; nil for one with
// other runes (case folding beyond ASCII is the regular expression's).
func literalOf(re *syntax.Regexp) *prefilter {
	p := &prefilter{fold: re.Flags&syntax.FoldCase != 0}
	for _, r := range re.Rune {
		if r >= utf8.RuneSelf {
			return nil
		}
		b := byte(r)
		if p.fold && 'a' <= b && b <= 'z' {
			b -= 'a' - 'A'
		}
		p.lit = append(p.lit, b)
	}
	return p
}

// mayMatch reports whether text may match: false only when it lacks the
// literal. A text with a non-ASCII byte under a case-folded literal is
// left to the regular expression, since Unicode folds some letters (the
// long s, the Kelvin sign) onto ASCII ones.
func (p *prefilter) mayMatch(text []byte) bool {
	if !p.fold {
		return bytes.Contains(text, p.lit)
	}
	n := len(p.lit)
	for i := 0; i+n <= len(text); i++ {
		j := 0
		for ; j < n; j++ {
			c := text[i+j]
			if c >= utf8.RuneSelf {
				return true
			}
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			if c != p.lit[j] {
				break
			}
		}
		if j == n {
			return true
		}
	}
	for _, c := range text[max(0, len(text)-n+1):] {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}
