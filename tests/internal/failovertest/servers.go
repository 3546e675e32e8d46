package failovertest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/sandbox"
)

// lookTimeout bounds each statement a look at a server runs.
const lookTimeout = 2 * time.Second

// View is one server as the test sees it, as root over its unix socket.
type View struct {
	Server *sandbox.Server
	// Err says why the server could not be read (not running, not answering).
	Err      error
	ReadOnly bool
	// Replica is SHOW SLAVE STATUS, nil when the server replicates from no one.
	Replica   map[string]string
	BinlogPos string // gtid_binlog_pos
	SlavePos  string // gtid_slave_pos: what replication applied
}

// Look reads s's view.
func Look(ctx context.Context, s *sandbox.Server) View {
	v := View{Server: s}
	if !s.Running() {
		v.Err = errors.New("not running")
		return v
	}
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	db, err := s.RootDB()
	if err != nil {
		v.Err = err
		return v
	}
	var ro int
	if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.read_only, @@GLOBAL.gtid_binlog_pos, @@GLOBAL.gtid_slave_pos").
		Scan(&ro, &v.BinlogPos, &v.SlavePos); err != nil {
		v.Err = err
		return v
	}
	v.ReadOnly = ro != 0
	if v.Replica, err = s.ReplicaStatus(ctx); err != nil {
		v.Err = err
	}
	return v
}

// LookAll reads the views of servers at once.
func LookAll(ctx context.Context, servers []*sandbox.Server) []View {
	out := make([]View, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() { out[i] = Look(ctx, s) })
	}
	wg.Wait()
	return out
}

// MasterPort is the port the server replicates from, 0 when none.
func (v View) MasterPort() int {
	if v.Replica == nil {
		return 0
	}
	p, _ := strconv.Atoi(v.Replica["Master_Port"])
	return p
}

// ReplicatesFrom is nil when v replicates from m with both replication threads running.
func (v View) ReplicatesFrom(m *sandbox.Server) error {
	switch {
	case v.Err != nil:
		return fmt.Errorf("%s: %v", v.Server.Name, v.Err)
	case v.Replica == nil:
		return fmt.Errorf("%s replicates from no one", v.Server.Name)
	case v.MasterPort() != m.Port:
		return fmt.Errorf("%s replicates from port %d, not %s (%d)", v.Server.Name, v.MasterPort(), m.Name, m.Port)
	case v.Replica["Slave_IO_Running"] != "Yes" || v.Replica["Slave_SQL_Running"] != "Yes":
		return fmt.Errorf("%s replicates from %s with Slave_IO_Running=%s (%s %s) Slave_SQL_Running=%s (%s %s)", v.Server.Name, m.Name,
			v.Replica["Slave_IO_Running"], v.Replica["Last_IO_Errno"], v.Replica["Last_IO_Error"],
			v.Replica["Slave_SQL_Running"], v.Replica["Last_SQL_Errno"], v.Replica["Last_SQL_Error"])
	}
	return nil
}

// String describes the view in one line.
func (v View) String() string {
	if v.Err != nil {
		return fmt.Sprintf("%s (%d): %v", v.Server.Name, v.Server.Port, v.Err)
	}
	ro := "writable"
	if v.ReadOnly {
		ro = "read-only"
	}
	repl := "replicates from no one"
	if v.Replica != nil {
		repl = fmt.Sprintf("replicates from %s IO=%s SQL=%s delay=%s", v.Replica["Master_Port"], v.Replica["Slave_IO_Running"],
			v.Replica["Slave_SQL_Running"], v.Replica["SQL_Delay"])
		if e := v.Replica["Last_SQL_Error"]; e != "" {
			repl += " sql_error=" + strconv.Quote(e)
		}
		if e := v.Replica["Last_IO_Error"]; e != "" {
			repl += " io_error=" + strconv.Quote(e)
		}
	}
	return fmt.Sprintf("%s (%d): %s, %s, binlog %q, slave_pos %q", v.Server.Name, v.Server.Port, ro, repl, v.BinlogPos, v.SlavePos)
}

// ReceivedSeq is the highest sequence number of GTID domain 0 (the sandbox's only one) that
// the server has anywhere: applied, in its binary log, or received into its relay log
// (Gtid_IO_Pos). Under GTID strict mode sequence numbers only grow, so of two servers that
// did not diverge, the one with the higher ReceivedSeq holds everything the other holds.
func (v View) ReceivedSeq() uint64 {
	var best uint64
	positions := []string{v.BinlogPos, v.SlavePos}
	if v.Replica != nil {
		positions = append(positions, v.Replica["Gtid_IO_Pos"])
	}
	for _, pos := range positions {
		for _, g := range strings.Split(pos, ",") {
			parts := strings.Split(strings.TrimSpace(g), "-")
			if len(parts) != 3 || parts[0] != "0" {
				continue
			}
			if n, err := strconv.ParseUint(parts[2], 10, 64); err == nil && n > best {
				best = n
			}
		}
	}
	return best
}

