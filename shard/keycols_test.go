package shard

import (
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/sluice-proxy/sluice/conf"
)

// fakeGeneralCI weighs like utf8mb4_general_ci for the characters the tests
// use: a letter weighs as its upper case without accent, ß as S, every
// supplementary character as U+FFFD; U+0100 .. U+01FF are left unknown.
func fakeGeneralCI() *Weights {
	w := NewWeights("utf8mb4_general_ci")
	for cp := 0; cp < 0x10000; cp++ {
		if cp >= 0x100 && cp < 0x200 {
			continue
		}
		r := unicode.ToUpper(rune(cp))
		switch rune(cp) {
		case 'ß':
			r = 'S'
		case 'é', 'É', 'è':
			r = 'E'
		}
		w.Set(cp, []byte{byte(r >> 8), byte(r)})
	}
	w.SetSupplementary([]byte{0xFF, 0xFD})
	return w
}

// keyRules are testConfig's rules and string, integer and byte hash keys of
// each kind, with their key columns set.
func keyRules(t *testing.T) *Rules {
	t.Helper()
	cfg := testConfig()
	names := []string{"db1", "db2"}
	for _, tb := range []string{"skus", "bins", "hints", "tiny", "blobs", "lat", "later", "skus2"} {
		s := conf.Shard{Schema: "pay", Table: tb, Key: "k", Algorithm: "hash", Clusters: names, TablesPerCluster: 4}
		if tb == "hints" {
			s.IDColumn = "id"
		}
		cfg.Shards = append(cfg.Shards, s)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	setKeyColumns(t, r)
	w := fakeGeneralCI()
	for logical, kc := range map[string]KeyColumn{
		"pay.skus":  {DataType: "varchar", ColumnType: "varchar(8)", Collation: "utf8mb4_general_ci", MaxChars: 8},
		"pay.bins":  {DataType: "varchar", ColumnType: "varchar(8)", Collation: "utf8mb4_bin", MaxChars: 8},
		"pay.hints": {DataType: "bigint", ColumnType: "bigint(20)"},
		"pay.tiny":  {DataType: "tinyint", ColumnType: "tinyint(3) unsigned"},
		"pay.blobs": {DataType: "varbinary", ColumnType: "varbinary(8)", MaxChars: 8},
		"pay.skus2": {DataType: "char", ColumnType: "char(8)", Collation: "utf8mb4_bin", MaxChars: 8},
	} {
		if err := r.SetKeyColumn(logical, kc, w); err != nil {
			t.Fatal(err)
		}
	}
	err = r.SetKeyColumn("pay.lat", KeyColumn{DataType: "varchar", ColumnType: "varchar(8)", Collation: "latin1_swedish_ci"}, nil)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "pay.lat column k") {
		t.Fatalf("latin1 hash key: %v, want a refusal naming the rule", err)
	}
	return r
}

// keyRules with a testing.B.
func keyRulesB(b *testing.B) *Rules {
	var r *Rules
	t := &testing.T{}
	r = keyRules(t)
	if t.Failed() {
		b.Fatal("keyRules failed")
	}
	return r
}

func str(s string) Value { return Value{Kind: KindString, S: []byte(s)} }

