package tests

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// The client-compatibility matrix: every common MySQL client runs the same
// workload through sluice and reports which backend served what. The
// workload (one table per client, matrix_<client>):
//
//   - create the table; insert 3 rows with bound parameters (binary prepared
//     statements where the client has them), sid = @@server_id, a UTF-8 text
//     with a 4-byte character, a NULL and a DATETIME;
//   - read sid of row 1 back with /* sluice:master */: the write's server;
//   - in a transaction: SELECT @@server_id, a parameterised read and the
//     rows: everything on the master;
//   - outside: SELECT @@server_id, a parameterised read (the same statement
//     handle as in the transaction where the client keeps one) and the rows
//     (polled until replication brought them): every read on a replica;
//   - drop the table.
//
// Each client prints one JSON line (matrixResult); errors are counted, not
// fatal. The external clients live in testdata/clients and are installed by
// `make deps-test` (scripts/deps.sh test); a missing one fails the test.

// matrixResult is what one client run reports.
type matrixResult struct {
	Client        string   `json:"client"`
	OK            bool     `json:"ok"`
	Errors        int      `json:"errors"`
	ReadServerIDs []uint32 `json:"read_server_ids"`
	TxServerID    uint32   `json:"tx_server_id"`
	WriteServerID uint32   `json:"write_server_id"`
	Details       string   `json:"details"`
}

// matrixTarget is where and as whom a client connects.
type matrixTarget struct {
	name                       string
	host, port, user, password string
}

func (tg matrixTarget) addr() string { return net.JoinHostPort(tg.host, tg.port) }

func (tg matrixTarget) env() []string {
	return append(os.Environ(), "SLUICE_HOST="+tg.host, "SLUICE_PORT="+tg.port,
		"SLUICE_USER="+tg.user, "SLUICE_PASSWORD="+tg.password, "SLUICE_DB=sluice_test")
}

// sluiceTarget is the shared sluice as the app user.
func sluiceTarget() matrixTarget {
	host, port, _ := net.SplitHostPort(env.addr)
	return matrixTarget{"sluice", host, port, env.topo.Opts.AppUser, env.topo.Opts.AppPassword}
}

// masterTarget is the master directly, as sluice's service user: the
// reference a failure through sluice is compared with.
func masterTarget() matrixTarget {
	host, port, _ := net.SplitHostPort(env.topo.Master.Addr())
	return matrixTarget{"master", host, port, env.topo.Opts.ServiceUser, env.topo.Opts.ServicePassword}
}

// The workload's fixed data, shared with the scripts in testdata/clients.
var (
	matrixDT   = time.Date(2026, 11, 29, 10, 11, 12, 0, time.UTC)
	matrixRows = []matrixRow{
		{1, "h\u00e9llo \u4e16\u754c", sql.NullInt64{Int64: 10, Valid: true}},
		{2, "null n", sql.NullInt64{}},
		{3, "four bytes \U0001f642", sql.NullInt64{Int64: 30, Valid: true}},
	}
)

const matrixDTText = "2026-11-29 10:11:12"

type matrixRow struct {
	id  int
	txt string
	n   sql.NullInt64
}

// matrixClient is one entry of the matrix. run fails the test (with a
// pointer to `make deps-test`) when the client is not installed.
type matrixClient struct {
	name string
	run  func(t *testing.T, tg matrixTarget) matrixResult
}

func matrixClients() []matrixClient {
	return []matrixClient{
		{"go-sql-driver/interpolateParams", func(t *testing.T, tg matrixTarget) matrixResult {
			return goMatrixRun(t, tg, true)
		}},
		{"go-sql-driver/binary", func(t *testing.T, tg matrixTarget) matrixResult {
			return goMatrixRun(t, tg, false)
		}},
		{"mariadb-cli", cliMatrixRun},
		{"pymysql", func(t *testing.T, tg matrixTarget) matrixResult {
			return scriptMatrixRun(t, tg, "", findPyMySQL(t), "testdata/clients/pymysql_client.py")
		}},
		{"pdo/emulated", func(t *testing.T, tg matrixTarget) matrixResult {
			return scriptMatrixRun(t, tg, "", findPHP(t, "pdo_mysql"), "testdata/clients/pdo.php", "emulated")
		}},
		{"pdo/native", func(t *testing.T, tg matrixTarget) matrixResult {
			return scriptMatrixRun(t, tg, "", findPHP(t, "pdo_mysql"), "testdata/clients/pdo.php", "native")
		}},
		{"mysqli", func(t *testing.T, tg matrixTarget) matrixResult {
			return scriptMatrixRun(t, tg, "", findPHP(t, "mysqli"), "testdata/clients/mysqli.php")
		}},
		{"mysql2/execute", func(t *testing.T, tg matrixTarget) matrixResult {
			return scriptMatrixRun(t, tg, "testdata/clients/node", findNodeMySQL2(t), "mysql2.js")
		}},
	}
}

