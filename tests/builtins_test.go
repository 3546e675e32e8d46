package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/router"
)

// builtinParserLabels are the names in router.BuiltinFuncNames that MariaDB has no function
// for: they are the TiDB parser's names for MariaDB built-in syntaxes, so the server check
// cannot apply to them. The value is the MariaDB syntax that produces each.
var builtinParserLabels = map[string]string{
	"char_func":                "CHAR(65) and CHAR(65 USING utf8mb4)",
	"insert_func":              "INSERT('abc', 1, 1, 'x'), the string function",
	"'tidb`.(dateliteral":      "the literal DATE '2020-01-01' and {d '2020-01-01'}",
	"'tidb`.(timeliteral":      "the literal TIME '10:00:00' and {t '10:00:00'}",
	"'tidb`.(timestampliteral": "the literal TIMESTAMP '2020-01-01 10:00:00' and {ts '...'}",
}

// TestBuiltinFuncNames checks the router's list of built-in function names against the
// sandbox master. The router sends a statement calling only listed functions to a replica,
// and in MariaDB an unqualified call of a name that is not built-in is a call of a stored
// function, which may write. So every listed name must be one MariaDB treats as built-in:
// it is in information_schema.SQL_FUNCTIONS, or CREATE FUNCTION db.name() gives Note 1585
// ("has the same name as a native function") or a syntax error. MariaDB gives that note for
// every keyword too, functions or not, so the test also checks that, with a stored function
// of that name in the current database, an unqualified call does not reach it for at least
// one of zero, one and two arguments (POINT, for one, is built-in only with two).
func TestBuiltinFuncNames(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := mustRoot(t, env.topo.Master).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The session leaves the binary log off and a scratch database current: discard it
	// rather than return it to the shared pool.
	defer func() {
		c.Raw(func(any) error { return driverBadConn })
		c.Close()
	}()

	var version string
	if err := c.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(version, "MariaDB") {
		t.Skipf("the server is %s, not MariaDB", version)
	}

	const db = "sluice_builtins"
	const marker = "sluice stored function"
	exec := func(q string) error { _, err := c.ExecContext(ctx, q); return err }
	// Keep the scratch functions off the replicas.
	for _, q := range []string{
		"SET SESSION sql_log_bin = 0",
		"DROP DATABASE IF EXISTS " + db,
		"CREATE DATABASE " + db,
		"USE " + db,
	} {
		if err := exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	defer exec("DROP DATABASE IF EXISTS " + db)

	sqlFunctions := map[string]bool{}
	rows, err := c.QueryContext(ctx, "SELECT LOWER(FUNCTION) FROM information_schema.SQL_FUNCTIONS")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		sqlFunctions[n] = true
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}

	// nativeNote reports whether the last statement's warnings include Note 1585 for name.
	// Statements that use no table do not clear the warnings, hence the name check.
	nativeNote := func(name string) bool {
		rows, err := c.QueryContext(ctx, "SHOW WARNINGS")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		found := false
		for rows.Next() {
			var level, msg string
			var code int
			if err := rows.Scan(&level, &code, &msg); err != nil {
				t.Fatal(err)
			}
			found = found || code == 1585 && strings.Contains(strings.ToLower(msg), "'"+name+"'")
		}
		return found
	}
	// reachesStored creates a stored function name with arity INT parameters and reports
	// whether an unqualified call with that many arguments runs it.
	reachesStored := func(name string, arity int) bool {
		params, args := make([]string, arity), make([]string, arity)
		for i := range arity {
			params[i], args[i] = fmt.Sprintf("p%d INT", i), "0"
		}
		fn := db + ".`" + name + "`"
		if err := exec("DROP FUNCTION IF EXISTS " + fn); err != nil {
			t.Fatal(err)
		}
		q := "CREATE FUNCTION " + fn + "(" + strings.Join(params, ", ") + ") RETURNS VARCHAR(40) DETERMINISTIC RETURN '" + marker + "'"
		if err := exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var v any
		err := c.QueryRowContext(ctx, "SELECT "+name+"("+strings.Join(args, ", ")+")").Scan(&v)
		if err != nil {
			// Any error but a complaint about the stored function means MariaDB did not call it.
			return strings.Contains(err.Error(), "FUNCTION "+db+".")
		}
		b, _ := v.([]byte)
		s, _ := v.(string)
		return string(b) == marker || s == marker
	}

	names := router.BuiltinFuncNames()
	listed := map[string]bool{}
	for _, name := range names {
		listed[name] = true
	}
	for label := range builtinParserLabels {
		if !listed[label] {
			t.Errorf("parser label %q is allowed here but no longer in the router's list", label)
		}
	}
	for _, name := range names {
		if _, ok := builtinParserLabels[name]; ok {
			continue
		}
		builtin := sqlFunctions[name]
		err := exec("CREATE FUNCTION " + db + "." + name + "() RETURNS VARCHAR(40) DETERMINISTIC RETURN '" + marker + "'")
		switch {
		case err != nil && mysqlErrNumber(err) == 1064:
			builtin = true // a keyword the grammar reserves
		case err != nil:
			t.Fatalf("CREATE FUNCTION %s.%s(): %v", db, name, err)
		case nativeNote(name):
			builtin = true
		}
		if !builtin {
			t.Errorf("%q: not in SQL_FUNCTIONS and CREATE FUNCTION gives no Note 1585: MariaDB treats it as a stored function", name)
			continue
		}
		stored := 0
		for arity := range 3 {
			if reachesStored(name, arity) {
				stored++
			}
		}
		if stored == 3 {
			t.Errorf("%q: an unqualified call with 0, 1 or 2 arguments runs the stored function of that name", name)
		}
		if err := exec("DROP FUNCTION IF EXISTS " + db + ".`" + name + "`"); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d names checked on %s (%d parser labels skipped)", len(names)-len(builtinParserLabels), version, len(builtinParserLabels))
}
