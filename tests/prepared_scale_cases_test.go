package tests

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/sandbox"
)

// backendMonitor samples every backend's Prepared_stmt_count and
// Threads_connected, and sluice's pools, until stopped, keeping the peaks.
type backendMonitor struct {
	servers []*sandbox.Server
	// basePrepared and baseThreads are the figures before the sluice
	// under test started.
	basePrepared, baseThreads []int64
	pools                     func() map[string][3]int

	mu                        sync.Mutex
	peakPrepared, peakThreads []int64
	peakOpen                  map[string]int
	samples, failed           int

	stopc chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

// newBackendMonitor takes the baseline of servers.
func newBackendMonitor(t *testing.T, ctx context.Context, servers []*sandbox.Server) *backendMonitor {
	t.Helper()
	m := &backendMonitor{servers: servers, peakOpen: map[string]int{}, stopc: make(chan struct{})}
	for _, s := range servers {
		prep, threads, err := backendFigures(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		m.basePrepared = append(m.basePrepared, prep)
		m.baseThreads = append(m.baseThreads, threads)
	}
	m.peakPrepared = append([]int64(nil), m.basePrepared...)
	m.peakThreads = append([]int64(nil), m.baseThreads...)
	return m
}

// backendFigures reads a backend's Prepared_stmt_count and
// Threads_connected.
func backendFigures(ctx context.Context, s *sandbox.Server) (prepared, threads int64, err error) {
	d, err := s.RootDB()
	if err != nil {
		return 0, 0, err
	}
	rows, err := d.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Prepared_stmt_count', 'Threads_connected')")
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", s.Name, err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			return 0, 0, fmt.Errorf("%s: %w", s.Name, err)
		}
		if name == "Prepared_stmt_count" {
			prepared = v
		} else {
			threads = v
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", s.Name, err)
	}
	if n != 2 {
		return 0, 0, fmt.Errorf("%s: %d status rows, want 2", s.Name, n)
	}
	return prepared, threads, nil
}

// start samples every 20 ms from now on; pools reports sluice's pools.
func (m *backendMonitor) start(ctx context.Context, pools func() map[string][3]int) {
	m.pools = pools
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			m.sample(ctx)
			select {
			case <-m.stopc:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// sample takes one sample; it may also be called besides the sampling
// goroutine, at moments that matter.
func (m *backendMonitor) sample(ctx context.Context) {
	type fig struct{ prep, threads int64 }
	figs := make([]fig, len(m.servers))
	failed := 0
	for i, s := range m.servers {
		p, th, err := backendFigures(ctx, s)
		if err != nil {
			failed++
			continue
		}
		figs[i] = fig{p, th}
	}
	stats := m.pools()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.samples++
	m.failed += failed
	for i, f := range figs {
		m.peakPrepared[i] = max(m.peakPrepared[i], f.prep)
		m.peakThreads[i] = max(m.peakThreads[i], f.threads)
	}
	for addr, st := range stats {
		m.peakOpen[addr] = max(m.peakOpen[addr], st[0])
	}
}

func (m *backendMonitor) stop() {
	m.once.Do(func() { close(m.stopc) })
	m.wg.Wait()
}

// check requires every backend to have held at most maxPrepared statements
// and pool connections more than before sluice started (besides the pool:
// both sluices' health probes, short logins every 500 ms each, the
// monitor's own connection and server threads of just-closed connections
// that have not yet noticed the close), and every pool to have opened at
// most pool connections.
func (m *backendMonitor) check(t *testing.T, pool int, maxPrepared int64) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	const others = 4
	t.Logf("monitor: %d samples, %d failed reads", m.samples, m.failed)
	if m.samples < 2 || m.failed*2 > m.samples*len(m.servers) {
		t.Errorf("monitor: %d samples, %d failed reads: too few to judge", m.samples, m.failed)
	}
	for i, s := range m.servers {
		t.Logf("%s: Prepared_stmt_count %d before, peak %d; Threads_connected %d before, peak %d",
			s.Name, m.basePrepared[i], m.peakPrepared[i], m.baseThreads[i], m.peakThreads[i])
		if m.peakPrepared[i]-m.basePrepared[i] > maxPrepared {
			t.Errorf("%s: Prepared_stmt_count peaked at %d, more than %d before + pool_size × backend_statement_cache = %d",
				s.Name, m.peakPrepared[i], m.basePrepared[i], maxPrepared)
		}
		if m.peakThreads[i] > m.baseThreads[i]+int64(pool)+others {
			t.Errorf("%s: Threads_connected peaked at %d, above %d before + pool %d + %d",
				s.Name, m.peakThreads[i], m.baseThreads[i], pool, others)
		}
	}
	for addr, n := range m.peakOpen {
		if n > pool {
			t.Errorf("pool %s opened %d connections, more than pool_size %d", addr, n, pool)
		}
	}
}

// waitPreparedAtMost polls until no backend's Prepared_stmt_count is above
// its figure in want.
func waitPreparedAtMost(t *testing.T, want []int64, when string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := preparedCounts(t)
		above := false
		for i := range got {
			above = above || got[i] > want[i]
		}
		if !above {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prepared_stmt_count %s = %v, want at most %v", when, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readBinaryHead reads the start of a binary result set (column count,
// definitions, their EOF) and returns the columns and the EOF's status. An
// ERR or OK fails the test.
func readBinaryHead(t *testing.T, c *protocol.Conn, what string) ([]protocol.ColumnDef, uint16) {
	t.Helper()
	p, err := c.ReadPacket()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if protocol.IsErr(p) {
		e, _ := protocol.ParseErr(p)
		t.Fatalf("%s: %v", what, e)
	}
	if protocol.IsOK(p) {
		t.Fatalf("%s: OK, want a result set", what)
	}
	n, _, _, err := protocol.ReadLenEncInt(p)
	if err != nil {
		t.Fatalf("%s: column count: %v", what, err)
	}
	cols := make([]protocol.ColumnDef, n)
	for i := range cols {
		p, err := c.ReadPacket()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		def, err := protocol.ParseColumnDef(p)
		if err != nil {
			t.Fatalf("%s: column %d: %v", what, i, err)
		}
		// The names alias the read buffer; only the type is needed.
		def.Schema, def.Table, def.Name = nil, nil, nil
		cols[i] = def
	}
	p, err = c.ReadPacket()
	if err != nil || !protocol.IsEOF(p) {
		t.Fatalf("%s: no EOF after the columns (%v)", what, err)
	}
	return cols, protocol.EOFStatus(p)
}

// readBinaryRows reads binary rows of cols up to their EOF and returns
// them as text, and the EOF's status.
func readBinaryRows(t *testing.T, c *protocol.Conn, cols []protocol.ColumnDef, what string) ([][]string, uint16) {
	t.Helper()
	var rows [][]string
	var vals [][]byte
	var scratch []byte
	for {
		p, err := c.ReadPacket()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if protocol.IsErr(p) {
			e, _ := protocol.ParseErr(p)
			t.Fatalf("%s: %v", what, e)
		}
		if protocol.IsEOF(p) {
			return rows, protocol.EOFStatus(p)
		}
		vals, scratch, err = protocol.ParseBinaryRow(p, cols, vals, scratch)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		row := make([]string, len(vals))
		for i, v := range vals {
			row[i] = string(v)
		}
		rows = append(rows, row)
	}
}

// psRawCases are the sessions of the cursor and long-data cases, logged in
// and prepared before the clients' loop starts, so that the cases
// themselves take few round trips: with every client busy, each one waits
// its turn behind all of them.
type psRawCases struct {
	cursor   *protocol.Conn
	cursorID uint32
	long     [2]*protocol.Conn
	longIDs  [2]uint32
}

func psPrepareRawCases(t *testing.T, addr string) *psRawCases {
	t.Helper()
	var r psRawCases
	r.cursor = rawLogin(t, addr)
	_ = r.cursor.SetDeadline(time.Now().Add(2 * time.Minute))
	r.cursorID = rawPrepare(t, r.cursor, psRangeText(0)).StatementID
	for k := range r.long {
		r.long[k] = rawLogin(t, addr)
		_ = r.long[k].SetDeadline(time.Now().Add(2 * time.Minute))
		r.longIDs[k] = rawPrepare(t, r.long[k], "SELECT ?, ?").StatementID
	}
	return &r
}

// cursorCase opens a read-only cursor on group 0's range select, a text
// other sessions execute all the while, and fetches it to the end in
// batches while the clients keep the pool busy between fetches. A cursor
// holds its backend connection: had sluice let another session execute
// the same backend statement there, the server would have closed the
// cursor, and other statements there would have run inside its fetches.
func (r *psRawCases) cursorCase(t *testing.T, w *psWorkers) {
	t.Helper()
	const from, to, batch = 101, 136, 6
	c, id := r.cursor, r.cursorID
	c.ResetSeq()
	if err := c.WritePacketFlush(executePacket(id, protocol.CursorTypeReadOnly, true, from, to)); err != nil {
		t.Fatal(err)
	}
	cols, status := readBinaryHead(t, c, "execute with a cursor")
	if status&protocol.StatusCursorExists == 0 {
		t.Fatalf("execute with a cursor: status %#x has no open cursor", status)
	}
	next := from
	for fetches := 0; ; fetches++ {
		if fetches > (to-from+1)/batch+1 {
			t.Fatalf("%d fetches of %d rows and the cursor is not done (at id %d)", fetches, batch, next)
		}
		w.waitProgress(t, 20)
		fetch := []byte{protocol.ComStmtFetch, 0, 0, 0, 0, batch, 0, 0, 0}
		binary.LittleEndian.PutUint32(fetch[1:], id)
		c.ResetSeq()
		if err := c.WritePacketFlush(fetch); err != nil {
			t.Fatal(err)
		}
		rows, st := readBinaryRows(t, c, cols, fmt.Sprintf("fetch %d", fetches))
		if len(rows) > batch {
			t.Fatalf("a fetch of %d returned %d rows", batch, len(rows))
		}
		for _, row := range rows {
			if want := []string{strconv.Itoa(next), strconv.Itoa(next * 7)}; fmt.Sprint(row) != fmt.Sprint(want) {
				t.Fatalf("cursor row %v, want %v", row, want)
			}
			next++
		}
		if st&protocol.StatusLastRowSent != 0 {
			break
		}
	}
	if next != to+1 {
		t.Fatalf("the cursor ended after id %d, want %d", next-1, to)
	}
	// The statement still executes without a cursor.
	c.ResetSeq()
	if err := c.WritePacketFlush(executePacket(id, 0, true, 5, 6)); err != nil {
		t.Fatal(err)
	}
	cols, _ = readBinaryHead(t, c, "execute after the cursor")
	if rows, _ := readBinaryRows(t, c, cols, "execute after the cursor"); fmt.Sprint(rows) != "[[5 35] [6 42]]" {
		t.Fatalf("execute after the cursor: %v", rows)
	}
	t.Logf("cursor: %d rows fetched in batches of %d while the clients ran", to-from+1, batch)
}

// longDataCase: two sessions that prepared the same text interleave
// COM_STMT_SEND_LONG_DATA chunks for its first parameter, the clients
// running between any two chunks; each execute then returns exactly its
// own session's chunks and its own inline second parameter.
func (r *psRawCases) longDataCase(t *testing.T, w *psWorkers) {
	t.Helper()
	const chunks, chunkLen, iterations = 4, 8 << 10, 2
	for it := range iterations {
		var want [len(r.long)][]byte
		for ch := range chunks {
			for k, c := range r.long {
				data := psChunk(k, it, ch, chunkLen)
				want[k] = append(want[k], data...)
				p := []byte{protocol.ComStmtSendLongData, 0, 0, 0, 0, 0, 0}
				binary.LittleEndian.PutUint32(p[1:], r.longIDs[k])
				c.ResetSeq()
				if err := c.WritePacketFlush(append(p, data...)); err != nil {
					t.Fatal(err)
				}
				w.waitProgress(t, 10)
			}
		}
		for k, c := range r.long {
			n := int64(1000*k + it)
			c.ResetSeq()
			if err := c.WritePacketFlush(longDataExecute(r.longIDs[k], n)); err != nil {
				t.Fatal(err)
			}
			what := fmt.Sprintf("session %d, iteration %d: execute after long data", k, it)
			cols, _ := readBinaryHead(t, c, what)
			rows, _ := readBinaryRows(t, c, cols, what)
			if len(rows) != 1 || len(rows[0]) != 2 {
				t.Fatalf("%s: %d rows", what, len(rows))
			}
			if rows[0][0] != string(want[k]) || rows[0][1] != strconv.FormatInt(n, 10) {
				t.Fatalf("%s: got %d bytes and %q, want its own %d bytes and %d", what, len(rows[0][0]), rows[0][1], len(want[k]), n)
			}
		}
	}
	t.Logf("long data: %d sessions × %d executes of %d chunks of %d bytes, interleaved", len(r.long), iterations, chunks, chunkLen)
}

// psChunk is chunk ch of session k's long data in iteration it: n bytes
// that name all three, so a chunk in the wrong place shows.
func psChunk(k, it, ch, n int) []byte {
	var b []byte
	for j := 0; len(b) < n; j++ {
		b = fmt.Appendf(b, "%c%d.%d.%d,", 'A'+k, it, ch, j)
	}
	return b[:n]
}

// longDataExecute builds a COM_STMT_EXECUTE of "SELECT ?, ?" whose first
// parameter, a BLOB, came by COM_STMT_SEND_LONG_DATA (so it has no value
// here) and whose second is the LONGLONG n.
func longDataExecute(id uint32, n int64) []byte {
	p := []byte{protocol.ComStmtExecute, 0, 0, 0, 0, 0, 1, 0, 0, 0}
	binary.LittleEndian.PutUint32(p[1:], id)
	p = append(p, 0, 1) // NULL bitmap, new parameters bound
	p = append(p, protocol.TypeBlob, 0, protocol.TypeLongLong, 0)
	return binary.LittleEndian.AppendUint64(p, uint64(n))
}
