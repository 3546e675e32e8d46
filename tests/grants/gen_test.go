package grants

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// stmt is one generated statement. Its text may hold placeholders the
// runner fills per account and side (see fill): {u} the account's tag (in
// scratch names, so accounts never share one), {victim} the victim
// session's connection id as that side sees it, {out} a file name unique to
// the side, account and statement, {load} the file LOAD DATA reads.
type stmt struct {
	sql  string
	kind string // what the statement exercises, for the per-kind totals
	// group is the index of the first statement of the group this one
	// belongs to (CREATE … DROP of one scratch table, LOCK … UNLOCK): an
	// account runs a group whole or not at all.
	group int
}

// gen makes the corpus of one run; the same seed gives the same statements.
type gen struct {
	r     *rand.Rand
	out   []stmt
	group int
}

// corpus returns at least n statements generated from seed.
func corpus(seed uint64, n int) []stmt {
	g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	for len(g.out) < n {
		g.group = len(g.out)
		x := g.r.IntN(total)
		for _, k := range kinds {
			if x < k.weight {
				k.make(g)
				break
			}
			x -= k.weight
		}
	}
	return g.out
}

// add appends statements of kind to the current group.
func (g *gen) add(kind string, sqls ...string) {
	for _, s := range sqls {
		g.out = append(g.out, stmt{sql: s, kind: kind, group: g.group})
	}
}

// n is a number unique to the current group: it names scratch objects.
func (g *gen) n() int { return g.group }

func (g *gen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

// db picks a database: mostly existing ones, sometimes a missing one.
func (g *gen) db() string {
	if g.r.IntN(100) < 8 {
		return g.pick(missingDatabases...)
	}
	// gp_a and gp_b carry most of the table, column and routine grants.
	switch x := g.r.IntN(100); {
	case x < 42:
		return "gp_a"
	case x < 62:
		return "gp_b"
	default:
		return g.pick(databases[2:]...)
	}
}

// table picks a base table name, rarely a missing one.
func (g *gen) table() string {
	switch x := g.r.IntN(100); {
	case x < 50:
		return "t1"
	case x < 75:
		return "t2"
	case x < 95:
		return "t3"
	default:
		return "nope"
	}
}

// col picks a column of table t ("a" for a missing table).
func (g *gen) col(t string) string {
	cs, ok := columns[t]
	if !ok {
		return "a"
	}
	return cs[g.r.IntN(len(cs))]
}

// cols picks one to three distinct columns of t, or * now and then.
func (g *gen) cols(t string) string {
	if g.r.IntN(6) == 0 {
		return "*"
	}
	cs, ok := columns[t]
	if !ok {
		return "a"
	}
	perm := g.r.Perm(len(cs))
	k := 1 + g.r.IntN(min(3, len(cs)))
	var out []string
	for _, i := range perm[:k] {
		out = append(out, cs[i])
	}
	return strings.Join(out, ", ")
}

// qual names table t of db, or leaves it unqualified now and then (it then
// means the session's current database, which USE statements change).
func (g *gen) qual(db, t string) string {
	if g.r.IntN(10) == 0 {
		return t
	}
	return db + "." + t
}

// where is an optional WHERE on a column of t.
func (g *gen) where(t string) string {
	switch g.r.IntN(3) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf(" WHERE %s = %d", g.col(t), g.r.IntN(10))
	default:
		return fmt.Sprintf(" WHERE %s IS NOT NULL AND id < %d", g.col(t), 1+g.r.IntN(9))
	}
}

// value is a literal fitting column c.
func (g *gen) value(c string) string {
	switch c {
	case "b", "d":
		return fmt.Sprintf("'v%d'", g.r.IntN(100))
	default:
		return fmt.Sprint(g.r.IntN(50))
	}
}

// kind is one way of making statements, and how often it is picked.
type kind struct {
	weight int
	make   func(*gen)
}

