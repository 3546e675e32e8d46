package tests

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-proxy/sluice/sandbox"
)

// With [proxy] event_loop, logged-in sessions run on the event loops: the
// gauge counts them while their clients are connected, and none is left
// once they leave. Text and prepared statements, transactions and
// session state go through the loops' data path meanwhile. (make test
// also runs this whole package with event_loop = true.)
func TestEventLoopSessions(t *testing.T) {
	var keys []string
	if !strings.Contains(os.Getenv(sandbox.ProxyKeysEnv), "event_loop") {
		keys = append(keys, "event_loop = true")
	}
	srv, err := startProxy(env.topo, keys...)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	o := env.topo.Opts
	db, err := sql.Open("mysql", dsn(srv.Addr().String(), o.AppUser, o.AppPassword, "sluice_test", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mustExec(t, db, "CREATE TABLE IF NOT EXISTS evloop (id INT PRIMARY KEY, v VARCHAR(20))")
	mustExec(t, db, "DELETE FROM evloop")

	const clients = 8
	conns := make([]*sql.Conn, clients)
	for i := range conns {
		c, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	pollUntil(t, fmt.Sprintf("%d sessions on the event loops", clients), func() bool {
		return scrapeFrom(t, srv, "sluice_event_loop_sessions") == clients
	})

	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- loopClientWork(ctx, c, i)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM evloop").Scan(&n); err != nil || n != clients*20 {
		t.Fatalf("rows written through the loops: %d (%v), want %d", n, err, clients*20)
	}
	for _, c := range conns {
		c.Close()
	}
	db.Close()
	pollUntil(t, "no session left on the event loops", func() bool {
		return scrapeFrom(t, srv, "sluice_event_loop_sessions") == 0
	})
}

// loopClientWork is one client's mix: writes in a transaction, a user
// variable (pins the session), prepared and text reads.
func loopClientWork(ctx context.Context, c *sql.Conn, i int) error {
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for j := range 20 {
		if _, err := tx.ExecContext(ctx, "INSERT INTO evloop VALUES (?, ?)", i*100+j, fmt.Sprintf("c%d-%d", i, j)); err != nil {
			tx.Rollback()
			return fmt.Errorf("client %d insert %d: %w", i, j, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if _, err := c.ExecContext(ctx, fmt.Sprintf("SET @mine = %d", i)); err != nil {
		return err
	}
	// Inside a transaction the reads go to the master, which has the
	// rows whatever the replicas' lag.
	rtx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer rtx.Rollback()
	for j := range 50 {
		var v string
		if err := rtx.QueryRowContext(ctx, "SELECT v FROM evloop WHERE id = ?", i*100+j%20).Scan(&v); err != nil {
			return fmt.Errorf("client %d read %d: %w", i, j, err)
		}
		if want := fmt.Sprintf("c%d-%d", i, j%20); v != want {
			return fmt.Errorf("client %d read %q, want %q", i, v, want)
		}
	}
	if err := rtx.Commit(); err != nil {
		return err
	}
	for j := range 50 {
		var n int
		if err := c.QueryRowContext(ctx, fmt.Sprintf("SELECT %d + 1", j)).Scan(&n); err != nil || n != j+1 {
			return fmt.Errorf("client %d: SELECT %d + 1 = %d (%v)", i, j, n, err)
		}
	}
	var mine int
	if err := c.QueryRowContext(ctx, "SELECT @mine").Scan(&mine); err != nil || mine != i {
		return fmt.Errorf("client %d: @mine = %d (%v), want its own value", i, mine, err)
	}
	return nil
}
