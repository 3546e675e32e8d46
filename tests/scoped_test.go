package tests

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/sandbox"
)

// scopedScript runs, on one client connection, statements that read the
// values MariaDB keeps per connection (LAST_INSERT_ID(), @@identity,
// ROW_COUNT(), FOUND_ROWS(), CONNECTION_ID()) inside other statements,
// with reads in between that may run elsewhere, and checks each against
// what the server itself reported to this client. It returns the failures
// and the session's CONNECTION_ID(). prepared sends the statements with
// parameters as binary prepared statements.
func scopedScript(ctx context.Context, c *sql.Conn, tag int, prepared bool) ([]string, uint64) {
	var fails []string
	fail := func(f string, a ...any) { fails = append(fails, fmt.Sprintf("session %d: ", tag)+fmt.Sprintf(f, a...)) }
	exec := func(q string, args ...any) sql.Result {
		r, err := c.ExecContext(ctx, q, args...)
		if err != nil {
			fail("%s: %v", q, err)
		}
		return r
	}
	one := func(q string, dst ...any) {
		if err := c.QueryRowContext(ctx, q).Scan(dst...); err != nil {
			fail("%s: %v", q, err)
		}
	}
	id := func(r sql.Result) int64 {
		if r == nil {
			return -1
		}
		n, _ := r.LastInsertId()
		return n
	}
	var connID, again, pseudo uint64
	one("SELECT CONNECTION_ID()", &connID)
	pid := id(exec(fmt.Sprintf("INSERT INTO scp_parent (tag) VALUES (%d)", tag)))
	var x int
	one("SELECT COUNT(*) FROM scp_static", &x) // a read: may run elsewhere
	var cid int64
	if prepared {
		cid = id(exec("INSERT INTO scp_child (parent_id, tag) VALUES (LAST_INSERT_ID(), ?)", tag))
	} else {
		cid = id(exec(fmt.Sprintf("INSERT INTO scp_child (parent_id, tag) VALUES (LAST_INSERT_ID(), %d)", tag)))
	}
	var got int64
	one(fmt.Sprintf("/* sluice:master */ SELECT parent_id FROM scp_child WHERE id = %d", cid), &got)
	if got != pid {
		fail("child %d points at parent %d, its parent is %d", cid, got, pid)
	}
	var lid, atLID, ident int64
	one("SELECT LAST_INSERT_ID()+0, @@last_insert_id, @@identity", &lid, &atLID, &ident)
	if lid != cid || atLID != cid || ident != cid {
		fail("LAST_INSERT_ID()+0, @@last_insert_id, @@identity = %d, %d, %d; the last INSERT made %d", lid, atLID, ident, cid)
	}
	exec(fmt.Sprintf("UPDATE scp_child SET note = note + 1 WHERE tag = %d", tag))
	logID := id(exec(fmt.Sprintf("INSERT INTO scp_log (v, tag) VALUES (ROW_COUNT(), %d)", tag)))
	one(fmt.Sprintf("/* sluice:master */ SELECT v FROM scp_log WHERE id = %d", logID), &got)
	if got != 1 {
		fail("ROW_COUNT() after an UPDATE of one row was %d in the INSERT after it", got)
	}
	rows, err := c.QueryContext(ctx, "SELECT id FROM scp_static ORDER BY id LIMIT 4")
	if err == nil {
		for rows.Next() {
		}
		rows.Close()
	} else {
		fail("%v", err)
	}
	var fr, rc int64
	one("SELECT FOUND_ROWS()+0, ROW_COUNT()+0", &fr, &rc)
	if fr != 4 || rc != -1 {
		fail("after a SELECT of 4 rows, FOUND_ROWS()+0 and ROW_COUNT()+0 are %d and %d, want 4 and -1", fr, rc)
	}
	one("SELECT SQL_CALC_FOUND_ROWS id FROM scp_static LIMIT 1", &x)
	one("SELECT FOUND_ROWS() + 0", &fr)
	if fr != 5 {
		fail("FOUND_ROWS() + 0 after SQL_CALC_FOUND_ROWS over 5 rows is %d", fr)
	}
	one("SELECT CONNECTION_ID(), @@pseudo_thread_id", &again, &pseudo)
	if again != connID || pseudo != connID {
		fail("CONNECTION_ID() was %d, now %d, @@pseudo_thread_id %d", connID, again, pseudo)
	}
	return fails, connID
}

