package health

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// DefaultControlTimeout bounds a control connection's dial and login, and each statement
// whose context has no deadline, when Credentials.Timeout is 0.
const DefaultControlTimeout = 5 * time.Second

// waitChunk is how long one server-side GTID wait may block before WaitExecuted looks at
// the replica's SQL thread and the context again.
const waitChunk = 500 * time.Millisecond

// waitMargin is how long before its context's deadline a server-side wait ends.
const waitMargin = 50 * time.Millisecond

// Credentials say how sluice logs in to a cluster's servers for control work: the cluster's
// service account. On MariaDB it needs REPLICATION SLAVE ADMIN, SLAVE MONITOR, READ_ONLY ADMIN
// and RELOAD (RESET SLAVE); on MySQL REPLICATION_SLAVE_ADMIN, REPLICATION CLIENT,
// SYSTEM_VARIABLES_ADMIN and RELOAD.
type Credentials struct {
	User, Password string
	// TLS, when not nil, is used for the connection (the server must offer TLS).
	TLS *tls.Config
	// Timeout bounds the dial and login, and every statement whose context has no deadline;
	// 0 means DefaultControlTimeout.
	Timeout time.Duration
}

func (c Credentials) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultControlTimeout
}

// ErrConnBroken is returned by a ControlConn whose connection was cut by a deadline, a
// cancelled context or a network error; open a new one.
var ErrConnBroken = errors.New("control connection broken")

// ControlConn is one control-plane connection (go-mysql's client) to one server, logged in
// with the cluster's service account: it reads replication state and runs the statements of a
// failover (promote, repoint, fence, named locks) in the server's flavor. A ControlConn is
// owned by one goroutine at a time; it is not safe for concurrent use. Every method honours
// its context: the connection's deadline follows the context, and a cancelled context cuts
// the statement short (the connection is then broken and only Close is useful). Named locks
// taken with TryLock are held until Unlock or Close.
type ControlConn struct {
	addr    string
	cred    Credentials
	c       *client.Conn
	raw     net.Conn
	version string
	d       dialect
	broken  error
}

// Dial opens a control connection to addr and detects the server's flavor and version.
func Dial(ctx context.Context, addr string, cred Credentials) (*ControlConn, error) {
	cc := &ControlConn{addr: addr, cred: cred}
	deadline := time.Now().Add(cred.timeout())
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	dial := func(ctx context.Context, network, address string) (net.Conn, error) {
		d := net.Dialer{Deadline: deadline}
		nc, err := d.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		// go-mysql's own timeouts stay 0, so this deadline (and the ones run sets later)
		// is the only one on the connection; the TLS layer shares it.
		_ = nc.SetDeadline(deadline)
		cc.raw = nc
		return nc, nil
	}
	c, err := client.ConnectWithDialer(ctx, "tcp", addr, cred.User, cred.Password, "", dial, func(c *client.Conn) error {
		if cred.TLS != nil {
			c.SetTLSConfig(cred.TLS)
		}
		return nil
	})
	if err != nil {
		if cc.raw != nil {
			cc.raw.Close()
		}
		return nil, fmt.Errorf("health: %s: control connection: %w", addr, err)
	}
	cc.c = c
	if err := cc.DetectFlavor(ctx); err != nil {
		cc.Close()
		return nil, err
	}
	return cc, nil
}

// Addr returns the address the connection was opened to.
func (cc *ControlConn) Addr() string { return cc.addr }

// Flavor returns the server's flavor, known since Dial.
func (cc *ControlConn) Flavor() Flavor { return cc.d.flavor }

// Version returns the server's version string (SELECT VERSION()).
func (cc *ControlConn) Version() string { return cc.version }

// Close ends the connection, which also releases its named locks.
func (cc *ControlConn) Close() error {
	if cc.c == nil {
		return nil
	}
	if cc.broken == nil {
		_ = cc.raw.SetDeadline(time.Now().Add(time.Second))
		if cc.c.Quit() == nil {
			return nil
		}
	}
	return cc.c.Close()
}

