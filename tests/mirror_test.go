package tests

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// mirrorSetup is the master's schema before sluice starts: what a
// mirror must carry over to the auth server without what would fail
// there (foreign keys, partitions, AUTO_INCREMENT=n, system versioning, a
// DEFAULT from a sequence, a view's DEFINER, routine bodies).
var mirrorSetup = []string{
	"CREATE DATABASE mshop",
	"CREATE TABLE mshop.customers (id int PRIMARY KEY AUTO_INCREMENT, name varchar(20) COMMENT 'it''s') AUTO_INCREMENT=100 DEFAULT CHARSET=latin1",
	"CREATE TABLE mshop.orders (id bigint unsigned NOT NULL AUTO_INCREMENT, cid int, amount decimal(10,2) DEFAULT 0, st enum('a','b c') DEFAULT 'a', " +
		"j json, g int GENERATED ALWAYS AS (cid + 1) VIRTUAL, created datetime NOT NULL DEFAULT current_timestamp(), PRIMARY KEY (id, created), KEY (cid), " +
		"CONSTRAINT chk CHECK (amount >= 0)) ROW_FORMAT=DYNAMIC PARTITION BY RANGE COLUMNS(created) " +
		"(PARTITION p0 VALUES LESS THAN ('2020-01-01'), PARTITION p1 VALUES LESS THAN (MAXVALUE))",
	"CREATE TABLE mshop.items (id int AUTO_INCREMENT PRIMARY KEY, cid int, FOREIGN KEY (cid) REFERENCES mshop.customers (id)) AUTO_INCREMENT=7 WITH SYSTEM VERSIONING",
	"CREATE SEQUENCE mshop.seq1",
	"CREATE TABLE mshop.sq (a int DEFAULT nextval(mshop.seq1))",
	"CREATE TABLE mshop.dropme (a int)",
	"CREATE DEFINER = root@localhost SQL SECURITY DEFINER VIEW mshop.v1 AS SELECT id, name FROM mshop.customers WHERE id > 1",
	"CREATE DEFINER = root@localhost PROCEDURE mshop.p1(IN x int) BEGIN SELECT x; END",
	"CREATE DEFINER = root@localhost FUNCTION mshop.f1(a int) RETURNS int DETERMINISTIC RETURN a + 1",
	"INSERT INTO mshop.customers (name) VALUES ('alice'), ('bob')",
}

