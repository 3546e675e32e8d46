package router

import (
	"slices"
	"strings"
	"testing"
)

// These tests cover the router's part in keeping writes off replicas: text
// the TiDB lexer may read differently from MariaDB's, stored functions,
// sql_mode sensitivity, and statements no hint may send to a replica.

// TestTiDBCommentsAreNotCode: "/*T!" is statement text for the TiDB lexer and
// a plain comment for MariaDB, so the parser's view of such a text cannot be
// trusted: it goes to the master, and nothing is tracked from it.
func TestTiDBCommentsAreNotCode(t *testing.T) {
	for _, sql := range []string{
		`/*T! SELECT 'x */ INSERT INTO w (tag) VALUES ("x") /*' */`,
		`/*T! SELECT 'x */ CREATE TABLE t2 (a INT) /*' */`,
		`/*T! SELECT 'x */ SELECT NEXTVAL(s) /*' */`,
		`SELECT 1 /*T![clustered_index] , NEXTVAL(s) */`,
		`/* sluice:replica */ /*T! SELECT 'x */ SELECT NEXTVAL(s) /*' */`,
		`/*T! SET @x = 1, */ SET SESSION sql_mode = ''`,
		`/*T! USE a */ SELECT 1`,
	} {
		for _, r := range []*Router{New(0), New(100)} {
			for range 2 {
				p := r.Classify(sql)
				if p.Target != TargetMaster || p.Kind != KindWrite || p.Pins&PinUntracked == 0 || p.Vars != nil || p.Schema != "" {
					t.Errorf("Classify(%q) = kind %v target %v pins %b vars %v schema %q; want a master write, untracked",
						sql, p.Kind, p.Target, p.Pins, p.Vars, p.Schema)
				}
			}
		}
	}
}

// TestLexerHazards: a byte outside literals and comments that the two lexers
// may read differently sends the statement to the master, whatever the hint;
// the same bytes inside literals and comments do not.
func TestLexerHazards(t *testing.T) {
	r := New(100)
	for _, sql := range []string{
		"SELECT 1 --\x85\x40, NEXTVAL(s) FROM (SELECT 1 AS \x85\x40) x",
		"SELECT 1 --\xa0 , NEXTVAL(s)",
		"SELECT 1\x85, 2",
		"SELECT 1 AS caf\xc3\xa9",
		"SELECT 1\x00",
		"SELECT 1 \x1c",
		"/* sluice:replica */ SELECT @x --\x85 , NEXTVAL(s)",
		"SELECT /*!50000 \x85 */ 1",
		// Under ANSI_QUOTES the double-quoted part is an identifier, in
		// which a backslash escapes nothing: the byte after it is code.
		"SELECT \"a\\\" , 'b\x85' \x85",
	} {
		p := r.Classify(sql)
		if p.Target != TargetMaster || p.Kind != KindWrite || p.Pins&PinUntracked == 0 {
			t.Errorf("Classify(%q) = kind %v target %v pins %b; want a master write, untracked", sql, p.Kind, p.Target, p.Pins)
		}
	}
	for _, sql := range []string{
		"SELECT 'caf\xc3\xa9', `caf\xc3\xa9` FROM t -- caf\xc3\xa9",
		"SELECT 1 /* \x85 */",
		"SELECT \"\x85\" # \x85\n",
		"SELECT 1\t\n\v\f\r",
	} {
		p := r.Classify(sql)
		if p.Kind != KindRead || p.Target != TargetReplica {
			t.Errorf("Classify(%q) = kind %v target %v; want a replica read", sql, p.Kind, p.Target)
		}
	}
	if p := r.Classify("SELECT 'caf\xc3\xa9'"); !p.NonASCII {
		t.Error("a text with a non-ASCII literal is not marked NonASCII")
	}
	if p := r.Classify("SELECT 'cafe'"); p.NonASCII {
		t.Error("an ASCII text is marked NonASCII")
	}
}

