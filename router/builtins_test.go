package router

import (
	"slices"
	"strings"
	"testing"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// builtinCallCollector gathers the function nodes of a statement. Only FuncCallExpr names
// are looked up in builtinFuncs: aggregate and window calls are their own node types
// (ast.AggregateFuncExpr, ast.WindowFuncExpr), and so are CAST/CONVERT(x, type)
// (ast.FuncCastExpr); they are counted so a test case cannot pass without a function in it.
type builtinCallCollector struct {
	calls  []*ast.FuncCallExpr
	others int
}

func (c *builtinCallCollector) Enter(n ast.Node) (ast.Node, bool) {
	switch n := n.(type) {
	case *ast.FuncCallExpr:
		c.calls = append(c.calls, n)
	case *ast.AggregateFuncExpr, *ast.WindowFuncExpr, *ast.FuncCastExpr:
		c.others++
	}
	return n, false
}

func (c *builtinCallCollector) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// parseBuiltinCalls parses sql with a pooled parser (MariaDB mode, as the router parses)
// and returns its function nodes.
func parseBuiltinCalls(t *testing.T, sql string) *builtinCallCollector {
	t.Helper()
	p := parserPool.Get().(*parser.Parser)
	defer parserPool.Put(p)
	stmts, _, err := p.Parse(sql, "", "")
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	c := &builtinCallCollector{}
	for _, s := range stmts {
		s.Accept(c)
	}
	return c
}

// TestBuiltinFuncCalls parses realistic calls of MariaDB built-ins and checks that every
// FuncCallExpr name the parser reports for them is in builtinFuncs. Each statement here
// runs without a syntax error on MariaDB 10.11 (given a table t (a INT PRIMARY KEY, b INT,
// s VARCHAR(10), FULLTEXT(s)) and a sequence s1).
func TestBuiltinFuncCalls(t *testing.T) {
	calls := []string{
		`SELECT ABS(-1)`,
		`SELECT ACOS(1)`,
		`SELECT ASIN(1)`,
		`SELECT ATAN(1)`,
		`SELECT ATAN(1, 2)`,
		`SELECT ATAN2(1, 2)`,
		`SELECT CEIL(1.5)`,
		`SELECT CEILING(1.5)`,
		`SELECT CONV('a', 16, 2)`,
		`SELECT COS(1)`,
		`SELECT COT(1)`,
		`SELECT CRC32('a')`,
		`SELECT CRC32C('a')`,
		`SELECT DEGREES(1)`,
		`SELECT EXP(1)`,
		`SELECT FLOOR(1.5)`,
		`SELECT LN(2)`,
		`SELECT LOG(2)`,
		`SELECT LOG(2, 8)`,
		`SELECT LOG2(8)`,
		`SELECT LOG10(100)`,
		`SELECT PI()`,
		`SELECT POW(2, 3)`,
		`SELECT POWER(2, 3)`,
		`SELECT RADIANS(90)`,
		`SELECT RAND()`,
		`SELECT RAND(7)`,
		`SELECT ROUND(1.25, 1)`,
		`SELECT SIGN(-3)`,
		`SELECT SIN(1)`,
		`SELECT SQRT(4)`,
		`SELECT TAN(1)`,
		`SELECT TRUNCATE(1.25, 1)`,
		`SELECT ASCII('a')`,
		`SELECT BIN(5)`,
		`SELECT BIT_LENGTH('a')`,
		`SELECT BIT_COUNT(7)`,
		`SELECT CHAR(65)`,
		`SELECT CHAR(65, 66 USING utf8mb4)`,
		`SELECT CHAR_LENGTH('a')`,
		`SELECT CHARACTER_LENGTH('a')`,
		`SELECT CHR(65)`,
		`SELECT CONCAT('a', 'b')`,
		`SELECT CONCAT_WS(',', 'a', 'b')`,
		`SELECT ELT(1, 'a', 'b')`,
		`SELECT EXPORT_SET(5, 'Y', 'N', ',', 4)`,
		`SELECT FIELD('b', 'a', 'b')`,
		`SELECT FIND_IN_SET('b', 'a,b')`,
		`SELECT FORMAT(1234.5, 2)`,
		`SELECT FORMAT(1234.5, 2, 'de_DE')`,
		`SELECT FROM_BASE64('YQ==')`,
		`SELECT TO_BASE64('a')`,
		`SELECT HEX('a')`,
		`SELECT UNHEX('61')`,
		`SELECT INSERT('abc', 1, 1, 'x')`,
		`SELECT INSTR('abc', 'b')`,
		`SELECT LCASE('A')`,
		`SELECT LOWER('A')`,
		`SELECT UCASE('a')`,
		`SELECT UPPER('a')`,
		`SELECT LEFT('abc', 1)`,
		`SELECT RIGHT('abc', 1)`,
		`SELECT LENGTH('abc')`,
		`SELECT LENGTHB('abc')`,
		`SELECT OCTET_LENGTH('abc')`,
		`SELECT LOCATE('b', 'abc')`,
		`SELECT LOCATE('b', 'abc', 2)`,
		`SELECT LPAD('a', 3, '-')`,
		`SELECT RPAD('a', 3, '-')`,
		`SELECT LTRIM(' a')`,
		`SELECT RTRIM('a ')`,
		`SELECT TRIM(' a ')`,
		`SELECT TRIM(LEADING 'x' FROM 'xxa')`,
		`SELECT TRIM(TRAILING 'x' FROM 'axx')`,
		`SELECT TRIM(BOTH 'x' FROM 'xax')`,
		`SELECT TRIM(BOTH FROM ' a ')`,
		`SELECT MAKE_SET(1, 'a', 'b')`,
		`SELECT MID('abc', 2, 1)`,
		`SELECT SUBSTR('abc', 2)`,
		`SELECT SUBSTRING('abc', 2, 1)`,
		`SELECT SUBSTRING('abc' FROM 2)`,
		`SELECT SUBSTRING('abc' FROM 2 FOR 1)`,
		`SELECT SUBSTRING_INDEX('a.b.c', '.', 2)`,
		`SELECT OCT(8)`,
		`SELECT ORD('a')`,
		`SELECT POSITION('b' IN 'abc')`,
		`SELECT QUOTE('a')`,
		`SELECT REPEAT('a', 3)`,
		`SELECT REPLACE('abc', 'b', 'x')`,
		`SELECT REVERSE('abc')`,
		`SELECT SOUNDEX('abc')`,
		`SELECT SPACE(3)`,
		`SELECT STRCMP('a', 'b')`,
		`SELECT CONVERT('a' USING utf8mb4)`,
		`SELECT CHARSET('a')`,
		`SELECT COLLATION('a')`,
		`SELECT COERCIBILITY('a')`,
		`SELECT WEIGHT_STRING('a')`,
		`SELECT SFORMAT('{} {}', 1, 2)`,
		`SELECT NATURAL_SORT_KEY('a10')`,
		`SELECT REGEXP_INSTR('abc', 'b')`,
		`SELECT REGEXP_REPLACE('abc', 'b', 'x')`,
		`SELECT REGEXP_SUBSTR('abc', 'b+')`,
		`SELECT ADDDATE('2020-01-01', INTERVAL 1 DAY)`,
		`SELECT ADDDATE('2020-01-01', 3)`,
		`SELECT ADDTIME('10:00:00', '01:00:00')`,
		`SELECT ADD_MONTHS('2020-01-01', 2)`,
		`SELECT CONVERT_TZ('2020-01-01 00:00:00', '+00:00', '+01:00')`,
		`SELECT CURDATE()`,
		`SELECT CURRENT_DATE`,
		`SELECT CURRENT_DATE()`,
		`SELECT CURTIME()`,
		`SELECT CURTIME(3)`,
		`SELECT CURRENT_TIME`,
		`SELECT CURRENT_TIME(3)`,
		`SELECT CURRENT_TIMESTAMP`,
		`SELECT CURRENT_TIMESTAMP(6)`,
		`SELECT LOCALTIME`,
		`SELECT LOCALTIME()`,
		`SELECT LOCALTIMESTAMP`,
		`SELECT LOCALTIMESTAMP(3)`,
		`SELECT NOW()`,
		`SELECT NOW(6)`,
		`SELECT SYSDATE()`,
		`SELECT SYSDATE(3)`,
		`SELECT UTC_DATE`,
		`SELECT UTC_DATE()`,
		`SELECT UTC_TIME()`,
		`SELECT UTC_TIME`,
		`SELECT UTC_TIMESTAMP()`,
		`SELECT UTC_TIMESTAMP`,
		`SELECT DATE('2020-01-01 10:00:00')`,
		`SELECT DATE_ADD('2020-01-01', INTERVAL 1 DAY)`,
		`SELECT DATE_ADD('2020-01-01', INTERVAL '1:1' HOUR_MINUTE)`,
		`SELECT DATE_SUB('2020-01-01', INTERVAL 1 MONTH)`,
		`SELECT '2020-01-01' + INTERVAL 1 DAY`,
		`SELECT INTERVAL 1 DAY + '2020-01-01'`,
		`SELECT '2020-01-01' - INTERVAL 1 DAY`,
		`SELECT DATE_FORMAT('2020-01-01', '%Y')`,
		`SELECT DATEDIFF('2020-01-02', '2020-01-01')`,
		`SELECT DAY('2020-01-01')`,
		`SELECT DAYNAME('2020-01-01')`,
		`SELECT DAYOFMONTH('2020-01-01')`,
		`SELECT DAYOFWEEK('2020-01-01')`,
		`SELECT DAYOFYEAR('2020-01-01')`,
		`SELECT EXTRACT(YEAR FROM '2020-01-01')`,
		`SELECT EXTRACT(HOUR_MINUTE FROM '2020-01-01 10:20:00')`,
		`SELECT FROM_DAYS(737000)`,
		`SELECT FROM_UNIXTIME(0)`,
		`SELECT FROM_UNIXTIME(0, '%Y')`,
		`SELECT GET_FORMAT(DATE, 'EUR')`,
		`SELECT HOUR('10:00:00')`,
		`SELECT LAST_DAY('2020-01-01')`,
		`SELECT MAKEDATE(2020, 1)`,
		`SELECT MAKETIME(10, 0, 0)`,
		`SELECT MICROSECOND('10:00:00.5')`,
		`SELECT MINUTE('10:00:00')`,
		`SELECT MONTH('2020-01-01')`,
		`SELECT MONTHNAME('2020-01-01')`,
		`SELECT PERIOD_ADD(202001, 1)`,
		`SELECT PERIOD_DIFF(202002, 202001)`,
		`SELECT QUARTER('2020-01-01')`,
		`SELECT SECOND('10:00:00')`,
		`SELECT SEC_TO_TIME(60)`,
		`SELECT STR_TO_DATE('01/02/2020', '%m/%d/%Y')`,
		`SELECT SUBDATE('2020-01-01', INTERVAL 1 DAY)`,
		`SELECT SUBDATE('2020-01-01', 1)`,
		`SELECT SUBTIME('10:00:00', '01:00:00')`,
		`SELECT TIME('10:00:00')`,
		`SELECT TIME_FORMAT('10:00:00', '%H')`,
		`SELECT TIME_TO_SEC('10:00:00')`,
		`SELECT TIMEDIFF('10:00:00', '09:00:00')`,
		`SELECT TIMESTAMP('2020-01-01')`,
		`SELECT TIMESTAMP('2020-01-01', '10:00:00')`,
		`SELECT TIMESTAMPADD(DAY, 1, '2020-01-01')`,
		`SELECT TIMESTAMPDIFF(DAY, '2020-01-01', '2020-01-03')`,
		`SELECT TO_DAYS('2020-01-01')`,
		`SELECT TO_SECONDS('2020-01-01')`,
		`SELECT TO_CHAR('2020-01-01', 'YYYY')`,
		`SELECT UNIX_TIMESTAMP()`,
		`SELECT UNIX_TIMESTAMP('2020-01-01')`,
		`SELECT WEEK('2020-01-01')`,
		`SELECT WEEK('2020-01-01', 1)`,
		`SELECT WEEKDAY('2020-01-01')`,
		`SELECT WEEKOFYEAR('2020-01-01')`,
		`SELECT YEAR('2020-01-01')`,
		`SELECT YEARWEEK('2020-01-01')`,
		`SELECT DATE '2020-01-01'`,
		`SELECT TIME '10:00:00'`,
		`SELECT TIMESTAMP '2020-01-01 10:00:00'`,
		`SELECT {d '2020-01-01'}`,
		`SELECT {t '10:00:00'}`,
		`SELECT {ts '2020-01-01 10:00:00'}`,
		`SELECT IF(1, 'a', 'b')`,
		`SELECT IFNULL(NULL, 1)`,
		`SELECT NULLIF(1, 1)`,
		`SELECT COALESCE(NULL, 1)`,
		`SELECT NVL(NULL, 1)`,
		`SELECT NVL2(NULL, 1, 2)`,
		`SELECT ISNULL(NULL)`,
		`SELECT GREATEST(1, 2)`,
		`SELECT LEAST(1, 2)`,
		`SELECT INTERVAL(5, 1, 10)`,
		`SELECT DECODE('a', 'b')`,
		`SELECT JSON_ARRAY(1, 2)`,
		`SELECT JSON_ARRAY_APPEND('[1]', '$', 2)`,
		`SELECT JSON_ARRAY_INSERT('[1]', '$[0]', 2)`,
		`SELECT JSON_COMPACT('{"a": 1}')`,
		`SELECT JSON_CONTAINS('[1]', '1')`,
		`SELECT JSON_CONTAINS_PATH('{"a": 1}', 'one', '$.a')`,
		`SELECT JSON_DEPTH('[1]')`,
		`SELECT JSON_DETAILED('[1]')`,
		`SELECT JSON_PRETTY('[1]')`,
		`SELECT JSON_LOOSE('[1]')`,
		`SELECT JSON_EQUALS('[1]', '[1]')`,
		`SELECT JSON_EXISTS('{"a": 1}', '$.a')`,
		`SELECT JSON_EXTRACT('{"a": 1}', '$.a')`,
		`SELECT JSON_INSERT('{}', '$.a', 1)`,
		`SELECT JSON_KEYS('{"a": 1}')`,
		`SELECT JSON_LENGTH('[1]')`,
		`SELECT JSON_MERGE('[1]', '[2]')`,
		`SELECT JSON_MERGE_PATCH('{}', '{"a": 1}')`,
		`SELECT JSON_MERGE_PRESERVE('[1]', '[2]')`,
		`SELECT JSON_NORMALIZE('{"a": 1}')`,
		`SELECT JSON_OBJECT('a', 1)`,
		`SELECT JSON_OVERLAPS('[1]', '[1]')`,
		`SELECT JSON_QUERY('{"a": [1]}', '$.a')`,
		`SELECT JSON_QUOTE('a')`,
		`SELECT JSON_REMOVE('{"a": 1}', '$.a')`,
		`SELECT JSON_REPLACE('{"a": 1}', '$.a', 2)`,
		`SELECT JSON_SEARCH('["a"]', 'one', 'a')`,
		`SELECT JSON_SET('{}', '$.a', 1)`,
		`SELECT JSON_TYPE('[1]')`,
		`SELECT JSON_UNQUOTE('"a"')`,
		`SELECT JSON_VALID('[1]')`,
		`SELECT JSON_VALUE('{"a": 1}', '$.a')`,
		`SELECT JSON_ARRAYAGG(a) FROM t`,
		`SELECT JSON_OBJECTAGG(s, a) FROM t`,
		`SELECT COUNT(*) FROM t`,
		`SELECT COUNT(DISTINCT a) FROM t`,
		`SELECT SUM(a) FROM t`,
		`SELECT AVG(a) FROM t`,
		`SELECT MIN(a) FROM t`,
		`SELECT MAX(a) FROM t`,
		`SELECT BIT_AND(a) FROM t`,
		`SELECT BIT_OR(a) FROM t`,
		`SELECT BIT_XOR(a) FROM t`,
		`SELECT STD(a) FROM t`,
		`SELECT STDDEV(a) FROM t`,
		`SELECT STDDEV_POP(a) FROM t`,
		`SELECT STDDEV_SAMP(a) FROM t`,
		`SELECT VARIANCE(a) FROM t`,
		`SELECT VAR_POP(a) FROM t`,
		`SELECT VAR_SAMP(a) FROM t`,
		`SELECT GROUP_CONCAT(s) FROM t`,
		`SELECT GROUP_CONCAT(DISTINCT s ORDER BY s SEPARATOR ';') FROM t`,
		`SELECT ROW_NUMBER() OVER (ORDER BY a) FROM t`,
		`SELECT RANK() OVER (ORDER BY a) FROM t`,
		`SELECT DENSE_RANK() OVER (ORDER BY a) FROM t`,
		`SELECT CUME_DIST() OVER (ORDER BY a) FROM t`,
		`SELECT PERCENT_RANK() OVER (ORDER BY a) FROM t`,
		`SELECT NTILE(2) OVER (ORDER BY a) FROM t`,
		`SELECT LAG(a) OVER (ORDER BY a) FROM t`,
		`SELECT LEAD(a) OVER (ORDER BY a) FROM t`,
		`SELECT FIRST_VALUE(a) OVER (ORDER BY a) FROM t`,
		`SELECT LAST_VALUE(a) OVER (ORDER BY a) FROM t`,
		`SELECT NTH_VALUE(a, 2) OVER (ORDER BY a) FROM t`,
		`SELECT SUM(a) OVER (PARTITION BY b) FROM t`,
		`SELECT CURRENT_USER`,
		`SELECT CURRENT_USER()`,
		`SELECT CURRENT_ROLE`,
		`SELECT CURRENT_ROLE()`,
		`SELECT DATABASE()`,
		`SELECT SCHEMA()`,
		`SELECT USER()`,
		`SELECT SESSION_USER()`,
		`SELECT SYSTEM_USER()`,
		`SELECT VERSION()`,
		`SELECT CONNECTION_ID()`,
		`SELECT FOUND_ROWS()`,
		`SELECT ROW_COUNT()`,
		`SELECT LAST_INSERT_ID()`,
		`SELECT LAST_INSERT_ID(5)`,
		`SELECT BENCHMARK(1, 1)`,
		`SELECT SLEEP(0)`,
		`SELECT GET_LOCK('l', 0)`,
		`SELECT RELEASE_LOCK('l')`,
		`SELECT RELEASE_ALL_LOCKS()`,
		`SELECT IS_FREE_LOCK('l')`,
		`SELECT IS_USED_LOCK('l')`,
		`SELECT ROWNUM()`,
		`SELECT UUID()`,
		`SELECT UUID_SHORT()`,
		`SELECT SYS_GUID()`,
		`SELECT INET_ATON('127.0.0.1')`,
		`SELECT INET_NTOA(1)`,
		`SELECT INET6_ATON('::1')`,
		`SELECT INET6_NTOA(INET6_ATON('::1'))`,
		`SELECT IS_IPV4('1.2.3.4')`,
		`SELECT IS_IPV6('::1')`,
		`SELECT IS_IPV4_COMPAT(INET6_ATON('::1.2.3.4'))`,
		`SELECT IS_IPV4_MAPPED(INET6_ATON('::ffff:1.2.3.4'))`,
		`SELECT MD5('a')`,
		`SELECT SHA('a')`,
		`SELECT SHA1('a')`,
		`SELECT SHA2('a', 256)`,
		`SELECT AES_ENCRYPT('a', 'k')`,
		`SELECT AES_DECRYPT(AES_ENCRYPT('a', 'k'), 'k')`,
		`SELECT COMPRESS('a')`,
		`SELECT UNCOMPRESS(COMPRESS('a'))`,
		`SELECT UNCOMPRESSED_LENGTH(COMPRESS('a'))`,
		`SELECT RANDOM_BYTES(4)`,
		`SELECT PASSWORD('a')`,
		`SELECT OLD_PASSWORD('a')`,
		`SELECT ENCRYPT('a')`,
		`SELECT ENCODE('a', 'k')`,
		`SELECT DES_ENCRYPT('a')`,
		`SELECT LOAD_FILE('/nonexistent')`,
		`SELECT NAME_CONST('n', 1)`,
		`SELECT BINLOG_GTID_POS('b', 4)`,
		`SELECT MASTER_POS_WAIT('b', 4, 0)`,
		`SELECT MASTER_GTID_WAIT('0-1-1', 0)`,
		`SELECT EXTRACTVALUE('<a>x</a>', '/a')`,
		`SELECT UPDATEXML('<a>x</a>', '/a', '<b/>')`,
		`SELECT COLUMN_CREATE('a', 1)`,
		`SELECT COLUMN_JSON(COLUMN_CREATE('a', 1))`,
		`SELECT COLUMN_LIST(COLUMN_CREATE('a', 1))`,
		`SELECT COLUMN_EXISTS(COLUMN_CREATE('a', 1), 'a')`,
		`SELECT COLUMN_CHECK(COLUMN_CREATE('a', 1))`,
		`SELECT COLUMN_ADD(COLUMN_CREATE('a', 1), 'b', 2)`,
		`SELECT COLUMN_DELETE(COLUMN_CREATE('a', 1), 'a')`,
		`SELECT POINT(1, 2)`,
		`SELECT LINESTRING(POINT(1, 2), POINT(3, 4))`,
		`SELECT POLYGON(LINESTRING(POINT(0, 0), POINT(1, 0), POINT(1, 1), POINT(0, 0)))`,
		`SELECT MULTIPOINT(POINT(1, 2))`,
		`SELECT MULTILINESTRING(LINESTRING(POINT(1, 2), POINT(3, 4)))`,
		`SELECT MULTIPOLYGON(POLYGON(LINESTRING(POINT(0, 0), POINT(1, 0), POINT(1, 1), POINT(0, 0))))`,
		`SELECT GEOMETRYCOLLECTION(POINT(1, 2))`,
		`SELECT ST_ASTEXT(ST_GEOMFROMTEXT('POINT(1 2)'))`,
		`SELECT ST_ASWKT(POINT(1, 2))`,
		`SELECT ST_ASBINARY(POINT(1, 2))`,
		`SELECT ST_ASGEOJSON(POINT(1, 2))`,
		`SELECT ST_GEOMFROMGEOJSON('{"type": "Point", "coordinates": [1, 2]}')`,
		`SELECT ST_X(POINT(1, 2))`,
		`SELECT ST_Y(POINT(1, 2))`,
		`SELECT ST_DISTANCE(POINT(1, 2), POINT(3, 4))`,
		`SELECT ST_DISTANCE_SPHERE(POINT(1, 2), POINT(3, 4))`,
		`SELECT ST_CONTAINS(POINT(1, 2), POINT(1, 2))`,
		`SELECT ST_INTERSECTS(POINT(1, 2), POINT(1, 2))`,
		`SELECT ST_SRID(POINT(1, 2))`,
		`SELECT ST_BUFFER(POINT(1, 2), 1)`,
		`SELECT ST_UNION(POINT(1, 2), POINT(3, 4))`,
		`SELECT ST_RELATE(POINT(1, 2), POINT(1, 2), 'T********')`,
		`SELECT MBRCONTAINS(POINT(1, 2), POINT(1, 2))`,
		`SELECT ASTEXT(POINT(1, 2))`,
		`SELECT X(POINT(1, 2))`,
		`SELECT GEOMFROMTEXT('POINT(1 2)')`,
		`SELECT NEXTVAL(s1)`,
		`SELECT NEXT VALUE FOR s1`,
		`SELECT LASTVAL(s1)`,
		`SELECT SETVAL(s1, 10)`,
		`SELECT WSREP_LAST_SEEN_GTID()`,
		`SELECT DECODE_HISTOGRAM('SINGLE_PREC_HB', '00')`,
		`SELECT TRIM_ORACLE(' a ')`,
		`SELECT LTRIM_ORACLE(' a ')`,
		`SELECT RTRIM_ORACLE(' a ')`,
		`SELECT LPAD_ORACLE('a', 3)`,
		`SELECT RPAD_ORACLE('a', 3)`,
		`SELECT SUBSTR_ORACLE('abc', 1)`,
		`SELECT REPLACE_ORACLE('abc', 'b', 'x')`,
		`SELECT CONCAT_OPERATOR_ORACLE('a', 'b')`,
		`SELECT DECODE_ORACLE(1, 1, 'a')`,
		`SELECT NOW() + INTERVAL 1 HOUR`,
		// Other statements and spellings.
		`SELECT CONCAT ('a')`,
		"SELECT `concat`('a')",
		`SELECT substr('abc' FROM 1)`,
		`SELECT WEIGHT_STRING('a' AS CHAR(4))`,
		`SELECT a FROM t WHERE b > UNIX_TIMESTAMP(CURDATE() - INTERVAL 7 DAY)`,
		`SELECT JSON_OBJECTAGG(s, a) OVER () FROM t`,
		`SELECT COUNT(*) OVER () FROM t`,
		`UPDATE t SET b = ABS(-1) WHERE a = LAST_INSERT_ID()`,
		`CREATE TABLE t2 (a TIMESTAMP DEFAULT NOW() ON UPDATE LOCALTIMESTAMP(3), d DATE DEFAULT CURDATE())`,
	}
	seen := map[string]bool{}
	for _, sql := range calls {
		if seen[sql] {
			t.Errorf("duplicate case %s", sql)
		}
		seen[sql] = true
		c := parseBuiltinCalls(t, sql)
		if len(c.calls)+c.others == 0 {
			t.Errorf("%s: no function call in the AST", sql)
		}
		for _, f := range c.calls {
			if f.Schema.L != "" {
				t.Errorf("%s: %s.%s has a schema", sql, f.Schema.O, f.FnName.O)
			}
			if !isBuiltinFunc(f.FnName.L) {
				t.Errorf("%s: the parser reports %q, which is not in builtinFuncs", sql, f.FnName.L)
			}
		}
	}
	if len(seen) < 150 {
		t.Errorf("only %d cases", len(seen))
	}
}

// TestBuiltinFuncSyntaxWithoutCall lists MariaDB built-in syntaxes that produce no
// FuncCallExpr at all, so they need no name in builtinFuncs.
func TestBuiltinFuncSyntaxWithoutCall(t *testing.T) {
	for _, sql := range []string{
		`SELECT MOD(5, 2)`,
		`SELECT 5 MOD 2`,
		`SELECT CAST('1' AS SIGNED)`,
		`SELECT CONVERT('1', SIGNED)`,
		`SELECT BINARY 'a'`,
		`SELECT 'abc' REGEXP 'b'`,
		`SELECT 'abc' LIKE 'a%'`,
		`SELECT CASE WHEN 1 THEN 2 END`,
		`SELECT DEFAULT(a) FROM t`,
		`SELECT MATCH(s) AGAINST ('x') FROM t`,
		`SELECT EXISTS (SELECT 1)`,
		`INSERT INTO t (a, b) VALUES (1, 2) ON DUPLICATE KEY UPDATE b = VALUES(b)`,
	} {
		if c := parseBuiltinCalls(t, sql); len(c.calls) != 0 {
			t.Errorf("%s: FuncCallExpr %q", sql, c.calls[0].FnName.L)
		}
	}
}

// TestBuiltinFuncNotStored checks that names of stored functions, and of functions only
// TiDB or MySQL has, are not built-in, and that a schema-qualified call keeps its schema
// so callers can treat it as a stored function whatever its name.
func TestBuiltinFuncNotStored(t *testing.T) {
	for _, tc := range []struct{ sql, name string }{
		{`SELECT f_ins(1)`, "f_ins"},
		{`SELECT my_func()`, "my_func"},
		{`SELECT a FROM t WHERE b = My_Func(a)`, "my_func"},
		{`SELECT tidb_version()`, "tidb_version"},
		{`SELECT bin_to_uuid(a) FROM t`, "bin_to_uuid"},
		{`SELECT regexp_like('a', 'a')`, "regexp_like"},
		{`SELECT any_value(a) FROM t`, "any_value"},
		{`SELECT json_schema_valid('{}', '{}')`, "json_schema_valid"},
		// MEMBER OF is MySQL syntax; MariaDB 10.11 rejects it.
		{`SELECT 1 MEMBER OF ('[1]')`, "json_memberof"},
	} {
		c := parseBuiltinCalls(t, tc.sql)
		found := false
		for _, f := range c.calls {
			if f.FnName.L == tc.name {
				found = true
				if isBuiltinFunc(f.FnName.L) {
					t.Errorf("%s: %q is in builtinFuncs", tc.sql, tc.name)
				}
			}
		}
		if !found {
			t.Errorf("%s: no call of %q in the AST", tc.sql, tc.name)
		}
	}
	for _, sql := range []string{"SELECT db.concat('a')", "SELECT `db`.`now`()", "SELECT db.f_ins(1)"} {
		c := parseBuiltinCalls(t, sql)
		if len(c.calls) != 1 {
			t.Fatalf("%s: %d calls", sql, len(c.calls))
		}
		if f := c.calls[0]; f.Schema.L != "db" {
			t.Errorf("%s: schema %q, want db", sql, f.Schema.L)
		}
	}
}

// TestBuiltinFuncNames checks the set's spelling and the exported sorted copy.
func TestBuiltinFuncNames(t *testing.T) {
	names := BuiltinFuncNames()
	if len(names) != len(builtinFuncs) || !slices.IsSorted(names) {
		t.Fatalf("BuiltinFuncNames: %d names, sorted %v; builtinFuncs has %d",
			len(names), slices.IsSorted(names), len(builtinFuncs))
	}
	for _, n := range names {
		if n != strings.ToLower(n) || strings.TrimSpace(n) != n || n == "" {
			t.Errorf("%q is not a trimmed lower-case name", n)
		}
		if !isBuiltinFunc(n) {
			t.Errorf("%q missing from builtinFuncs", n)
		}
	}
	names[0] = "changed"
	if isBuiltinFunc("changed") || BuiltinFuncNames()[0] == "changed" {
		t.Error("BuiltinFuncNames does not return a copy")
	}
}
