package router

import (
	"strings"
	"testing"
)

func TestSessionCommandsClassify(t *testing.T) {
	r := New(100)
	for _, tc := range []struct {
		sql  string
		want LocalFunc
	}{
		{"KILL 5", LocalKill},
		{"kill query 5", LocalKill},
		{"KILL HARD QUERY 5", LocalKill},
		{"KILL SOFT CONNECTION 5", LocalKill},
		{"KILL QUERY ID 5", LocalKill},
		{"KILL USER app", LocalKill},
		{"KILL CONNECTION USER 'app'@'%'", LocalKill},
		{"/* sluice:master */ KILL 5", LocalKill},
		{"/*!50000 KILL 5 */", LocalKill},
		{"/*M! KILL 5 */", LocalKill},
		{"SELECT 1; KILL 5", LocalKill},
		{"SELECT 1;KILL HARD 5", LocalKill},
		{"SELECT * FROM information_schema.PROCESSLIST; KILL 5", LocalKill},
		{"PREPARE s FROM 'KILL 5'", LocalKill},
		{"SHOW PROCESSLIST", LocalShowProcesslist},
		{"show full processlist", LocalShowFullProcesslist},
		{"SELECT * FROM information_schema.PROCESSLIST", LocalProcesslistTable},
		{"SELECT id FROM INFORMATION_SCHEMA.processlist p WHERE p.user = 'x'", LocalProcesslistTable},
		{"SELECT COUNT(*) FROM processlist", LocalProcesslistTable},
		{"SELECT (SELECT COUNT(*) FROM information_schema.processlist) AS n", LocalProcesslistTable},
		{"SELECT 1; SELECT * FROM information_schema.processlist", LocalProcesslistTable},
		{"SELECT * FROM other.processlist", LocalNone},
		{"SELECT 'KILL 5'", LocalNone},
		{"SELECT 1 -- ; KILL 5", LocalNone},
		{"SELECT killed FROM t", LocalNone},
		{"SELECT LAST_INSERT_ID()", LocalLastInsertID},
		{"SHOW EXPLAIN FOR 5", LocalThreadPlan},
		{"show explain format=json for 5", LocalThreadPlan},
		{"SHOW ANALYZE FOR 5", LocalThreadPlan},
		{"EXPLAIN FOR CONNECTION 5", LocalThreadPlan},
		{"EXPLAIN FORMAT=JSON FOR\n CONNECTION 5", LocalThreadPlan},
		{"SELECT 1; SHOW EXPLAIN FOR 5", LocalThreadPlan},
		{"EXPLAIN SELECT * FROM t", LocalNone},
		{"SHOW TABLES", LocalNone},
	} {
		for range 2 { // a miss, then the cached plan
			if got := r.Classify(tc.sql).Local; got != tc.want {
				t.Errorf("%q: Local %d, want %d", tc.sql, got, tc.want)
			}
		}
	}
}

func TestParseKill(t *testing.T) {
	for _, tc := range []struct {
		sql  string
		want Kill
		err  string
	}{
		{sql: "KILL 5", want: Kill{ID: 5, IDKnown: true}},
		{sql: "kill connection 5;", want: Kill{ID: 5, IDKnown: true}},
		{sql: "KILL QUERY 7", want: Kill{Query: true, ID: 7, IDKnown: true}},
		{sql: "KILL HARD QUERY 7", want: Kill{Query: true, ID: 7, IDKnown: true}},
		{sql: "KILL SOFT 7", want: Kill{ID: 7, IDKnown: true}},
		{sql: "KILL QUERY ID 9", want: Kill{Query: true, QueryID: true, ID: 9, IDKnown: true}},
		{sql: "KILL 1.5", want: Kill{ID: 2, IDKnown: true}},
		{sql: "KILL -1", want: Kill{ID: 1<<64 - 1, IDKnown: true}},
		{sql: "KILL 'abc'", want: Kill{ID: 0, IDKnown: true}},
		{sql: "KILL '12x'", want: Kill{ID: 12, IDKnown: true}},
		{sql: "KILL NULL", want: Kill{IDKnown: true}},
		{sql: "KILL (5)", want: Kill{ID: 5, IDKnown: true}},
		{sql: "KILL CONNECTION_ID()", want: Kill{Self: true}},
		{sql: "KILL QUERY connection_id ( )", want: Kill{Query: true, Self: true}},
		{sql: "KILL @id", want: Kill{Expr: "@id"}},
		{sql: "/*!50000 KILL 5 */", want: Kill{ID: 5, IDKnown: true}},
		{sql: "KILL USER app", want: Kill{ByUser: true, User: "app"}},
		{sql: "KILL QUERY USER 'app'@'10.%'", want: Kill{Query: true, ByUser: true, User: "app", Host: "10.%"}},
		{sql: "KILL USER `a``b`", want: Kill{ByUser: true, User: "a`b"}},
		{sql: "KILL USER CURRENT_USER()", want: Kill{ByUser: true, CurrentUser: true}},
		{sql: "KILL", err: "needs a thread id"},
		{sql: "KILL USER 'x", err: "unterminated"},
		{sql: "SELECT 1; KILL 5", err: ErrNotKill.Error()},
		{sql: "PREPARE s FROM 'KILL 5'", err: ErrNotKill.Error()},
	} {
		got, err := ParseKill(tc.sql)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one with %q", tc.sql, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v %v, want %+v", tc.sql, got, err, tc.want)
		}
	}
}

func TestRewriteProcesslist(t *testing.T) {
	const d = "SELECT 1"
	for _, tc := range []struct {
		sql, schema string
		modes       LexModes
		want        string
		ok          bool
	}{
		{"SELECT * FROM information_schema.PROCESSLIST", "", 0, "SELECT * FROM (SELECT 1) AS `PROCESSLIST`", true},
		{"select ID from information_schema.processlist p where p.USER='a\\'b' order by 1", "", 0,
			"select ID from (SELECT 1) p where p.USER='a\\'b' order by 1", true},
		{"SELECT 'a\\b' FROM information_schema.processlist", "", LexNoBackslashEscapes,
			"SELECT 'a\\b' FROM (SELECT 1) AS `processlist`", true},
		{"SELECT 'information_schema.processlist', x.id FROM `information_schema` . `PROCESSLIST` AS x WHERE TIME >= 0", "", 0,
			"SELECT 'information_schema.processlist', x.id FROM (SELECT 1) AS x WHERE TIME >= 0", true},
		{"SELECT (SELECT COUNT(*) FROM information_schema.PROCESSLIST), ID FROM INFORMATION_SCHEMA.PROCESSLIST WHERE ID > 0", "", 0,
			"SELECT (SELECT COUNT(*) FROM (SELECT 1) AS `PROCESSLIST`), ID FROM (SELECT 1) AS `PROCESSLIST` WHERE ID > 0", true},
		{"SELECT * FROM PROCESSLIST", "INFORMATION_SCHEMA", 0, "SELECT * FROM (SELECT 1) AS `PROCESSLIST`", true},
		{"SELECT * FROM PROCESSLIST", "app", 0, "", false},
	} {
		got, ok, err := RewriteProcesslist(tc.sql, tc.modes, tc.schema, d)
		if err != nil || ok != tc.ok || got != tc.want {
			t.Errorf("%q: %q %v %v, want %q %v", tc.sql, got, ok, err, tc.want, tc.ok)
		}
	}
}