// TestNonASCIIDigestPlans: texts that differ only in literals share their
// digest's plan, yet NonASCII follows each text's own bytes.
func TestNonASCIIDigestPlans(t *testing.T) {
	r := New(100)
	for i, sql := range []string{"SELECT * FROM t WHERE n = 'a'", "SELECT * FROM t WHERE n = '\xc3\xa9'", "SELECT * FROM t WHERE n = 'b'", "SELECT * FROM t WHERE n = '\xe4\xb8\xad'"} {
		want := i%2 == 1
		if p := r.Classify(sql); p.NonASCII != want || p.Target != TargetReplica {
			t.Errorf("Classify(%q): NonASCII %v target %v, want NonASCII %v on a replica", sql, p.NonASCII, p.Target, want)
		}
	}
}

// TestStoredFunctions: calls of functions that are not MariaDB built-ins are
// listed for the proxy's catalog check, qualified or not; built-ins are not.
func TestStoredFunctions(t *testing.T) {
	r := New(100)
	cases := []struct {
		sql  string
		want []FuncRef
	}{
		{"SELECT f_ins('x')", []FuncRef{{Name: "f_ins"}}},
		{"SELECT F_Ins('x'), f_ins('y')", []FuncRef{{Name: "f_ins"}}},
		{"SELECT * FROM w WHERE f_ins('y') = 1", []FuncRef{{Name: "f_ins"}}},
		{"SELECT Shop.price(3) + other.tax()", []FuncRef{{Schema: "Shop", Name: "price"}, {Schema: "other", Name: "tax"}}},
		{"SELECT db.concat('a')", []FuncRef{{Schema: "db", Name: "concat"}}},
		{"/* sluice:replica */ SELECT f(1) FROM t", []FuncRef{{Name: "f"}}},
		{"SELECT * FROM t WHERE id IN (SELECT g(id) FROM u)", []FuncRef{{Name: "g"}}},
		{"EXPLAIN ANALYZE SELECT f(1)", []FuncRef{{Name: "f"}}},
		{"SELECT CONCAT('a', 'b'), NOW(), COUNT(*), IFNULL(a, 1), JSON_EXTRACT(j, '$.a') FROM t", nil},
		// A keyword function's name in backquotes calls a stored function.
		// A keyword function's name in quotes, or with a space or comment
		// before "(", calls a stored function of that name if there is one.
		{"SELECT `now`(), `Trim` ('a'), `db`.`user`(), '`x`(' FROM `t`", []FuncRef{{Schema: "db", Name: "user"}, {Name: "now", Maybe: true}, {Name: "trim", Maybe: true}}},
		{"SELECT mid ('abc', 1, 1), COUNT /**/ (a), NOW() FROM t", []FuncRef{{Name: "mid", Maybe: true}, {Name: "count", Maybe: true}}},
		// Names with an underscore too (they were lower-cased to 0x7f).
		{"SELECT session_user (), json_arrayagg (a) FROM t", []FuncRef{{Name: "session_user", Maybe: true}, {Name: "json_arrayagg", Maybe: true}}},
		{"SELECT `a`, COUNT(`b`) FROM `t` WHERE `c` IN (1) AND d IN (SELECT 1)", nil},
		{"SELECT CONCAT ('a'), IFNULL (a, 1) FROM t", nil},
		// TiDB's own aggregates are no MariaDB built-ins.
		{"SELECT approx_count_distinct(a) FROM t", []FuncRef{{Name: "approx_count_distinct"}}},
		// The geometry constructors are built-in only with their arguments.
		{"SELECT POINT(1, 2), LINESTRING(POINT(1, 2), POINT(3, 4))", nil},
		{"SELECT POINT(), LINESTRING()", []FuncRef{{Name: "point"}, {Name: "linestring"}}},
	}
	for _, c := range cases {
		p := r.Classify(c.sql)
		if !slices.Equal(p.Funcs, c.want) {
			t.Errorf("Classify(%q).Funcs = %v, want %v", c.sql, p.Funcs, c.want)
		}
	}
	// The plan's target stays a replica: the proxy decides with its catalog.
	if p := r.Classify("SELECT f_ro()"); p.Target != TargetReplica || p.Kind != KindRead {
		t.Errorf("SELECT f_ro(): kind %v target %v", p.Kind, p.Target)
	}
}

