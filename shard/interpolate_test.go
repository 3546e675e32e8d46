package shard

import (
	"errors"
	"math"
	"testing"
)

func TestInterpolate(t *testing.T) {
	args := []Value{
		{Kind: KindInt, I: -7},
		{Kind: KindString, S: []byte("it's a \\ test")},
		{Kind: KindNull},
		{Kind: KindUint, U: 18446744073709551615},
		{Kind: KindFloat, F: 1.5},
	}
	cases := []struct {
		sql    string
		params []int
		nbe    bool
		want   string
	}{
		{"SELECT * FROM t WHERE a = ? AND b = ?", []int{0, 1}, false, `SELECT * FROM t WHERE a = -7 AND b = 'it''s a \\ test'`},
		{"SELECT * FROM t WHERE b = ?", []int{1}, true, `SELECT * FROM t WHERE b = 'it''s a \ test'`},
		{"INSERT INTO t VALUES (?, ?, ?)", []int{2, 3, 4}, false, "INSERT INTO t VALUES (NULL, 18446744073709551615, 00000000000000001.5e+00)"},
		{"SELECT '?', `?`, \"?\" /* ? */ FROM t WHERE a = ? -- ?\n", []int{0}, false, "SELECT '?', `?`, \"?\" /* ? */ FROM t WHERE a = -7 -- ?\n"},
		{"SELECT 'a\\'?' , ?", []int{0}, false, "SELECT 'a\\'?' , -7"},
		{"SELECT ?, ?", nil, false, `SELECT -7, 'it''s a \\ test'`},
	}
	for _, c := range cases {
		got, err := Interpolate(c.sql, args, nil, c.params, c.nbe)
		if err != nil || got != c.want {
			t.Errorf("Interpolate(%q) = %q, %v; want %q", c.sql, got, err, c.want)
		}
	}
	if _, err := Interpolate("SELECT ?, ?", args, nil, []int{0}, false); err == nil {
		t.Error("more markers than params: no error")
	}
	if _, err := Interpolate("SELECT ?", args, nil, []int{9}, false); err == nil {
		t.Error("param index out of range: no error")
	}
}

// TestInterpolateTypes: each bound type is written as a literal the server
// types as it types the bound parameter (issue 20 item 15).
func TestInterpolateTypes(t *testing.T) {
	str := func(s string) Value { return Value{Kind: KindString, S: []byte(s)} }
	cases := []struct {
		v    Value
		tp   ParamType
		want string
	}{
		{Value{Kind: KindFloat, F: 0.1}, ParamString, "0000000000000000001e-01"},
		{Value{Kind: KindFloat, F: float64(float32(0.1))}, ParamString, "01.0000000149011612e-01"},
		{Value{Kind: KindFloat, F: 5e-324}, ParamString, "000000000000000005e-324"},
		{Value{Kind: KindFloat, F: -1.7976931348623157e308}, ParamString, "-1.7976931348623157e+308"},
		{str("-12.50"), ParamDecimal, "-12.50"},
		{str("2020-01-02"), ParamDate, "DATE'2020-01-02'"},
		{str("2020-01-02 03:04:05.500000"), ParamDatetime, "TIMESTAMP'2020-01-02 03:04:05.500000'"},
		{str("-26:03:04"), ParamTime, "TIME'-26:03:04'"},
		{str("a\x00'"), ParamBinary, `_binary'a\0'''`},
		{str("x"), ParamString, "'x'"},
		{intv(-7), ParamInt8, "-00000000000000000007"},
		{intv(7), ParamInt8, "000000000000000000007"},
		{intv(-7), ParamInt4, "-0000000007"},
		{intv(-7), ParamInt2, "-00007"},
		{intv(7), ParamInt1, "0007"},
		{intv(-9223372036854775808), ParamInt8, "-9223372036854775808"},
		{Value{Kind: KindUint, U: 18446744073709551615}, ParamInt8, "018446744073709551615"},
		{intv(-7), ParamString, "-7"},
		{Value{Kind: KindFloat, F: -0.1}, ParamString, "-000000000000000001e-01"},
	}
	for _, c := range cases {
		got, err := Interpolate("SELECT ?", []Value{c.v}, []ParamType{c.tp}, nil, false)
		if err != nil || got != "SELECT "+c.want {
			t.Errorf("%v as %d: %q, %v; want %q", c.v, c.tp, got, err, "SELECT "+c.want)
		}
	}
	for _, c := range []struct {
		v  Value
		tp ParamType
	}{
		{str("1e5"), ParamDecimal}, {str("0000-00-00"), ParamDate}, {str("2020-01-02'"), ParamDatetime},
		{Value{Kind: KindFloat, F: math.NaN()}, ParamString},
	} {
		if got, err := Interpolate("SELECT ?", []Value{c.v}, []ParamType{c.tp}, nil, false); err == nil {
			t.Errorf("%v as %d: %q, want an error", c.v, c.tp, got)
		}
	}
}

// TestInterpolateAfterMinus: an integer that is the operand of a minus sign
// is written inside a CAST, so the parser does not fold the sign into the
// literal (- -7 is the INT 7, where - ? bound to -7 is the DECIMAL 7), and
// the one value whose negation overflows as a parameter is refused.
func TestInterpolateAfterMinus(t *testing.T) {
	cases := []struct {
		sql  string
		v    Value
		want string
	}{
		{"SELECT -?", intv(-7), "SELECT -CAST(-00000000000000000007 AS SIGNED)"},
		{"SELECT IF(1e0, (- ( ?)), 0)", intv(3), "SELECT IF(1e0, (- ( CAST(000000000000000000003 AS SIGNED))), 0)"},
		{"SELECT a-?", Value{Kind: KindUint, U: 18446744073709551615}, "SELECT a-CAST(018446744073709551615 AS UNSIGNED)"},
		{"SELECT -?", Value{Kind: KindFloat, F: -0.5}, "SELECT --000000000000000005e-01"},
		{"SELECT -?", Value{Kind: KindString, S: []byte("7")}, "SELECT -'7'"},
		{"SELECT a - b, ?", intv(-7), "SELECT a - b, -00000000000000000007"},
		{"SELECT '-'?", intv(-7), "SELECT '-'-00000000000000000007"},
	}
	for _, c := range cases {
		got, err := Interpolate(c.sql, []Value{c.v}, []ParamType{ParamInt8}, nil, false)
		if err != nil || got != c.want {
			t.Errorf("Interpolate(%q, %v) = %q, %v; want %q", c.sql, c.v, got, err, c.want)
		}
	}
	for _, v := range []Value{intv(math.MinInt64), {Kind: KindUint, U: 1 << 63}} {
		if got, err := Interpolate("SELECT -(?)", []Value{v}, []ParamType{ParamInt8}, nil, false); !errors.Is(err, ErrUnsupported) {
			t.Errorf("-(?) with %v: %q, %v; want ErrUnsupported", v, got, err)
		}
	}
	if got, err := Interpolate("SELECT ?", []Value{intv(math.MinInt64)}, []ParamType{ParamInt8}, nil, false); err != nil || got != "SELECT -9223372036854775808" {
		t.Errorf("? with MinInt64: %q, %v", got, err)
	}
}
