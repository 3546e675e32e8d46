package health

import (
	"errors"
	"strings"
	"testing"
)

const (
	uuidA = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	uuidB = "4b6e0c8a-1f2d-11ef-8a4b-0242ac120002"
)

func TestParseGTIDCanonical(t *testing.T) {
	for _, tc := range []struct {
		flavor   Flavor
		in, want string
	}{
		{FlavorMariaDB, "", ""},
		{FlavorMariaDB, "  ", ""},
		{FlavorMariaDB, "0-1-100", "0-1-100"},
		{FlavorMariaDB, "1-2-7, 0-1-100", "0-1-100,1-2-7"},
		{FlavorMariaDB, "0-1-007", "0-1-7"},
		{FlavorMariaDB, "4294967295-4294967295-18446744073709551615", "4294967295-4294967295-18446744073709551615"},
		{FlavorMySQL, "", ""},
		{FlavorMySQL, uuidA + ":1-5", uuidA + ":1-5"},
		{FlavorMySQL, strings.ToUpper(uuidA) + ":1-5", uuidA + ":1-5"},
		{FlavorMySQL, strings.ReplaceAll(uuidA, "-", "") + ":3", uuidA + ":3"},
		{FlavorMySQL, uuidA + ":1-3:4-5:9:7", uuidA + ":1-5:7:9"},
		{FlavorMySQL, uuidB + ":1-2,\n" + uuidA + ":1-5", uuidA + ":1-5," + uuidB + ":1-2"},
		{FlavorMySQL, uuidA + ":1-3," + uuidA + ":2-8", uuidA + ":1-8"},
		{FlavorMySQL, uuidA + ":Blue:1-2:4:_x:1," + uuidA + ":1-3", uuidA + ":1-3:_x:1:blue:1-2:4"},
		{FlavorMySQL, uuidA + ":9223372036854775807", uuidA + ":9223372036854775807"},
	} {
		g, err := ParseGTID(tc.flavor, tc.in)
		if err != nil {
			t.Errorf("ParseGTID(%v, %q): %v", tc.flavor, tc.in, err)
			continue
		}
		if got := g.String(); got != tc.want {
			t.Errorf("ParseGTID(%v, %q).String() = %q, want %q", tc.flavor, tc.in, got, tc.want)
		}
		if g.Flavor() != tc.flavor || g.IsEmpty() != (tc.want == "") {
			t.Errorf("ParseGTID(%v, %q): flavor %v, empty %v", tc.flavor, tc.in, g.Flavor(), g.IsEmpty())
		}
	}
}

// TestParseGTIDErrors: every error wraps ErrBadGTID and names the part that is wrong.
func TestParseGTIDErrors(t *testing.T) {
	for _, tc := range []struct {
		flavor Flavor
		in     string
		want   string // substring of the message
	}{
		{FlavorUnknown, "0-1-1", "unknown server flavor"},
		{FlavorMariaDB, "0-1", `"0-1": want domain-server-sequence`},
		{FlavorMariaDB, "0-1-2-3", `"0-1-2-3": want domain-server-sequence`},
		{FlavorMariaDB, "0-1-5,x-1-5", `"x-1-5": domain id "x"`},
		{FlavorMariaDB, "0--5", `server id "": empty`},
		{FlavorMariaDB, "0-1-+5", `sequence number "+5": not a number`},
		{FlavorMariaDB, "4294967296-1-1", `domain id "4294967296": out of range`},
		{FlavorMariaDB, "0-1-18446744073709551616", `sequence number "18446744073709551616": out of range`},
		{FlavorMariaDB, "0-1-5,0-2-6", `"0-2-6": domain 0 appears twice`},
		{FlavorMariaDB, "0-1-5,", "empty part between commas"},
		{FlavorMariaDB, "0-1-5 0-1-6", `"0-1-5 0-1-6": want domain-server-sequence`},
		{FlavorMySQL, "nope:1-5", `source uuid "nope" is not a UUID`},
		{FlavorMySQL, "3e11fa47-71ca-11e1-9e33-c80aa942956g:1", "is not a UUID"},
		{FlavorMySQL, "3e11fa47x71ca-11e1-9e33-c80aa9429562:1", "is not a UUID"},
		{FlavorMySQL, uuidA, "has no transaction numbers"},
		{FlavorMySQL, uuidA + ":0-5", `interval "0-5": transaction numbers start at 1`},
		{FlavorMySQL, uuidA + ":5-3", `interval "5-3": end before start`},
		{FlavorMySQL, uuidA + ":1-", `interval "1-": end: empty`},
		{FlavorMySQL, uuidA + ":1-x", `interval "1-x": end: not a number`},
		{FlavorMySQL, uuidA + ":9223372036854775808", "transaction number above 9223372036854775807"},
		{FlavorMySQL, uuidA + "::1", "empty field between colons"},
		{FlavorMySQL, uuidA + ":tag", `tag "tag" has no transaction numbers`},
		{FlavorMySQL, uuidA + ":a:b:1", `tag "a" has no transaction numbers`},
		{FlavorMySQL, uuidA + ":ta-g:1", `tag "ta-g": character '-' not allowed`},
		{FlavorMySQL, uuidA + ":" + strings.Repeat("t", 33) + ":1", "longer than 32 characters"},
		{FlavorMySQL, uuidA + ":1,,", "empty part between commas"},
	} {
		_, err := ParseGTID(tc.flavor, tc.in)
		if err == nil {
			t.Errorf("ParseGTID(%v, %q) succeeded", tc.flavor, tc.in)
			continue
		}
		if !errors.Is(err, ErrBadGTID) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseGTID(%v, %q) = %v, want ErrBadGTID mentioning %s", tc.flavor, tc.in, err, tc.want)
		}
	}
}