// TestQuotedCallsBypassTheDigest: `now`() and now() share a digest but not
// a plan.
func TestQuotedCallsBypassTheDigest(t *testing.T) {
	r := New(100)
	for range 2 {
		if p := r.Classify("SELECT now() FROM t WHERE a = 1"); len(p.Funcs) != 0 {
			t.Errorf("now(): Funcs %v", p.Funcs)
		}
		if p := r.Classify("SELECT mid('abc', 1, 1) FROM t WHERE a = 1"); len(p.Funcs) != 0 {
			t.Errorf("mid(): Funcs %v", p.Funcs)
		}
		if p := r.Classify("SELECT mid ('abc', 1, 1) FROM t WHERE a = 3"); !slices.Equal(p.Funcs, []FuncRef{{Name: "mid", Maybe: true}}) {
			t.Errorf("mid (): Funcs %v", p.Funcs)
		}
		if p := r.Classify("SELECT `now`() FROM t WHERE a = 2"); !slices.Equal(p.Funcs, []FuncRef{{Name: "now", Maybe: true}}) {
			t.Errorf("`now`(): Funcs %v", p.Funcs)
		}
	}
}

// TestNoHintSendsEffectsToReplicas: files written by INTO OUTFILE/DUMPFILE,
// row locks and sequences change something, so a replica hint cannot move
// them off the master (a read-only replica connection would refuse them).
func TestNoHintSendsEffectsToReplicas(t *testing.T) {
	r := New(100)
	for _, sql := range []string{
		"/* sluice:replica */ SELECT 1 INTO OUTFILE '/tmp/f'",
		"/* sluice:replica */ SELECT 1 INTO DUMPFILE '/tmp/f'",
		"/* sluice:replica */ SELECT * FROM t FOR UPDATE",
		"/* sluice:replica */ SELECT * FROM t LOCK IN SHARE MODE",
		"/* sluice:replica */ SELECT s.nextval FROM dual",
		"/* sluice:replica */ SELECT db.s.nextval FROM dual",
		"/* sluice:replica */ SELECT NEXTVAL(s)",
		"/* sluice:replica */ SELECT NEXT VALUE FOR s",
		"/* sluice:replica */ SELECT SETVAL(s, 10)",
		"/* sluice:replica */ SELECT LASTVAL(s)",
	} {
		if p := r.Classify(sql); p.Target != TargetMaster || p.Kind != KindWrite {
			t.Errorf("Classify(%q) = kind %v target %v; want a master write", sql, p.Kind, p.Target)
		}
	}
	for _, sql := range []string{"SELECT s.currval FROM dual", "SELECT @@tx_read_only", "SELECT @@session.transaction_read_only"} {
		if p := r.Classify(sql); p.Target != TargetMaster {
			t.Errorf("Classify(%q) = target %v; want the master, which holds the session's value", sql, p.Target)
		}
	}
	// A replica hint still serves reads kept on the master for session state.
	if p := r.Classify("/* sluice:replica */ SELECT SQL_CALC_FOUND_ROWS * FROM t"); p.Target != TargetReplica {
		t.Errorf("hinted SQL_CALC_FOUND_ROWS: target %v, want replica", p.Target)
	}
}