// Keys the server finds equal are placed together; what sluice cannot map
// scatters in a WHERE and is refused in an INSERT.
func TestKeyPlacedAsStored(t *testing.T) {
	r := keyRules(t)
	dec := func(s string) Value { return Value{Kind: KindString, S: []byte(s), Decimal: true} }
	i := func(n int64) Value { return Value{Kind: KindInt, I: n} }
	f := func(x float64) Value { return Value{Kind: KindFloat, F: x} }
	type c = ClientCharset
	equal := []struct {
		table string
		cs    c
		vals  []Value
	}{
		{"skus", ClientUTF8MB4, []Value{str("SKU-1"), str("sKU-1"), str("sku-1   "), str("Sku-1 ")}},
		{"skus", ClientUTF8MB4, []Value{str("Straße"), str("STRASE"), str("strase ")}},
		{"skus", ClientUTF8MB3, []Value{str("Éclair"), str("eclair"), str("ECLAIR  ")}},
		{"skus", ClientOther, []Value{str("abc"), str("ABC ")}},
		{"skus", ClientUTF8MB4, []Value{str("a😀"), str("A😁")}}, // general_ci: every emoji weighs U+FFFD
		{"bins", ClientUTF8MB4, []Value{str("Ab"), str("Ab  ")}},
		{"skus2", ClientUTF8MB4, []Value{str("Ab"), str("Ab  ")}},
		{"hints", ClientOther, []Value{i(42), str("042"), str(" 42"), str("+42 "), str("42.000"), dec("42.0"), f(42)}},
		{"hints", ClientUTF8MB4, []Value{i(-7), str("-07"), dec("-7.0")}},
		{"blobs", ClientUTF8MB4, []Value{str("ab"), str("ab")}},
	}
	for _, tc := range equal {
		ru := ruleOf(t, r, tc.table)
		want := -1
		for _, v := range tc.vals {
			for _, store := range []bool{false, true} {
				p, err := ru.place(v, store, tc.cs)
				if err != nil {
					t.Fatalf("%s place(%s, store %v): %v", tc.table, formatValue(v), store, err)
				}
				if want < 0 {
					want = p
				} else if p != want {
					t.Errorf("%s: %s placed at %d, %s at %d", tc.table, formatValue(tc.vals[0]), want, formatValue(v), p)
				}
			}
		}
	}
	// Integer keys keep the placement of before: the hash of their decimal text.
	if p, _ := ruleOf(t, r, "hints").place(str(" 0042"), false, ClientUTF8MB4); p != int(crc32.ChecksumIEEE([]byte("42"))%8) {
		t.Errorf("hints: ' 0042' placed at %d, want the hash of \"42\"", p)
	}
	// The weights of a general_ci key, not its bytes.
	if a, _ := ruleOf(t, r, "skus").place(str("ab"), false, ClientUTF8MB4); a != int(crc32.ChecksumIEEE([]byte{0, 'A', 0, 'B'})%8) {
		t.Errorf("skus: 'ab' placed at %d, want the hash of its weights", a)
	}
	if a, _ := ruleOf(t, r, "bins").place(str("ab  "), false, ClientUTF8MB4); a != int(crc32.ChecksumIEEE([]byte("ab"))%8) {
		t.Errorf("bins: 'ab  ' placed at %d, want the hash of its bytes without the spaces", a)
	}

	inexact := []struct {
		table string
		cs    c
		v     Value
	}{
		{"hints", ClientUTF8MB4, str("42abc")},
		{"hints", ClientUTF8MB4, str("4.2e1")},
		{"hints", ClientUTF8MB4, str("42.5")},
		{"hints", ClientUTF8MB4, dec("42.5")},
		{"hints", ClientUTF8MB4, str("99999999999999999999")},
		{"hints", ClientUTF8MB4, dec("-18446744073709551616")},
		{"hints", ClientUTF8MB4, f(42.5)},
		{"hints", ClientUTF8MB4, str("")},
		{"hints", ClientUTF8MB4, str("\t42")},
		{"skus", ClientUTF8MB4, dec("42.0")},
		{"skus", ClientUTF8MB4, f(1)},
		{"skus", ClientOther, str("é")},
		{"skus", ClientUTF8MB3, str("a😀")},
		{"skus", ClientUTF8MB4, str("a\xff")},
		{"skus", ClientUTF8MB4, str("Ā")}, // no weight learnt
		{"bins", ClientUTF8MB4, str("a\xc3")},
		{"bins", ClientUTF8MB3, str("😀")},
		{"orders", ClientUTF8MB4, str("9527.5")},
		{"orders", ClientUTF8MB4, str("18446744073709551616")},
		{"events", ClientUTF8MB4, str("2026-3-15")},
	}
	for _, tc := range inexact {
		ru := ruleOf(t, r, tc.table)
		if _, err := ru.place(tc.v, false, tc.cs); err != errNotExact {
			t.Errorf("%s WHERE %s: %v, want not exact (scatter)", tc.table, formatValue(tc.v), err)
		}
		if _, err := ru.place(tc.v, true, tc.cs); !errors.Is(err, ErrBadKeyValue) || !strings.Contains(err.Error(), "column") {
			t.Errorf("%s INSERT %s: %v, want ErrBadKeyValue naming the column", tc.table, formatValue(tc.v), err)
		}
	}
	// A number compares with a string column as a number: a WHERE
	// scatters, an INSERT stores its decimal text.
	ru := ruleOf(t, r, "skus")
	if _, err := ru.place(i(42), false, ClientUTF8MB4); err != errNotExact {
		t.Errorf("skus WHERE 42: %v, want not exact", err)
	}
	a, err1 := ru.place(i(42), true, ClientUTF8MB4)
	b, err2 := ru.place(str("42"), true, ClientUTF8MB4)
	if err1 != nil || err2 != nil || a != b {
		t.Errorf("skus INSERT 42 at %d (%v), '42' at %d (%v)", a, err1, b, err2)
	}
	// What the column would not store as given is refused on INSERT only.
	for _, tc := range []struct {
		table string
		v     Value
		why   string
	}{
		{"tiny", i(256), "out of the range of tinyint(3) unsigned"},
		{"tiny", i(-1), "out of the range"},
		{"tiny", str("300"), "out of the range"},
		{"skus", str("123456789"), "longer than the column's 8 characters"},
	} {
		ru := ruleOf(t, r, tc.table)
		if _, err := ru.place(tc.v, true, ClientUTF8MB4); !errors.Is(err, ErrBadKeyValue) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s INSERT %s: %v, want %q", tc.table, formatValue(tc.v), err, tc.why)
		}
		if _, err := ru.place(tc.v, false, ClientUTF8MB4); err != nil {
			t.Errorf("%s WHERE %s: %v, want a shard (no row matches)", tc.table, formatValue(tc.v), err)
		}
	}
	if _, err := ruleOf(t, r, "skus").place(str("12345678   "), true, ClientUTF8MB4); err != nil {
		t.Errorf("trailing spaces past the length are cut by the server, not refused: %v", err)
	}
}