// kinds covers reads, writes, DDL, views, routines, temporary tables, LOCK
// TABLES, files, administrative statements and SHOWs.
var kinds = []kind{
	{12, (*gen).selectCols},
	{4, (*gen).selectJoin},
	{3, (*gen).selectSubquery},
	{3, (*gen).selectUnion},
	{4, (*gen).selectView},
	{3, (*gen).selectFunction},
	{6, (*gen).insert},
	{3, (*gen).insertSelect},
	{3, (*gen).replace},
	{6, (*gen).update},
	{3, (*gen).updateMulti},
	{3, (*gen).delete},
	{2, (*gen).deleteMulti},
	{3, (*gen).scratchTable},
	{2, (*gen).createFrom},
	{3, (*gen).dropMissing},
	{2, (*gen).alterBase},
	{2, (*gen).truncate},
	{2, (*gen).viewLifecycle},
	{3, (*gen).showCreate},
	{2, (*gen).tempTable},
	{2, (*gen).lockTables},
	{4, (*gen).call},
	{2, (*gen).routineLifecycle},
	{2, (*gen).outfile},
	{2, (*gen).loadData},
	{3, (*gen).setGlobal},
	{3, (*gen).kill},
	{4, (*gen).show},
	{3, (*gen).use},
	{3, (*gen).setRole},
	{2, (*gen).grant},
	{1, (*gen).createUser},
	{1, (*gen).database},
	{2, (*gen).admin},
}

func (g *gen) selectCols() {
	db, t := g.db(), g.table()
	q := fmt.Sprintf("SELECT %s FROM %s%s", g.cols(t), g.qual(db, t), g.where(t))
	if g.r.IntN(3) == 0 {
		q += " ORDER BY " + g.col(t)
	}
	if g.r.IntN(4) == 0 {
		q = fmt.Sprintf("SELECT COUNT(%s) FROM %s%s", g.pick("*", g.col(t)), g.qual(db, t), g.where(t))
	}
	g.add("select", q+fmt.Sprintf(" LIMIT %d", 1+g.r.IntN(5)))
}

func (g *gen) selectJoin() {
	d1, d2 := g.db(), g.db()
	g.add("select join", fmt.Sprintf("SELECT x.id, y.%s FROM %s.t1 x JOIN %s.t2 y ON y.t1_id = x.id WHERE x.%s > %d",
		g.col("t2"), d1, d2, g.col("t1"), g.r.IntN(5)))
}

func (g *gen) selectSubquery() {
	d1, d2 := g.db(), g.db()
	g.add("select subquery", fmt.Sprintf("SELECT id FROM %s.t1 WHERE a IN (SELECT %s FROM %s.t2 WHERE id < %d)",
		d1, g.pick("a", "t1_id", "id"), d2, 2+g.r.IntN(6)))
}

func (g *gen) selectUnion() {
	d1, d2 := g.db(), g.db()
	g.add("select union", fmt.Sprintf("SELECT id, %s FROM %s.t1 UNION %sSELECT id, a FROM %s.%s",
		g.pick("a", "b", "c"), d1, g.pick("", "ALL "), d2, g.pick("t2", "t3")))
}

func (g *gen) selectView() {
	db, v := g.db(), g.pick("v1", "v2")
	cols := g.pick("*", "id", "a", "id, a")
	if v == "v1" {
		cols = g.pick(cols, "b")
	} else {
		cols = g.pick(cols, "d")
	}
	g.add("select view", fmt.Sprintf("SELECT %s FROM %s WHERE id < %d", cols, g.qual(db, v), 2+g.r.IntN(7)))
}

func (g *gen) selectFunction() {
	db, f := g.db(), g.pick("f1", "f2")
	if g.r.IntN(3) == 0 {
		g.add("select function", fmt.Sprintf("SELECT id, %s.%s(id) FROM %s.t1 WHERE id < 3", db, f, g.db()))
		return
	}
	g.add("select function", fmt.Sprintf("SELECT %s.%s(%d)", db, f, g.r.IntN(10)))
}

func (g *gen) insert() {
	db, t := g.db(), g.pick("t1", "t1", "t2", "t3")
	cs := columns[t]
	k := 1 + g.r.IntN(len(cs)-1)
	names, vals := []string{"id"}, []string{fmt.Sprint(100000 + g.n())}
	for _, c := range cs[1 : 1+k] {
		names, vals = append(names, c), append(vals, g.value(c))
	}
	q := fmt.Sprintf("INSERT %sINTO %s (%s) VALUES (%s)", g.pick("", "IGNORE "), g.qual(db, t),
		strings.Join(names, ", "), strings.Join(vals, ", "))
	if g.r.IntN(2) == 0 {
		c := g.col(t)
		if c == "id" {
			c = cs[1]
		}
		q += fmt.Sprintf(" ON DUPLICATE KEY UPDATE %s = %s", c, g.pick(g.value(c), "VALUES("+c+")", c))
	}
	g.add("insert", q)
}

func (g *gen) insertSelect() {
	g.add("insert select", fmt.Sprintf("INSERT IGNORE INTO %s.t3 (id, a) SELECT id + %d, %s FROM %s.%s WHERE id < 4",
		g.db(), 200000+g.n()*10, g.pick("a", "id"), g.db(), g.pick("t1", "t2", "v1")))
}