// scopedSetup makes the tables scopedScript writes, on the master.
func scopedSetup(t *testing.T) {
	root := mustRoot(t, env.topo.Master)
	db := "scp19"
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS " + db,
		"CREATE OR REPLACE TABLE " + db + ".scp_parent (id INT AUTO_INCREMENT PRIMARY KEY, tag INT)",
		"CREATE OR REPLACE TABLE " + db + ".scp_child (id INT AUTO_INCREMENT PRIMARY KEY, parent_id INT, tag INT, note INT NOT NULL DEFAULT 0)",
		"CREATE OR REPLACE TABLE " + db + ".scp_log (id INT AUTO_INCREMENT PRIMARY KEY, v BIGINT, tag INT)",
		"CREATE OR REPLACE TABLE " + db + ".scp_static (id INT PRIMARY KEY)",
		"INSERT INTO " + db + ".scp_static VALUES (1),(2),(3),(4),(5)",
	} {
		mustExec(t, root, q)
	}
	if err := env.topo.WaitReplicated(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestConnectionScopedValuesUnderMultiplexing: 50 sessions share two
// connections per backend; each reads its own LAST_INSERT_ID(), ROW_COUNT(),
// FOUND_ROWS() and CONNECTION_ID() inside INSERTs and SELECTs (issue 19,
// item 3), in the text protocol and as binary prepared statements. The same
// script alone on a direct connection to the master is the control: it
// proves the script's expectations are the server's.
func TestConnectionScopedValuesUnderMultiplexing(t *testing.T) {
	scopedSetup(t)
	o := env.topo.Opts
	direct, err := sql.Open("mysql", env.topo.Master.DSN(o.ServiceUser, o.ServicePassword, "scp19"))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	c, err := direct.Conn(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for k, prepared := range []bool{false, true} {
		if fails, _ := scopedScript(ctxT(t), c, 1000+k, prepared); len(fails) > 0 {
			t.Fatalf("the script fails on MariaDB itself: %s", strings.Join(fails, "\n"))
		}
	}
	c.Close()

	srv, err := startProxyWith(env.topo, sandbox.SluiceOptions{ClusterKeys: []string{"pool_size = 2", `pool_wait_timeout = "20s"`}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, prepared := range []bool{false, true} {
		d, err := sql.Open("mysql", dsn(srv.Addr().String(), o.AppUser, o.AppPassword, "scp19", func(c *mysql.Config) { c.InterpolateParams = false }))
		if err != nil {
			t.Fatal(err)
		}
		d.SetMaxIdleConns(0)
		var mu sync.Mutex
		var fails []string
		ids := map[uint64]int{}
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := d.Conn(ctxT(t))
				if err != nil {
					mu.Lock()
					fails = append(fails, err.Error())
					mu.Unlock()
					return
				}
				defer c.Close()
				tag := i
				if prepared {
					tag += 100
				}
				f, id := scopedScript(ctxT(t), c, tag, prepared)
				mu.Lock()
				fails = append(fails, f...)
				ids[id]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		d.Close()
		for id, n := range ids {
			if n > 1 {
				fails = append(fails, fmt.Sprintf("%d sessions got CONNECTION_ID() %d", n, id))
			}
		}
		if len(fails) > 0 {
			t.Errorf("prepared=%v: %d failures through sluice:\n%s", prepared, len(fails), strings.Join(fails[:min(len(fails), 20)], "\n"))
		}
	}
}