// A hash rule whose key column is not known yet scatters reads and refuses
// every INSERT, integers included (placed by their text, they would belong
// elsewhere once the column turns out to be a _ci string); a refused rule
// refuses every statement.
func TestKeyColumnUnknownOrRefused(t *testing.T) {
	r := keyRules(t)
	ru := ruleOf(t, r, "later")
	if p, err := ru.place(Value{Kind: KindInt, I: 42}, true, ClientUTF8MB4); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "not known yet") {
		t.Errorf("unknown column, INSERT integer key: placed on %d, %v; want ErrUnsupported (not known yet)", p, err)
	}
	if _, err := ru.place(Value{Kind: KindInt, I: 42}, false, ClientUTF8MB4); err != errNotExact {
		t.Errorf("unknown column, WHERE integer: %v, want not exact", err)
	}
	if _, err := ru.place(str("x"), false, ClientUTF8MB4); err != errNotExact {
		t.Errorf("unknown column, WHERE string: %v, want not exact", err)
	}
	if _, err := ru.place(str("x"), true, ClientUTF8MB4); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "not known yet") {
		t.Errorf("unknown column, INSERT string: %v", err)
	}
	for _, sql := range []string{"SELECT * FROM lat WHERE k = 'x'", "INSERT INTO lat (k) VALUES ('x')", "SELECT * FROM lat WHERE k = 1"} {
		tm, err := r.Prepare("pay", sql)
		if err == nil {
			_, err = tm.Route(nil)
		}
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "collation") {
			t.Errorf("%s: %v, want ErrUnsupported naming the collation", sql, err)
		}
	}
	r.RefuseKey("pay.skus", "the key column's type or collation differs between clusters (db1: int; db2: varchar(8))")
	tm, err := r.Prepare("pay", "SELECT * FROM skus WHERE k = 'a'")
	if err == nil {
		_, err = tm.Route(nil)
	}
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "pay.skus column k") || !strings.Contains(err.Error(), "differs between") {
		t.Errorf("refused rule: %v", err)
	}
	// Keys of different collations do not join shard by shard.
	if _, err := r.Prepare("pay", "SELECT * FROM bins b JOIN blobs x ON x.k = b.k WHERE b.k = 'a'"); !errors.Is(err, ErrCrossShardJoin) {
		t.Errorf("join of a utf8mb4_bin and a varbinary key: %v, want ErrCrossShardJoin", err)
	}
}