// run executes f with the connection's deadline taken from ctx (or the credentials' timeout)
// and cuts the connection when ctx ends first.
func (cc *ControlConn) run(ctx context.Context, what string, f func() error) error {
	if cc.broken != nil {
		return fmt.Errorf("health: %s: %s: %w (%v)", cc.addr, what, ErrConnBroken, cc.broken)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(cc.cred.timeout())
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("health: %s: %s: %w", cc.addr, what, err)
	}
	_ = cc.raw.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = cc.raw.SetDeadline(time.Unix(1, 0)) })
	err := f()
	stop()
	if err == nil {
		return nil
	}
	var me *mysql.MyError
	if !errors.As(err, &me) {
		// Anything but a server's ERR packet leaves the protocol state unknown.
		cc.broken = err
	}
	switch {
	case ctx.Err() != nil:
		err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	case ok && !time.Now().Before(deadline):
		// The connection's deadline is ctx's and fired a moment before ctx noticed
		// (go-mysql does not keep the net.Error in its error chain).
		err = fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
	}
	return fmt.Errorf("health: %s: %s: %w", cc.addr, what, err)
}

// exec runs statements one after another, stopping at the first error, which names it.
func (cc *ControlConn) exec(ctx context.Context, stmts ...string) error {
	for _, q := range stmts {
		if err := cc.run(ctx, q, func() error { _, err := cc.c.Execute(q); return err }); err != nil {
			return err
		}
	}
	return nil
}

// query runs one statement that returns rows.
func (cc *ControlConn) query(ctx context.Context, q string) (*mysql.Resultset, error) {
	var rs *mysql.Resultset
	err := cc.run(ctx, q, func() error {
		r, err := cc.c.Execute(q)
		if err != nil {
			return err
		}
		if r.Resultset == nil {
			return errors.New("no result set")
		}
		rs = r.Resultset
		return nil
	})
	return rs, err
}

// Rows runs q, a statement that returns rows, and returns each row's
// values as text (NULL as ""), for control-plane catalog questions.
func (cc *ControlConn) Rows(ctx context.Context, q string) ([][]string, error) {
	rs, err := cc.query(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([][]string, len(rs.Values))
	for i := range rs.Values {
		row := make([]string, len(rs.Fields))
		for j := range row {
			if row[j], err = rs.GetString(i, j); err != nil {
				return nil, err
			}
		}
		out[i] = row
	}
	return out, nil
}

// Tables lists the base tables and views of schema on the server (none
// when the schema does not exist).
func (cc *ControlConn) Tables(ctx context.Context, schema string) ([]string, error) {
	q := "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = '" +
		strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(schema) + "'"
	rs, err := cc.query(ctx, q)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(rs.Values))
	for i := range rs.Values {
		v, err := rs.GetString(i, 0)
		if err != nil {
			return nil, err
		}
		names = append(names, v)
	}
	return names, nil
}

// Ping checks that the server answers (COM_PING).
func (cc *ControlConn) Ping(ctx context.Context) error {
	return cc.run(ctx, "ping", cc.c.Ping)
}

// DetectFlavor asks the server for its version (SELECT VERSION()) and picks the statements
// to use for it: MariaDB, MySQL 8.0.23 and later (REPLICA/SOURCE syntax), or older MySQL
// (SLAVE/MASTER syntax). Dial calls it; it is exported for reconnecting callers that want to
// re-check after an upgrade.
func (cc *ControlConn) DetectFlavor(ctx context.Context) error {
	rs, err := cc.query(ctx, "SELECT VERSION()")
	if err != nil {
		return err
	}
	v, err := rs.GetString(0, 0)
	if err != nil {
		return fmt.Errorf("health: %s: SELECT VERSION(): %w", cc.addr, err)
	}
	cc.version = v
	cc.d = dialectFor(v)
	return nil
}