func TestGTIDContains(t *testing.T) {
	m := func(s string) GTIDSet { return MustParseGTID(FlavorMariaDB, s) }
	y := func(s string) GTIDSet { return MustParseGTID(FlavorMySQL, s) }
	for _, tc := range []struct {
		name string
		a, b GTIDSet
		want bool
	}{
		{"maria equal", m("0-1-10"), m("0-1-10"), true},
		{"maria ahead", m("0-1-10"), m("0-1-9"), true},
		{"maria behind", m("0-1-9"), m("0-1-10"), false},
		{"maria server id ignored", m("0-2-10"), m("0-1-10"), true},
		{"maria missing domain", m("0-1-10"), m("0-1-5,1-1-1"), false},
		{"maria extra domain", m("0-1-10,1-1-1"), m("0-1-5"), true},
		{"maria per domain", m("0-1-10,1-1-1"), m("0-1-5,1-1-2"), false},
		{"maria empty b", m("0-1-1"), m(""), true},
		{"maria empty a", m(""), m("0-1-1"), false},
		{"mysql equal", y(uuidA + ":1-5"), y(uuidA + ":1-5"), true},
		{"mysql subset", y(uuidA + ":1-5"), y(uuidA + ":2-3"), true},
		{"mysql gap", y(uuidA + ":1-3:5-9"), y(uuidA + ":3-5"), false},
		{"mysql both sides of gap", y(uuidA + ":1-3:5-9"), y(uuidA + ":3:5"), true},
		{"mysql other uuid", y(uuidA + ":1-5"), y(uuidB + ":1"), false},
		{"mysql tag is another source", y(uuidA + ":1-5"), y(uuidA + ":t:1"), false},
		{"mysql tag", y(uuidA + ":1-5:t:1-2"), y(uuidA + ":t:2"), true},
		{"mysql beyond", y(uuidA + ":1-5"), y(uuidA + ":6"), false},
		{"flavors differ", m("0-1-1"), y(uuidA + ":1"), false},
		{"zero contains zero", GTIDSet{}, GTIDSet{}, true},
		{"zero contains nothing", GTIDSet{}, m("0-1-1"), false},
		{"anything contains zero", y(uuidA + ":1"), GTIDSet{}, true},
	} {
		if got := tc.a.Contains(tc.b); got != tc.want {
			t.Errorf("%s: %q contains %q = %v, want %v", tc.name, tc.a, tc.b, got, tc.want)
		}
	}
}