// A WHERE key sluice cannot map scatters instead of failing; a session
// whose character set is not UTF-8 scatters for non-ASCII keys.
func TestInexactWhereScatters(t *testing.T) {
	r := keyRules(t)
	for _, tc := range []struct {
		sql  string
		cs   ClientCharset
		args []Value
	}{
		{"SELECT * FROM hints WHERE k = 18446744073709551616", ClientUTF8MB4, nil},
		{"SELECT * FROM hints WHERE k = '42abc'", ClientUTF8MB4, nil},
		{"SELECT * FROM hints WHERE k IN (1, 42.5)", ClientUTF8MB4, nil},
		{"SELECT * FROM skus WHERE k = 'é'", ClientOther, nil},
		{"SELECT * FROM skus WHERE k = ?", ClientOther, []Value{str("é")}},
		{"SELECT * FROM skus WHERE k = _latin1'\xe9'", ClientUTF8MB4, nil},
		{"UPDATE orders SET amount = 1 WHERE uid = 99999999999999999999", ClientUTF8MB4, nil},
		{"DELETE FROM skus WHERE k = 7", ClientUTF8MB4, nil},
	} {
		tm, err := r.Prepare("pay", tc.sql)
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		rt, err := tm.RouteFor(tc.args, tc.cs)
		if err != nil {
			t.Errorf("%s: %v, want a scatter", tc.sql, err)
			continue
		}
		if want := tm.ru.shards; len(rt.Parts) != want {
			t.Errorf("%s: %d parts, want all %d", tc.sql, len(rt.Parts), want)
		}
	}
	tm, err := r.Prepare("pay", "INSERT INTO skus (k) VALUES ('é')")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tm.RouteFor(nil, ClientOther); !errors.Is(err, ErrBadKeyValue) {
		t.Errorf("INSERT of a non-ASCII key from a latin1 session: %v, want ErrBadKeyValue", err)
	}
	if rt, err := tm.RouteFor(nil, ClientUTF8MB3); err != nil || len(rt.Parts) != 1 {
		t.Errorf("INSERT of 'é' from a utf8mb3 session: %v", err)
	}
}

// Ids are decoded for routing only in the generated range, and an INSERT
// may not give an id in the range that names another shard than its row's.
func TestIDRange(t *testing.T) {
	g := NewIDGenerator(2)
	id := g.Next(5)
	if s, ok := ShardOfID(id); !ok || s != 5 {
		t.Fatalf("a generated id: %d, %v", s, ok)
	}
	for _, small := range []int64{1048836, 1<<20 | 3, IDMinAge.Milliseconds()<<idTimeShift - 1} {
		if _, ok := ShardOfID(small); ok {
			t.Errorf("%d (version bit set, time part below a day) decoded as a generated id", small)
		}
	}
	// An id whose time lies years ahead is decoded today, as it will be
	// once the clock reaches it, so an INSERT of it is checked today.
	ahead := func(shard int) int64 {
		ms := time.Since(IDEpoch).Milliseconds() + 3*365*24*time.Hour.Milliseconds()
		return ms<<idTimeShift | IDVersionSharded<<idVersionShift | int64(shard)
	}
	if s, ok := ShardOfID(ahead(5)); !ok || s != 5 {
		t.Errorf("an id three years ahead: %d, %v; want shard 5 decoded", s, ok)
	}

	r := keyRules(t)
	ru := ruleOf(t, r, "hints")
	p, _ := ru.place(Value{Kind: KindInt, I: 42}, true, ClientUTF8MB4)
	other := (p + 1) % ru.shards
	for _, tc := range []struct {
		id      int64
		refused bool
	}{
		{g.Next(p), false},
		{g.Next(p + 8), false}, // the same shard, another virtual number
		{g.Next(other), true},
		{1048836, false}, // an application's id
		{g.NextPlain(), false},
		{ahead(p), false},
		{ahead(other), true}, // routed to other by the id alone once its time comes
	} {
		sql := fmt.Sprintf("INSERT INTO hints (k, id) VALUES (42, %d)", tc.id)
		tm, err := r.Prepare("pay", sql)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tm.Route(nil)
		if got := errors.Is(err, ErrBadKeyValue); got != tc.refused || err != nil && !strings.Contains(err.Error(), "generated ids") {
			t.Errorf("%s: %v, refused want %v", sql, err, tc.refused)
		}
		tm, _ = r.Prepare("pay", "INSERT INTO hints (k, id) VALUES (?, ?), (7, 1)")
		_, err = tm.Route([]Value{{Kind: KindInt, I: 42}, {Kind: KindInt, I: tc.id}})
		if got := errors.Is(err, ErrBadKeyValue); got != tc.refused {
			t.Errorf("prepared %d: %v, refused want %v", tc.id, err, tc.refused)
		}
	}
	if _, err := r.Prepare("pay", "INSERT INTO hints (k, id) VALUES (42, 1+1)"); !errors.Is(err, ErrBadKeyValue) {
		t.Errorf("an id sluice cannot read: %v, want ErrBadKeyValue", err)
	}
	// A lookup by a small id with the version bit scatters.
	rt := route(t, r, "SELECT * FROM hints WHERE id = 1048836")
	if len(rt.Parts) != ru.shards {
		t.Errorf("WHERE id = 1048836: %d parts, want all %d", len(rt.Parts), ru.shards)
	}
	rt = route(t, r, fmt.Sprintf("SELECT * FROM hints WHERE id = %d", g.Next(p)))
	if len(rt.Parts) != 1 || rt.Parts[0].Shards[0] != p%ru.shards {
		t.Errorf("WHERE id = a generated id: %+v", rt.Parts)
	}
}

