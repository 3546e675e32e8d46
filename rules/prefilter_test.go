package rules

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// TestPrefilterNeverRulesOutAMatch: whenever a pattern matches a text, its
// prefilter lets the text through, over chosen cases (Unicode case folding
// onto ASCII included) and seeded random texts; and it does rule out texts
// that lack the required literal.
func TestPrefilterNeverRulesOutAMatch(t *testing.T) {
	patterns := []string{
		`(?i)^SELECT .* FROM report_0 `, `^UPDATE sbtest2`, `(?i)kelvin`, `(?i)(foo|bar)baz`, `a+bcd`,
		`(?i)x{2,}yz`, `(abc)?def`, `(?s)SLEEP\(`, `(?i)ſelect`, `[a-c]+xyz`, `(?i)from\s+orders`,
	}
	texts := []string{
		"SELECT c FROM sbtest1 WHERE id=5000", "select a from report_0 where x", "UPDATE sbtest2 SET k=1",
		"\u212Aelvin", "KELVIN", "foobaz", "BARBAZ", "aaabcd", "XXXYZ", "def", "abcdef", "SELECT SLEEP(1)",
		"ſelect", "SELECT", "ccxyz", "SELECT * FROM   orders", "from\torders",
	}
	rng := rand.New(rand.NewPCG(7, 11))
	alphabet := []rune("abcdefkxyzSELCTFROMsel ()_0\u212Aſ\t")
	for range 3000 {
		n := rng.IntN(24)
		r := make([]rune, n)
		for i := range r {
			r[i] = alphabet[rng.IntN(len(alphabet))]
		}
		texts = append(texts, string(r))
	}
	for _, p := range patterns {
		re := regexp.MustCompile(p)
		pre := newPrefilter(p)
		if pre == nil {
			continue
		}
		for _, text := range texts {
			if re.MatchString(text) && !pre.mayMatch([]byte(text)) {
				t.Errorf("pattern %q matches %q but its prefilter (%q, fold %v) ruled it out", p, text, pre.lit, pre.fold)
			}
		}
	}
	for _, c := range []struct {
		pattern, text string
		lit           string
	}{
		{`(?i)^SELECT .* FROM report_0 `, "SELECT c FROM sbtest1 WHERE id=5000", " FROM REPORT_0 "},
		{`^UPDATE sbtest2`, "UPDATE sbtest1 SET k=1", "UPDATE sbtest2"},
	} {
		pre := newPrefilter(c.pattern)
		if pre == nil || string(pre.lit) != c.lit {
			t.Fatalf("pattern %q: prefilter %+v, want literal %q", c.pattern, pre, c.lit)
		}
		if pre.mayMatch([]byte(c.text)) {
			t.Errorf("pattern %q: the prefilter lets %q through, which lacks %q", c.pattern, c.text, c.lit)
		}
	}
	for _, p := range []string{`(abcde|fghij)`, `x?`, `[a-z]+`, `ab`, `(abc)?def?`} {
		if pre := newPrefilter(p); pre != nil {
			t.Errorf("pattern %q: prefilter %q, want none (no literal of 3 bytes required)", p, pre.lit)
		}
	}
}

// BenchmarkPatternRules is four pattern rules that do not match a point
// select: the cost a statement pays for them (0 allocs).
func BenchmarkPatternRules(b *testing.B) {
	s := compile(b, `
[[rule]]
name = "r0"
pattern = '(?i)^SELECT .* FROM report_0 '
[[rule]]
name = "r5"
pattern = '(?i)^SELECT .* FROM report_5 '
[[rule]]
name = "r10"
pattern = '(?i)^SELECT .* FROM report_10 '
[[rule]]
name = "r15"
pattern = '(?i)^SELECT .* FROM report_15 '
`, nil)
	in := input("SELECT c FROM sbtest1 WHERE id=5000")
	b.ReportAllocs()
	for b.Loop() {
		if d := s.Match(in); d.Matched() {
			b.Fatal("matched")
		}
	}
}