// ReplicaStatus is a server's replication state as SHOW SLAVE STATUS (SHOW REPLICA STATUS)
// and the GTID variables report it. It is a plain value.
type ReplicaStatus struct {
	// Configured: the server replicates from a master (the status has a row).
	Configured bool
	MasterHost string
	MasterPort int
	// IORunning is Slave_IO_Running as printed: "Yes", "Connecting", "Preparing" or "No".
	IORunning    string
	SQLRunning   bool
	LastIOErrno  int
	LastIOError  string
	LastSQLErrno int
	LastSQLError string
	// SQLDelay is MASTER_DELAY (SOURCE_DELAY) in seconds: how long the SQL thread holds each
	// transaction back.
	SQLDelay int
	// RelayLogFile and RelayLogPos are where the SQL thread is in the relay log.
	RelayLogFile string
	RelayLogPos  uint64
	// UsingGTID is MariaDB's Using_Gtid ("Slave_Pos", "Current_Pos" or "No"); "" on MySQL.
	UsingGTID string
	// Received is every transaction the server has from its master: MariaDB Gtid_IO_Pos
	// merged with gtid_slave_pos; MySQL Retrieved_Gtid_Set merged with gtid_executed.
	Received GTIDSet
	// Executed is what replication has applied: MariaDB gtid_slave_pos, MySQL gtid_executed.
	Executed GTIDSet
}

// IOConnected reports whether the IO thread is connected to its master and receiving.
func (s ReplicaStatus) IOConnected() bool { return s.Configured && s.IORunning == "Yes" }

// ServerState is what the failover sequence needs to know of one server. It is a plain value.
type ServerState struct {
	Flavor  Flavor
	Version string
	// ReadOnly: read_only (or super_read_only on MySQL) is on.
	ReadOnly bool
	// BinlogPos is every transaction in the server's binary log: MariaDB gtid_binlog_pos,
	// MySQL gtid_executed. On a master, what it has written; on a replica with
	// log_slave_updates, what it applied.
	BinlogPos GTIDSet
	// Binlog is the binary log's state (MariaDB gtid_binlog_state, MySQL gtid_executed): what
	// it holds, told apart by the server that wrote it.
	Binlog  BinlogState
	Replica ReplicaStatus
}

// State reads read_only, the server's GTID positions and its replication status.
func (cc *ControlConn) State(ctx context.Context) (ServerState, error) {
	st := ServerState{Flavor: cc.d.flavor, Version: cc.version}
	rs, err := cc.query(ctx, cc.d.variablesQuery())
	if err != nil {
		return st, err
	}
	vals := make([]string, len(rs.Fields))
	for i := range vals {
		if vals[i], err = rs.GetString(0, i); err != nil {
			return st, fmt.Errorf("health: %s: %s: %w", cc.addr, cc.d.variablesQuery(), err)
		}
	}
	// variablesQuery: read_only, super_read_only (MySQL) or 0, binlog position, slave position,
	// binlog state.
	st.ReadOnly = vals[0] == "1" || vals[1] == "1"
	if st.BinlogPos, err = ParseGTID(cc.d.flavor, vals[2]); err != nil {
		return st, fmt.Errorf("health: %s: binlog GTID position: %w", cc.addr, err)
	}
	executed, err := ParseGTID(cc.d.flavor, vals[3])
	if err != nil {
		return st, fmt.Errorf("health: %s: replica GTID position: %w", cc.addr, err)
	}
	if st.Binlog, err = ParseBinlogState(cc.d.flavor, vals[4]); err != nil {
		return st, fmt.Errorf("health: %s: binlog GTID state: %w", cc.addr, err)
	}
	st.Binlog = st.Binlog.WithApplied(executed)
	st.Replica, err = cc.replicaStatus(ctx, executed)
	return st, err
}

// ReplicaStatus reads the server's replication status (Configured is false when it
// replicates from no one).
func (cc *ControlConn) ReplicaStatus(ctx context.Context) (ReplicaStatus, error) {
	st, err := cc.State(ctx)
	return st.Replica, err
}

