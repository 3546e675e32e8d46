package tests

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

const adminPassword = "adm-s3cret"

// adminSluice starts a sluice of its own in front of the shared topology
// with the admin port on a free port and [admin] user adminUser.
func adminSluice(t *testing.T, adminUser string) *server.Server {
	t.Helper()
	o := sandbox.SluiceOptions{Listen: "127.0.0.1:0",
		ProxyKeys:  []string{`metrics_listen = ""`, `admin_listen = "127.0.0.1:0"`},
		HealthKeys: []string{`interval = "100ms"`}}
	text := env.topo.SluiceConfigWith(o) + "\n[admin]\nuser = \"" + adminUser + "\"\npassword = \"" + adminPassword + "\"\n"
	cfg, err := conf.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// adminCLI runs sql through the mariadb client on srv's admin port, in
// batch mode with column names, and returns stdout, stderr and the error.
func adminCLI(t *testing.T, srv *server.Server, password, sql string) (string, string, error) {
	t.Helper()
	host, port, _ := net.SplitHostPort(srv.AdminAddr().String())
	return runCLI(t, "--no-defaults", "--skip-ssl", "-h"+host, "-P"+port, "-uadmin", "-p"+password, "-B", "-e", sql)
}

// adminRows runs sql on the admin port with the mariadb client and returns
// the header and rows, failing the test on an error.
func adminRows(t *testing.T, srv *server.Server, sql string) ([]string, [][]string) {
	t.Helper()
	out, errOut, err := adminCLI(t, srv, adminPassword, sql)
	if err != nil {
		t.Fatalf("%s: %v: %s", sql, err, errOut)
	}
	lines := strings.Split(out, "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatalf("%s: no output", sql)
	}
	header := strings.Split(lines[0], "\t")
	var rows [][]string
	for _, l := range lines[1:] {
		r := strings.Split(l, "\t")
		// runCLI trims the output, and with it the empty last values.
		for len(r) < len(header) {
			r = append(r, "")
		}
		rows = append(rows, r)
	}
	return header, rows
}

// column returns the values of column name in rows.
func column(t *testing.T, header []string, rows [][]string, name string) []string {
	t.Helper()
	for i, h := range header {
		if h == name {
			var out []string
			for _, r := range rows {
				out = append(out, r[i])
			}
			return out
		}
	}
	t.Fatalf("no column %q in %v", name, header)
	return nil
}

// rowWith returns the first row whose column name equals value.
func rowWith(t *testing.T, header []string, rows [][]string, name, value string) map[string]string {
	t.Helper()
	for i, v := range column(t, header, rows, name) {
		if v == value {
			m := map[string]string{}
			for j, h := range header {
				m[h] = rows[i][j]
			}
			return m
		}
	}
	t.Fatalf("no row with %s = %q in %v", name, value, rows)
	return nil
}

// adminDB opens a go-sql-driver pool on srv's admin port.
func adminDB(t *testing.T, srv *server.Server, password string) *sql.DB {
	t.Helper()
	d, err := sql.Open("mysql", dsn(srv.AdminAddr().String(), "admin", password, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func sqlCode(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

func TestAdminCommands(t *testing.T) {
	srv := adminSluice(t, "admin")
	app, err := sql.Open("mysql", dsn(srv.Addr().String(), env.topo.Opts.AppUser, env.topo.Opts.AppPassword, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	ctx := ctxT(t)
	for range 3 {
		var one int
		if err := app.QueryRowContext(ctx, "SELECT 1 + 41").Scan(&one); err != nil {
			t.Fatal(err)
		}
	}
	hold := conn(t, app)
	mustExecC(t, hold, "SET @pinned = 1")
	master := env.topo.Master.Addr()
	replica := env.topo.Replicas[0].Addr()

	t.Run("SHOW BACKENDS", func(t *testing.T) {
		h, rows := adminRows(t, srv, "SHOW BACKENDS")
		m := rowWith(t, h, rows, "address", master)
		if m["cluster"] != "main" || m["role"] != "master" || m["state"] != "up" || m["weight"] != "1" {
			t.Fatalf("master row: %v", m)
		}
		r := rowWith(t, h, rows, "address", replica)
		if r["role"] != "replica" {
			t.Fatalf("replica row: %v", r)
		}
		total := 0
		for _, q := range column(t, h, rows, "queries") {
			n, _ := strconv.Atoi(q)
			total += n
		}
		if total < 3 {
			t.Fatalf("queries column sums to %d after 3 statements: %v", total, rows)
		}
	})
	t.Run("SHOW CLUSTERS", func(t *testing.T) {
		h, rows := adminRows(t, srv, "show clusters;")
		m := rowWith(t, h, rows, "cluster", "main")
		if m["master"] != master || !strings.Contains(m["replicas"], replica) || m["epoch"] == "" {
			t.Fatalf("cluster row: %v", m)
		}
	})
	t.Run("SHOW POOLS", func(t *testing.T) {
		h, rows := adminRows(t, srv, "SHOW POOLS")
		if len(rows) != 1+len(env.topo.Replicas) {
			t.Fatalf("SHOW POOLS: %d rows, want one per backend: %v", len(rows), rows)
		}
		m := rowWith(t, h, rows, "address", master)
		if m["size"] == "" || m["open"] == "" {
			t.Fatalf("pool row: %v", m)
		}
	})
	t.Run("SHOW SESSIONS", func(t *testing.T) {
		h, rows := adminRows(t, srv, "SHOW SESSIONS")
		users := column(t, h, rows, "user")
		pinned := column(t, h, rows, "pinned")
		found := false
		for i := range users {
			if users[i] == env.topo.Opts.AppUser && strings.Contains(pinned[i], "user_variables") {
				found = true
			}
		}
		if !found {
			t.Fatalf("no session of %s pinned by user_variables: %v", env.topo.Opts.AppUser, rows)
		}
	})
	t.Run("SHOW QUERY DIGESTS", func(t *testing.T) {
		h, rows := adminRows(t, srv, "SHOW QUERY DIGESTS LIMIT 50")
		var m map[string]string
		for _, d := range column(t, h, rows, "digest") {
			if strings.Contains(strings.ToLower(d), "select ? + ?") {
				m = rowWith(t, h, rows, "digest", d)
			}
		}
		if m == nil {
			t.Fatalf("no digest of SELECT 1 + 41: %v", rows)
		}
		if n, _ := strconv.Atoi(m["count"]); n < 3 || m["route"] == "" || m["errors"] != "0" {
			t.Fatalf("digest row: %v", m)
		}
		_, one := adminRows(t, srv, "SHOW QUERY DIGESTS LIMIT 1")
		if len(one) != 1 {
			t.Fatalf("LIMIT 1 gave %d rows", len(one))
		}
	})
	t.Run("SHOW SHARDS", func(t *testing.T) {
		// Without rules the result is empty (the client prints nothing).
		out, errOut, err := adminCLI(t, srv, adminPassword, "SHOW SHARDS")
		if err != nil || out != "" {
			t.Fatalf("SHOW SHARDS without rules: %q %v: %s", out, err, errOut)
		}
		rows, err := adminDB(t, srv, adminPassword).QueryContext(ctx, "SHOW SHARDS")
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		rows.Close()
		if strings.Join(cols, ",") != "schema,table,key,algorithm,clusters,tables_per_cluster,physical_tables" {
			t.Fatalf("SHOW SHARDS columns: %v", cols)
		}
	})
	t.Run("SHOW CONFIG hides secrets", func(t *testing.T) {
		out, _, err := adminCLI(t, srv, adminPassword, "SHOW CONFIG")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "cluster \"main\"") || strings.Contains(out, adminPassword) ||
			!strings.Contains(out, "password set in the file") {
			t.Fatalf("SHOW CONFIG: %s", out)
		}
	})
	t.Run("SHOW VERSION", func(t *testing.T) {
		h, rows := adminRows(t, srv, "SHOW VERSION")
		if len(rows) != 1 || h[0] != "sluice" || !strings.HasPrefix(rows[0][1], "go") {
			t.Fatalf("SHOW VERSION: %v %v", h, rows)
		}
	})
	t.Run("HELP", func(t *testing.T) {
		// The mariadb client answers HELP itself; SHOW HELP reaches sluice.
		h, rows := adminRows(t, srv, "SHOW HELP")
		var n int
		if err := adminDB(t, srv, adminPassword).QueryRowContext(ctx, "SELECT 1 FROM dual").Scan(&n); err == nil {
			t.Fatal("SELECT on the admin port succeeded")
		}
		var cmd, desc string
		if err := adminDB(t, srv, adminPassword).QueryRowContext(ctx, "help").Scan(&cmd, &desc); err != nil || cmd != "SHOW BACKENDS" {
			t.Fatalf("HELP through go-sql-driver: %q %v", cmd, err)
		}
		cmds := strings.Join(column(t, h, rows, "command"), "\n")
		for _, c := range []string{"SHOW BACKENDS", "SET BACKEND", "KILL", "SWITCHOVER", "FAILOVER", "RELOAD CONFIG"} {
			if !strings.Contains(cmds, c) {
				t.Fatalf("HELP lacks %s: %s", c, cmds)
			}
		}
	})
	t.Run("SET BACKEND WEIGHT and SHOW EVENTS", func(t *testing.T) {
		if _, errOut, err := adminCLI(t, srv, adminPassword, "SET BACKEND '"+replica+"' WEIGHT 5"); err != nil {
			t.Fatalf("%v: %s", err, errOut)
		}
		h, rows := adminRows(t, srv, "SHOW BACKENDS")
		if w := rowWith(t, h, rows, "address", replica)["weight"]; w != "5" {
			t.Fatalf("weight after SET BACKEND WEIGHT 5: %s", w)
		}
		if _, errOut, err := adminCLI(t, srv, adminPassword, "SET BACKEND '"+replica+"' OFFLINE"); err != nil {
			t.Fatalf("%v: %s", err, errOut)
		}
		if _, errOut, err := adminCLI(t, srv, adminPassword, "SET BACKEND '"+replica+"' ONLINE"); err != nil {
			t.Fatalf("%v: %s", err, errOut)
		}
		h, rows = adminRows(t, srv, "SHOW EVENTS")
		kinds := strings.Join(column(t, h, rows, "kind"), ",")
		if !strings.Contains(kinds, "offline") || !strings.Contains(kinds, "online") {
			t.Fatalf("SHOW EVENTS after OFFLINE/ONLINE: %v", rows)
		}
		if e := rowWith(t, h, rows, "kind", "offline"); e["backend"] != replica || e["epoch"] == "" || e["time"] == "" {
			t.Fatalf("offline event: %v", e)
		}
	})
	t.Run("master cannot go offline", func(t *testing.T) {
		_, errOut, err := adminCLI(t, srv, adminPassword, "SET BACKEND '"+master+"' OFFLINE")
		if err == nil || !strings.Contains(errOut, "SWITCHOVER") {
			t.Fatalf("SET BACKEND master OFFLINE: %v: %s", err, errOut)
		}
	})
	t.Run("operations reach the Server methods", func(t *testing.T) {
		// The shared topology must keep its master: only refusals here
		// (tests/switchover_test.go runs real ones on topologies of
		// their own).
		for _, c := range []struct{ q, want string }{
			{"SWITCHOVER CLUSTER nope TO '" + replica + "'", `no cluster "nope"`},
			{"FAILOVER CLUSTER main", "use SWITCHOVER"},
		} {
			_, errOut, err := adminCLI(t, srv, adminPassword, c.q)
			if err == nil || !strings.Contains(errOut, c.want) {
				t.Fatalf("%s: %v: %s; want a refusal saying %q", c.q, err, errOut, c.want)
			}
		}
	})
	t.Run("KILL CONNECTION", func(t *testing.T) {
		c := conn(t, app)
		mustExecC(t, c, "SET @victim = 1")
		h, rows := adminRows(t, srv, "SHOW SESSIONS")
		var id string
		ids, pins := column(t, h, rows, "id"), column(t, h, rows, "pinned")
		for i := range ids {
			if strings.Contains(pins[i], "user_variables") {
				id = ids[i] // the newest pinned session is the victim
			}
		}
		if _, errOut, err := adminCLI(t, srv, adminPassword, "KILL CONNECTION "+id); err != nil {
			t.Fatalf("KILL CONNECTION %s: %v: %s", id, err, errOut)
		}
		var v int
		if err := c.QueryRowContext(ctx, "SELECT @victim").Scan(&v); err == nil {
			t.Fatalf("session %s still answers after KILL CONNECTION", id)
		}
		_, errOut, err := adminCLI(t, srv, adminPassword, "KILL 999999")
		if err == nil || !strings.Contains(errOut, "1094") {
			t.Fatalf("KILL of an unknown id: %v: %s", err, errOut)
		}
	})
}

func TestAdminLogin(t *testing.T) {
	srv := adminSluice(t, "admin")
	t.Run("wrong password", func(t *testing.T) {
		_, errOut, err := adminCLI(t, srv, "wrong", "SHOW VERSION")
		if err == nil || !strings.Contains(errOut, "1045") {
			t.Fatalf("wrong admin password: %v: %s", err, errOut)
		}
	})
	t.Run("application user", func(t *testing.T) {
		host, port, _ := net.SplitHostPort(srv.AdminAddr().String())
		_, errOut, err := runCLI(t, "--no-defaults", "--skip-ssl", "-h"+host, "-P"+port, "-u"+env.topo.Opts.AppUser,
			"-p"+env.topo.Opts.AppPassword, "-e", "SHOW VERSION")
		if err == nil || !strings.Contains(errOut, "1045") {
			t.Fatalf("application user on the admin port: %v: %s", err, errOut)
		}
	})
	t.Run("admin user on the data port", func(t *testing.T) {
		// The admin user is named like the application user, so the auth
		// server accepts it and only sluice's own check refuses it.
		s2 := adminSluice(t, env.topo.Opts.AppUser)
		host, port, _ := net.SplitHostPort(s2.Addr().String())
		_, errOut, err := runCLI(t, "--no-defaults", "--skip-ssl", "-h"+host, "-P"+port, "-u"+env.topo.Opts.AppUser,
			"-p"+env.topo.Opts.AppPassword, "-e", "SELECT 1")
		if err == nil || !strings.Contains(errOut, "1045") || !strings.Contains(errOut, s2.AdminAddr().String()) {
			t.Fatalf("admin user on the data port: %v: %s", err, errOut)
		}
	})
}

func TestAdminBadInput(t *testing.T) {
	srv := adminSluice(t, "admin")
	ctx := ctxT(t)
	d := adminDB(t, srv, adminPassword)
	d.SetMaxIdleConns(1)
	c := conn(t, d)
	for _, q := range []string{";", "", "   ", "SET BACKEND 'x'' OR 1=1 --' OFFLINE", "SET BACKEND 'x' OR '1'='1' OFFLINE",
		"SET BACKEND 'x'; DROP TABLE t; --' OFFLINE", "SHOW BACKENDS; SHOW POOLS", "\x00\xff", "SELECT * FROM mysql.user"} {
		_, err := c.ExecContext(ctx, q)
		if err == nil {
			t.Fatalf("%q: no error", q)
		}
		if code := sqlCode(err); code == 0 {
			t.Fatalf("%q: %v, want an ERR packet", q, err)
		}
		// The connection still serves.
		var v string
		if err := c.QueryRowContext(ctx, "SHOW VERSION").Scan(&v, new(string), new(string)); err != nil {
			t.Fatalf("after %q: %v", q, err)
		}
	}
	t.Run("1 MB query", func(t *testing.T) {
		_, err := d.ExecContext(ctx, "SHOW BACKENDS "+strings.Repeat("x", 1<<20))
		if err == nil {
			t.Fatal("1 MB command: no error")
		}
		// sluice closes that connection after the ERR (with the rest of the
		// megabyte unread, so the client may see a reset), and d can hand
		// the dead connection out again before it notices: ask on a new
		// one whether the port still serves.
		var v string
		if err := adminDB(t, srv, adminPassword).QueryRowContext(ctx, "SHOW VERSION").Scan(&v, new(string), new(string)); err != nil {
			t.Fatalf("admin port after a 1 MB command: %v", err)
		}
	})
	t.Run("CLI lone semicolon and unknown command", func(t *testing.T) {
		_, errOut, err := adminCLI(t, srv, adminPassword, "FROB")
		if err == nil || !strings.Contains(errOut, "SHOW BACKENDS") {
			t.Fatalf("unknown command: %v: %s", err, errOut)
		}
	})
}

// TestAdminOfflineDrains sets a replica OFFLINE: it gets no new reads,
// a transaction in flight on the master finishes, and ONLINE brings the
// replica back into rotation.
func TestAdminOfflineDrains(t *testing.T) {
	srv := adminSluice(t, "admin")
	ctx := ctxT(t)
	app, err := sql.Open("mysql", dsn(srv.Addr().String(), env.topo.Opts.AppUser, env.topo.Opts.AppPassword, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	root := mustRoot(t, env.topo.Master)
	mustExec(t, root, "CREATE DATABASE IF NOT EXISTS admintest")
	mustExec(t, root, "CREATE TABLE IF NOT EXISTS admintest.drain (id INT PRIMARY KEY)")
	mustExec(t, root, "DELETE FROM admintest.drain")

	off := env.topo.Replicas[0]
	tx := conn(t, app)
	mustExecC(t, tx, "BEGIN")
	mustExecC(t, tx, "INSERT INTO admintest.drain VALUES (1)")

	if _, errOut, err := adminCLI(t, srv, adminPassword, "SET BACKEND '"+off.Addr()+"' OFFLINE"); err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	t.Cleanup(func() { adminCLI(t, srv, adminPassword, "SET BACKEND '"+off.Addr()+"' ONLINE") })
	for range 30 {
		c := conn(t, app)
		if id := serverID(t, ctx, c, ""); id == off.ServerID {
			t.Fatalf("a read reached offline replica %s", off.Addr())
		}
		c.Raw(func(any) error { return driverBadConn })
	}
	mustExecC(t, tx, "INSERT INTO admintest.drain VALUES (2)")
	mustExecC(t, tx, "COMMIT")
	var n int
	if err := root.QueryRowContext(ctx, "SELECT COUNT(*) FROM admintest.drain").Scan(&n); err != nil || n != 2 {
		t.Fatalf("transaction in flight: %d rows (%v), want 2", n, err)
	}
	h, rows := adminRows(t, srv, "SHOW BACKENDS")
	if st := rowWith(t, h, rows, "address", off.Addr())["state"]; st != "offline" {
		t.Fatalf("state of the offline replica: %s", st)
	}

	if _, errOut, err := adminCLI(t, srv, adminPassword, "SET BACKEND '"+off.Addr()+"' ONLINE"); err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := conn(t, app)
		id := serverID(t, ctx, c, "")
		c.Raw(func(any) error { return driverBadConn })
		if id == off.ServerID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s got no read after ONLINE", off.Addr())
		}
	}
}

// TestAdminKillQuery kills a running SELECT SLEEP(30) from the admin port:
// the client gets the server's ERR 1317 within a second.
func TestAdminKillQuery(t *testing.T) {
	srv := adminSluice(t, "admin")
	app, err := sql.Open("mysql", dsn(srv.Addr().String(), env.topo.Opts.AppUser, env.topo.Opts.AppPassword, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	admin := adminDB(t, srv, adminPassword)
	type result struct {
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		var v int
		err := app.QueryRowContext(context.Background(), "SELECT SLEEP(30)").Scan(&v)
		done <- result{err, time.Now()}
	}()
	// Find the session once its statement runs.
	var id string
	deadline := time.Now().Add(10 * time.Second)
	for id == "" {
		if time.Now().After(deadline) {
			t.Fatal("the SLEEP never showed in SHOW SESSIONS")
		}
		rows, err := admin.Query("SHOW SESSIONS")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var sid, user, client, schema, backend, state, tm, digest, pinned string
			if err := rows.Scan(&sid, &user, &client, &schema, &backend, &state, &tm, &digest, &pinned); err != nil {
				t.Fatal(err)
			}
			if state == "query" && strings.Contains(strings.ToLower(digest), "sleep") && backend != "" {
				id = sid
			}
		}
		rows.Close()
	}
	killed := time.Now()
	if _, errOut, err := adminCLI(t, srv, adminPassword, "KILL QUERY "+id); err != nil {
		t.Fatalf("KILL QUERY %s: %v: %s", id, err, errOut)
	}
	select {
	case r := <-done:
		if took := r.at.Sub(killed); took > time.Second {
			t.Fatalf("the SLEEP ended %v after KILL QUERY, want within 1s", took)
		}
		if code := sqlCode(r.err); code != 1317 {
			t.Fatalf("killed SLEEP: %v, want ERR 1317", r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("SELECT SLEEP(30) still runs 5s after KILL QUERY")
	}
	// The session goes on after the kill.
	var one int
	if err := app.QueryRow("SELECT 1").Scan(&one); err != nil {
		t.Fatalf("after KILL QUERY: %v", err)
	}
}
