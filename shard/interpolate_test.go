package shard

import "testing"

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
		{"INSERT INTO t VALUES (?, ?, ?)", []int{2, 3, 4}, false, "INSERT INTO t VALUES (NULL, 18446744073709551615, 1.5)"},
		{"SELECT '?', `?`, \"?\" /* ? */ FROM t WHERE a = ? -- ?\n", []int{0}, false, "SELECT '?', `?`, \"?\" /* ? */ FROM t WHERE a = -7 -- ?\n"},
		{"SELECT 'a\\'?' , ?", []int{0}, false, "SELECT 'a\\'?' , -7"},
		{"SELECT ?, ?", nil, false, `SELECT -7, 'it''s a \\ test'`},
	}
	for _, c := range cases {
		got, err := Interpolate(c.sql, args, c.params, c.nbe)
		if err != nil || got != c.want {
			t.Errorf("Interpolate(%q) = %q, %v; want %q", c.sql, got, err, c.want)
		}
	}
	if _, err := Interpolate("SELECT ?, ?", args, []int{0}, false); err == nil {
		t.Error("more markers than params: no error")
	}
	if _, err := Interpolate("SELECT ?", args, []int{9}, false); err == nil {
		t.Error("param index out of range: no error")
	}
}