func (cc *ControlConn) replicaStatus(ctx context.Context, executed GTIDSet) (ReplicaStatus, error) {
	q := cc.d.showReplicaStatus()
	rs, err := cc.query(ctx, q)
	if err != nil {
		return ReplicaStatus{}, err
	}
	st := ReplicaStatus{Executed: executed, Received: executed}
	if rs.RowNumber() == 0 {
		return st, nil
	}
	col := func(names ...string) string {
		for _, n := range names {
			if _, ok := rs.FieldNames[n]; ok {
				v, _ := rs.GetStringByName(0, n)
				return v
			}
		}
		return ""
	}
	num := func(names ...string) int {
		n, _ := strconv.Atoi(col(names...))
		return n
	}
	st.Configured = true
	st.MasterHost = col("Master_Host", "Source_Host")
	st.MasterPort = num("Master_Port", "Source_Port")
	st.IORunning = col("Slave_IO_Running", "Replica_IO_Running")
	st.SQLRunning = col("Slave_SQL_Running", "Replica_SQL_Running") == "Yes"
	st.LastIOErrno, st.LastIOError = num("Last_IO_Errno"), col("Last_IO_Error")
	st.LastSQLErrno, st.LastSQLError = num("Last_SQL_Errno"), col("Last_SQL_Error")
	st.SQLDelay = num("SQL_Delay")
	st.RelayLogFile = col("Relay_Log_File")
	st.RelayLogPos, _ = strconv.ParseUint(col("Relay_Log_Pos"), 10, 64)
	st.UsingGTID = col("Using_Gtid")
	recvCol := "Gtid_IO_Pos"
	if cc.d.flavor == FlavorMySQL {
		recvCol = "Retrieved_Gtid_Set"
	}
	recv, err := ParseGTID(cc.d.flavor, col(recvCol))
	if err != nil {
		return st, fmt.Errorf("health: %s: %s %s: %w", cc.addr, q, recvCol, err)
	}
	st.Received = executed.Union(recv)
	return st, nil
}

// WaitExecuted waits until replication on this server has applied pos (MASTER_GTID_WAIT on
// MariaDB, WAIT_FOR_EXECUTED_GTID_SET on MySQL), in server-side waits of at most 500ms so
// that it notices a stopped SQL thread (an error naming it) and the end of ctx in between.
// The last wait ends shortly before ctx's deadline, so a wait that runs out of time returns
// context.DeadlineExceeded and leaves the connection usable. An empty pos is reached at once.
func (cc *ControlConn) WaitExecuted(ctx context.Context, pos GTIDSet) error {
	if pos.IsEmpty() {
		return nil
	}
	if pos.Flavor() != cc.d.flavor {
		return fmt.Errorf("health: %s: WaitExecuted: %s position for a %s server", cc.addr, pos.Flavor(), cc.d.flavor)
	}
	for {
		chunk := waitChunk
		if d, ok := ctx.Deadline(); ok {
			// End the server-side wait a little before ctx does, so that running out of
			// time does not cut the connection.
			chunk = min(chunk, time.Until(d)-waitMargin)
		}
		if chunk <= 0 {
			return fmt.Errorf("health: %s: waiting to apply %s: %w", cc.addr, pos, context.DeadlineExceeded)
		}
		q := cc.d.waitExecuted(pos.String(), chunk)
		rs, err := cc.query(ctx, q)
		if err != nil {
			return err
		}
		res, err := rs.GetInt(0, 0)
		if err != nil {
			return fmt.Errorf("health: %s: %s: %w", cc.addr, q, err)
		}
		if res == 0 {
			return nil
		}
		rst, err := cc.ReplicaStatus(ctx)
		if err != nil {
			return err
		}
		if !rst.Configured || !rst.SQLRunning {
			return fmt.Errorf("health: %s: waiting to apply %s: the replication SQL thread is not running (error %d: %s)",
				cc.addr, pos, rst.LastSQLErrno, rst.LastSQLError)
		}
	}
}

// StopReplication stops both replication threads (STOP SLAVE / STOP REPLICA). The relay log
// and the received position are kept; doing it on a server that does not replicate is not an
// error.
func (cc *ControlConn) StopReplication(ctx context.Context) error {
	return cc.exec(ctx, cc.d.stopReplication())
}

// ResetReplication makes the server forget its master and discard its relay log (RESET SLAVE
// ALL / RESET REPLICA ALL). Replication must be stopped and, for nothing to be lost, the relay
// log applied. Doing it again is harmless.
func (cc *ControlConn) ResetReplication(ctx context.Context) error {
	return cc.exec(ctx, cc.d.resetReplication())
}