// TestSetOfNonConstantIsNotReplayed: a SET whose value is evaluated (a
// function, a subquery, a variable, an expression) is a write on the master
// that pins the session; it is never tracked for replay.
func TestSetOfNonConstantIsNotReplayed(t *testing.T) {
	r := New(100)
	// A stored function may change other session state too: untracked.
	for _, sql := range []string{
		"SET SESSION wait_timeout = f_ret('x')",
		"SET sql_mode = CONCAT(@@sql_mode, f())",
		"SET NAMES (SELECT 'utf8mb4')",
		"SET autocommit = 1, wait_timeout = db.f()",
	} {
		p := r.Classify(sql)
		if p.Kind != KindWrite || p.Target != TargetMaster || p.Vars != nil || p.Pins&PinUntracked == 0 {
			t.Errorf("Classify(%q) = kind %v target %v vars %v pins %b; want an untracked master write", sql, p.Kind, p.Target, p.Vars, p.Pins)
		}
	}
	// Other values that are not constants are evaluated once, on the
	// master, and the value they left is read back to replay (issue 19).
	for sql, readBack := range map[string]string{
		"SET wait_timeout = (SELECT 100)":                                                                   "wait_timeout",
		"SET SESSION sql_mode = @@GLOBAL.sql_mode":                                                          "sql_mode",
		"SET sql_mode = CONCAT(@@GLOBAL.sql_mode, ',ANSI_QUOTES')":                                          "sql_mode",
		"SET sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')":                                                 "sql_mode",
		"SET time_zone = @tz":                                                                               "time_zone",
		"SET wait_timeout = @@server_id":                                                                    "wait_timeout",
		"SET time_zone = CONCAT('+0', FLOOR(RAND() * 9), ':00')":                                            "time_zone",
		"SET @@SESSION.Time_Zone = ?":                                                                       "time_zone",
		"SET tx_isolation = @@GLOBAL.tx_isolation":                                                          "tx_isolation",
		"SET sql_mode = REPLACE(@@SESSION.sql_mode, 'ONLY_FULL_GROUP_BY', '')":                              "sql_mode",
		"SET autocommit = 1, wait_timeout = CONNECTION_ID()":                                                "wait_timeout",
		"SET @@SESSION.sql_mode = CONCAT(@@sql_mode, ',STRICT_ALL_TABLES'), @@SESSION.sql_auto_is_null = 0": "sql_mode",
	} {
		p := r.Classify(sql)
		if p.Kind != KindSet || p.Target != TargetMaster {
			t.Errorf("Classify(%q) = kind %v target %v; want KindSet on the master", sql, p.Kind, p.Target)
			continue
		}
		var got []string
		for _, v := range p.Vars {
			if v.ReadBack != "" {
				got = append(got, v.ReadBack)
			}
		}
		if len(got) != 1 || got[0] != readBack {
			t.Errorf("Classify(%q): read back %q, want [%s]", sql, got, readBack)
		}
		if strings.Contains(sql, "@tz") != (p.Pins&PinUserVars != 0) || p.Pins&PinUntracked != 0 {
			t.Errorf("Classify(%q).Pins = %b", sql, p.Pins)
		}
	}
	for _, sql := range []string{"SET wait_timeout = 10", "SET x = -1", "SET sql_mode = ANSI", "SET autocommit = ON",
		"SET sql_select_limit = DEFAULT", "SET time_zone = '+00:00'", "SET wait_timeout = 1 + 1",
		"SET SESSION group_concat_max_len = 1024 * 1024",
		// Rails' connection set-up.
		"SET @@SESSION.sql_mode = CONCAT(@@sql_mode, ',STRICT_ALL_TABLES'), @@SESSION.sql_auto_is_null = 0, @@SESSION.wait_timeout = 2147483",
		"SET sql_mode = REPLACE(@@SESSION.sql_mode, 'ONLY_FULL_GROUP_BY', '')"} {
		if p := r.Classify(sql); p.Kind != KindSet || p.Pins != 0 {
			t.Errorf("Classify(%q) = %v pins %b, want KindSet without pins", sql, p.Kind, p.Pins)
		}
	}
}

