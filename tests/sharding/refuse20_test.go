package sharding

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Issue 20 items 6, 10, 11 and 16 run in their own schema with their own
// sluice: tickets has one table per cluster (a statement that wrongly runs
// on one cluster changes part of the rows, silently), orders three per
// cluster, countries is broadcast and plain lives on the default cluster.
const u20Schema = "u20"

var (
	u20Tickets = &rule{schema: u20Schema, table: "tickets", key: "tid", algo: "mod", clusters: clusterNames, tables: 1,
		columns: "tid BIGINT NOT NULL PRIMARY KEY, n INT NOT NULL, note VARCHAR(16) NOT NULL"}
	u20Orders = &rule{schema: u20Schema, table: "orders", key: "uid", algo: "mod", clusters: clusterNames, tables: 3,
		columns: "uid BIGINT NOT NULL, oid BIGINT NOT NULL PRIMARY KEY, qty INT NOT NULL, country CHAR(2) NOT NULL"}
)

const (
	u20CountriesColumns = "country CHAR(2) NOT NULL PRIMARY KEY, name VARCHAR(32) NOT NULL"
	u20PlainColumns     = "id BIGINT NOT NULL PRIMARY KEY, qty INT NOT NULL"
	// u20Users is how many uids orders has, two rows each.
	u20Users = 30
)

var u20Countries = []string{"DE", "FR", "IT", "ES", "PL", "SE"}

var (
	u20Once sync.Once
	u20Addr string
	u20Err  error
)

// u20Setup creates the schema's tables and rows on the clusters (each row
// in its physical table) and the reference, and starts the schema's
// sluice once for the package; it returns the sluice's address.
func u20Setup(t *testing.T) string {
	t.Helper()
	u20Once.Do(func() { u20Addr, u20Err = u20Start() })
	if u20Err != nil {
		t.Fatal(u20Err)
	}
	return u20Addr
}

func u20Start() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var countries []string
	for i, c := range u20Countries {
		countries = append(countries, fmt.Sprintf("('%s', 'country %d')", c, i))
	}
	tickets := map[int][]string{}
	var allTickets []string
	for tid := int64(1); tid <= 6; tid++ {
		s, _ := u20Tickets.shardOf(strconv.FormatInt(tid, 10))
		v := fmt.Sprintf("(%d, %d, 'note %d')", tid, tid*10, tid)
		tickets[s] = append(tickets[s], v)
		allTickets = append(allTickets, v)
	}
	orders := map[int][]string{}
	var allOrders []string
	for uid := int64(0); uid < u20Users; uid++ {
		s, _ := u20Orders.shardOf(strconv.FormatInt(uid, 10))
		for j := int64(0); j < 2; j++ {
			// Only the first four countries have orders: the others stay
			// unmatched in an outer join.
			v := fmt.Sprintf("(%d, %d, %d, '%s')", uid, uid*10+j, (uid*7+j)%20, u20Countries[(uid+j)%4])
			orders[s] = append(orders[s], v)
			allOrders = append(allOrders, v)
		}
	}
	for _, name := range clusterNames {
		stmts := []string{"DROP DATABASE IF EXISTS " + u20Schema, "CREATE DATABASE " + u20Schema,
			"CREATE TABLE u20.countries (" + u20CountriesColumns + ")",
			"INSERT INTO u20.countries VALUES " + strings.Join(countries, ", ")}
		if name == defaultCluster {
			stmts = append(stmts, "CREATE TABLE u20.plain ("+u20PlainColumns+")", "INSERT INTO u20.plain VALUES (1, 7), (2, 19)")
		}
		for _, r := range []*rule{u20Tickets, u20Orders} {
			rows := tickets
			if r == u20Orders {
				rows = orders
			}
			for s := range r.shards() {
				if r.cluster(s) != name {
					continue
				}
				stmts = append(stmts, fmt.Sprintf("CREATE TABLE u20.%s (%s)", r.physical(s), r.columns))
				if len(rows[s]) > 0 {
					stmts = append(stmts, fmt.Sprintf("INSERT INTO u20.%s VALUES %s", r.physical(s), strings.Join(rows[s], ", ")))
				}
			}
		}
		if err := env.clusters[name].Master.Exec(ctx, stmts...); err != nil {
			return "", fmt.Errorf("u20 on %s: %w", name, err)
		}
	}
	if err := env.ref.Master.Exec(ctx, "DROP DATABASE IF EXISTS "+u20Schema, "CREATE DATABASE "+u20Schema,
		"CREATE TABLE u20.countries ("+u20CountriesColumns+")",
		"INSERT INTO u20.countries VALUES "+strings.Join(countries, ", "),
		"CREATE TABLE u20.plain ("+u20PlainColumns+")", "INSERT INTO u20.plain VALUES (1, 7), (2, 19)",
		"CREATE TABLE u20.tickets ("+u20Tickets.columns+")", "INSERT INTO u20.tickets VALUES "+strings.Join(allTickets, ", "),
		"CREATE TABLE u20.orders ("+u20Orders.columns+")", "INSERT INTO u20.orders VALUES "+strings.Join(allOrders, ", ")); err != nil {
		return "", fmt.Errorf("u20 on the reference: %w", err)
	}
	for _, tp := range clusterTopos() {
		if err := tp.WaitReplicated(ctx); err != nil {
			return "", err
		}
	}
	toml := fmt.Sprintf("[sharding]\ndefault_cluster = %q\nnode_id = 7\n\n", defaultCluster) +
		u20Tickets.toml() + u20Orders.toml() +
		fmt.Sprintf("[[broadcast]]\nschema = %q\ntable = \"countries\"\n", u20Schema)
	srv, err := startSluice(named(clusterNames, clusterTopos()), toml)
	if err != nil {
		return "", err
	}
	// The server lives as long as the test process.
	return srv.Addr().String(), nil
}