func (g *gen) replace() {
	db, t := g.db(), g.pick("t1", "t3")
	g.add("replace", fmt.Sprintf("REPLACE INTO %s (id, a) VALUES (%d, %d)", g.qual(db, t), 300000+g.n(), g.r.IntN(9)))
}

func (g *gen) update() {
	db, t := g.db(), g.table()
	c := g.col(t)
	if c == "id" {
		c = "a"
	}
	val := g.value(c)
	if g.r.IntN(3) == 0 {
		val = g.pick(c, g.col(t))
		if c == "b" || c == "d" {
			val = fmt.Sprintf("CONCAT(%s, '')", c)
		}
	}
	g.add("update", fmt.Sprintf("UPDATE %s SET %s = %s%s", g.qual(db, t), c, val, g.where(t)))
}

func (g *gen) updateMulti() {
	g.add("update multi", fmt.Sprintf("UPDATE %s.t1 x JOIN %s.t2 y ON y.t1_id = x.id SET x.%s = y.a WHERE y.id = %d",
		g.db(), g.db(), g.pick("a", "c"), 1+g.r.IntN(8)))
}

func (g *gen) delete() {
	db, t := g.db(), g.table()
	g.add("delete", fmt.Sprintf("DELETE FROM %s WHERE %s", g.qual(db, t),
		g.pick("id >= 100000", "id = -1", fmt.Sprintf("%s = -1", g.col(t)))))
}

func (g *gen) deleteMulti() {
	g.add("delete multi", fmt.Sprintf("DELETE x FROM %s.t3 x JOIN %s.t1 y ON x.id = y.id + 100000 WHERE y.%s < 0",
		g.db(), g.db(), g.pick("a", "c", "id")))
}

// scratchTable creates a table of its own, works on it and drops it.
func (g *gen) scratchTable() {
	db := g.db()
	s := fmt.Sprintf("%s.s%d_{u}", db, g.n())
	r := fmt.Sprintf("%s.s%dr_{u}", g.pick(db, db, g.db()), g.n())
	g.add("ddl", "CREATE TABLE "+s+" (id INT PRIMARY KEY, a INT)")
	g.add("ddl", "ALTER TABLE "+s+" ADD COLUMN z INT")
	g.add("ddl", "CREATE INDEX ia ON "+s+" (a)")
	g.add("insert", "INSERT INTO "+s+" (id, a) VALUES (1, 1)")
	g.add("ddl", "TRUNCATE TABLE "+s)
	g.add("ddl", "RENAME TABLE "+s+" TO "+r)
	g.add("ddl", "DROP TABLE IF EXISTS "+s+", "+r)
}

// createFrom creates a table from another (LIKE, or AS SELECT) and drops it.
func (g *gen) createFrom() {
	db := g.db()
	s := fmt.Sprintf("%s.c%d_{u}", db, g.n())
	if g.r.IntN(2) == 0 {
		g.add("ddl", fmt.Sprintf("CREATE TABLE %s LIKE %s.%s", s, g.db(), g.table()))
	} else {
		g.add("ddl", fmt.Sprintf("CREATE TABLE %s AS SELECT id, a FROM %s.%s", s, g.db(), g.pick("t1", "t2", "v1")))
	}
	g.add("ddl", "DROP TABLE IF EXISTS "+s)
}

func (g *gen) dropMissing() {
	db := g.db()
	switch g.r.IntN(4) {
	case 0:
		g.add("ddl", fmt.Sprintf("DROP TABLE IF EXISTS %s.m%d_{u}", db, g.n()))
	case 1:
		g.add("ddl", fmt.Sprintf("DROP VIEW IF EXISTS %s.m%d_{u}", db, g.n()))
	case 2:
		g.add("ddl", fmt.Sprintf("DROP PROCEDURE IF EXISTS %s.m%d_{u}", db, g.n()))
	default:
		g.add("ddl", fmt.Sprintf("DROP TABLE %s.m%d_{u}", db, g.n()))
	}
}

// alterBase changes a base table in ways that leave it as it was.
func (g *gen) alterBase() {
	db, t := g.db(), g.pick("t1", "t2", "t3")
	if g.r.IntN(2) == 0 {
		g.add("ddl", fmt.Sprintf("ALTER TABLE %s.%s COMMENT = 'c%d'", db, t, g.r.IntN(3)))
		return
	}
	g.add("ddl", fmt.Sprintf("CREATE INDEX i%d_{u} ON %s.%s (a)", g.n(), db, t),
		fmt.Sprintf("DROP INDEX i%d_{u} ON %s.%s", g.n(), db, t))
}