func TestClientMatrix(t *testing.T) {
	for _, c := range matrixClients() {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			r := c.run(t, sluiceTarget())
			t.Logf("%s: reads served by %s; transaction on %s; write on %s (%s; %v)", c.name,
				describeServers(r.ReadServerIDs), describeServers([]uint32{r.TxServerID}),
				describeServers([]uint32{r.WriteServerID}), r.Details, time.Since(start).Round(time.Millisecond))
			failed := false
			if !r.OK || r.Errors != 0 {
				failed = true
				t.Errorf("%s through sluice: ok=%v, %d errors: %s", c.name, r.OK, r.Errors, r.Details)
			}
			if len(r.ReadServerIDs) == 0 {
				failed = true
				t.Errorf("%s reported no reads", c.name)
			}
			for _, id := range r.ReadServerIDs {
				if !env.replicaIDs[id] {
					failed = true
					t.Errorf("a read outside a transaction ran on %s, want a replica", describeServers([]uint32{id}))
				}
			}
			if r.TxServerID != env.masterID {
				failed = true
				t.Errorf("the transaction ran on %s, want the master (server_id %d)", describeServers([]uint32{r.TxServerID}), env.masterID)
			}
			if r.WriteServerID != env.masterID {
				failed = true
				t.Errorf("the write ran on %s, want the master (server_id %d)", describeServers([]uint32{r.WriteServerID}), env.masterID)
			}
			if failed {
				// The same client straight at the master tells a sluice bug
				// from a client or workload problem.
				d := c.run(t, masterTarget())
				t.Logf("for comparison, %s directly against the master (%s): ok=%v, %d errors: %s",
					c.name, env.topo.Master.Addr(), d.OK, d.Errors, d.Details)
			}
		})
	}
}