// u20Pair is one sluice session and one reference session in u20.
type u20Pair struct {
	t        *testing.T
	sl, ref  *sql.Conn
	snapshot func() string
}

func u20Sessions(t *testing.T, binary bool) *u20Pair {
	t.Helper()
	addr := u20Setup(t)
	return &u20Pair{t: t, sl: conn(t, sluiceDB(t, addr, u20Schema, binary)), ref: conn(t, refDB(t, u20Schema, binary))}
}

// u20Tables is every physical table of the schema on each cluster.
func u20Tables() map[string][]string {
	out := map[string][]string{}
	for _, name := range clusterNames {
		out[name] = append(out[name], "countries")
		if name == defaultCluster {
			out[name] = append(out[name], "plain")
		}
	}
	for _, r := range []*rule{u20Tickets, u20Orders} {
		for s := range r.shards() {
			out[r.cluster(s)] = append(out[r.cluster(s)], r.physical(s))
		}
	}
	return out
}

// u20Snapshot is every row of every physical table of the schema, read on
// the cluster masters, by "cluster.table".
func u20Snapshot(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range clusterNames {
		db, err := env.clusters[name].Master.RootDB()
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range u20Tables()[name] {
			out[name+"."+tb] = fmt.Sprintf("%q", queryRows(t, db, "SELECT * FROM u20."+tb+" ORDER BY 1, 2"))
		}
	}
	return out
}

// u20Unchanged fails t for each physical table whose rows differ from
// before.
func u20Unchanged(t *testing.T, q string, before map[string]string) {
	t.Helper()
	for k, v := range u20Snapshot(t) {
		if before[k] != v {
			t.Errorf("%s changed %s:\nbefore %s\nafter  %s", q, k, before[k], v)
		}
	}
}

