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
		{"SELECT @@`identity` AS i, @@session.`pseudo_thread_id` AS p, @@local.last_insert_id AS l",
			"SELECT IF(1,CAST(7 AS UNSIGNED),@@`identity`) AS i, IF(1,CAST(42 AS UNSIGNED),@@session.`pseudo_thread_id`) AS p, IF(1,CAST(7 AS UNSIGNED),@@local.last_insert_id) AS l"},
		{"SELECT (SELECT FOUND_ROWS()) AS f", "SELECT (SELECT IF(1,3,FOUND_ROWS()) AS `FOUND_ROWS()`) AS f"},
		{"SELECT 1 /*!50000 + ROW_COUNT() */", "SELECT 1 /*!50000 + IF(1,-1,ROW_COUNT()) */ AS `1  + ROW_COUNT()`"},
		{"SELECT LAST_INSERT_ID() -- c\nFROM t", "SELECT IF(1,CAST(7 AS UNSIGNED),LAST_INSERT_ID()) AS `LAST_INSERT_ID()` -- c\nFROM t"},
		{"SELECT ROW_COUNT() /* c */, LAST_INSERT_ID()/* c */+1", "SELECT IF(1,-1,ROW_COUNT()) AS `ROW_COUNT()` /* c */, IF(1,CAST(7 AS UNSIGNED),LAST_INSERT_ID())/* c */+1 AS `LAST_INSERT_ID()/* c */+1`"},
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
	// DDL keeps its text: the server evaluates it later, elsewhere.
	for _, sql := range []string{"CREATE VIEW v AS SELECT LAST_INSERT_ID() AS lid", "CREATE TABLE d (id INT, who BIGINT DEFAULT (CONNECTION_ID()))"} {
		if p := r.Classify(sql); p.Scoped != nil {
			t.Errorf("%s: scoped %+v", sql, p.Scoped)
		}
	}
	// A read the parser cannot see (MariaDB runs /*M! */) makes the text
	// unrewritable, but known to read the value.
	if p := r.Classify("SELECT 1 /*M! + LAST_INSERT_ID() */"); p.Scoped == nil || p.Scoped.Rewritable || p.Scoped.Uses != ScopedLastInsertID {
		t.Errorf("/*M! */: %+v", p.Scoped)
	}
	// Texts that differ in literals share a plan whose reads are found in
	// each text, without allocating.
	a := r.Classify("INSERT INTO c (p, x) VALUES (LAST_INSERT_ID(), 1)")
	b := "INSERT INTO c (p, x) VALUES (LAST_INSERT_ID(), 'two')"
	if p := r.Classify(b); p != a && p.Scoped != a.Scoped || p.Scoped == nil || !p.Scoped.TextRefs {
		t.Errorf("a text with other literals does not share the plan: %+v", p.Scoped)
	}
	var dst []byte
	vals := ScopedValues{LastInsertID: 9}
	bb := []byte(b)
	if n := testing.AllocsPerRun(50, func() { dst, _ = a.Scoped.Rewrite(dst[:0], bb, &vals) }); n != 0 || string(dst) != "INSERT INTO c (p, x) VALUES (IF(1,CAST(9 AS UNSIGNED),LAST_INSERT_ID()), 'two')" {
		t.Errorf("rewrite of a shared plan: %q, %v allocs", dst, n)
	}
	// Skipped values are left as written; nothing left means no rewrite.
	if _, ok := r.Classify("SELECT ROW_COUNT()+1").Scoped.Rewrite(nil, []byte("SELECT ROW_COUNT()+1"), &ScopedValues{Skip: ScopedRowCount}); ok {
		t.Error("rewrote a skipped read")
	}
}

func TestNoTables(t *testing.T) {
	r := New(100)
	for sql, want := range map[string]bool{
		"SELECT 1":                          true,
		"SET @w = 1":                        true,
		"DO 1 + 1":                          true,
		"SELECT @@version, NOW()":           true,
		"SELECT * FROM t":                   false,
		"SELECT (SELECT MAX(a) FROM t)":     false,
		"SET @x = (SELECT COUNT(*) FROM t)": false,
		"UPDATE t SET a = 1":                false,
		"SHOW WARNINGS":                     false,
		"SELECT 1 /*!50000 FROM t */":       false,
	} {
		if got := r.Classify(sql).NoTables; got != want {
			t.Errorf("%s: NoTables %v, want %v", sql, got, want)
		}
	}
}

func TestShowWarningsLimitFollowsPrevious(t *testing.T) {
	r := New(100)
	for _, sql := range []string{"SHOW WARNINGS LIMIT 1", "show errors limit 0, 2", "SHOW WARNINGS"} {
		if p := r.Classify(sql); !p.FollowsPrevious || p.ParseErr != nil || p.Pins != 0 {
			t.Errorf("%s: FollowsPrevious %v, ParseErr %v, Pins %v", sql, p.FollowsPrevious, p.ParseErr, p.Pins)
		}
	}
}
