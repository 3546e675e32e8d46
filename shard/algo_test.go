package shard

import (
	"errors"
	"hash/crc32"
	"testing"
)

func ruleOf(t *testing.T, r *Rules, table string) *rule {
	t.Helper()
	ru, _ := r.lookup("pay", table)
	if ru == nil {
		t.Fatalf("no rule for %s", table)
	}
	return ru
}

func TestPlace(t *testing.T) {
	r := testRules(t)
	str := func(s string) Value { return Value{Kind: KindString, S: []byte(s)} }
	i := func(n int64) Value { return Value{Kind: KindInt, I: n} }
	hashOf := func(s string, mod uint32) int { return int(crc32.ChecksumIEEE([]byte(s)) % mod) }
	tests := []struct {
		table string
		v     Value
		want  int // place: virtual shard when the rule has them
		err   error
	}{
		// The payment seed: 8 clusters x 10 tables, uid 9527 -> first cluster, orders_7.
		{"orders", i(9527), 7, nil},
		{"orders", i(123), 123 % 80, nil},
		{"orders", Value{Kind: KindUint, U: 81}, 1, nil},
		{"orders", str("9527"), 7, nil},
		{"orders", str(" 9527.00 "), 7, nil},
		{"orders", i(-9527), 7, nil}, // absolute value
		{"orders", Value{Kind: KindFloat, F: 9527}, 7, nil},
		{"orders", Value{Kind: KindFloat, F: 1.5}, 0, ErrBadKeyValue},
		{"orders", str("12ab"), 0, ErrBadKeyValue},
		{"orders", str("9527.5"), 0, ErrBadKeyValue},
		{"orders", str("99999999999999999999"), 0, ErrBadKeyValue},
		{"users", str("alice"), hashOf("alice", 64), nil},
		{"users", str("alice  "), hashOf("alice", 64), nil}, // PAD SPACE
		{"users", i(42), hashOf("42", 64), nil},
		{"users", Value{Kind: KindFloat, F: 0.5}, 0, ErrBadKeyValue},
		{"ranges", i(0), 0, nil},
		{"ranges", i(99), 0, nil},
		{"ranges", i(100), 1, nil},
		{"ranges", str("199"), 1, nil},
		{"ranges", i(200), 0, ErrKeyOutOfRange},
		{"ranges", i(-1), 0, ErrKeyOutOfRange},
		{"ranges", Value{Kind: KindUint, U: 1 << 63}, 0, ErrKeyOutOfRange},
		// events: month unit over 12 shards: (year*12 + month-1) mod 12.
		{"events", str("2026-03-15"), (2026*12 + 2) % 12, nil},
		{"events", str("2026-03-15 10:11:12.123456"), 2, nil},
		{"events", i(20261231), 11, nil},
		{"events", str("2026-02-30"), 0, ErrBadKeyValue},
		{"events", str("2026-3-15"), 0, ErrBadKeyValue},
		{"events", str("2026-03-15 25:00:00"), 0, ErrBadKeyValue},
		{"events", Value{Kind: KindFloat, F: 1}, 0, ErrBadKeyValue},
	}
	for _, tc := range tests {
		ru := ruleOf(t, r, tc.table)
		got, err := ru.place(tc.v, true, ClientUTF8MB4)
		if !errors.Is(err, tc.err) {
			t.Errorf("%s place(%s): error %v, want %v", tc.table, formatValue(tc.v), err, tc.err)
			continue
		}
		if err == nil && got != tc.want {
			t.Errorf("%s place(%s) = %d, want %d", tc.table, formatValue(tc.v), got, tc.want)
		}
	}
}

func TestPaymentSeedFormula(t *testing.T) {
	r := testRules(t)
	ru := ruleOf(t, r, "orders")
	for uid := int64(0); uid < 2000; uid += 7 {
		p, err := ru.place(Value{Kind: KindInt, I: uid}, false, ClientUTF8MB4)
		if err != nil {
			t.Fatal(err)
		}
		s := p % ru.shards
		wantCluster := ru.clusters[(uid/10)%8]
		if ru.cluster(s) != wantCluster || int64(s%ru.tables) != uid%10 {
			t.Fatalf("uid %d: cluster %d table %d, want cluster %d table %d", uid, ru.cluster(s), s%ru.tables, wantCluster, uid%10)
		}
	}
	rt := route(t, r, "SELECT * FROM orders WHERE uid = 9527")
	if got := r.Clusters()[rt.Parts[0].Cluster]; got != "db1" || rt.Parts[0].SQL != "SELECT * FROM `orders_7` AS `orders` WHERE `uid`=9527" {
		t.Fatalf("uid 9527: cluster %s SQL %q", got, rt.Parts[0].SQL)
	}
}

func TestDateUnits(t *testing.T) {
	tests := []struct {
		s    string
		unit dateUnit
		want int64
	}{
		{"1970-01-01", unitDay, 0},
		{"1970-01-02 00:00:00", unitDay, 1},
		{"1969-12-31", unitDay, -1},
		{"2000-03-01", unitDay, 11017},
		{"2026-01-01", unitMonth, 2026 * 12},
		{"2026-12-31T23:59:59", unitYear, 2026},
	}
	for _, tc := range tests {
		got, ok := dateNumber(Value{Kind: KindString, S: []byte(tc.s)}, tc.unit)
		if !ok || got != tc.want {
			t.Errorf("dateNumber(%q, %d) = %d, %v; want %d", tc.s, tc.unit, got, ok, tc.want)
		}
	}
}

// Doubling the physical shards of a rule with virtual shards moves whole
// tables: a key's shard s becomes s or s+P.
func TestVirtualShardsDoubling(t *testing.T) {
	small := &rule{algo: algoHash, shards: 4, tables: 2, virtual: 64}
	big := &rule{algo: algoHash, shards: 8, tables: 2, virtual: 64}
	for k := int64(0); k < 500; k++ {
		v := Value{Kind: KindInt, I: k}
		a, _ := small.place(v, true, ClientUTF8MB4)
		b, _ := big.place(v, true, ClientUTF8MB4)
		if a != b {
			t.Fatalf("key %d: virtual shard %d then %d", k, a, b)
		}
		if s, s2 := a%4, b%8; s2 != s && s2 != s+4 {
			t.Fatalf("key %d: shard %d became %d", k, s, s2)
		}
	}
}