// A latin1 collation weighs one byte per character; characters latin1
// lacks have no weight.
func TestLatin1Weights(t *testing.T) {
	r := keyRules(t)
	w := NewWeights("latin1_swedish_ci")
	for cp := 0; cp < 0x100; cp++ {
		x := unicode.ToUpper(rune(cp))
		if x > 0xFF {
			x = rune(cp)
		}
		if cp == 'é' || cp == 'É' {
			x = 'E'
		}
		w.Set(cp, []byte{byte(x)})
	}
	w.Set(0x20AC, []byte{0x80}) // €, cp1252's 0x80
	w.Set(0x100, []byte{0, 1})  // not one byte: stays unknown
	if err := r.SetKeyColumn("pay.skus", KeyColumn{DataType: "varchar", ColumnType: "varchar(8)", Collation: "latin1_swedish_ci", MaxChars: 8}, w); err != nil {
		t.Fatal(err)
	}
	ru := ruleOf(t, r, "skus")
	a, err1 := ru.place(str("Éclair €"), false, ClientUTF8MB4)
	b, err2 := ru.place(str("eCLAIR €  "), true, ClientUTF8MB4)
	if err1 != nil || err2 != nil || a != b || a != int(crc32.ChecksumIEEE([]byte("ECLAIR \x80"))%8) {
		t.Errorf("latin1: %d (%v), %d (%v), want the hash of one byte per character", a, err1, b, err2)
	}
	for _, v := range []string{"Ā", "日本"} {
		if _, err := ru.place(str(v), false, ClientUTF8MB4); err != errNotExact {
			t.Errorf("latin1 WHERE %q: %v, want not exact", v, err)
		}
	}
	if err := r.SetKeyColumn("pay.skus", KeyColumn{DataType: "varchar", ColumnType: "varchar(8)", Collation: "latin1_german2_ci"}, nil); err == nil {
		t.Error("latin1_german2_ci (ä as ae) accepted")
	}
}

// Check finds a collation that weighs several characters at once.
func TestWeightsCheck(t *testing.T) {
	w := fakeGeneralCI()
	if err := w.Check("Aß", []byte{0, 'A', 0, 'S'}); err != nil {
		t.Error(err)
	}
	if err := w.Check("Aß", []byte{0, 'A', 0, 'S', 0, 'S'}); err == nil {
		t.Error("an expansion (ß as ss) passed the check")
	}
	if err := w.Check("Ā", []byte{1, 0}); err == nil {
		t.Error("a character without a learnt weight passed the check")
	}
}

// A point statement on a general_ci string key is placed by its weights
// without allocating.
func BenchmarkPlanShardedPointSelectWeighed(b *testing.B) {
	r := keyRulesB(b)
	const q = "SELECT * FROM skus WHERE k = ?"
	args := []Value{str("Straße-1 ")}
	b.ReportAllocs()
	for b.Loop() {
		tm, err := r.Prepare("pay", q)
		if err != nil {
			b.Fatal(err)
		}
		rt, err := tm.RouteFor(args, ClientUTF8MB4)
		if err != nil || len(rt.Parts) != 1 {
			b.Fatal(err)
		}
	}
}
