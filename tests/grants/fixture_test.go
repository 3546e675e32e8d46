package grants

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluice-proxy/sluice/sandbox"
)

// databases are the test schemas, created with the same objects on the
// cluster's master and on the reference (rows included) and on the auth
// server (structure only). gp_x1, gp_x_1, gp_xy1 and gpax_1 tell the
// wildcards apart: `gp\_x%` matches the first three, the unescaped `gp_x_1`
// matches gp_x_1, gp_xy1 and gpax_1 but not gp_x1.
var databases = []string{"gp_a", "gp_b", "gp_x1", "gp_x_1", "gp_xy1", "gpax_1"}

// missingDatabases exist on no server; gp_x9 still matches the `gp\_x%`
// grant, so an account with it gets "unknown" where others get "denied".
var missingDatabases = []string{"gp_x9", "gp_nope", "gpzz"}

// columns of each test table, in order.
var columns = map[string][]string{
	"t1": {"id", "a", "b", "c"},
	"t2": {"id", "t1_id", "a", "d"},
	"t3": {"id", "a", "b"},
}

// structureDDL returns the statements creating db's tables, views and
// routines. Views and routines run with their definer's rights (root) or
// their invoker's, as each name says: v1, p1 and f1 are SQL SECURITY
// DEFINER, v2, p2 and f2 SQL SECURITY INVOKER.
func structureDDL(db string) []string {
	q := "`" + db + "`"
	return []string{
		"CREATE DATABASE " + q,
		"CREATE TABLE " + q + ".t1 (id INT PRIMARY KEY, a INT, b VARCHAR(32), c INT)",
		"CREATE TABLE " + q + ".t2 (id INT PRIMARY KEY, t1_id INT, a INT, d VARCHAR(32))",
		"CREATE TABLE " + q + ".t3 (id INT PRIMARY KEY, a INT, b VARCHAR(32))",
		"CREATE SQL SECURITY DEFINER VIEW " + q + ".v1 AS SELECT id, a, b FROM " + q + ".t1",
		"CREATE SQL SECURITY INVOKER VIEW " + q + ".v2 AS SELECT t1.id, t1.a, t2.d FROM " + q + ".t1 JOIN " + q + ".t2 ON t2.t1_id = t1.id",
		"CREATE PROCEDURE " + q + ".p1(IN x INT) SQL SECURITY DEFINER SELECT COUNT(*) FROM " + q + ".t1 WHERE a > x",
		"CREATE PROCEDURE " + q + ".p2() SQL SECURITY INVOKER UPDATE " + q + ".t3 SET a = a WHERE id = 1",
		"CREATE FUNCTION " + q + ".f1(x INT) RETURNS INT DETERMINISTIC READS SQL DATA SQL SECURITY DEFINER RETURN x + (SELECT COUNT(*) FROM " + q + ".t1)",
		"CREATE FUNCTION " + q + ".f2(x INT) RETURNS INT DETERMINISTIC READS SQL DATA SQL SECURITY INVOKER RETURN x + (SELECT COUNT(*) FROM " + q + ".t2)",
	}
}

// rowsDML returns the statements filling db's tables.
func rowsDML(db string) []string {
	q := "`" + db + "`"
	var t1, t2 []string
	for i := 1; i <= 8; i++ {
		t1 = append(t1, fmt.Sprintf("(%d, %d, 'b%d', %d)", i, i*10, i, i%3))
		t2 = append(t2, fmt.Sprintf("(%d, %d, %d, 'd%d')", i, i, i*5, i))
	}
	return []string{
		"INSERT INTO " + q + ".t1 VALUES " + strings.Join(t1, ", "),
		"INSERT INTO " + q + ".t2 VALUES " + strings.Join(t2, ", "),
		"INSERT INTO " + q + ".t3 VALUES (1, 1, 'x'), (2, 2, 'y'), (3, 3, 'z'), (4, 4, 'w')",
	}
}

// account is one test login. tag is short and unique: it goes into the
// names of the scratch objects the account's statements create.
type account struct {
	name, password, tag string
}

// password is every test account's password but reporter's (none).
const password = "gp-pw"

// runners are the accounts whose statements the test compares.
var runners = []account{
	{"gp_global", password, "gl"},
	{"gp_dbwild", password, "dw"},
	{"gp_dbus", password, "du"},
	{"gp_table", password, "tb"},
	{"gp_column", password, "co"},
	{"gp_routine", password, "ro"},
	{"gp_roleuser", password, "rl"},
	{"gp_setrole", password, "sr"},
	{"gp_grantopt", password, "go"},
	{"gp_admin", password, "ad"},
	{"reporter", "", "rp"},
}

// victim is the account whose open session the KILL statements aim at; it
// has no grants and runs nothing but SELECT CONNECTION_ID().
var victim = account{"gp_victim", password, "vi"}