// describeServers names the backends behind server ids, with counts:
// "replica1 (server_id 2) x3, replica2 (server_id 3) x2".
func describeServers(ids []uint32) string {
	if len(ids) == 0 {
		return "nothing"
	}
	count := map[uint32]int{}
	for _, id := range ids {
		count[id]++
	}
	keys := make([]uint32, 0, len(count))
	for id := range count {
		keys = append(keys, id)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	var parts []string
	for _, id := range keys {
		s := fmt.Sprintf("%s (server_id %d)", serverName(id), id)
		if len(ids) > 1 {
			s += fmt.Sprintf(" x%d", count[id])
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// serverName is the sandbox name ("master", "replica1", ...) of server id.
func serverName(id uint32) string {
	for _, s := range append([]*sandboxServer{env.topo.Master}, env.topo.Replicas...) {
		if s.ServerID == id {
			return s.Name
		}
	}
	return "no known server"
}

// --- external clients ---

// scriptMatrixRun runs one client script (argv[0] is the interpreter) in
// dir (relative to tests/, "" for tests/) against tg and decodes its JSON
// line. A crash or unreadable output is reported as one error.
func scriptMatrixRun(t *testing.T, tg matrixTarget, dir string, argv ...string) matrixResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if dir != "" {
		cmd.Dir = dir
	}
	cmd.Env = tg.env()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var r matrixResult
	if jerr := json.Unmarshal([]byte(lines[len(lines)-1]), &r); jerr != nil || r.Client == "" {
		return matrixResult{Errors: 1, Details: fmt.Sprintf("%s exited with %v and printed no result: stdout %q stderr %q",
			strings.Join(argv, " "), err, out.String(), errb.String())}
	}
	if err != nil {
		r.OK = false
		r.Errors++
		r.Details += fmt.Sprintf("; exit: %v; stderr: %s", err, strings.TrimSpace(errb.String()))
	}
	return r
}

// findPyMySQL returns a Python that can import pymysql: the first python3 on
// PATH or Debian's /usr/bin/python3 (where python3-pymysql installs).
func findPyMySQL(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		p, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		tried = append(tried, p)
		if exec.Command(p, "-c", "import pymysql").Run() == nil {
			return p
		}
	}
	t.Fatalf("PyMySQL is required for the client matrix (no python3 among %v imports pymysql): run `make deps-test` (Debian: python3-pymysql)", tried)
	return ""
}

// findPHP returns the php binary after checking it has the extension ext.
func findPHP(t *testing.T, ext string) string {
	t.Helper()
	php, err := exec.LookPath("php")
	if err != nil {
		t.Fatalf("PHP is required for the client matrix: run `make deps-test` (Debian: php-cli php-mysql): %v", err)
	}
	if err := exec.Command(php, "-r", `exit(extension_loaded($argv[1]) ? 0 : 1);`, ext).Run(); err != nil {
		t.Fatalf("PHP's %s extension is required for the client matrix: run `make deps-test` (Debian: php-mysql)", ext)
	}
	return php
}

// findNodeMySQL2 returns the node binary after checking that mysql2 is
// installed in testdata/clients/node.
func findNodeMySQL2(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("Node.js is required for the client matrix: run `make deps-test` (Debian: nodejs npm): %v", err)
	}
	if _, err := os.Stat(filepath.Join("testdata", "clients", "node", "node_modules", "mysql2", "package.json")); err != nil {
		t.Fatalf("mysql2 is not installed in tests/testdata/clients/node: run `make deps-test` (npm ci there): %v", err)
	}
	return node
}

// --- go-sql-driver/mysql ---

// goMatrixRun runs the workload with go-sql-driver/mysql on one connection:
// with interpolateParams the driver substitutes parameters itself (text
// protocol only); without it every statement with arguments is a binary
// prepared statement, and one explicitly prepared statement is used both in
// and out of the transaction.
func goMatrixRun(t *testing.T, tg matrixTarget, interpolate bool) matrixResult {
	t.Helper()
	name := "go-sql-driver/binary"
	table := "matrix_go_binary"
	if interpolate {
		name, table = "go-sql-driver/interpolateParams", "matrix_go_interpolate"
	}
	r := matrixResult{Client: name}
	var notes, info []string // errors; replication waits
	fail := func(step string, err error) {
		r.Errors++
		notes = append(notes, step+": "+err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	d, err := sql.Open("mysql", dsn(tg.addr(), tg.user, tg.password, "sluice_test", func(c *mysql.Config) {
		c.InterpolateParams = interpolate
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c, err := d.Conn(ctx)
	if err != nil {
		fail("connect", err)
		r.Details = strings.Join(notes, "; ")
		return r
	}
	defer c.Close()

	readRows := func(q interface {
		QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	}, query string, withSID bool) (sid uint32, got []matrixRow, dts []string, err error) {
		rows, err := q.QueryContext(ctx, query, 1)
		if err != nil {
			return 0, nil, nil, err
		}
		defer rows.Close()
		for rows.Next() {
			var row matrixRow
			var dt string
			dest := []any{&row.id, &row.txt, &row.n, &dt}
			if withSID {
				dest = append([]any{&sid}, dest...)
			}
			if err := rows.Scan(dest...); err != nil {
				return 0, nil, nil, err
			}
			got, dts = append(got, row), append(dts, dt)
		}
		return sid, got, dts, rows.Err()
	}
	checkRows := func(where string, got []matrixRow, dts []string) {
		ok := len(got) == len(matrixRows)
		for i := 0; ok && i < len(got); i++ {
			ok = got[i] == matrixRows[i] && dts[i] == matrixDTText
		}
		if !ok {
			fail(where, fmt.Errorf("rows %v %q, want %v at %s", got, dts, matrixRows, matrixDTText))
		}
	}
	step := func(name string, f func() error) {
		if err := f(); err != nil {
			fail(name, err)
		}
	}

	step("create table", func() error {
		if _, err := c.ExecContext(ctx, "DROP TABLE IF EXISTS "+table); err != nil {
			return err
		}
		_, err := c.ExecContext(ctx, "CREATE TABLE "+table+" (id INT PRIMARY KEY, sid INT, "+
			"txt VARCHAR(64) CHARACTER SET utf8mb4, n INT NULL, dt DATETIME)")
		return err
	})
	step("insert with parameters", func() error {
		for _, row := range matrixRows {
			if _, err := c.ExecContext(ctx, "INSERT INTO "+table+" (id, sid, txt, n, dt) VALUES (?, @@server_id, ?, ?, ?)",
				row.id, row.txt, row.n, matrixDT); err != nil {
				return err
			}
		}
		return nil
	})
	step("hinted read of the write", func() error {
		return c.QueryRowContext(ctx, "/* sluice:master */ SELECT sid FROM "+table+" WHERE id = ?", 1).Scan(&r.WriteServerID)
	})
	// Without interpolateParams, one explicitly prepared statement is used
	// in and out of the transaction.
	var plus *sql.Stmt
	if !interpolate {
		step("prepare a shared read", func() (err error) {
			plus, err = c.PrepareContext(ctx, "SELECT @@server_id, ? + 1")
			return err
		})
		if plus != nil {
			defer plus.Close()
		}
	}
	plusRow := func(tx *sql.Tx, arg int) *sql.Row {
		switch {
		case plus != nil && tx != nil:
			return tx.StmtContext(ctx, plus).QueryRowContext(ctx, arg)
		case plus != nil:
			return plus.QueryRowContext(ctx, arg)
		case tx != nil:
			return tx.QueryRowContext(ctx, "SELECT @@server_id, ? + 1", arg)
		default:
			return c.QueryRowContext(ctx, "SELECT @@server_id, ? + 1", arg)
		}
	}
	step("transaction", func() error {
		tx, err := c.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := tx.QueryRowContext(ctx, "SELECT @@server_id").Scan(&r.TxServerID); err != nil {
			return err
		}
		var sid uint32
		var two int
		if err := plusRow(tx, 1).Scan(&sid, &two); err != nil {
			return fmt.Errorf("parameterised read: %w", err)
		}
		if sid != r.TxServerID || two != 2 {
			fail("parameterised read in the transaction", fmt.Errorf("server %d, %d; want %d, 2", sid, two, r.TxServerID))
		}
		_, got, dts, err := readRows(tx, "SELECT id, txt, n, dt FROM "+table+" WHERE id >= ? ORDER BY id", false)
		if err != nil {
			return err
		}
		checkRows("transaction read", got, dts)
		return tx.Commit()
	})
	step("reads", func() error {
		for range 4 {
			var id uint32
			if err := c.QueryRowContext(ctx, "SELECT @@server_id").Scan(&id); err != nil {
				return err
			}
			r.ReadServerIDs = append(r.ReadServerIDs, id)
		}
		var sid uint32
		var v int
		if err := plusRow(nil, 41).Scan(&sid, &v); err != nil {
			return fmt.Errorf("parameterised read: %w", err)
		}
		r.ReadServerIDs = append(r.ReadServerIDs, sid)
		if v != 42 {
			fail("parameterised read", fmt.Errorf("got %d, want 42", v))
		}
		return nil
	})
	step("multi-row read", func() error {
		// Outside a transaction the rows come from a replica: poll until
		// replication has brought the table and the rows there.
		deadline := time.Now().Add(15 * time.Second)
		for polls := 1; ; polls++ {
			sid, got, dts, err := readRows(c, "SELECT @@server_id, id, txt, n, dt FROM "+table+" WHERE id >= ? ORDER BY id", true)
			if err != nil && (mysqlErrNumber(err) != 1146 || time.Now().After(deadline)) { // 1146: no such table (yet)
				return err
			}
			if len(got) > 0 {
				r.ReadServerIDs = append(r.ReadServerIDs, sid)
			}
			if len(got) == len(matrixRows) || time.Now().After(deadline) {
				if polls > 1 {
					info = append(info, fmt.Sprintf("rows on the replica after %d reads", polls))
				}
				checkRows("multi-row read", got, dts)
				return nil
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	step("drop table", func() error {
		_, err := c.ExecContext(ctx, "DROP TABLE IF EXISTS "+table)
		return err
	})
	r.OK = r.Errors == 0
	if len(notes) == 0 {
		notes = []string{"binary prepared statements"}
		if interpolate {
			notes = []string{"parameters interpolated by the driver (text protocol)"}
		}
	}
	r.Details = strings.Join(append(notes, info...), "; ")
	return r
}

// --- the mariadb command-line client ---

// cliMatrixRun runs the workload with the mariadb CLI (text protocol only,
// literal values, one session per step, as scripts use it).
func cliMatrixRun(t *testing.T, tg matrixTarget) matrixResult {
	t.Helper()
	bin, err := exec.LookPath("mariadb")
	if err != nil {
		t.Fatalf("the mariadb client is required for the client matrix: run `make deps-test` (Debian: mariadb-client): %v", err)
	}
	const table = "matrix_cli"
	r := matrixResult{Client: "mariadb-cli"}
	var notes, info []string // errors; replication waits
	fail := func(step string, err error) {
		r.Errors++
		notes = append(notes, step+": "+err.Error())
	}
	run := func(script string) ([]string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "--no-defaults", "-h"+tg.host, "-P"+tg.port, "-u"+tg.user, "-p"+tg.password,
			"-N", "-B", "--comments", "--default-character-set=utf8mb4", "-Dsluice_test", "-e", script)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%v: %s", err, strings.TrimSpace(errb.String()))
		}
		s := strings.TrimRight(out.String(), "\n")
		if s == "" {
			return nil, nil
		}
		return strings.Split(s, "\n"), nil
	}
	id := func(s string) uint32 {
		n, _ := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
		return uint32(n)
	}
	wantRows := func() []string {
		var w []string
		for _, row := range matrixRows {
			n := "NULL"
			if row.n.Valid {
				n = strconv.FormatInt(row.n.Int64, 10)
			}
			w = append(w, fmt.Sprintf("%d\t%s\t%s\t%s", row.id, row.txt, n, matrixDTText))
		}
		return w
	}()
	checkRows := func(where string, got []string) {
		if strings.Join(got, "\n") != strings.Join(wantRows, "\n") {
			fail(where, fmt.Errorf("rows %q, want %q", got, wantRows))
		}
	}
	var values []string
	for _, row := range matrixRows {
		n := "NULL"
		if row.n.Valid {
			n = strconv.FormatInt(row.n.Int64, 10)
		}
		values = append(values, fmt.Sprintf("(%d, @@server_id, '%s', %s, '%s')", row.id, row.txt, n, matrixDTText))
	}

	if out, err := run("DROP TABLE IF EXISTS " + table + "; CREATE TABLE " + table + " (id INT PRIMARY KEY, sid INT, " +
		"txt VARCHAR(64) CHARACTER SET utf8mb4, n INT NULL, dt DATETIME); " +
		"INSERT INTO " + table + " (id, sid, txt, n, dt) VALUES " + strings.Join(values, ", ") + "; " +
		"/* sluice:master */ SELECT sid FROM " + table + " WHERE id = 1"); err != nil {
		fail("create, insert and hinted read", err)
	} else if len(out) != 1 {
		fail("hinted read of the write", fmt.Errorf("output %q", out))
	} else {
		r.WriteServerID = id(out[0])
	}
	if out, err := run("BEGIN; SELECT @@server_id; SELECT id, txt, n, dt FROM " + table + " ORDER BY id; COMMIT"); err != nil {
		fail("transaction", err)
	} else if len(out) < 1 {
		fail("transaction", fmt.Errorf("no output"))
	} else {
		r.TxServerID = id(out[0])
		checkRows("transaction read", out[1:])
	}
	if out, err := run(strings.Repeat("SELECT @@server_id; ", 4)); err != nil {
		fail("reads", err)
	} else {
		for _, l := range out {
			r.ReadServerIDs = append(r.ReadServerIDs, id(l))
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for polls := 1; ; polls++ {
		// Outside a transaction the rows come from a replica: poll until
		// replication has brought the table and the rows there.
		out, err := run("SELECT @@server_id, id, txt, n, dt FROM " + table + " ORDER BY id")
		if err != nil && (!strings.Contains(err.Error(), "ERROR 1146") || time.Now().After(deadline)) {
			fail("multi-row read", err)
			break
		}
		var rows []string
		for _, l := range out {
			sid, rest, _ := strings.Cut(l, "\t")
			rows = append(rows, rest)
			if len(rows) == 1 {
				r.ReadServerIDs = append(r.ReadServerIDs, id(sid))
			}
		}
		if len(rows) == len(matrixRows) || time.Now().After(deadline) {
			if polls > 1 {
				info = append(info, fmt.Sprintf("rows on the replica after %d reads", polls))
			}
			checkRows("multi-row read", rows)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := run("DROP TABLE IF EXISTS " + table); err != nil {
		fail("drop table", err)
	}
	r.OK = r.Errors == 0
	if len(notes) == 0 {
		notes = []string{"text protocol, literal values, one session per step"}
	}
	r.Details = strings.Join(append(notes, info...), "; ")
	return r
}

// --- sysbench ---

// sysbenchStats is what TestSysbenchMatrix reads from sysbench's report.
type sysbenchStats struct {
	transactions, queries  int64
	tps, qps               float64
	ignoredErrors, reconns int64
	// ignoredCodes are the error numbers sysbench logged as ignored (at
	// --verbosity=5 it logs each distinct message once).
	ignoredCodes map[string]bool
}

var (
	sbTransactions = regexp.MustCompile(`(?m)^\s*transactions:\s+(\d+)\s+\(([\d.]+) per sec\.\)`)
	sbQueries      = regexp.MustCompile(`(?m)^\s*queries:\s+(\d+)\s+\(([\d.]+) per sec\.\)`)
	sbIgnored      = regexp.MustCompile(`(?m)^\s*ignored errors:\s+(\d+)`)
	sbReconnects   = regexp.MustCompile(`(?m)^\s*reconnects:\s+(\d+)`)
	sbIgnoring     = regexp.MustCompile(`Ignoring error (\d+)`)
)

func (s sysbenchStats) ignoredCodeList() string {
	if len(s.ignoredCodes) == 0 {
		return "none"
	}
	var codes []string
	for c := range s.ignoredCodes {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	return strings.Join(codes, ",")
}

func parseSysbench(out string) (sysbenchStats, error) {
	var s sysbenchStats
	m := sbTransactions.FindStringSubmatch(out)
	q := sbQueries.FindStringSubmatch(out)
	ig := sbIgnored.FindStringSubmatch(out)
	rc := sbReconnects.FindStringSubmatch(out)
	if m == nil || q == nil || ig == nil || rc == nil {
		return s, errors.New("no SQL statistics in sysbench's output")
	}
	s.transactions, _ = strconv.ParseInt(m[1], 10, 64)
	s.tps, _ = strconv.ParseFloat(m[2], 64)
	s.queries, _ = strconv.ParseInt(q[1], 10, 64)
	s.qps, _ = strconv.ParseFloat(q[2], 64)
	s.ignoredErrors, _ = strconv.ParseInt(ig[1], 10, 64)
	s.reconns, _ = strconv.ParseInt(rc[1], 10, 64)
	s.ignoredCodes = map[string]bool{}
	for _, m := range sbIgnoring.FindAllStringSubmatch(out, -1) {
		s.ignoredCodes[m[1]] = true
	}
	return s, nil
}

// comSelect reads Com_select of the master and every replica.
func comSelect(t *testing.T) []int64 {
	t.Helper()
	var out []int64
	for _, s := range append([]*sandboxServer{env.topo.Master}, env.topo.Replicas...) {
		var name string
		var v int64
		if err := mustRoot(t, s).QueryRowContext(ctxT(t), "SHOW GLOBAL STATUS LIKE 'Com_select'").Scan(&name, &v); err != nil {
			t.Fatalf("%s: Com_select: %v", s.Name, err)
		}
		out = append(out, v)
	}
	return out
}

// TestSysbenchMatrix runs sysbench through sluice with server-side prepared
// statements (--db-ps-mode=auto) and without (disable): oltp_read_write for
// 20 s, whose transactions keep nearly every statement on the master, and
// oltp_read_only without transactions for 10 s, whose selects must go to the
// replicas. Every run must finish with no error and no reconnect; the
// Com_select deltas of the backends show which served the reads.
//
// oltp_read_write's concurrent transactions deadlock now and then on 1000-row
// tables, directly against MariaDB too (a dozen or two in 20 s here):
// sysbench ignores error 1213 and retries the transaction, and reports it
// under "ignored errors". Those are logged; any other error is a failure.
func TestSysbenchMatrix(t *testing.T) {
	bin, err := exec.LookPath("sysbench")
	if err != nil {
		t.Fatalf("sysbench is required for the client matrix: run `make deps-test` (Debian: sysbench): %v", err)
	}
	host, port, _ := net.SplitHostPort(env.addr)
	o := env.topo.Opts
	common := []string{"--db-driver=mysql", "--mysql-host=" + host, "--mysql-port=" + port,
		"--mysql-user=" + o.AppUser, "--mysql-password=" + o.AppPassword, "--mysql-db=sluice_test",
		"--tables=2", "--table-size=10000"}
	sysbench := func(t *testing.T, timeout time.Duration, args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// The sbtest tables are made once through sluice (so on the master) and
	// shared by every run.
	if out, err := sysbench(t, time.Minute, append([]string{"oltp_read_write"}, append(common, "cleanup")...)...); err != nil {
		t.Fatalf("sysbench cleanup: %v\n%s", err, out)
	}
	if out, err := sysbench(t, 2*time.Minute, append([]string{"oltp_read_write"}, append(common, "prepare")...)...); err != nil {
		t.Fatalf("sysbench prepare: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := sysbench(t, time.Minute, append([]string{"oltp_read_write"}, append(common, "cleanup")...)...); err != nil {
			t.Errorf("sysbench cleanup: %v\n%s", err, out)
		}
	})
	names := []string{env.topo.Master.Name}
	for _, r := range env.topo.Replicas {
		names = append(names, r.Name)
	}
	runs := []struct {
		test    string
		seconds int
		extra   []string
		// replicasServe: the selects must go to the replicas.
		replicasServe bool
	}{
		{"oltp_read_write", 20, nil, false},
		{"oltp_read_only", 10, []string{"--skip_trx=on"}, true},
	}
	for _, run := range runs {
		for _, mode := range []string{"auto", "disable"} {
			t.Run(run.test+"/ps-mode="+mode, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := env.topo.WaitReplicated(ctx); err != nil {
					t.Fatalf("replicas did not catch up before the run: %v", err)
				}
				args := append([]string{run.test}, common...)
				// --verbosity=5 makes sysbench name the errors it ignores.
				args = append(args, "--threads=4", "--time="+strconv.Itoa(run.seconds), "--db-ps-mode="+mode, "--verbosity=5")
				args = append(args, run.extra...)
				args = append(args, "run")
				before := comSelect(t)
				start := time.Now()
				out, err := sysbench(t, time.Duration(run.seconds)*time.Second+90*time.Second, args...)
				elapsed := time.Since(start)
				after := comSelect(t)
				if err != nil {
					t.Fatalf("sysbench %s: %v\n%s", strings.Join(args, " "), err, out)
				}
				if strings.Contains(out, "FATAL") || strings.Contains(out, "ALERT") {
					t.Errorf("sysbench reported an error:\n%s", out)
				}
				s, perr := parseSysbench(out)
				if perr != nil {
					t.Fatalf("%v:\n%s", perr, out)
				}
				var total int64
				deltas := make([]int64, len(before))
				for i := range before {
					deltas[i] = after[i] - before[i]
					total += deltas[i]
				}
				var dist []string
				for i, d := range deltas {
					share := 0.0
					if total > 0 {
						share = 100 * float64(d) / float64(total)
					}
					dist = append(dist, fmt.Sprintf("%s %d (%.1f%%)", names[i], d, share))
				}
				t.Logf("sysbench %s --db-ps-mode=%s, %d threads, %ds (%v wall): %d transactions (%.2f/s), %d queries (%.2f/s), %d ignored errors (codes %s, retried by sysbench), %d reconnects; Com_select: %s",
					run.test, mode, 4, run.seconds, elapsed.Round(time.Millisecond), s.transactions, s.tps, s.queries, s.qps,
					s.ignoredErrors, s.ignoredCodeList(), s.reconns, strings.Join(dist, ", "))
				if s.transactions == 0 {
					t.Errorf("no transaction completed:\n%s", out)
				}
				if s.reconns != 0 {
					t.Errorf("%d reconnects, want none:\n%s", s.reconns, out)
				}
				if s.ignoredErrors > 0 && (len(s.ignoredCodes) == 0 || len(s.ignoredCodes) > 1 || !s.ignoredCodes["1213"]) {
					t.Errorf("%d ignored errors with codes %v, want only deadlocks (1213):\n%s", s.ignoredErrors, s.ignoredCodes, out)
				}
				if run.replicasServe {
					var replicas int64
					for i, d := range deltas[1:] {
						replicas += d
						if d <= 0 {
							t.Errorf("%s served no selects (Com_select delta %d)", names[i+1], d)
						}
					}
					// The master sees the health probes and little else.
					if deltas[0]*20 > replicas {
						t.Errorf("the master served %d selects against %d on the replicas, want it under 5%%", deltas[0], replicas)
					}
				}
			})
		}
	}
}