// Describe is the views' String, one per line.
func Describe(views []View) string {
	var b strings.Builder
	for _, v := range views {
		b.WriteString("  " + v.String() + "\n")
	}
	return b.String()
}

// Writable returns the servers of views that answered and are writable.
func Writable(views []View) []*sandbox.Server {
	var out []*sandbox.Server
	for _, v := range views {
		if v.Err == nil && !v.ReadOnly {
			out = append(out, v.Server)
		}
	}
	return out
}

// Applied reports whether replica r has applied pos (a MariaDB GTID position), waiting at most
// wait for it. Under a steady stream of writes a replica is always a little behind its
// master's latest position; a short wait tells "behind by milliseconds" from "stuck".
func Applied(ctx context.Context, r *sandbox.Server, pos string, wait time.Duration) (bool, error) {
	if pos == "" {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, lookTimeout+wait)
	defer cancel()
	db, err := r.RootDB()
	if err != nil {
		return false, err
	}
	var res int
	if err := db.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, ?)", pos, wait.Seconds()).Scan(&res); err != nil {
		return false, fmt.Errorf("%s: %w", r.Name, err)
	}
	return res == 0, nil
}

// BinlogPos is s's gtid_binlog_pos.
func BinlogPos(ctx context.Context, s *sandbox.Server) (string, error) {
	v := Look(ctx, s)
	return v.BinlogPos, v.Err
}

// Contents is what one server holds of the writers' tables.
type Contents struct {
	Acked   map[int64]int // id -> writer
	Detail  map[int64]bool
	Counter map[int]int64 // writer -> n, for n > 0
}

// ReadContents reads s's copy of the writers' tables as root.
func ReadContents(ctx context.Context, s *sandbox.Server) (Contents, error) {
	c := Contents{Acked: map[int64]int{}, Detail: map[int64]bool{}, Counter: map[int]int64{}}
	db, err := s.RootDB()
	if err != nil {
		return c, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	scan := func(q string, row func(a, b int64)) error {
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", s.Name, q, err)
		}
		defer rows.Close()
		for rows.Next() {
			var a, b int64
			if err := rows.Scan(&a, &b); err != nil {
				return err
			}
			row(a, b)
		}
		return rows.Err()
	}
	db2 := sandbox.TestDatabase
	if err := scan("SELECT id, writer FROM "+db2+".acked", func(a, b int64) { c.Acked[a] = int(b) }); err != nil {
		return c, err
	}
	if err := scan("SELECT id, 0 FROM "+db2+".acked_detail", func(a, _ int64) { c.Detail[a] = true }); err != nil {
		return c, err
	}
	err = scan("SELECT writer, n FROM "+db2+".counter WHERE n > 0", func(a, b int64) { c.Counter[int(a)] = b })
	return c, err
}

// Missing returns the ids of ids that c's acked table lacks.
func (c Contents) Missing(ids []int64) []int64 {
	var out []int64
	for _, id := range ids {
		if _, ok := c.Acked[id]; !ok {
			out = append(out, id)
		}
	}
	return out
}

// Torn describes transactions that are only partly there: a row in acked without its
// acked_detail row or the other way round, or a writer whose counter differs from its
// number of acked rows. A server that applied every transaction whole has none.
func (c Contents) Torn() []string {
	var out []string
	perWriter := map[int]int64{}
	for id, w := range c.Acked {
		perWriter[w]++
		if !c.Detail[id] {
			out = append(out, fmt.Sprintf("acked %d without its acked_detail row", id))
		}
	}
	for id := range c.Detail {
		if _, ok := c.Acked[id]; !ok {
			out = append(out, fmt.Sprintf("acked_detail %d without its acked row", id))
		}
	}
	for w, n := range c.Counter {
		if perWriter[w] != n {
			out = append(out, fmt.Sprintf("writer %d: counter %d, %d acked rows", w, n, perWriter[w]))
		}
	}
	for w, n := range perWriter {
		if _, ok := c.Counter[w]; !ok {
			out = append(out, fmt.Sprintf("writer %d: counter 0, %d acked rows", w, n))
		}
	}
	slices.Sort(out)
	return out
}

// First returns at most n elements of s, for messages.
func First[T any](s []T, n int) []T { return s[:min(len(s), n)] }

// StateFile is the failover state file of cluster "main" under dir, with whether it still
// records a failover in progress ("pending").
type StateFile struct {
	health.FailoverState
	Pending json.RawMessage
}

// ReadStateFile reads the state file of cluster "main" under dir; ok is false without one.
func ReadStateFile(dir string) (st StateFile, ok bool, err error) {
	st.FailoverState, ok, err = health.ReadFailoverState(dir, "main")
	if err != nil || !ok {
		return st, ok, err
	}
	data, err := os.ReadFile(health.FailoverStatePath(dir, "main"))
	if err != nil {
		return st, false, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return st, false, err
	}
	if p, ok := raw["pending"]; ok && string(p) != "null" {
		st.Pending = p
	}
	return st, true, nil
}

