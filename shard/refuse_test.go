package shard

import (
	"errors"
	"strings"
	"testing"
)

// TestMayName: table names match as identifier tokens in any letter case,
// quoted or not, qualified or not, and not as parts of longer identifiers.
func TestMayName(t *testing.T) {
	r := testRules(t)
	tests := []struct {
		sql, want string
	}{
		{"UPDATE orders SET a = 1 WHERE 'a' SOUNDS LIKE 'a'", "pay.orders"},
		{"update `ORDERS` set a = 1", "pay.orders"},
		{"SELECT * FROM pay.Orders", "pay.orders"},
		{`SELECT * FROM "orders"`, "pay.orders"},
		{"SELECT * FROM x,orders", "pay.orders"},
		{"SELECT * FROM /*!orders*/ x", "pay.orders"},
		{"SELECT * FROM 1orders", "pay.orders"}, // a digit before counts as a boundary
		{"SELECT * FROM \xc3\xa9orders", "pay.orders"},
		{"SELECT * FROM config", "pay.config"},
		{"SELECT * FROM orders_archive", ""},
		{"SELECT * FROM myorders", ""},
		{"SELECT * FROM orders2", ""},
		{"SELECT * FROM notes", ""},
	}
	for _, tc := range tests {
		if got := r.mayName(tc.sql); got != tc.want {
			t.Errorf("mayName(%q) = %q, want %q", tc.sql, got, tc.want)
		}
	}
}

// TestRefuseHalfUnderstood: texts the parser rejects, PREPARE from a text
// or a variable, and several statements are refused when they may name a
// sharded or broadcast table, and pass to the default cluster otherwise.
func TestRefuseHalfUnderstood(t *testing.T) {
	r := testRules(t)
	refused := []string{
		"UPDATE orders SET amount = 1 WHERE 'a' SOUNDS LIKE 'a'",
		"SELECT COUNT(*) INTO @t FROM `Orders`",
		"SELECT * FROM orders ORDER BY uid OFFSET 1 ROWS FETCH FIRST 3 ROWS ONLY",
		"PREPARE s FROM 'SELECT * FROM orders'",
		"PREPARE s FROM @q",
		"SELECT 1; SELECT * FROM config",
		// A WITH name that is also a rule's table: the inner WITH does not
		// reach the outer orders, and a CTE's own body reads the table;
		// collect does not scope WITH names, so every such text is refused.
		"SELECT COUNT(*) FROM orders WHERE uid IN (WITH orders AS (SELECT 1 AS uid) SELECT uid FROM orders)",
		"WITH orders AS (SELECT * FROM orders) SELECT COUNT(*) FROM orders",
		"WITH config AS (SELECT 1 AS k) SELECT * FROM config",
	}
	for _, q := range refused {
		_, err := r.Prepare("pay", q)
		if !errors.Is(err, ErrUnsupported) {
			t.Errorf("Prepare(%q): %v, want ErrUnsupported", q, err)
		}
	}
	for _, q := range []string{"UPDATE notes SET a = 1 WHERE 'a' SOUNDS LIKE 'a'", "PREPARE s FROM 'SELECT * FROM notes'", "SELECT 1; SELECT 2"} {
		tm, err := r.Prepare("pay", q)
		if err != nil {
			t.Errorf("Prepare(%q): %v", q, err)
			continue
		}
		rt, _ := tm.Route(nil)
		if len(rt.Parts) != 1 || rt.Parts[0].Cluster != r.DefaultCluster() || rt.Parts[0].SQL != q {
			t.Errorf("Prepare(%q): route %+v, want the default cluster", q, rt)
		}
	}
	for _, tc := range []struct{ sql, want string }{
		{"SET @q := (SELECT COUNT(*) FROM orders)", "orders"},
		{"SET @q := (SELECT name FROM config LIMIT 1)", ""},
		{"SET @q := 7", ""},
		{"SELECT * FROM orders WHERE 'a' SOUNDS LIKE 'a'", "pay.orders"},
		{"SELECT * FROM notes WHERE 'a' SOUNDS LIKE 'a'", ""},
	} {
		err := r.CheckDefault("pay", tc.sql, 0)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckDefault(%q): %v", tc.sql, err)
		case tc.want != "" && (!errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckDefault(%q): %v, want ErrUnsupported naming %s", tc.sql, err, tc.want)
		}
	}
}