// ApplyRelayLog makes the server's SQL thread apply everything its relay log holds now, with
// no MASTER_DELAY (SOURCE_DELAY), keeping the relay log; rs is the replication status it was
// last read with. On MariaDB in GTID mode the relay log is discarded whenever replication
// starts with the IO thread stopped (START SLAVE SQL_THREAD included) and by a CHANGE MASTER
// that names no relay log position, so: with the IO thread running and no delay, only the SQL
// thread is started; otherwise replication is stopped and CHANGE MASTER names the SQL thread's
// own relay log position (and MASTER_DELAY = 0) before the SQL thread starts. That CHANGE
// MASTER turns GTID positioning off, which a later repoint or promotion sets anew. On MySQL,
// where the delay changes with only the applier stopped, the applier is restarted.
func (cc *ControlConn) ApplyRelayLog(ctx context.Context, rs ReplicaStatus) error {
	if cc.d.flavor != FlavorMariaDB {
		if rs.SQLDelay > 0 {
			return cc.exec(ctx, cc.d.liftDelayMySQL()...)
		}
		if rs.SQLRunning {
			return nil
		}
		return cc.exec(ctx, cc.d.startApplier())
	}
	switch {
	case rs.SQLDelay == 0 && rs.SQLRunning:
		return nil
	case rs.SQLDelay == 0 && rs.IORunning != "No" && rs.IORunning != "":
		return cc.exec(ctx, cc.d.startApplier())
	}
	if err := cc.StopReplication(ctx); err != nil {
		return err
	}
	st, err := cc.ReplicaStatus(ctx)
	if err != nil {
		return err
	}
	if !st.Configured || st.RelayLogFile == "" {
		return fmt.Errorf("health: %s: applying the relay log: no relay log position in the replication status", cc.addr)
	}
	return cc.exec(ctx,
		"CHANGE MASTER TO MASTER_DELAY = 0, RELAY_LOG_FILE = "+quoteSQL(st.RelayLogFile)+", RELAY_LOG_POS = "+strconv.FormatUint(st.RelayLogPos, 10),
		cc.d.startApplier())
}

// undoApplyRelayLog returns the statements that put a replica whose status was rs back as it
// was after ApplyRelayLog, once its master answers again (an abandoned failover): its
// MASTER_DELAY and GTID positioning, and the threads that ran. The relay log is fetched again.
func (d dialect) undoApplyRelayLog(rs ReplicaStatus) []string {
	if d.flavor != FlavorMariaDB {
		var out []string
		if rs.SQLDelay > 0 {
			out = append(out, d.stopApplier(), d.changeDelay(rs.SQLDelay))
		}
		if !rs.SQLRunning {
			out = append(out, d.stopApplier())
		} else if rs.SQLDelay > 0 {
			out = append(out, d.startApplier())
		}
		return out
	}
	switch {
	case rs.SQLDelay == 0 && rs.SQLRunning:
		return nil
	case rs.SQLDelay == 0 && rs.IORunning != "No" && rs.IORunning != "":
		return []string{"STOP SLAVE SQL_THREAD"}
	}
	cm := "CHANGE MASTER TO MASTER_DELAY = " + strconv.Itoa(rs.SQLDelay)
	switch strings.ToLower(rs.UsingGTID) {
	case "slave_pos", "current_pos":
		cm += ", MASTER_USE_GTID = " + strings.ToLower(rs.UsingGTID)
	}
	out := []string{"STOP SLAVE", cm}
	io := rs.IORunning != "No" && rs.IORunning != ""
	switch {
	case io && rs.SQLRunning:
		out = append(out, "START SLAVE")
	case io:
		out = append(out, "START SLAVE IO_THREAD")
	case rs.SQLRunning:
		out = append(out, "START SLAVE SQL_THREAD")
	}
	return out
}

// Exec executes statements an earlier step recorded (such as undoApplyRelayLog's), stopping at
// the first error, which names it.
func (cc *ControlConn) Exec(ctx context.Context, stmts ...string) error {
	return cc.exec(ctx, stmts...)
}

// Promote makes the server a master: it stops replication, forgets its master (RESET SLAVE
// ALL / RESET REPLICA ALL) and turns read_only (and super_read_only on MySQL) off. Call
// WaitExecuted first: the relay log is discarded.
func (cc *ControlConn) Promote(ctx context.Context) error {
	return cc.exec(ctx, cc.d.promote()...)
}

// Repoint makes the server replicate from host:port with GTID auto-positioning (MariaDB
// MASTER_USE_GTID = slave_pos, MySQL SOURCE_AUTO_POSITION = 1). Options not named here (the
// replication user and password, TLS, retry) keep their values, so the server must already
// be a replica.
func (cc *ControlConn) Repoint(ctx context.Context, host string, port int) error {
	return cc.exec(ctx, cc.d.repoint(host, port)...)
}

