package tests

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/sluice-proxy/sluice/tests/internal/sluicebin"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// readyz fetches /readyz from addr: the status code and body, or 0 when
// the metrics listener does not answer.
func readyz(addr string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	r, err := c.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, string(b)
}

// shutdownConn is one dedicated go-sql-driver connection through addr.
func shutdownConn(t *testing.T, addr string) *sql.Conn {
	t.Helper()
	d, err := sql.Open("mysql", dsn(addr, env.topo.Opts.AppUser, env.topo.Opts.AppPassword, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return conn(t, d)
}

// TestShutdownOnSIGTERM runs sluice as a process and sends it SIGTERM with
// four clients connected: one idle, one running SELECT SLEEP(3), one inside
// a transaction that commits after the signal, and one inside a transaction
// that never ends. /readyz turns 503 "shutting down" while the listener
// still accepts (shutdown_delay); then new connections are refused, the
// idle client is closed at once, the statement completes with its result,
// the transaction commits and its rows are on the master, and the process
// exits with status 0 within shutdown_timeout although the last client
// never commits (its row is rolled back).
func TestShutdownOnSIGTERM(t *testing.T) {
	const (
		delay   = 2 * time.Second
		timeout = 6 * time.Second
	)
	root := mustRoot(t, env.topo.Master)
	mustExec(t, root, "CREATE DATABASE IF NOT EXISTS shutdowntest")
	mustExec(t, root, "CREATE TABLE IF NOT EXISTS shutdowntest.t (id INT PRIMARY KEY)")
	mustExec(t, root, "DELETE FROM shutdowntest.t")

	bin := sluicebin.Build(t)
	metrics := freePort(t)
	cfg := env.topo.SluiceConfig("127.0.0.1:0", `admin_listen = ""`, fmt.Sprintf("metrics_listen = %q", metrics),
		fmt.Sprintf("shutdown_delay = %q", delay.String()), fmt.Sprintf("shutdown_timeout = %q", timeout.String()))
	log := &procLog{ready: make(chan string, 1)}
	proc := sluicebin.Start(t, bin, cfg, log)
	cmd, exited := proc.Cmd, proc.Exited
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	var addr string
	select {
	case addr = <-log.ready:
	case err := <-exited:
		stopped = true
		t.Fatalf("sluice exited before serving (%v):\n%s", err, log.tail())
	case <-time.After(30 * time.Second):
		t.Fatalf("sluice did not report its listen address within 30s:\n%s", log.tail())
	}
	pollUntil(t, "/readyz 200", func() bool { code, _ := readyz(metrics); return code == 200 })

	ctx := ctxT(t)
	idle, err := idleLogin(addr)
	if err != nil {
		t.Fatalf("idle client: %v", err)
	}
	defer idle.Close()
	rawIdleValue(t, idle, "SELECT 1", "1")

	commits := shutdownConn(t, addr)
	mustExecC(t, commits, "BEGIN")
	mustExecC(t, commits, "INSERT INTO shutdowntest.t VALUES (1)")
	forever := shutdownConn(t, addr)
	mustExecC(t, forever, "BEGIN")
	mustExecC(t, forever, "INSERT INTO shutdowntest.t VALUES (100)")

	sleeper := shutdownConn(t, addr)
	type result struct {
		v   int
		err error
	}
	slept := make(chan result, 1)
	go func() {
		var r result
		r.err = sleeper.QueryRowContext(ctx, "SELECT SLEEP(3)").Scan(&r.v)
		slept <- r
	}()
	// The statement is running when SHOW PROCESSLIST on the master shows
	// it (sleeps are read-only, but sluice may send them to a replica:
	// look everywhere).
	pollUntil(t, "SELECT SLEEP(3) running on a backend", func() bool {
		for _, s := range append(env.topo.Replicas, env.topo.Master) {
			var n int
			if err := mustRoot(t, s).QueryRowContext(ctx,
				"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'SELECT SLEEP(3)'").Scan(&n); err == nil && n > 0 {
				return true
			}
		}
		return false
	})

	signalled := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	// /readyz turns unready first, while the listener still takes clients.
	pollUntil(t, "/readyz 503", func() bool { code, _ := readyz(metrics); return code == http.StatusServiceUnavailable })
	if _, body := readyz(metrics); !strings.Contains(body, "shutting down") {
		t.Errorf("/readyz body %q, want the reason \"shutting down\"", body)
	}
	if nc, err := net.Dial("tcp", addr); err != nil {
		if time.Since(signalled) < delay {
			t.Fatalf("connection refused %v after SIGTERM, within shutdown_delay %v: %v", time.Since(signalled), delay, err)
		}
		t.Logf("the check of the listener during shutdown_delay came too late (%v after SIGTERM)", time.Since(signalled))
	} else {
		nc.Close()
	}

	// Then the listener closes: connection refused.
	pollUntil(t, "new connections refused", func() bool {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			return errors.Is(err, syscall.ECONNREFUSED)
		}
		nc.Close()
		return false
	})
	refusedAt := time.Since(signalled)
	if refusedAt < delay {
		t.Errorf("listener closed %v after SIGTERM, before shutdown_delay %v", refusedAt, delay)
	}

	// The idle client is closed at once, while the transactions still run.
	_ = idle.SetDeadline(time.Now().Add(timeout))
	if _, err := idle.ReadPacket(); err == nil {
		t.Fatalf("the idle client got a packet instead of a close")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the idle client was not closed within shutdown_timeout")
	}
	var one int
	if err := forever.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("the idle client's close came with the cut-off, not before: a session in a transaction is gone too: %v", err)
	}

	// The statement in flight completes with its result.
	r := <-slept
	if r.err != nil || r.v != 0 {
		t.Fatalf("SELECT SLEEP(3) across SIGTERM: %d, %v; want 0", r.v, r.err)
	}
	if err := sleeper.PingContext(ctx); err == nil {
		t.Errorf("the session that ran SLEEP is still open after its statement")
	}

	// The open transaction goes on and commits.
	mustExecC(t, commits, "INSERT INTO shutdowntest.t VALUES (2)")
	mustExecC(t, commits, "COMMIT")
	if err := commits.PingContext(ctx); err == nil {
		t.Errorf("the session whose transaction committed is still open")
	}

	// The process exits within shutdown_timeout of closing the listener,
	// although one transaction never ends.
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Fatalf("sluice exited with %v after SIGTERM; log:\n%s", err, log.tail())
		}
	case <-time.After(delay + timeout + 15*time.Second):
		t.Fatalf("sluice still running %v after SIGTERM; log:\n%s", time.Since(signalled), log.tail())
	}
	took := time.Since(signalled)
	t.Logf("SIGTERM to exit: %v (shutdown_delay %v, shutdown_timeout %v); listener closed after %v", took, delay, timeout, refusedAt)

	var ids []int
	rows, err := root.QueryContext(ctx, "SELECT id FROM shutdowntest.t ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if fmt.Sprint(ids) != "[1 2]" {
		t.Fatalf("rows on the master: %v, want [1 2] (the committed transaction's, not the cut one's)", ids)
	}
}