func TestGTIDUnionCountMissing(t *testing.T) {
	m := func(s string) GTIDSet { return MustParseGTID(FlavorMariaDB, s) }
	y := func(s string) GTIDSet { return MustParseGTID(FlavorMySQL, s) }
	for _, tc := range []struct {
		a, b           GTIDSet
		union          string
		count          uint64 // of the union
		aMinusB, bMinA string
	}{
		{m("0-1-10,2-1-3"), m("0-2-12,1-1-4"), "0-2-12,1-1-4,2-1-3", 19,
			"domain 2 seq 1-3 (last 2-1-3)", "domain 0 seq 11-12 (last 0-2-12), domain 1 seq 1-4 (last 1-1-4)"},
		{m("0-1-10"), m("0-1-10"), "0-1-10", 10, "", ""},
		{m("0-1-10"), m("0-1-9"), "0-1-10", 10, "domain 0 seq 10 (last 0-1-10)", ""},
		{m(""), m("0-1-2"), "0-1-2", 2, "", "domain 0 seq 1-2 (last 0-1-2)"},
		{y(uuidA + ":1-5:8-10"), y(uuidA + ":3-8," + uuidB + ":1"), uuidA + ":1-10," + uuidB + ":1", 11,
			uuidA + ":1-2:9-10", uuidA + ":6-7," + uuidB + ":1"},
		{y(uuidA + ":1-9"), y(uuidA + ":2:4:6-7"), uuidA + ":1-9", 9, uuidA + ":1:3:5:8-9", ""},
		{y(uuidA + ":1-3:t:1"), y(uuidA + ":1-3"), uuidA + ":1-3:t:1", 4, uuidA + ":t:1", ""},
	} {
		u := tc.a.Union(tc.b)
		if u.String() != tc.union || u.Count() != tc.count {
			t.Errorf("%q ∪ %q = %q (count %d), want %q (%d)", tc.a, tc.b, u, u.Count(), tc.union, tc.count)
		}
		if !u.Contains(tc.a) || !u.Contains(tc.b) {
			t.Errorf("%q ∪ %q = %q does not contain both", tc.a, tc.b, u)
		}
		if got := tc.a.Missing(tc.b); got != tc.aMinusB {
			t.Errorf("%q missing from %q = %q, want %q", tc.a, tc.b, got, tc.aMinusB)
		}
		if got := tc.b.Missing(tc.a); got != tc.bMinA {
			t.Errorf("%q missing from %q = %q, want %q", tc.b, tc.a, got, tc.bMinA)
		}
	}
	// Mixed flavors never merge.
	a, b := m("0-1-1"), y(uuidA+":1")
	if a.Union(b).String() != "0-1-1" || (GTIDSet{}).Union(b).String() != b.String() {
		t.Errorf("mixed-flavor unions: %q, %q", a.Union(b), (GTIDSet{}).Union(b))
	}
	if got := a.Missing(b); !strings.Contains(got, "not comparable") {
		t.Errorf("mixed-flavor Missing = %q", got)
	}
	if n := m("0-1-18446744073709551615,1-1-5").Count(); n != 1<<64-1 {
		t.Errorf("Count does not saturate: %d", n)
	}
}

func TestSubtractIntervals(t *testing.T) {
	iv := func(pairs ...uint64) []gtidInterval {
		var out []gtidInterval
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, gtidInterval{pairs[i], pairs[i+1]})
		}
		return out
	}
	for _, tc := range []struct{ a, b, want []gtidInterval }{
		{iv(1, 10), nil, iv(1, 10)},
		{iv(1, 10), iv(1, 10), nil},
		{iv(1, 10), iv(0+1, 3, 5, 6, 9, 12), iv(4, 4, 7, 8)},
		{iv(1, 3, 7, 9), iv(2, 8), iv(1, 1, 9, 9)},
		{iv(5, 6), iv(1, 2, 10, 11), iv(5, 6)},
		{iv(1, maxGNO), iv(2, maxGNO), iv(1, 1)},
	} {
		got := subtractIntervals(tc.a, tc.b)
		if len(got) != len(tc.want) {
			t.Errorf("%v - %v = %v, want %v", tc.a, tc.b, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%v - %v = %v, want %v", tc.a, tc.b, got, tc.want)
				break
			}
		}
	}
}

// FuzzParseGTID: parsing never panics, and what parses prints back to an equal set that
// contains itself and absorbs itself in a union.
func FuzzParseGTID(f *testing.F) {
	for _, s := range []string{"0-1-5", "0-1-5,1-2-3", uuidA + ":1-5:7", uuidA + ":t:1-2," + uuidB + ":3", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, fl := range []Flavor{FlavorMariaDB, FlavorMySQL} {
			g, err := ParseGTID(fl, s)
			if err != nil {
				if !errors.Is(err, ErrBadGTID) {
					t.Fatalf("ParseGTID(%v, %q) = %v, not ErrBadGTID", fl, s, err)
				}
				continue
			}
			back, err := ParseGTID(fl, g.String())
			if err != nil {
				t.Fatalf("ParseGTID(%v, %q) printed %q, which does not parse: %v", fl, s, g, err)
			}
			if !back.Equal(g) || back.String() != g.String() {
				t.Fatalf("ParseGTID(%v, %q): %q reparses as %q", fl, s, g, back)
			}
			if !g.Contains(g) || !g.Union(g).Equal(g) || g.Missing(g) != "" {
				t.Fatalf("ParseGTID(%v, %q) = %q is not consistent with itself", fl, s, g)
			}
		}
	})
}