// TestSetRecordsLexingState: assignments of the client character set and of
// sql_mode carry what the proxy needs to judge later statements.
func TestSetRecordsLexingState(t *testing.T) {
	r := New(100)
	cases := []struct {
		sql        string
		charset    string
		modes      LexModes
		modesKnown bool
	}{
		{"SET NAMES gbk", "gbk", 0, false},
		{"SET NAMES 'gbk' COLLATE 'gbk_bin'", "gbk", 0, false},
		{"SET CHARACTER SET gbk", "gbk", 0, false},
		{"SET character_set_client = cp932", "cp932", 0, false},
		{"SET NAMES DEFAULT", "", 0, false},
		{"SET sql_mode = 'ORACLE'", "", LexOracle | LexANSIQuotes | LexPipesAsConcat, true},
		{"SET SESSION sql_mode = 'STRICT_TRANS_TABLES,no_backslash_escapes'", "", LexNoBackslashEscapes, true},
		{"SET sql_mode = ANSI", "", LexANSIQuotes | LexPipesAsConcat, true},
		{"SET sql_mode = ''", "", 0, true},
		{"SET sql_mode = DEFAULT", "", 0, false},
		// Values that are not a list of names are read back by the proxy.
		{"SET sql_mode = 4", "", 0, false},
		{"SET sql_mode = x'414E53495F51554F544553'", "", 0, false},
		{"SET sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')", "", 0, false},
	}
	for _, c := range cases {
		p := r.Classify(c.sql)
		if p.Kind != KindSet || len(p.Vars) != 1 {
			t.Errorf("Classify(%q) = %v with %d vars", c.sql, p.Kind, len(p.Vars))
			continue
		}
		v := p.Vars[0]
		if v.Charset != c.charset || v.Modes != c.modes || v.ModesKnown != c.modesKnown {
			t.Errorf("Classify(%q): charset %q modes %b known %v; want %q %b %v", c.sql, v.Charset, v.Modes, v.ModesKnown, c.charset, c.modes, c.modesKnown)
		}
	}
	// The TiDB parser rejects the names of character sets it lacks (big5,
	// sjis, cp932 in SET NAMES): such a SET is untracked and pins the
	// session, whose statements then all run on the master.
	for _, sql := range []string{"SET NAMES sjis", "SET CHARACTER SET big5", "SET NAMES cp932 COLLATE cp932_bin"} {
		if p := r.Classify(sql); p.Kind != KindWrite || p.Target != TargetMaster || p.Pins&PinUntracked == 0 {
			t.Errorf("Classify(%q) = kind %v target %v pins %b; want an untracked master write", sql, p.Kind, p.Target, p.Pins)
		}
	}
	if !UnsafeClientCharset("GBK") || UnsafeClientCharset("utf8mb4") || !UnsafeClientCharset("") || UnsafeClientCharset("latin1") {
		t.Error("UnsafeClientCharset")
	}
	if !UnsafeCollation(28) || UnsafeCollation(45) || UnsafeCollation(8) {
		t.Error("UnsafeCollation")
	}
}

// TestModeSensitivity: a text classifies under each sql_mode its characters
// give a reason for, and Modes names them when any reading differs.
func TestModeSensitivity(t *testing.T) {
	r := New(100)
	cases := []struct {
		sql  string
		want LexModes
	}{
		{`SELECT 'a\', NEXTVAL(s) -- '`, LexNoBackslashEscapes},
		{`SELECT "a\", NEXTVAL(s) -- "`, LexNoBackslashEscapes | LexANSIQuotes},
		{`SELECT "a", b FROM t`, 0},
		{`SELECT a || b FROM t`, 0},
		{`SET SESSION lc_messages = "en_US"`, LexANSIQuotes},
		{`SELECT 1`, 0},
	}
	for _, c := range cases {
		if p := r.Classify(c.sql); p.Modes != c.want {
			t.Errorf("Classify(%q).Modes = %b, want %b", c.sql, p.Modes, c.want)
		}
	}
	for _, c := range []struct {
		v    string
		want LexModes
	}{
		{"", 0}, {"ANSI_QUOTES", LexANSIQuotes}, {"oracle", LexOracle | LexANSIQuotes | LexPipesAsConcat},
		{"STRICT_TRANS_TABLES, PIPES_AS_CONCAT", LexPipesAsConcat}, {"1234", LexUnknown},
	} {
		if got := ParseSQLMode(c.v); got != c.want {
			t.Errorf("ParseSQLMode(%q) = %b, want %b", c.v, got, c.want)
		}
	}
}