// TestOuterJoinKeepsBroadcast: an outer join that keeps the rows of a
// table that is not sharded while a sharded one is on its other side runs
// on one shard, or is refused.
func TestOuterJoinKeepsBroadcast(t *testing.T) {
	r := testRules(t)
	multi := []string{
		"SELECT COUNT(*) FROM config c LEFT JOIN orders o ON o.status = c.k",
		"SELECT COUNT(*) FROM orders o RIGHT JOIN config c ON o.status = c.k",
		"SELECT COUNT(*) FROM config c NATURAL LEFT JOIN orders o",
		"SELECT COUNT(*) FROM config c LEFT JOIN orders o USING (k)",
		"SELECT COUNT(*) FROM config c LEFT JOIN (orders o JOIN items i ON i.uid = o.uid) ON o.status = c.k",
		"SELECT COUNT(*) FROM (SELECT * FROM config) c LEFT JOIN orders o ON o.status = c.k",
		"SELECT COUNT(*) FROM config c JOIN config d ON d.k = c.k LEFT JOIN orders o ON o.status = c.k",
		"SELECT COUNT(*) FROM config c LEFT JOIN orders o ON o.status = c.k AND o.uid = 5",
	}
	for _, q := range multi {
		tm, err := r.Prepare("pay", q)
		if err != nil {
			t.Errorf("Prepare(%q): %v", q, err)
			continue
		}
		if _, err := tm.Route(nil); !errors.Is(err, ErrUnsupported) {
			t.Errorf("Route(%q): %v, want ErrUnsupported", q, err)
		}
	}
	for _, q := range []string{
		"SELECT COUNT(*) FROM config c LEFT JOIN orders o ON o.status = c.k WHERE o.uid = 5",
		"SELECT COUNT(*) FROM orders o LEFT JOIN config c ON o.status = c.k",
		"SELECT COUNT(*) FROM config c RIGHT JOIN orders o ON o.status = c.k",
		"SELECT COUNT(*) FROM config c JOIN orders o ON o.status = c.k",
		"SELECT COUNT(*) FROM (orders o JOIN config c ON o.status = c.k) LEFT JOIN items i ON i.uid = o.uid",
	} {
		route(t, r, q)
	}
}

// TestSharedTableWrites: a write that changes a broadcast table by what a
// sharded table holds is refused, even on one shard.
func TestSharedTableWrites(t *testing.T) {
	r := testRules(t)
	for _, q := range []string{
		"UPDATE config c JOIN orders o ON o.status = c.k SET c.v = 1 WHERE o.uid = 5",
		"UPDATE orders o JOIN config c ON o.status = c.k SET v = 1 WHERE o.uid = 5",
		"DELETE c FROM config c JOIN orders o ON o.status = c.k WHERE o.uid = 5",
		"UPDATE config SET v = (SELECT COUNT(*) FROM orders WHERE uid = 5)",
		"DELETE FROM config WHERE k IN (SELECT status FROM orders WHERE uid = 5)",
	} {
		if _, err := r.Prepare("pay", q); !errors.Is(err, ErrUnsupported) {
			t.Errorf("Prepare(%q): %v, want ErrUnsupported", q, err)
		}
	}
	route(t, r, "UPDATE orders o JOIN config c ON o.status = c.k SET o.amount = 1 WHERE o.uid = 5")
	route(t, r, "DELETE o FROM orders o JOIN config c ON o.status = c.k WHERE o.uid = 5")
}

// TestUserVarRecorded: the Template names a user variable the statement
// reads or assigns.
func TestUserVarRecorded(t *testing.T) {
	r := testRules(t)
	for _, tc := range []struct{ sql, want string }{
		{"SELECT COUNT(*) FROM orders WHERE amount = @q", "@q"},
		{"SELECT @n := uid FROM orders WHERE uid = 5", "@n"},
		{"SELECT COUNT(*) FROM orders WHERE amount = @@max_allowed_packet", ""},
		{"SELECT COUNT(*) FROM orders WHERE uid = ?", ""},
	} {
		tm, err := r.Prepare("pay", tc.sql)
		if err != nil {
			t.Fatalf("Prepare(%q): %v", tc.sql, err)
		}
		if got := tm.UserVar(); got != tc.want {
			t.Errorf("UserVar(%q) = %q, want %q", tc.sql, got, tc.want)
		}
	}
}

// TestSelectIntoOneShard: SELECT ... INTO OUTFILE runs on one shard only.
func TestSelectIntoOneShard(t *testing.T) {
	r := testRules(t)
	route(t, r, "SELECT * FROM orders WHERE uid = 5 INTO OUTFILE '/tmp/x'")
	tm, err := r.Prepare("pay", "SELECT * FROM orders INTO OUTFILE '/tmp/x'")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Route(nil); !errors.Is(err, ErrUnsupported) {
		t.Errorf("SELECT INTO OUTFILE over every shard: %v, want ErrUnsupported", err)
	}
}

// FuzzCheckDefault: no input panics, and a text that holds no rule's name
// as a token is never refused.
func FuzzCheckDefault(f *testing.F) {
	for _, s := range []string{"UPDATE orders SET a = 1 WHERE 'a' SOUNDS LIKE 'a'", "SET @q := (SELECT COUNT(*) FROM orders)",
		"SELECT 1; UPDATE `Config` SET v = 1", "PREPARE s FROM 'SELECT * FROM orders'", "WITH orders AS (SELECT 1) SELECT * FROM orders"} {
		f.Add(s)
	}
	r, err := New(testConfig())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		err := r.CheckDefault("pay", sql, 0)
		if err != nil && r.mayName(sql) == "" {
			t.Errorf("CheckDefault(%q) refused a text naming no rule's table: %v", sql, err)
		}
		if err != nil && !errors.Is(err, ErrUnsupported) {
			t.Errorf("CheckDefault(%q): %v does not wrap ErrUnsupported", sql, err)
		}
	})
}