func (g *gen) truncate() {
	db := g.db()
	if g.r.IntN(2) == 0 {
		g.add("ddl", fmt.Sprintf("TRUNCATE TABLE %s.t3", db))
		return
	}
	g.add("ddl", fmt.Sprintf("TRUNCATE %s.%s", db, g.pick("t1_nope", "v1")))
}

func (g *gen) viewLifecycle() {
	db, src := g.db(), g.db()
	v := fmt.Sprintf("%s.w%d_{u}", db, g.n())
	definer := g.pick("", "", "", "DEFINER = CURRENT_USER ", "DEFINER = 'root'@'localhost' ")
	g.add("view", fmt.Sprintf("CREATE %sVIEW %s AS SELECT id, %s FROM %s.t1", definer, v, g.pick("a", "b", "c"), src))
	g.add("view", "SHOW CREATE VIEW "+v)
	g.add("view", "SELECT * FROM "+v)
	g.add("view", "DROP VIEW IF EXISTS "+v)
}

func (g *gen) showCreate() {
	db := g.db()
	switch g.r.IntN(4) {
	case 0:
		g.add("show", fmt.Sprintf("SHOW CREATE VIEW %s.%s", db, g.pick("v1", "v2")))
	case 1:
		g.add("show", fmt.Sprintf("SHOW CREATE TABLE %s.%s", db, g.pick("t1", "t2", "t3", "v1", "nope")))
	case 2:
		g.add("show", fmt.Sprintf("SHOW COLUMNS FROM %s.%s", db, g.table()))
	default:
		what, name, _ := strings.Cut(g.pick("PROCEDURE p1", "PROCEDURE p2", "FUNCTION f1", "FUNCTION f2"), " ")
		g.add("show", fmt.Sprintf("SHOW CREATE %s %s.%s", what, db, name))
	}
}

func (g *gen) tempTable() {
	db := g.db()
	tt := fmt.Sprintf("%s.tmp%d_{u}", db, g.n())
	g.add("temporary", "CREATE TEMPORARY TABLE "+tt+" (id INT PRIMARY KEY, a INT)")
	g.add("temporary", "INSERT INTO "+tt+" VALUES (1, 2)")
	g.add("temporary", "SELECT a FROM "+tt)
	g.add("temporary", "DROP TEMPORARY TABLE IF EXISTS "+tt)
}

// lockTables locks, reads or writes the locked table, and unlocks, all in
// one group, so no other account waits long.
func (g *gen) lockTables() {
	db, t := g.db(), g.pick("t1", "t2", "t3", "v1")
	mode := g.pick("READ", "WRITE")
	lock := fmt.Sprintf("LOCK TABLES %s.%s %s", db, t, mode)
	if g.r.IntN(3) == 0 {
		lock += fmt.Sprintf(", %s.t3 READ", g.db())
	}
	g.add("lock", lock)
	g.add("lock", fmt.Sprintf("SELECT COUNT(*) FROM %s.%s", db, t))
	g.add("lock", "UNLOCK TABLES")
}

func (g *gen) call() {
	db := g.db()
	if g.r.IntN(2) == 0 {
		g.add("call", fmt.Sprintf("CALL %s.p1(%d)", db, g.r.IntN(50)))
		return
	}
	g.add("call", fmt.Sprintf("CALL %s.%s()", db, g.pick("p2", "p2", "nope")))
}

// routineLifecycle creates a procedure or a function, runs it and drops it.
func (g *gen) routineLifecycle() {
	db := g.db()
	if g.r.IntN(2) == 0 {
		p := fmt.Sprintf("%s.sp%d_{u}", db, g.n())
		g.add("routine", fmt.Sprintf("CREATE PROCEDURE %s() %sSELECT %d", p, g.pick("", "SQL SECURITY INVOKER "), g.r.IntN(9)))
		g.add("routine", "CALL "+p+"()")
		g.add("routine", "DROP PROCEDURE IF EXISTS "+p)
		return
	}
	f := fmt.Sprintf("%s.sf%d_{u}", db, g.n())
	// With the binary log on (and log_bin_trust_function_creators off),
	// MariaDB wants SUPER from whoever creates a function (1419) and a
	// DETERMINISTIC, NO SQL or READS SQL DATA declaration from everyone
	// (1418).
	g.add("routine", fmt.Sprintf("CREATE FUNCTION %s() RETURNS INT %sRETURN %d", f, g.pick("", "DETERMINISTIC "), g.r.IntN(9)))
	g.add("routine", "SELECT "+f+"()")
	g.add("routine", "DROP FUNCTION IF EXISTS "+f)
}