// TestQuotesInsideLiteralsKeepTheDigestLevel: a double quote or "||" inside
// a single-quoted string (JSON, say) cannot change the text's reading under
// any sql_mode when it holds no backslash: such texts still share their
// digest's plan.
func TestQuotesInsideLiteralsKeepTheDigestLevel(t *testing.T) {
	for _, c := range []struct {
		sql    string
		bypass bool
	}{
		{`SELECT * FROM t WHERE j = '{"a":1}'`, false},
		{`SELECT * FROM t WHERE s = 'a||b' AND ` + "`x\"y`" + ` = 1`, false},
		{`SELECT "a" FROM t`, true},
		{`SELECT a || b FROM t`, true},
		{`SELECT '\'', "a" FROM t`, true},
		{"SELECT 1\n\tFROM t\r\n", false},
	} {
		if got := scanTextFlags(c.sql)&bypassFlags != 0; got != c.bypass {
			t.Errorf("scanTextFlags(%q) bypasses the digest level: %v, want %v", c.sql, got, c.bypass)
		}
	}
	for _, c := range []struct {
		s             string
		odd, nonASCII bool
	}{
		{"SELECT 1 FROM t WHERE a = 'x'", false, false},
		{"SELECT 1\n\tFROM t\r\n\v\f", false, false},
		{"SELECT 1 FROM t WHERE a = 'caf\xc3\xa9' AND b = 1", true, true},
		{"SELECT 1 FROM t WHERE a = 1 AND b = 2\x00", true, false},
		{"SELECT 1 FROM t WHERE a = 1 AND\x7f b = 2", true, false},
		{"\x85", true, true},
	} {
		if odd, non := oddBytes(c.s); odd != c.odd || non != c.nonASCII {
			t.Errorf("oddBytes(%q) = %v, %v; want %v, %v", c.s, odd, non, c.odd, c.nonASCII)
		}
	}
}

// TestRoleAndReadLockPin: SET ROLE changes the session's privileges on its
// connection, and FLUSH TABLES ... WITH READ LOCK holds a lock there until
// UNLOCK TABLES: both keep the session on that connection (issue 19).
func TestRoleAndReadLockPin(t *testing.T) {
	r := New(100)
	for sql, want := range map[string]Pin{
		"SET ROLE r":                         PinUntracked | PinRole,
		"SET ROLE NONE":                      PinUntracked | PinRole,
		"FLUSH TABLES WITH READ LOCK":        PinLocks,
		"FLUSH TABLES t1, t2 WITH READ LOCK": PinLocks,
		"FLUSH TABLES":                       0,
		"FLUSH NO_WRITE_TO_BINLOG TABLES t1": 0,
		"SET DEFAULT ROLE r FOR u":           0,
	} {
		p := r.Classify(sql)
		if p.Pins&want != want || want == 0 && p.Pins&(PinLocks|PinUntracked) != 0 && p.ParseErr == nil {
			t.Errorf("Classify(%q).Pins = %b, want %b (parse error: %v)", sql, p.Pins, want, p.ParseErr)
		}
		if p.Target != TargetMaster {
			t.Errorf("Classify(%q) goes to the %v", sql, p.Target)
		}
	}
}