type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// queryRows reads every row of q as text; NULL reads as "NULL".
func queryRows(t *testing.T, db queryer, q string, args ...any) [][]string {
	t.Helper()
	out, err := tryRows(ctxT(t), db, q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

func tryRows(ctx context.Context, db queryer, q string, args ...any) ([][]string, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = "NULL"
			if v.Valid {
				row[i] = v.String
			}
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// same runs q on both sessions and fails unless the rows are equal.
func (p *u20Pair) same(q string, args ...any) {
	p.t.Helper()
	got, err := tryRows(ctxT(p.t), p.sl, q, args...)
	if err != nil {
		p.t.Errorf("sluice: %s %v: %v", q, args, err)
		return
	}
	want := queryRows(p.t, p.ref, q, args...)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		p.t.Errorf("%s %v:\nsluice    %v\nreference %v", q, args, got, want)
	}
}

// exec runs q on both sessions, which must both succeed.
func (p *u20Pair) exec(q string) {
	p.t.Helper()
	if _, err := p.sl.ExecContext(ctxT(p.t), q); err != nil {
		p.t.Fatalf("sluice: %s: %v", q, err)
	}
	if _, err := p.ref.ExecContext(ctxT(p.t), q); err != nil {
		p.t.Fatalf("reference: %s: %v", q, err)
	}
}

// refused runs q through sluice (as a query when it starts with SELECT,
// else as an exec) and fails unless it gets error code with a message
// naming every one of names, and unless no row of any cluster changed.
func u20Refused(t *testing.T, c *sql.Conn, code uint16, q string, names ...string) {
	t.Helper()
	before := u20Snapshot(t)
	var err error
	if strings.HasPrefix(strings.ToUpper(strings.TrimSpace(q)), "SELECT") {
		_, err = tryRows(ctxT(t), c, q)
	} else {
		_, err = c.ExecContext(ctxT(t), q)
	}
	checkErr(t, "refused", q, err, code, names...)
	u20Unchanged(t, q, before)
}

// u20KeyOn is a uid of orders on cluster.
func u20KeyOn(cluster string) int64 { return keyOn(u20Orders, cluster, 1) }

// TestIssue20UnparsedNamingShardedTable (item 10): a text sluice cannot
// parse, or whose SQL it cannot see into, that may name a sharded or
// broadcast table is refused with 1235 naming the table; nothing runs on
// any cluster. One that names none still runs on the default cluster.
func TestIssue20UnparsedNamingShardedTable(t *testing.T) {
	p := u20Sessions(t, false)
	for _, tc := range []struct{ q, table string }{
		{"UPDATE tickets SET n = n + 1 WHERE 'a' SOUNDS LIKE 'a'", "tickets"},
		{"UPDATE orders SET qty = qty + 1 WHERE 'a' SOUNDS LIKE 'a'", "orders"},
		{"UPDATE `u20`.`TICKETS` SET n = n + 1 WHERE 'a' SOUNDS LIKE 'a'", "tickets"},
		{"UPDATE countries SET name = 'x' WHERE 'a' SOUNDS LIKE 'a'", "countries"},
		{"SELECT COUNT(*) INTO @t FROM tickets", "tickets"},
		{"SELECT tid FROM tickets ORDER BY tid OFFSET 1 ROWS FETCH FIRST 3 ROWS ONLY", "tickets"},
		{"SELECT uid FROM Orders ORDER BY uid OFFSET 1 ROWS FETCH FIRST 3 ROWS ONLY", "orders"},
		{"PREPARE u20s FROM 'UPDATE tickets SET n = n + 1'", "tickets"},
		{"PREPARE u20s FROM @u20text", "variable"},
		{"EXECUTE IMMEDIATE 'UPDATE tickets SET n = n + 1'", "tickets"},
		{"EXECUTE IMMEDIATE @u20text", "dynamic SQL"},
		// Executable comments: the server runs what the parser skips
		// (/*M! */) or reads otherwise.
		{"SELECT COUNT(*) FROM countries /*M! , tickets */", "tickets"},
		{"SELECT COUNT(*) FROM plain /*M! , orders */", "orders"},
		{"UPDATE plain /*M! , tickets */ SET plain.qty = plain.qty + 1 /*M! , tickets.n = tickets.n + 1 */", "tickets"},
		{"SELECT COUNT(*) FROM countries /*!99999 , orders */", "orders"},
	} {
		u20Refused(t, p.sl, 1235, tc.q, tc.table)
	}
	// Prepared through the protocol, an executable comment is no safer.
	bin := u20Sessions(t, true)
	for _, tc := range []struct{ q, table string }{
		{"SELECT COUNT(*) FROM countries /*M! , tickets */ WHERE country = ?", "tickets"},
		{"UPDATE orders SET qty = qty + 1 WHERE uid = ? AND 'a' SOUNDS LIKE 'a'", "orders"},
	} {
		before := u20Snapshot(t)
		_, err := bin.sl.ExecContext(ctxT(t), tc.q, "DE")
		checkErr(t, "prepared", tc.q, err, 1235, tc.table)
		u20Unchanged(t, tc.q, before)
	}
	// The session is still usable, and @t was never set on it.
	p.same("SELECT @t")
	// An unparsed statement naming no sharded table runs, as before, on
	// the default cluster.
	p.exec("UPDATE plain SET qty = qty + 1 WHERE 'a' SOUNDS LIKE 'a'")
	p.same("SELECT * FROM plain ORDER BY id")
	p.exec("UPDATE plain SET qty = qty - 1 WHERE 'a' SOUNDS LIKE 'a'")

	// Several statements in one text, one of them unparsed.
	addr := u20Setup(t)
	cfg := mysql.NewConfig()
	o := env.ref.Opts
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = o.AppUser, o.AppPassword, "tcp", addr, u20Schema
	cfg.MultiStatements = true
	multi, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { multi.Close() })
	mc := conn(t, multi)
	u20Refused(t, mc, 1235, "UPDATE plain SET qty = qty WHERE id = 0; UPDATE tickets SET n = n + 1 WHERE 'a' SOUNDS LIKE 'a'", "tickets")
	u20Refused(t, mc, 1235, "UPDATE plain SET qty = qty WHERE id = 0; UPDATE tickets SET n = n + 1", "tickets")
}

// TestIssue20UserVariables (item 11): a statement that reads or assigns a
// user variable runs on the default cluster only (where the session's
// variables are); anywhere else, or over several shards, it is refused
// with 1235 naming the variable and nothing changes.
func TestIssue20UserVariables(t *testing.T) {
	for _, binary := range []bool{false, true} {
		t.Run(fmt.Sprintf("binary=%v", binary), func(t *testing.T) {
			p := u20Sessions(t, binary)
			onDef, onOther := u20KeyOn(defaultCluster), u20KeyOn(clusterNames[0])
			p.exec("SET @q := 7")
			p.exec("SET @c := 'FR'")
			p.exec("SET @nm := 'renamed'")
			u20Refused(t, p.sl, 1235, "SELECT COUNT(*) FROM orders WHERE qty = @q", "@q")
			u20Refused(t, p.sl, 1235, fmt.Sprintf("SELECT COUNT(*) FROM orders WHERE uid = %d AND qty >= @q", onOther), "@q")
			u20Refused(t, p.sl, 1235, "SELECT @n := COUNT(*) FROM orders")
			u20Refused(t, p.sl, 1235, "SELECT @n := uid FROM orders WHERE qty = 19", "@n")
			u20Refused(t, p.sl, 1235, "SELECT COUNT(*) FROM tickets WHERE n > @q", "@q")
			u20Refused(t, p.sl, 1235, "UPDATE tickets SET n = @q", "@q")
			u20Refused(t, p.sl, 1235, "UPDATE countries SET name = @nm WHERE country = 'DE'", "@nm")
			u20Refused(t, p.sl, 1235, "SET @n := (SELECT COUNT(*) FROM orders)", "orders")
			p.same("SELECT @n")
			// On the default cluster alone the variables are the session's.
			p.same(fmt.Sprintf("SELECT COUNT(*) FROM orders WHERE uid = %d AND qty >= @q", onDef))
			// A broadcast read answers from the default cluster's copy,
			// even when the session last ran on another cluster.
			p.same("SELECT COUNT(*) FROM orders WHERE uid = ?", onOther)
			p.same("SELECT name FROM countries WHERE country = @c")
			p.same("SELECT @q, @c")
			// As a prepared statement with a parameter: routed by the
			// key, refused off the default cluster.
			q := "SELECT COUNT(*) FROM orders WHERE uid = ? AND qty >= @q"
			p.same(q, onDef)
			before := u20Snapshot(t)
			_, err := tryRows(ctxT(t), p.sl, q, onOther)
			checkErr(t, "prepared", q, err, 1235, "@q")
			u20Unchanged(t, q, before)
		})
	}
}

// TestIssue20BroadcastOuterJoin (item 6): an outer join keeping every row
// of the broadcast table while a sharded table is on its other side would
// return the unmatched rows once per shard: over several shards it is
// refused (1235 naming both tables), on one shard it equals the
// reference. A write changing the broadcast table by what a sharded one
// holds is refused too, even on one shard (the copies would differ).
func TestIssue20BroadcastOuterJoin(t *testing.T) {
	p := u20Sessions(t, false)
	for _, tc := range []struct{ q, keep, sharded string }{
		{"SELECT COUNT(*) FROM countries c LEFT JOIN orders o ON o.country = c.country AND o.qty = 19", "countries", "u20.orders"},
		{"SELECT COUNT(*) FROM orders o RIGHT JOIN countries c ON o.country = c.country AND o.qty = 19", "countries", "u20.orders"},
		{"SELECT COUNT(*) FROM countries c LEFT JOIN tickets t ON t.note = c.name", "countries", "u20.tickets"},
		{"SELECT COUNT(*) FROM countries c NATURAL LEFT JOIN orders o", "countries", "u20.orders"},
		{"SELECT COUNT(*) FROM countries c LEFT JOIN orders o USING (country)", "countries", "u20.orders"},
		{"SELECT c.country, COUNT(o.uid) FROM countries c LEFT JOIN (orders o JOIN countries d ON d.country = o.country) ON o.country = c.country GROUP BY c.country", "countries", "u20.orders"},
		{"SELECT COUNT(*) FROM (SELECT country FROM countries) c LEFT JOIN orders o USING (country)", "derived table c", "u20.orders"},
	} {
		u20Refused(t, p.sl, 1235, tc.q, tc.keep, tc.sharded)
	}
	k := u20KeyOn(clusterNames[0])
	p.same(fmt.Sprintf("SELECT COUNT(*) FROM countries c LEFT JOIN orders o ON o.country = c.country WHERE o.uid = %d", k))
	p.same("SELECT COUNT(*) FROM orders o LEFT JOIN countries c ON o.country = c.country AND c.name = 'country 1'")
	p.same("SELECT COUNT(*) FROM countries c RIGHT JOIN orders o ON o.country = c.country AND c.name = 'country 1'")
	p.same("SELECT COUNT(*) FROM countries c JOIN orders o USING (country)")
	for _, q := range []string{
		fmt.Sprintf("UPDATE countries c JOIN orders o ON o.country = c.country SET c.name = 'x' WHERE o.uid = %d", k),
		fmt.Sprintf("UPDATE orders o JOIN countries c ON o.country = c.country SET name = 'x' WHERE o.uid = %d", k),
		fmt.Sprintf("DELETE c FROM countries c JOIN orders o ON o.country = c.country WHERE o.uid = %d", k),
		fmt.Sprintf("UPDATE countries SET name = 'x' WHERE country IN (SELECT country FROM orders WHERE uid = %d)", k),
	} {
		u20Refused(t, p.sl, 1235, q, "countries")
	}
}

// TestIssue20DocumentedRefusals (item 16): the refusals docs/sharding.md
// lists, each with its code, and nothing written anywhere.
func TestIssue20DocumentedRefusals(t *testing.T) {
	p := u20Sessions(t, false)
	for _, tc := range []struct {
		code  uint16
		q     string
		names []string
	}{
		{1235, "UPDATE orders SET qty = qty + 1 ORDER BY uid LIMIT 2", []string{"u20.orders", "ORDER BY"}},
		{1235, "DELETE FROM orders ORDER BY uid LIMIT 1", []string{"u20.orders", "ORDER BY"}},
		{1235, "DELETE FROM tickets LIMIT 1", []string{"u20.tickets"}},
		{1235, "SELECT * FROM orders ORDER BY 2", []string{"u20.orders", "position"}},
		{1235, "SELECT * FROM orders o JOIN plain p ON p.id = o.uid", []string{"u20.orders", "plain"}},
		{1235, "INSERT INTO plain (id, qty) SELECT oid, qty FROM orders", []string{"u20.orders", "plain"}},
		{1366, "INSERT INTO orders (uid, oid, qty, country) VALUES (1 + 1, 999, 1, 'DE')", []string{"u20.orders", "uid"}},
	} {
		u20Refused(t, p.sl, tc.code, tc.q, tc.names...)
	}
}
