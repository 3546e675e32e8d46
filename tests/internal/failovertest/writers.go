package failovertest

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/sandbox"
)

// MaxWriters is how many writer numbers the counter table holds rows for: writers started by
// StartWriters use numbers first..first+n-1 below it.
const MaxWriters = 1000

// CreateSchema creates the writers' tables on topo's master and waits until the replicas have
// them: acked (one row per transaction: its id and writer), acked_detail (a second row per
// transaction), counter (one row per writer number, incremented by each of its
// transactions) and marks (rows the read checks write).
func CreateSchema(ctx context.Context, topo *sandbox.Topology) error {
	var rows strings.Builder
	for w := range MaxWriters {
		if w > 0 {
			rows.WriteString(",")
		}
		fmt.Fprintf(&rows, "(%d, 0)", w)
	}
	db := sandbox.TestDatabase
	if err := topo.Master.Exec(ctx,
		"CREATE TABLE "+db+".acked (id BIGINT PRIMARY KEY, writer INT NOT NULL)",
		"CREATE TABLE "+db+".acked_detail (id BIGINT PRIMARY KEY, note VARCHAR(32) NOT NULL)",
		"CREATE TABLE "+db+".counter (writer INT PRIMARY KEY, n BIGINT NOT NULL)",
		"INSERT INTO "+db+".counter (writer, n) VALUES "+rows.String(),
		"CREATE TABLE "+db+".marks (id BIGINT PRIMARY KEY)",
	); err != nil {
		return err
	}
	return topo.WaitReplicated(ctx)
}

// ClientDSN is the application's DSN through sluice at addr, on the test database, with
// parameters interpolated by the driver (no prepared statements) and bounded timeouts.
func ClientDSN(topo *sandbox.Topology, addr string) string {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = topo.Opts.AppUser, topo.Opts.AppPassword, "tcp", addr, sandbox.TestDatabase
	c.Timeout, c.ReadTimeout, c.WriteTimeout = 5*time.Second, 20*time.Second, 20*time.Second
	c.InterpolateParams = true
	return c.FormatDSN()
}

var quietOnce sync.Once

// QuietDriver silences go-sql-driver's own logging of broken connections, which a killed
// server or sluice produces by the hundred.
func QuietDriver() {
	quietOnce.Do(func() { _ = mysql.SetLogger(log.New(io.Discard, "", 0)) })
}

// Writers are clients that run, each in a loop until halted, the transaction
// BEGIN; INSERT acked; INSERT acked_detail; UPDATE counter; COMMIT with a fresh id per
// attempt (a COMMIT that failed may still have committed), and record the ids of the
// transactions whose COMMIT succeeded: the acknowledged ones.
type Writers struct {
	db     *sql.DB
	acked  [][]int64 // per writer, written by that writer's goroutine only until halted
	total  atomic.Int64
	failed atomic.Int64
	// mark (unix nanos) and afterMark count acknowledged transactions begun after Mark.
	mark      atomic.Int64
	afterMark atomic.Int64
	errMu     sync.Mutex
	errs      map[string]int
	stop      context.CancelFunc
	wg        sync.WaitGroup
	haltOnce  sync.Once
}

// StartWriters starts n writers with writer numbers first..first+n-1 through the DSN dsn;
// they stop when ctx ends or at Halt.
func StartWriters(ctx context.Context, dsn string, n, first int) (*Writers, error) {
	if first < 0 || first+n > MaxWriters {
		return nil, fmt.Errorf("writer numbers %d..%d outside 0..%d", first, first+n-1, MaxWriters-1)
	}
	QuietDriver()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	w := &Writers{db: db, acked: make([][]int64, n), errs: map[string]int{}}
	wctx, stop := context.WithCancel(ctx)
	w.stop = stop
	for i := range n {
		writer := first + i
		w.wg.Go(func() {
			for k := int64(1); wctx.Err() == nil; k++ {
				id := int64(writer)*1_000_000_000 + k
				begun := time.Now().UnixNano()
				err := w.transaction(wctx, writer, id)
				if err == nil {
					w.acked[i] = append(w.acked[i], id)
					w.total.Add(1)
					if m := w.mark.Load(); m != 0 && begun > m {
						w.afterMark.Add(1)
					}
					continue
				}
				if wctx.Err() != nil {
					return
				}
				w.failed.Add(1)
				w.errMu.Lock()
				w.errs[shortErr(err)]++
				w.errMu.Unlock()
				select {
				case <-time.After(20 * time.Millisecond):
				case <-wctx.Done():
				}
			}
		})
	}
	return w, nil
}

func (w *Writers) transaction(ctx context.Context, writer int, id int64) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("BEGIN: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // after COMMIT it does nothing
	for _, st := range []struct {
		q    string
		args []any
	}{
		{"INSERT INTO acked (id, writer) VALUES (?, ?)", []any{id, writer}},
		{"INSERT INTO acked_detail (id, note) VALUES (?, ?)", []any{id, fmt.Sprintf("w%d", writer)}},
		{"UPDATE counter SET n = n + 1 WHERE writer = ?", []any{writer}},
	} {
		if _, err := tx.ExecContext(ctx, st.q, st.args...); err != nil {
			return fmt.Errorf("%s: %w", strings.Fields(st.q)[0], err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("COMMIT: %w", err)
	}
	return nil
}

// shortErr is an error's message with its long numbers (ids, ports) blanked, error codes kept, cut
// to 160 bytes, so that failures can be counted by kind.
func shortErr(err error) string {
	s := digits.ReplaceAllString(err.Error(), "N")
	if len(s) > 160 {
		s = s[:160]
	}
	return s
}

var digits = regexp.MustCompile(`[0-9]{5,}`)

// Total is how many transactions were acknowledged so far.
func (w *Writers) Total() int64 { return w.total.Load() }

// Failed is how many attempts failed so far.
func (w *Writers) Failed() int64 { return w.failed.Load() }

// Mark starts counting the acknowledged transactions begun from now on (AfterMark).
func (w *Writers) Mark() { w.afterMark.Store(0); w.mark.Store(time.Now().UnixNano()) }

// AfterMark is how many transactions begun after Mark were acknowledged.
func (w *Writers) AfterMark() int64 { return w.afterMark.Load() }

// Halt stops the writers and waits for them; it may be called more than once.
func (w *Writers) Halt() {
	w.haltOnce.Do(func() {
		w.stop()
		w.wg.Wait()
		w.db.Close()
	})
}

// IDs returns the acknowledged transactions' ids; call it after Halt.
func (w *Writers) IDs() []int64 {
	var out []int64
	for _, l := range w.acked {
		out = append(out, l...)
	}
	return out
}

// Errors describes the failed attempts by kind, most frequent first.
func (w *Writers) Errors() []string {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	type kv struct {
		msg string
		n   int
	}
	var all []kv
	for m, n := range w.errs {
		all = append(all, kv{m, n})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n || all[i].n == all[j].n && all[i].msg < all[j].msg })
	out := make([]string, len(all))
	for i, e := range all {
		out[i] = fmt.Sprintf("%d x %s", e.n, e.msg)
	}
	return out
}