// mirrorCatalog lists what s holds in schemas, one line per column
// ("schema.table.column type"; a view's columns without type, since the
// auth server's stubs read NULL) and per routine, sorted.
func mirrorCatalog(t *testing.T, ctx context.Context, db *sql.DB, schemas []string) []string {
	t.Helper()
	in := "'" + strings.Join(schemas, "','") + "'"
	rows, err := db.QueryContext(ctx, "SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME, c.COLUMN_TYPE, t.TABLE_TYPE "+
		"FROM information_schema.COLUMNS c JOIN information_schema.TABLES t USING (TABLE_SCHEMA, TABLE_NAME) "+
		"WHERE c.TABLE_SCHEMA IN ("+in+") ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s, tb, c, typ, kind string
		if err := rows.Scan(&s, &tb, &c, &typ, &kind); err != nil {
			t.Fatal(err)
		}
		switch kind {
		case "VIEW":
			out = append(out, fmt.Sprintf("view %s.%s.%s", s, tb, c))
			continue
		case "SYSTEM VERSIONED":
			// The mirror drops WITH SYSTEM VERSIONING: grants need none.
			kind = "BASE TABLE"
		}
		out = append(out, fmt.Sprintf("%s %s.%s.%s %s", strings.ToLower(kind), s, tb, c, typ))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rrows, err := db.QueryContext(ctx, "SELECT ROUTINE_TYPE, ROUTINE_SCHEMA, ROUTINE_NAME FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA IN ("+in+")")
	if err != nil {
		t.Fatal(err)
	}
	defer rrows.Close()
	for rrows.Next() {
		var typ, s, n string
		if err := rrows.Scan(&typ, &s, &n); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %s.%s", strings.ToLower(typ), s, n))
	}
	slices.Sort(out)
	return out
}

// awaitMirrored polls until the auth server holds what the master holds in
// schemas (and, with gone, no schema named in gone), failing with the
// difference after 30s.
func awaitMirrored(t *testing.T, topo *sandbox.Topology, schemas []string, gone ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	master, authDB := mustRoot(t, topo.Master), mustRoot(t, topo.Auth)
	deadline := time.Now().Add(30 * time.Second)
	for {
		want, got := mirrorCatalog(t, ctx, master, schemas), mirrorCatalog(t, ctx, authDB, schemas)
		left := 0
		for _, g := range gone {
			var n int
			if err := authDB.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", g).Scan(&n); err != nil {
				t.Fatal(err)
			}
			left += n
		}
		if slices.Equal(want, got) && left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the auth server does not mirror the master within 30s (schemas %v gone: %d left)\nmaster:\n  %s\nauth server:\n  %s",
				gone, left, strings.Join(want, "\n  "), strings.Join(got, "\n  "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// mirrorConfig is a sluice configuration for topo with mirror_schema set
// to on and the admin port for RELOAD CONFIG.
func mirrorConfig(topo *sandbox.Topology, on bool) string {
	o := sandbox.SluiceOptions{Listen: "127.0.0.1:0",
		ProxyKeys: []string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = "127.0.0.1:0"`},
		AuthKeys:  []string{fmt.Sprintf("mirror_schema = %v", on)}}
	return sandbox.ShardedSluiceConfig(o, topo.Auth, []sandbox.NamedTopology{{Name: "main", Topology: topo}}, "") +
		"\n[admin]\nuser = \"admin\"\npassword = \"" + adminPassword + "\"\n"
}

// mirrorClient is the app user's pool through srv.
func mirrorClient(t *testing.T, srv *server.Server, topo *sandbox.Topology) *sql.DB {
	t.Helper()
	d, err := sql.Open("mysql", dsn(srv.Addr().String(), topo.Opts.AppUser, topo.Opts.AppPassword, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestMirrorSchema: with [auth] mirror_schema the auth server gets the
// master's schemas, tables (columns equal), views, sequences and routines
// at start-up (retried while the auth server is down) and after DDL routed
// through sluice or a RELOAD CONFIG, no row, and keeps the DBA's grants on a table it replaces; a column-level
// GRANT on a table created through sluice works there, and fails without
// the mirror.
func TestMirrorSchema(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topo, err := sandbox.Start(ctx, sandbox.Options{Replicas: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer topo.Stop()
	master, authDB := mustRoot(t, topo.Master), mustRoot(t, topo.Auth)
	for _, q := range mirrorSetup {
		mustExec(t, master, q)
	}
	// reader gets the grants; dba_own is the DBA's own schema on the auth
	// server, which no master has and the mirror must leave alone.
	mustExec(t, authDB, "CREATE USER reader@'%'")
	mustExec(t, authDB, "CREATE DATABASE dba_own")
	schemas := []string{"mshop", sandbox.TestDatabase}

	// The control: without the mirror a table created through sluice
	// does not exist on the auth server, and MariaDB refuses the grant.
	off, _ := reloadSluice(t, mirrorConfig(topo, false))
	mustExec(t, mirrorClient(t, off, topo), "CREATE TABLE mshop.late (a int, b int)")
	_, err = authDB.ExecContext(ctx, "GRANT SELECT (b) ON mshop.late TO reader@'%'")
	if n := mysqlErrNumber(err); n != 1146 {
		t.Fatalf("GRANT on a table only the master has, without the mirror: %v; want ERR 1146", err)
	}
	if runs := scrapeFrom(t, off, `sluice_auth_mirror_runs_total{result="ok"}`); runs != 0 {
		t.Errorf("mirror_schema = false ran the mirror %v times", runs)
	}
	_ = off.Close()

	// sluice starts while the auth server is down: the mirror's first run
	// fails, and it runs again until the auth server is back.
	if err := topo.Auth.Stop(); err != nil {
		t.Fatal(err)
	}
	srv, _ := reloadSluice(t, mirrorConfig(topo, true))
	app := mirrorClient(t, srv, topo)
	pollUntil(t, "a failed mirror run while the auth server is down", func() bool {
		return scrapeFrom(t, srv, `sluice_auth_mirror_runs_total{result="error"}`) >= 1
	})
	if err := topo.Auth.Start(ctx); err != nil {
		t.Fatal(err)
	}
	awaitMirrored(t, topo, schemas)
	mustExec(t, authDB, "GRANT SELECT (b) ON mshop.late TO reader@'%'")
	mustExec(t, authDB, "GRANT SELECT (id, cid), INSERT ON mshop.orders TO reader@'%'")
	mustExec(t, authDB, "GRANT SELECT (name) ON mshop.v1 TO reader@'%'")
	mustExec(t, authDB, "GRANT EXECUTE ON PROCEDURE mshop.p1 TO reader@'%'")
	mustExec(t, authDB, "GRANT EXECUTE ON FUNCTION mshop.f1 TO reader@'%'")
	grantsBefore := showGrants(t, authDB, "reader")

	// DDL through sluice reaches the auth server.
	for _, q := range []string{
		"CREATE TABLE mshop.t2 (id int PRIMARY KEY, v varchar(10))",
		"ALTER TABLE mshop.orders ADD COLUMN note varchar(20) AFTER cid",
		"CREATE VIEW mshop.v2 AS SELECT id, v FROM mshop.t2",
		"CREATE PROCEDURE mshop.p2() BEGIN SELECT 1; END",
		"DROP TABLE mshop.dropme",
		"CREATE DATABASE mtmp",
		"CREATE TABLE mtmp.x (a int)",
	} {
		mustExec(t, app, q)
	}
	awaitMirrored(t, topo, append(schemas, "mtmp"))
	// orders was replaced (a new column): the grants on it stayed.
	grantsAfter := showGrants(t, authDB, "reader")
	for _, g := range grantsBefore {
		if !slices.Contains(grantsAfter, g) {
			t.Errorf("grant %q lost when the mirror replaced the tables; now:\n%s", g, strings.Join(grantsAfter, "\n"))
		}
	}
	for _, q := range []string{
		"GRANT SELECT (note) ON mshop.orders TO reader@'%'",
		"GRANT SELECT (v), UPDATE (v) ON mshop.t2 TO reader@'%'",
		"GRANT SELECT (v) ON mshop.v2 TO reader@'%'",
		"GRANT EXECUTE ON PROCEDURE mshop.p2 TO reader@'%'",
	} {
		mustExec(t, authDB, q)
	}

	// DROP DATABASE through sluice drops the schema the mirror created,
	// and only that.
	mustExec(t, app, "DROP DATABASE mtmp")
	awaitMirrored(t, topo, schemas, "mtmp")
	var n int
	if err := authDB.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'dba_own'").Scan(&n); err != nil || n != 1 {
		t.Errorf("the DBA's own schema dba_own on the auth server: %d, %v; want it kept", n, err)
	}

	// DDL that did not pass through sluice arrives with RELOAD CONFIG.
	okRuns := scrapeFrom(t, srv, `sluice_auth_mirror_runs_total{result="ok"}`)
	mustExec(t, master, "CREATE TABLE mshop.direct (d date)")
	mustReload(t, srv)
	awaitMirrored(t, topo, schemas)
	if after := scrapeFrom(t, srv, `sluice_auth_mirror_runs_total{result="ok"}`); after <= okRuns {
		t.Errorf("sluice_auth_mirror_runs_total{result=\"ok\"} %v after the reload, %v before", after, okRuns)
	}
	if c := scrapeFrom(t, srv, "sluice_auth_mirror_changes_total"); c < 10 {
		t.Errorf("sluice_auth_mirror_changes_total = %v, want at least the 10 objects created", c)
	}

	// No row ever reaches the auth server.
	mustExec(t, app, "INSERT INTO mshop.t2 VALUES (1, 'x'), (2, 'y')")
	mustExec(t, app, "INSERT INTO mshop.orders (cid, amount) VALUES (1, 2)")
	mustExec(t, app, "CREATE TABLE mshop.last (a int)") // one more run after the inserts
	awaitMirrored(t, topo, schemas)
	assertNoRows(t, authDB, schemas)
}

// showGrants is SHOW GRANTS FOR user@'%' on db, each grant's columns
// sorted.
func showGrants(t *testing.T, db *sql.DB, user string) []string {
	t.Helper()
	rows, err := db.QueryContext(ctxT(t), "SHOW GRANTS FOR "+user+"@'%'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			t.Fatal(err)
		}
		// The columns of a grant, in a fixed order: the server lists them
		// in the order of its own hash.
		g = grantColumns.ReplaceAllStringFunc(g, func(cols string) string {
			list := strings.Split(cols[1:len(cols)-1], ", ")
			slices.Sort(list)
			return "(" + strings.Join(list, ", ") + ")"
		})
		out = append(out, g)
	}
	return out
}

// grantColumns matches a column list in SHOW GRANTS output.
var grantColumns = regexp.MustCompile("\\((`[^)]*`)\\)")

// assertNoRows fails for any base table in schemas on db that holds a row.
func assertNoRows(t *testing.T, db *sql.DB, schemas []string) {
	t.Helper()
	ctx := ctxT(t)
	rows, err := db.QueryContext(ctx, "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED') AND TABLE_SCHEMA IN ('"+strings.Join(schemas, "','")+"')")
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var s, tb string
		if err := rows.Scan(&s, &tb); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, "`"+s+"`.`"+tb+"`")
	}
	rows.Close()
	if len(tables) < 5 {
		t.Fatalf("only %d tables on the auth server: %v", len(tables), tables)
	}
	for _, tb := range tables {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+tb).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s holds %d rows on the auth server", tb, n)
		}
	}
}