// Fence turns read_only on (super_read_only on MySQL), so that only accounts with READ_ONLY
// ADMIN or SUPER can still write to the server. Sluice sends a fenced server no traffic.
func (cc *ControlConn) Fence(ctx context.Context) error {
	return cc.exec(ctx, cc.d.fence()...)
}

// TryLock takes the named lock name without waiting (GET_LOCK(name, 0)) and reports whether
// it got it; false means another connection holds it. The lock lives as long as this
// connection or until Unlock.
func (cc *ControlConn) TryLock(ctx context.Context, name string) (bool, error) {
	q := "SELECT GET_LOCK(" + quoteSQL(name) + ", 0)"
	rs, err := cc.query(ctx, q)
	if err != nil {
		return false, err
	}
	v, err := rs.GetValue(0, 0)
	if err != nil {
		return false, fmt.Errorf("health: %s: %s: %w", cc.addr, q, err)
	}
	if v == nil {
		return false, fmt.Errorf("health: %s: %s returned NULL", cc.addr, q)
	}
	n, _ := rs.GetInt(0, 0)
	return n == 1, nil
}

// Unlock releases the named lock (RELEASE_LOCK); releasing a lock this connection does not
// hold is an error naming it.
func (cc *ControlConn) Unlock(ctx context.Context, name string) error {
	q := "SELECT RELEASE_LOCK(" + quoteSQL(name) + ")"
	rs, err := cc.query(ctx, q)
	if err != nil {
		return err
	}
	if n, _ := rs.GetInt(0, 0); n != 1 {
		return fmt.Errorf("health: %s: lock %s is not held by this connection", cc.addr, name)
	}
	return nil
}

// FailoverLockName is the named lock that serialises failovers of cluster between sluice
// instances: "sluice_failover_<cluster>", with long cluster names shortened by a hash to fit
// MySQL's 64-character limit.
func FailoverLockName(cluster string) string {
	name := "sluice_failover_" + cluster
	if len(name) <= 64 {
		return name
	}
	sum := sha256.Sum256([]byte(cluster))
	return name[:64-17] + "_" + hex.EncodeToString(sum[:8])
}

// quoteSQL returns s as a single-quoted SQL string literal.
func quoteSQL(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\x00", `\0`, "\n", `\n`, "\r", `\r`, "\x1a", `\Z`)
	return "'" + r.Replace(s) + "'"
}

// dialect is the SQL of one server flavor and version. It is a plain value.
type dialect struct {
	flavor Flavor
	// replicaWords: MySQL 8.0.23 and later, whose REPLICA/SOURCE statements replace the
	// SLAVE/MASTER ones (8.4 removed the old ones).
	replicaWords bool
}

// dialectFor picks the dialect for a VERSION() string: MariaDB when it says so, else MySQL,
// with REPLICA/SOURCE syntax from 8.0.23 on (and for versions it cannot read).
func dialectFor(version string) dialect {
	if strings.Contains(strings.ToLower(version), "mariadb") {
		return dialect{flavor: FlavorMariaDB}
	}
	major, minor, patch, ok := parseVersion(version)
	old := ok && (major < 8 || (major == 8 && minor == 0 && patch < 23))
	return dialect{flavor: FlavorMySQL, replicaWords: !old}
}

// parseVersion reads the leading "major.minor.patch" of a version string.
func parseVersion(v string) (major, minor, patch int, ok bool) {
	end := strings.IndexFunc(v, func(r rune) bool { return r != '.' && (r < '0' || r > '9') })
	if end >= 0 {
		v = v[:end]
	}
	parts := strings.Split(v, ".")
	if len(parts) < 3 {
		return 0, 0, 0, false
	}
	var n [3]int
	for i := range n {
		x, err := strconv.Atoi(parts[i])
		if err != nil {
			return 0, 0, 0, false
		}
		n[i] = x
	}
	return n[0], n[1], n[2], true
}