// RecordsFailoverTo is nil when the state file names master as the master, records no
// failover in progress, and has a finished failover to master in its history with
// LastFailover set.
func (st StateFile) RecordsFailoverTo(master string) error {
	switch {
	case st.Master != master:
		return fmt.Errorf("state file names master %q, not %s", st.Master, master)
	case len(st.Pending) > 0:
		return fmt.Errorf("state file still records a failover in progress: %s", st.Pending)
	case st.LastFailover.IsZero():
		return errors.New("state file has no last_failover")
	case !slices.ContainsFunc(st.History, func(r health.Result) bool { return r.NewMaster == master }):
		return fmt.Errorf("state file's history has no failover to %s: %d entries", master, len(st.History))
	}
	return nil
}

// Sampler polls @@read_only on every running server of a set, at once, every interval and
// records each round in which more than one was writable.
type Sampler struct {
	stop       chan struct{}
	done       chan struct{}
	mu         sync.Mutex
	rounds     int
	violations []string
}

// StartSampler starts sampling servers every interval until Stop.
func StartSampler(servers []*sandbox.Server, interval time.Duration) *Sampler {
	s := &Sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			s.round(servers, interval)
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *Sampler) round(servers []*sandbox.Server, interval time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), max(interval*3, 300*time.Millisecond))
	defer cancel()
	writable := make([]bool, len(servers))
	var wg sync.WaitGroup
	for i, srv := range servers {
		if !srv.Running() {
			continue
		}
		wg.Go(func() {
			db, err := srv.RootDB()
			if err != nil {
				return
			}
			var ro int
			if db.QueryRowContext(ctx, "SELECT @@GLOBAL.read_only").Scan(&ro) == nil && ro == 0 {
				writable[i] = true
			}
		})
	}
	wg.Wait()
	var names []string
	for i, w := range writable {
		if w {
			names = append(names, fmt.Sprintf("%s (%d)", servers[i].Name, servers[i].Port))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rounds++
	if len(names) > 1 {
		s.violations = append(s.violations, time.Now().Format("15:04:05.000")+": "+strings.Join(names, " and ")+" writable")
	}
}

// Stop ends the sampling and returns how many rounds ran and the rounds with more than one
// writable server.
func (s *Sampler) Stop() (rounds int, violations []string) {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rounds, slices.Clone(s.violations)
}

// ReadCheck is what ReadsSee found.
type ReadCheck struct {
	// Served counts the reads by the server_id that answered them, Missed those that did
	// not see the row.
	Served, Missed map[uint32]int
	Errors         []string
}

// Misses is how many reads did not see the row or failed.
func (r ReadCheck) Misses() int {
	n := len(r.Errors)
	for _, m := range r.Missed {
		n += m
	}
	return n
}

// ReadsSee writes the row id into marks through sluice (dsn), retrying for at most 10 s,
// waits (at most 10 s) until every server of followers has applied master's binlog position,
// then reads the row n times through sluice, each on a fresh client connection, spread over
// span. Reads go to replicas: a read served by a replica that follows a server other than
// master (a fenced old master) misses the row, however long it waits.
func ReadsSee(ctx context.Context, dsn string, master *sandbox.Server, followers []*sandbox.Server, id int64, n int, span time.Duration) (ReadCheck, error) {
	res := ReadCheck{Served: map[uint32]int{}, Missed: map[uint32]int{}}
	QuietDriver()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return res, err
	}
	defer db.Close()
	db.SetMaxIdleConns(-1) // a fresh connection, so a fresh choice of replica, per read
	deadline := time.Now().Add(10 * time.Second)
	for {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := db.ExecContext(wctx, "INSERT INTO marks (id) VALUES (?)", id)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return res, fmt.Errorf("writing mark %d through sluice: %w", id, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	pos, err := BinlogPos(ctx, master)
	if err != nil {
		return res, err
	}
	for _, f := range followers {
		for {
			ok, err := Applied(ctx, f, pos, 0)
			if ok {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return res, fmt.Errorf("%s has not applied %s (%v) 10s after the mark was written:\n%s", f.Name, pos, err, Look(ctx, f))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	gap := span / time.Duration(max(n-1, 1))
	for i := range n {
		if i > 0 {
			select {
			case <-time.After(gap):
			case <-ctx.Done():
				return res, ctx.Err()
			}
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var sid uint32
		var seen int
		err := db.QueryRowContext(rctx, "SELECT @@server_id, (SELECT COUNT(*) FROM marks WHERE id = ?)", id).Scan(&sid, &seen)
		cancel()
		if err != nil {
			res.Errors = append(res.Errors, err.Error())
			continue
		}
		res.Served[sid]++
		if seen == 0 {
			res.Missed[sid]++
		}
	}
	return res, nil
}

// Eventually calls cond every 20 ms until it returns nil, the deadline d passes or ctx ends;
// it returns the last error, naming what.
func Eventually(ctx context.Context, d time.Duration, what string, cond func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s: not within %v: %w", what, d, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}
