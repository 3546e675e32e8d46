package badinput

import (
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// requireServerAnswer runs q on the session c: it must come back as a result
// or as a MySQL error (the server's, or sluice's naming the problem), never
// as a broken connection; then the same session must answer SELECT 1.
func requireServerAnswer(t *testing.T, c *sql.Conn, q string, allowed ...uint16) (result []byte, code uint16) {
	t.Helper()
	ctx := ctxT(t)
	var v []byte
	err := c.QueryRowContext(ctx, q).Scan(&v)
	var me *mysql.MySQLError
	switch {
	case err == nil:
	case errors.As(err, &me):
		code = me.Number
		if me.Message == "" || me.Number == 0 {
			t.Fatalf("%q: ERR without code or message: %v", q, err)
		}
		if len(allowed) > 0 && !inCodes(me.Number, allowed) {
			t.Fatalf("%q: ERR %d %q, want one of %v", q, me.Number, me.Message, allowed)
		}
		t.Logf("%q: ERR %d %s", q, me.Number, me.Message)
	default:
		t.Fatalf("%q: not a MySQL answer: %v", q, err)
	}
	var one int
	if err := c.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("session unusable after %q: %v", q, err)
	}
	return v, code
}

func inCodes(c uint16, codes []uint16) bool {
	for _, x := range codes {
		if c == x {
			return true
		}
	}
	return false
}

// Invalid UTF-8 and NUL bytes in COM_QUERY: the server's own answer comes
// back and the session stays usable.
func TestInvalidUTF8AndNULInSQL(t *testing.T) {
	checkLeaks(t)
	c := sqlConn(t, env.addr)
	// NUL inside a string literal is data.
	if v, code := requireServerAnswer(t, c, "SELECT 'a\x00b'"); code != 0 || string(v) != "a\x00b" {
		t.Fatalf("SELECT 'a\\0b' = %q (ERR %d)", v, code)
	}
	for _, q := range []string{
		"SELECT 'a\xff\xfeb'",           // invalid UTF-8 in a literal
		"SELECT '\xc3\x28'",             // a broken two-byte sequence
		"SELECT '\xed\xa0\x80'",         // a UTF-16 surrogate
		"SELECT 1\x00",                  // NUL after the statement
		"SELECT\x00 1",                  // NUL between tokens
		"SELECT `a\x00b` FROM dual",     // NUL in an identifier
		"SELECT `\xff\xfe` FROM dual",   // invalid UTF-8 in an identifier
		"\xff\xfe\x00\x01",              // nothing but garbage
		"SELECT 1 /* \xff\x00 */",       // in a comment
		"INSERT INTO \xff VALUES (1)",   // a write
		"SELECT 'x' -- \x00\xff\n, 2",   // in a line comment
		"/*!50000 SELECT \xff\x00 */ 1", // in a versioned comment
	} {
		requireServerAnswer(t, c, q)
	}
	requireServes(t, env.addr)
}

// Statements sluice's parser cannot parse: MariaDB syntax the TiDB parser
// lacks gets the backend's answer, nonsense gets 1064; the session stays
// usable.
func TestUnparsableStatement(t *testing.T) {
	checkLeaks(t)
	c := sqlConn(t, env.addr)
	for _, q := range []string{
		"SELECT 1 LIMIT ROWS EXAMINED 1000", // MariaDB only
		"VALUES (1)",                        // a table value constructor
		"SELECT 1 FROM dual WHERE 1 = 1 INTERSECT ALL SELECT 1",
		"SELECT JSON_DETAILED('[1]')",
		// A number the parser's literal driver cannot hold makes it
		// panic; sluice takes that as a parse failure, and MariaDB
		// answers with a DECIMAL. (The alias makes a digest no earlier
		// statement has, so the text reaches the parser.)
		"SELECT " + strings.Repeat("7", 82) + " AS eighty_two_sevens",
	} {
		if _, code := requireServerAnswer(t, c, q); code != 0 {
			t.Errorf("%q: MariaDB runs it, sluice answered ERR %d", q, code)
		}
	}
	for _, q := range []string{
		"SELEKT 1",
		"SELECT (((((1",
		"SELECT 1 FROM",
		";;;",
		"SELECT @@@",
	} {
		requireServerAnswer(t, c, q, 1064, 1065)
	}
	requireServes(t, env.addr)
}
