package shard

import (
	"errors"
	"strings"
	"testing"
)

// A negated string is a number the server computes as a double (-” and
// -'abc' are 0): a WHERE on it scatters, an INSERT of it is refused, and
// neither panics (an empty string once indexed its first byte).
func TestNegatedStringKey(t *testing.T) {
	r := testRules(t)
	for _, tc := range []struct {
		sql    string
		shards int
	}{
		{"SELECT * FROM orders WHERE uid = -''", 80},
		{"SELECT * FROM orders WHERE uid = -'7'", 80},
		{"SELECT * FROM users WHERE name = -'abc'", 4},
		{"SELECT * FROM users WHERE name IN ('x', -'')", 4},
	} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s: panic: %v", tc.sql, p)
				}
			}()
			if got := shardsOf(route(t, r, tc.sql)); len(got) != tc.shards {
				t.Errorf("%s: shards %v, want all %d", tc.sql, got, tc.shards)
			}
		}()
	}
	for _, sql := range []string{"INSERT INTO orders (uid) VALUES (-'')", "INSERT INTO users (name, id) VALUES (-'abc', 1)"} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s: panic: %v", sql, p)
				}
			}()
			tm, err := r.Prepare("pay", sql)
			if err == nil {
				_, err = tm.Route(nil)
			}
			if !errors.Is(err, ErrBadKeyValue) {
				t.Errorf("%s: %v, want ErrBadKeyValue", sql, err)
			}
		}()
	}
	// A negated decimal is still its exact value.
	if a, b := shardsOf(route(t, r, "SELECT * FROM orders WHERE uid = -7.0")), shardsOf(route(t, r, "SELECT * FROM orders WHERE uid = 7")); len(a) != 1 || a[0] != b[0] {
		t.Errorf("uid = -7.0 on %v, uid = 7 on %v", a, b)
	}
}

// A date key is placed only in the forms the server reads as the same
// date: 'YYYY-MM-DD[ hh:mm:ss[.f]]', YYYYMMDD and YYYYMMDDhhmmss. The
// server reads 240105 as 2024-01-05 (YYMMDD), which sluice does not
// guess: it scatters in a WHERE and is refused in an INSERT.
func TestDateKeyForms(t *testing.T) {
	r := testRules(t)
	ru := ruleOf(t, r, "events")
	want, err := ru.place(str("2024-01-05"), true, ClientUTF8MB4)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []Value{intv(20240105), intv(20240105123000), {Kind: KindUint, U: 20240131}, str("2024-01-05 23:59:59"), str("2024-01-05T10:00:00.123456")} {
		if p, err := ru.place(v, true, ClientUTF8MB4); err != nil || p != want {
			t.Errorf("%s: %d, %v; want %d", formatValue(v), p, err, want)
		}
	}
	for _, v := range []Value{intv(240105), intv(700105), intv(240105123000), intv(2401051230), intv(20240105250000), intv(2024010512),
		intv(20241305), str("2024-1-5"), str("24-01-05"), str("20240105"), str("2024/01/05"), str("2024-01-05 25:00:00"), str("240105")} {
		if _, err := ru.place(v, false, ClientUTF8MB4); err != errNotExact {
			t.Errorf("WHERE %s: %v, want not exact (scatter)", formatValue(v), err)
		}
		if _, err := ru.place(v, true, ClientUTF8MB4); !errors.Is(err, ErrBadKeyValue) {
			t.Errorf("INSERT %s: %v, want ErrBadKeyValue", formatValue(v), err)
		}
	}
}

// A date rule on a TIMESTAMP column is refused once the column's type is
// known: the day a TIMESTAMP names depends on the session's time_zone.
func TestDateRuleOnTimestampRefused(t *testing.T) {
	r := testRules(t)
	err := r.SetKeyColumn("pay.events", KeyColumn{DataType: "timestamp", ColumnType: "timestamp"}, nil)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "pay.events column day") || !strings.Contains(err.Error(), "time_zone") {
		t.Fatalf("SetKeyColumn(timestamp): %v, want ErrUnsupported naming the table and time_zone", err)
	}
	tm, err := r.Prepare("pay", "SELECT * FROM events WHERE day = '2024-01-05'")
	if err == nil {
		_, err = tm.Route(nil)
	}
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("SELECT on the refused rule: %v, want ErrUnsupported", err)
	}
	for _, dt := range []string{"date", "datetime"} {
		if err := r.SetKeyColumn("pay.events", KeyColumn{DataType: dt, ColumnType: dt}, nil); err != nil {
			t.Errorf("a %s key: %v", dt, err)
		}
	}
}

// A _binary literal of non-ASCII bytes is compared byte for byte with a
// latin1 column's bytes: _binary'é' (C3 A9) matches the latin1 'Ã©', not
// 'é'. Sluice does not place it for a non-utf8 key; for a utf8 one it
// does.
func TestBinaryLiteralNonUTF8Key(t *testing.T) {
	r := keyRules(t)
	w := NewWeights("latin1_swedish_ci")
	for cp := 0; cp < 0x100; cp++ {
		x := cp
		if cp >= 'a' && cp <= 'z' {
			x = cp - 32
		}
		w.Set(cp, []byte{byte(x)})
	}
	if err := r.SetKeyColumn("pay.lat", KeyColumn{DataType: "varchar", ColumnType: "varchar(8)", Collation: "latin1_swedish_ci", MaxChars: 8}, w); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sql    string
		shards int
	}{
		{"SELECT * FROM lat WHERE k = _binary'é'", 8},
		{"SELECT * FROM lat WHERE k = 'é'", 1},
		{"SELECT * FROM lat WHERE k = _binary'abc'", 1},
		{"SELECT * FROM skus WHERE k = _binary'é'", 1},
		{"SELECT * FROM bins WHERE k = _binary'é'", 1},
	} {
		if got := shardsOf(route(t, r, tc.sql)); len(got) != tc.shards {
			t.Errorf("%s: shards %v, want %d", tc.sql, got, tc.shards)
		}
	}
	tm, err := r.Prepare("pay", "INSERT INTO lat (k) VALUES (_binary'é')")
	if err == nil {
		_, err = tm.Route(nil)
	}
	if !errors.Is(err, ErrBadKeyValue) || !strings.Contains(err.Error(), "_binary") {
		t.Errorf("INSERT _binary'é' into a latin1 key: %v, want ErrBadKeyValue naming _binary", err)
	}
}