// TestCommitRelease: the RELEASE clause of COMMIT and ROLLBACK, which the
// parser folds (NO RELEASE reads as no clause) or rejects (ROLLBACK WORK
// ...), is read from the words (issue 19, item 9).
func TestCommitRelease(t *testing.T) {
	r := New(100)
	for sql, want := range map[string]TxnRelease{
		"COMMIT":                                ReleaseDefault,
		"COMMIT WORK":                           ReleaseDefault,
		"ROLLBACK":                              ReleaseDefault,
		"COMMIT AND CHAIN":                      ReleaseDefault,
		"COMMIT RELEASE":                        ReleaseYes,
		"commit /* x */ release":                ReleaseYes,
		"ROLLBACK RELEASE":                      ReleaseYes,
		"COMMIT WORK RELEASE":                   ReleaseYes,
		"ROLLBACK WORK AND NO CHAIN RELEASE":    ReleaseYes,
		"COMMIT AND NO CHAIN RELEASE":           ReleaseYes,
		"COMMIT NO RELEASE":                     ReleaseNo,
		"COMMIT AND CHAIN NO RELEASE":           ReleaseNo,
		"ROLLBACK WORK AND NO CHAIN NO RELEASE": ReleaseNo,
		"/*!50000 COMMIT */ /* RELEASE */":      ReleaseDefault,
	} {
		p := r.Classify(sql)
		if p.Kind != KindTxn || p.Txn != TxnEnd || p.Release != want {
			t.Errorf("Classify(%q) = %v %v release %v, want release %v", sql, p.Kind, p.Txn, p.Release, want)
		}
	}
	if p := r.Classify("ROLLBACK TO SAVEPOINT release"); p.Release != ReleaseDefault || p.Txn != TxnOther {
		t.Errorf("ROLLBACK TO SAVEPOINT release: %v release %v", p.Txn, p.Release)
	}
}

// TestSelfAccountStatement: statements that would change or lock out the
// account they run as (on a backend, the service account "sluice").
func TestSelfAccountStatement(t *testing.T) {
	for sql, want := range map[string]bool{
		"SET DEFAULT ROLE r":                          true,
		"set default role `r` ":                       true,
		"SET DEFAULT ROLE NONE":                       true,
		"SET DEFAULT ROLE 'r' /* FOR u */":            true,
		"SET DEFAULT ROLE r # FOR u\n":                true,
		"SET DEFAULT ROLE r -- FOR u":                 true,
		"SET DEFAULT ROLE r FOR CURRENT_USER":         true,
		"SET DEFAULT ROLE r FOR current_user()":       true,
		"SET DEFAULT ROLE r FOR sluice":               true,
		"SET DEFAULT ROLE r FOR 'sluice'@'%'":         true,
		"SET DEFAULT ROLE r FOR u":                    false,
		"SET DEFAULT ROLE `r` FOR 'u'@'%'":            false,
		"SET DEFAULT ROLE 'for' FOR `app`":            false,
		"SET PASSWORD = PASSWORD('x')":                true,
		"SET PASSWORD = PASSWORD('FOR')":              true,
		"set password /*!50000 = */ password('x')":    true,
		"SET PASSWORD FOR CURRENT_USER() = 'x'":       true,
		"SET PASSWORD FOR 'bob'@'%' = PASSWORD('x')":  false,
		"ALTER USER CURRENT_USER() IDENTIFIED BY 'x'": true,
		"ALTER USER bob, USER() ACCOUNT LOCK":         true,
		"ALTER USER IF EXISTS 'sluice'@'%' LOCK":      true,
		"ALTER USER bob IDENTIFIED BY 'sluice'":       false,
		"DROP USER sluice":                            true,
		"DROP USER IF EXISTS bob, 'sluice'@'%'":       true,
		"DROP USER bob":                               false,
		"RENAME USER sluice TO x":                     true,
		"SET ROLE r":                                  false,
		"SET time_zone = 'SET DEFAULT ROLE r'":        false,
	} {
		if _, got := SelfAccountStatement(sql, []string{"sluice"}); got != want {
			t.Errorf("SelfAccountStatement(%q) = %v, want %v", sql, got, want)
		}
	}
}