// TestShutdownInProcess drives Server.Shutdown directly (under the race
// detector): an idle session is closed promptly, a session inside a
// transaction may still commit and is closed after it, /readyz reports
// "shutting down", and Shutdown returns once both are gone, long before
// shutdown_timeout.
func TestShutdownInProcess(t *testing.T) {
	srv, err := startProxy(env.topo, `shutdown_timeout = "60s"`)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	root := mustRoot(t, env.topo.Master)
	mustExec(t, root, "CREATE DATABASE IF NOT EXISTS shutdowntest")
	mustExec(t, root, "CREATE TABLE IF NOT EXISTS shutdowntest.inproc (id INT PRIMARY KEY)")
	mustExec(t, root, "DELETE FROM shutdowntest.inproc")
	addr := srv.Addr().String()
	ctx := ctxT(t)

	idle := shutdownConn(t, addr)
	if err := idle.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	tx := shutdownConn(t, addr)
	mustExecC(t, tx, "BEGIN")
	mustExecC(t, tx, "INSERT INTO shutdowntest.inproc VALUES (7)")

	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- srv.Shutdown(context.Background()) }()
	pollUntil(t, "unready", func() bool { ok, _ := srv.Ready(); return !ok })
	if _, why := srv.Ready(); !strings.Contains(why, "shutting down") {
		t.Errorf("Ready reason %q, want \"shutting down\"", why)
	}
	pollUntil(t, "new connections refused", func() bool {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			return true
		}
		nc.Close()
		return false
	})
	// The idle session's connection was closed: the driver finds it dead.
	if err := idle.PingContext(ctx); err == nil {
		t.Fatalf("the idle session still answers after Shutdown closed the listener")
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) while a transaction was open", err)
	default:
	}
	mustExecC(t, tx, "COMMIT")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Shutdown did not return 30s after the last transaction committed")
	}
	t.Logf("Shutdown took %v", time.Since(start))
	var n int
	if err := root.QueryRowContext(ctx, "SELECT COUNT(*) FROM shutdowntest.inproc WHERE id = 7").Scan(&n); err != nil || n != 1 {
		t.Fatalf("committed row: %d, %v", n, err)
	}
}