// accountStatements create the accounts and roles and grant their
// privileges; they run, in this order and unchanged, on the auth server and
// on the reference (and on the cluster's master in direct-master mode).
// gp_sink never logs in: it is what GRANT and REVOKE statements aim at.
func accountStatements() []string {
	pw := " IDENTIFIED BY '" + password + "'"
	return []string{
		// Global.
		"CREATE USER 'gp_global'@'%'" + pw,
		"GRANT SELECT, FILE ON *.* TO 'gp_global'@'%'",
		// Database level through an escaped wildcard, plus FILE.
		"CREATE USER 'gp_dbwild'@'%'" + pw,
		"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX, CREATE VIEW, SHOW VIEW, " +
			"CREATE TEMPORARY TABLES, LOCK TABLES, CREATE ROUTINE, ALTER ROUTINE, EXECUTE ON `gp\\_x%`.* TO 'gp_dbwild'@'%'",
		"GRANT FILE ON *.* TO 'gp_dbwild'@'%'",
		// Database level through an unescaped _, which matches any one character.
		"CREATE USER 'gp_dbus'@'%'" + pw,
		"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP ON `gp_x_1`.* TO 'gp_dbus'@'%'",
		// Table level.
		"CREATE USER 'gp_table'@'%'" + pw,
		"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX ON gp_a.t1 TO 'gp_table'@'%'",
		"GRANT SELECT ON gp_b.t2 TO 'gp_table'@'%'",
		"GRANT SELECT, SHOW VIEW ON gp_a.v1 TO 'gp_table'@'%'",
		"GRANT SELECT ON gp_a.v2 TO 'gp_table'@'%'",
		"GRANT DROP, INSERT ON gp_a.t3 TO 'gp_table'@'%'",
		// Column level.
		"CREATE USER 'gp_column'@'%'" + pw,
		"GRANT SELECT (id, a), UPDATE (b), INSERT (id, a) ON gp_a.t1 TO 'gp_column'@'%'",
		"GRANT SELECT (id, t1_id) ON gp_a.t2 TO 'gp_column'@'%'",
		"GRANT SELECT (id) ON gp_x1.t1 TO 'gp_column'@'%'",
		// Routine level.
		"CREATE USER 'gp_routine'@'%'" + pw,
		"GRANT EXECUTE ON PROCEDURE gp_a.p1 TO 'gp_routine'@'%'",
		"GRANT EXECUTE ON PROCEDURE gp_a.p2 TO 'gp_routine'@'%'",
		"GRANT EXECUTE ON FUNCTION gp_a.f1 TO 'gp_routine'@'%'",
		"GRANT EXECUTE ON FUNCTION gp_a.f2 TO 'gp_routine'@'%'",
		"GRANT ALTER ROUTINE ON PROCEDURE gp_b.p1 TO 'gp_routine'@'%'",
		"GRANT CREATE ROUTINE ON gp_b.* TO 'gp_routine'@'%'",
		// A default role.
		"CREATE ROLE gp_rw",
		"GRANT SELECT, INSERT, UPDATE, DELETE, EXECUTE, CREATE TEMPORARY TABLES, LOCK TABLES ON gp_b.* TO gp_rw",
		"GRANT SELECT ON gp_a.t2 TO gp_rw",
		"CREATE USER 'gp_roleuser'@'%'" + pw,
		"GRANT gp_rw TO 'gp_roleuser'@'%'",
		"SET DEFAULT ROLE gp_rw FOR 'gp_roleuser'@'%'",
		// A role granted but not default: the session must SET ROLE.
		"CREATE ROLE gp_power",
		"GRANT ALL PRIVILEGES ON gp_a.* TO gp_power",
		"GRANT SUPER ON *.* TO gp_power",
		"CREATE USER 'gp_setrole'@'%'" + pw,
		"GRANT SELECT ON gp_a.t2 TO 'gp_setrole'@'%'",
		"GRANT gp_power TO 'gp_setrole'@'%'",
		// WITH GRANT OPTION.
		"CREATE USER 'gp_grantopt'@'%'" + pw,
		"GRANT SELECT, INSERT ON gp_b.* TO 'gp_grantopt'@'%' WITH GRANT OPTION",
		"GRANT SELECT ON gp_a.t1 TO 'gp_grantopt'@'%' WITH GRANT OPTION",
		// Administrative.
		"CREATE USER 'gp_admin'@'%'" + pw,
		"GRANT PROCESS, CONNECTION ADMIN, BINLOG ADMIN, BINLOG MONITOR ON *.* TO 'gp_admin'@'%'",
		"GRANT SELECT ON gp_a.* TO 'gp_admin'@'%'",
		// None at all, as the reporter.
		"CREATE USER reporter",
		// The KILL victim and the GRANT target.
		"CREATE USER 'gp_victim'@'%'" + pw,
		"CREATE USER 'gp_sink'@'%'" + pw,
	}
}

// createSchemas creates the test schemas on the servers in full (objects and
// rows) and on the servers in structureOnly without rows.
func createSchemas(ctx context.Context, full, structureOnly []*sandbox.Server) error {
	var ddl, dml []string
	for _, db := range databases {
		ddl = append(ddl, structureDDL(db)...)
		dml = append(dml, rowsDML(db)...)
	}
	for _, s := range full {
		if err := s.Exec(ctx, append(append([]string{}, ddl...), dml...)...); err != nil {
			return err
		}
	}
	for _, s := range structureOnly {
		if err := s.Exec(ctx, ddl...); err != nil {
			return err
		}
	}
	return nil
}

// createAccounts runs accountStatements on each server.
func createAccounts(ctx context.Context, servers ...*sandbox.Server) error {
	for _, s := range servers {
		if err := s.Exec(ctx, accountStatements()...); err != nil {
			return err
		}
	}
	return nil
}