// variablesQuery returns read_only, super_read_only (0 on MariaDB), the binlog GTID position,
// the replica's applied position and the binlog GTID state, in that order.
func (d dialect) variablesQuery() string {
	if d.flavor == FlavorMariaDB {
		return "SELECT @@GLOBAL.read_only, 0, @@GLOBAL.gtid_binlog_pos, @@GLOBAL.gtid_slave_pos, @@GLOBAL.gtid_binlog_state"
	}
	return "SELECT @@GLOBAL.read_only, @@GLOBAL.super_read_only, @@GLOBAL.gtid_executed, @@GLOBAL.gtid_executed, @@GLOBAL.gtid_executed"
}

func (d dialect) showReplicaStatus() string {
	if d.replicaWords {
		return "SHOW REPLICA STATUS"
	}
	return "SHOW SLAVE STATUS"
}

func (d dialect) promote() []string {
	switch {
	case d.flavor == FlavorMariaDB:
		return []string{"STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = OFF"}
	case d.replicaWords:
		return []string{"STOP REPLICA", "RESET REPLICA ALL", "SET GLOBAL super_read_only = OFF", "SET GLOBAL read_only = OFF"}
	}
	return []string{"STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL super_read_only = OFF", "SET GLOBAL read_only = OFF"}
}

func (d dialect) stopReplication() string {
	if d.replicaWords {
		return "STOP REPLICA"
	}
	return "STOP SLAVE"
}

func (d dialect) resetReplication() string {
	if d.replicaWords {
		return "RESET REPLICA ALL"
	}
	return "RESET SLAVE ALL"
}

func (d dialect) startApplier() string {
	if d.replicaWords {
		return "START REPLICA SQL_THREAD"
	}
	return "START SLAVE SQL_THREAD"
}

// liftDelayMySQL: MySQL changes the delay with only the applier stopped and keeps the relay log.
func (d dialect) liftDelayMySQL() []string {
	return []string{d.stopApplier(), d.changeDelay(0), d.startApplier()}
}

func (d dialect) stopApplier() string {
	if d.replicaWords {
		return "STOP REPLICA SQL_THREAD"
	}
	return "STOP SLAVE SQL_THREAD"
}

func (d dialect) changeDelay(secs int) string {
	if d.replicaWords {
		return "CHANGE REPLICATION SOURCE TO SOURCE_DELAY = " + strconv.Itoa(secs)
	}
	return "CHANGE MASTER TO MASTER_DELAY = " + strconv.Itoa(secs)
}

func (d dialect) repoint(host string, port int) []string {
	h, p := quoteSQL(host), strconv.Itoa(port)
	switch {
	case d.flavor == FlavorMariaDB:
		return []string{"STOP SLAVE",
			"CHANGE MASTER TO MASTER_HOST = " + h + ", MASTER_PORT = " + p + ", MASTER_USE_GTID = slave_pos",
			"START SLAVE"}
	case d.replicaWords:
		return []string{"STOP REPLICA",
			"CHANGE REPLICATION SOURCE TO SOURCE_HOST = " + h + ", SOURCE_PORT = " + p + ", SOURCE_AUTO_POSITION = 1",
			"START REPLICA"}
	}
	return []string{"STOP SLAVE",
		"CHANGE MASTER TO MASTER_HOST = " + h + ", MASTER_PORT = " + p + ", MASTER_AUTO_POSITION = 1",
		"START SLAVE"}
}

func (d dialect) fence() []string {
	if d.flavor == FlavorMariaDB {
		return []string{"SET GLOBAL read_only = ON"}
	}
	return []string{"SET GLOBAL super_read_only = ON"} // turns read_only on as well
}

// waitExecuted is a statement answering 0 once pos is applied and non-zero after timeout.
func (d dialect) waitExecuted(pos string, timeout time.Duration) string {
	if d.flavor == FlavorMariaDB {
		secs := strconv.FormatFloat(max(timeout.Seconds(), 0.001), 'f', 3, 64)
		return "SELECT MASTER_GTID_WAIT(" + quoteSQL(pos) + ", " + secs + ")" // 0 reached, -1 timed out
	}
	// Whole seconds: older 8.0 releases take no fraction here.
	secs := strconv.FormatInt(int64(max((timeout+time.Second-1)/time.Second, 1)), 10)
	return "SELECT WAIT_FOR_EXECUTED_GTID_SET(" + quoteSQL(pos) + ", " + secs + ")" // 0 reached, 1 timed out
}
