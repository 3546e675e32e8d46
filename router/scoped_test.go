package router

import "testing"

func TestScopedRewrite(t *testing.T) {
	v := &ScopedValues{LastInsertID: 7, RowCount: -1, FoundRows: 3, ConnID: 42}
	cases := []struct{ in, want string }{
		{"SELECT LAST_INSERT_ID()+0", "SELECT IF(1,CAST(7 AS UNSIGNED),LAST_INSERT_ID())+0 AS `LAST_INSERT_ID()+0`"},
		{"INSERT INTO c (p, x) VALUES (last_insert_id(), 'LAST_INSERT_ID()')",
			"INSERT INTO c (p, x) VALUES (IF(1,CAST(7 AS UNSIGNED),last_insert_id()), 'LAST_INSERT_ID()')"},
		{"SELECT ROW_COUNT() AS rc, FOUND_ROWS ( /* c */ ) , CONNECTION_ID() FROM t",
			"SELECT IF(1,-1,ROW_COUNT()) AS rc, IF(1,3,FOUND_ROWS ( /* c */ )) AS `FOUND_ROWS ( /* c */ )` , IF(1,CAST(42 AS UNSIGNED),CONNECTION_ID()) AS `CONNECTION_ID()` FROM t"},
		{"SELECT @@identity, @@session.last_insert_id x, @@pseudo_thread_id",
			"SELECT IF(1,CAST(7 AS UNSIGNED),@@identity) AS `@@identity`, IF(1,CAST(7 AS UNSIGNED),@@session.last_insert_id) x, IF(1,CAST(42 AS UNSIGNED),@@pseudo_thread_id) AS `@@pseudo_thread_id`"},
		{"UPDATE t SET a = ROW_COUNT() WHERE id = `row_count`() OR b = db.row_count()",
			"UPDATE t SET a = IF(1,-1,ROW_COUNT()) WHERE id = IF(1,-1,`row_count`()) OR b = db.row_count()"},
		{"SELECT (SELECT FOUND_ROWS()) AS f", "SELECT (SELECT IF(1,3,FOUND_ROWS()) AS `FOUND_ROWS()`) AS f"},
		{"SELECT 1 /*!50000 + ROW_COUNT() */", "SELECT 1 /*!50000 + IF(1,-1,ROW_COUNT()) */ AS `1 /*!50000 + ROW_COUNT() */`"},
	}
	r := New(100)
	for _, c := range cases {
		p := r.Classify(c.in)
		if p.Scoped == nil {
			t.Errorf("%s: no scoped reads found", c.in)
			continue
		}
		got, ok := p.Scoped.Rewrite(nil, []byte(c.in), v)
		if !ok || string(got) != c.want {
			t.Errorf("%s:\n got  %s\n want %s", c.in, got, c.want)
		}
	}
	for _, sql := range []string{"SELECT 1", "SELECT 'ROW_COUNT()'", "SELECT db.connection_id()", "SELECT @row_count"} {
		if p := r.Classify(sql); p.Scoped != nil && p.Scoped.Uses != 0 {
			t.Errorf("%s: reads %v", sql, p.Scoped.Uses)
		}
	}
	p := r.Classify("SELECT LAST_INSERT_ID(5), LAST_INSERT_ID()")
	if p.Scoped == nil || !p.Scoped.SetsLastInsertID || p.Scoped.Uses != ScopedLastInsertID {
		t.Errorf("LAST_INSERT_ID(5): %+v", p.Scoped)
	}
	// Skipped values are left as written; nothing left means no rewrite.
	if _, ok := r.Classify("SELECT ROW_COUNT()+1").Scoped.Rewrite(nil, []byte("SELECT ROW_COUNT()+1"), &ScopedValues{Skip: ScopedRowCount}); ok {
		t.Error("rewrote a skipped read")
	}
}
