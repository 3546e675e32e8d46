package dataplane

import (
	"testing"

	"github.com/sluice-proxy/sluice/router"
)

// TestCacheablePlan: which statements the result cache may store, by
// their plan alone; when in doubt, none.
func TestCacheablePlan(t *testing.T) {
	r := router.New(100)
	for _, tc := range []struct {
		sql  string
		want bool
	}{
		{"SELECT COUNT(*) FROM t", true},
		{"SELECT v FROM db1.t WHERE id = 5", true},
		{"SELECT a FROM t JOIN u ON t.id = u.id WHERE x IN (SELECT y FROM w)", true},
		{"WITH c AS (SELECT a FROM t) SELECT * FROM c", true},
		{"SELECT now_col, `now` FROM t", true},
		{"SELECT 1", false},
		{"SELECT NOW() FROM t", false},
		{"SELECT now () FROM t", false},
		{"SELECT CURRENT_TIMESTAMP FROM t", false},
		{"SELECT a FROM t WHERE d < CURDATE()", false},
		{"SELECT RAND() FROM t", false},
		{"SELECT UUID() FROM t", false},
		{"SELECT UUID_SHORT() FROM t", false},
		{"SELECT CONNECTION_ID() FROM t", false},
		{"SELECT CURRENT_USER() FROM t", false},
		{"SELECT USER() FROM t", false},
		{"SELECT @x FROM t", false},
		{"SELECT @@sql_mode FROM t", false},
		{"SELECT NEXT VALUE FOR s", false},
		{"SELECT NEXTVAL(s)", false},
		{"SELECT a FROM t FOR UPDATE", false},
		{"SELECT a FROM t LOCK IN SHARE MODE", false},
		{"SELECT SQL_CALC_FOUND_ROWS a FROM t", false},
		{"SELECT a INTO @x FROM t", false},
		{"SELECT f(a) FROM t", false},
		{"SELECT a FROM t; SELECT b FROM u", false},
		{"SELECT LAST_INSERT_ID() FROM t", false},
		{"SELECT FOUND_ROWS() FROM t", false},
		{"SELECT GET_LOCK('x', 1) FROM t", false},
		{"SELECT SLEEP(1) FROM t", false},
		{"SELECT LOAD_FILE('/etc/passwd') FROM t", false},
		{"/* sluice:master */ SELECT a FROM t", false},
		{"SHOW TABLES", false},
		{"INSERT INTO t VALUES (1)", false},
		{"SELECT a FROM t WHERE", false},
	} {
		if got := cacheablePlan(r.Classify(tc.sql)); got != tc.want {
			t.Errorf("%s: cacheable %v, want %v", tc.sql, got, tc.want)
		}
	}
}

// TestMayWrite: what begins a write on the cache's counters.
func TestMayWrite(t *testing.T) {
	r := router.New(100)
	for _, tc := range []struct {
		sql  string
		want bool
	}{
		{"SELECT a FROM t", false},
		{"INSERT INTO t VALUES (1)", true},
		{"DELETE FROM t", true},
		{"ALTER TABLE t ADD c INT", true},
		{"SELECT f(a) FROM t", true}, // a stored function may write
		{"SET @x = f()", true},
		{"CALL p()", true},
		{"BEGIN", false},
		{"USE db", false},
		{"SET NAMES utf8mb4", false},
	} {
		if got := mayWrite(r.Classify(tc.sql), false); got != tc.want {
			t.Errorf("%s: mayWrite %v, want %v", tc.sql, got, tc.want)
		}
	}
}