func (g *gen) outfile() {
	db, t := g.db(), g.pick("t1", "t2", "v1")
	g.add("file", fmt.Sprintf("SELECT id, a FROM %s.%s INTO OUTFILE '{out}'", db, t))
}

func (g *gen) loadData() {
	db := g.db()
	if g.r.IntN(2) == 0 {
		g.add("file", fmt.Sprintf("LOAD DATA INFILE '{load}' %s INTO TABLE %s.t3 (id, a)", g.pick("REPLACE", "IGNORE"), db))
		return
	}
	g.add("file", fmt.Sprintf("LOAD DATA INFILE '{load}' IGNORE INTO TABLE %s.t1 (id, %s)", db, g.pick("a", "c")))
}

// globals are variables SET GLOBAL sets to their own value; each needs a
// different privilege (CONNECTION ADMIN, SUPER, BINLOG ADMIN, READ_ONLY ADMIN).
var globals = []string{"max_connections", "long_query_time", "binlog_cache_size", "expire_logs_days", "read_only", "slow_query_log"}

func (g *gen) setGlobal() {
	v := g.pick(globals...)
	g.add("set global", fmt.Sprintf("SET GLOBAL %s = @@global.%s", v, v))
}

func (g *gen) kill() {
	switch g.r.IntN(5) {
	case 0, 1:
		g.add("kill", "KILL QUERY {victim}")
	case 2:
		g.add("kill", "KILL {victim}")
	case 3:
		g.add("kill", "KILL CONNECTION {victim}")
	default:
		g.add("kill", "KILL 987654321")
	}
}

func (g *gen) show() {
	switch g.r.IntN(8) {
	case 0:
		g.add("show", g.pick("SHOW PROCESSLIST", "SHOW FULL PROCESSLIST"))
	case 1:
		g.add("show", g.pick("SHOW GRANTS", "SHOW GRANTS FOR CURRENT_USER()"))
	case 2:
		g.add("show", g.pick("SHOW GRANTS FOR 'gp_victim'@'%'", "SHOW GRANTS FOR gp_rw"))
	case 3:
		g.add("show", "SHOW DATABASES")
	case 4:
		g.add("show", fmt.Sprintf("SHOW TABLES FROM %s", g.db()))
	case 5:
		g.add("show", "SHOW TABLES")
	case 6:
		g.add("show", fmt.Sprintf("SHOW TABLE STATUS FROM %s", g.db()))
	default:
		g.add("show", g.pick("SELECT CURRENT_USER()", "SELECT COUNT(*) FROM mysql.user", "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA LIKE 'gp%'"))
	}
}

func (g *gen) use() { g.add("use", "USE "+g.db()) }

func (g *gen) setRole() {
	g.add("role", "SET ROLE "+g.pick("gp_power", "gp_power", "NONE", "gp_rw", "gp_nope"))
}

// grant grants a privilege to gp_sink and revokes it again.
func (g *gen) grant() {
	on := g.pick("gp_b.*", "gp_b.t1", "gp_a.t1", "gp_a.*")
	priv := g.pick("SELECT", "INSERT", "UPDATE")
	g.add("grant", fmt.Sprintf("GRANT %s ON %s TO 'gp_sink'@'%%'", priv, on))
	g.add("grant", fmt.Sprintf("REVOKE %s ON %s FROM 'gp_sink'@'%%'", priv, on))
}

func (g *gen) createUser() {
	u := fmt.Sprintf("'gp_new%d_{u}'@'%%'", g.n())
	g.add("account", "CREATE USER "+u)
	g.add("account", "DROP USER IF EXISTS "+u)
}

// database creates a database of its own (one the `gp\_x%` grant
// matches, or not) and drops it.
func (g *gen) database() {
	d := fmt.Sprintf("%s%d_{u}", g.pick("gp_xs", "gp_s"), g.n())
	g.add("database", "CREATE DATABASE "+d)
	g.add("database", "DROP DATABASE IF EXISTS "+d)
}

func (g *gen) admin() {
	g.add("admin", g.pick(
		"SHOW MASTER STATUS",
		"SHOW BINARY LOGS",
		"SHOW ENGINE INNODB STATUS",
		"FLUSH STATUS",
		"PURGE BINARY LOGS BEFORE '2000-01-01 00:00:00'",
		"SHOW SLAVE STATUS",
		"SHOW BINLOG EVENTS LIMIT 1",
		"EXPLAIN SELECT * FROM gp_a.v1",
	))
}
