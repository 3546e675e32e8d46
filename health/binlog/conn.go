package binlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"
)

// conn is one connection of the tailer to a master: a control connection
// for queries and the binlog dump. It lives on the tailer's goroutine.
type conn struct {
	t    *Tailer
	addr string
	// resume is the position after the last whole transaction read (nil
	// until known); the next connection starts there.
	resume *mysql.MariadbGTIDSet
	// read: the dump delivered at least one event.
	read bool
	ctl  *client.Conn
	// trig holds the master's triggers, for statements logged as text.
	trig triggers
	// cur is the GTID of the transaction being read; standalone: it has no
	// COMMIT or XID event and ends with its one statement.
	cur        mysql.MariadbGTID
	inTxn      bool
	standalone bool
}

// tail connects, starts the dump at c.resume (or at the master's present,
// resetting), and reads events until an error, a change of master or the
// end of ctx. Every connection and goroutine it opened is gone when it
// returns.
func (c *conn) tail(ctx context.Context) error {
	t := c.t
	host, portText, err := net.SplitHostPort(c.addr)
	if err != nil {
		return fmt.Errorf("master address %q: %w", c.addr, err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return fmt.Errorf("master address %q: port: %w", c.addr, err)
	}
	if err := c.dial(ctx); err != nil {
		return err
	}
	defer c.ctl.Close()
	if c.resume == nil {
		pos, err := c.position()
		if err != nil {
			return err
		}
		// Whatever was written before this position is missed: the cache
		// drops it all; everything after it is read below.
		c.resume = pos
		t.reset("attached to " + c.addr + " at its present position")
	}
	if err := c.trig.load(c.ctl); err != nil {
		return err
	}
	if !c.trig.visible {
		t.log.Warn("binlog tailer: the account lacks TRIGGER on *.* and cannot see the master's triggers;"+
			" each write logged as a statement (binlog_format STATEMENT or MIXED) resets the cache",
			zap.String("master", c.addr), zap.String("user", t.o.User))
	}
	cfg := replication.BinlogSyncerConfig{
		ServerID: t.o.ServerID, Flavor: mysql.MariaDBFlavor,
		Host: host, Port: uint16(port), User: t.o.User, Password: t.o.Password,
		TLSConfig: t.tlsFor(c.addr), Localhost: "sluice-" + t.o.Cluster,
		HeartbeatPeriod: t.o.Heartbeat, ReadTimeout: 5 * t.o.Heartbeat,
		// The tailer reconnects itself, to follow the master and to reset
		// when it cannot resume.
		DisableRetrySync: true, DiscardGTIDSet: true,
		Logger:          slog.New(slog.DiscardHandler),
		EventCacheCount: 256,
		// Only the table of a rows event matters, not its rows.
		RowsEventDecodeFunc: func(e *replication.RowsEvent, data []byte) error {
			_, err := e.DecodeHeader(data)
			return err
		},
		Dialer: (&net.Dialer{Timeout: t.o.ConnectTimeout}).DialContext,
	}
	syncer := replication.NewBinlogSyncer(cfg)
	defer syncer.Close()
	from := c.resume.Clone().(*mysql.MariadbGTIDSet)
	stream, err := syncer.StartSyncGTID(from)
	if err != nil {
		return fmt.Errorf("start the binlog dump at %s: %w", from, err)
	}
	t.attachedTo.Store(&c.addr)
	t.log.Info("binlog tailer attached", zap.String("master", c.addr), zap.Stringer("position", from),
		zap.Uint32("server_id", t.o.ServerID))
	for {
		gctx, cancel := context.WithTimeout(ctx, t.o.MasterCheck)
		ev, err := stream.GetEvent(gctx)
		cancel()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			if t.o.Master() != c.addr {
				return errMasterChanged
			}
			continue
		default:
			return err
		}
		c.read = true
		if err := c.handle(ev); err != nil {
			return err
		}
	}
}

// dial opens the control connection.
func (c *conn) dial(ctx context.Context) error {
	t := c.t
	timeout := t.o.ConnectTimeout
	dialer := func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: timeout}
		return d.DialContext(ctx, network, addr)
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ctl, err := client.ConnectWithDialer(dctx, "tcp", c.addr, t.o.User, t.o.Password, "", dialer, func(cc *client.Conn) error {
		cc.SetAttributes(map[string]string{"program_name": "sluice-binlog"})
		if tc := t.tlsFor(c.addr); tc != nil {
			cc.SetTLSConfig(tc)
		}
		cc.ReadTimeout, cc.WriteTimeout = timeout, timeout
		return nil
	})
	if err != nil {
		return fmt.Errorf("connect to %s: %w", c.addr, err)
	}
	if !strings.Contains(ctl.GetServerVersion(), "MariaDB") {
		ctl.Close()
		return fmt.Errorf("%s runs %s: the binlog tailer reads MariaDB's binary log only", c.addr, ctl.GetServerVersion())
	}
	c.ctl = ctl
	return nil
}

// position reads the master's present GTID position.
func (c *conn) position() (*mysql.MariadbGTIDSet, error) {
	r, err := c.ctl.Execute("SELECT @@GLOBAL.gtid_binlog_pos")
	if err != nil {
		return nil, fmt.Errorf("read gtid_binlog_pos on %s: %w", c.addr, err)
	}
	s, err := r.GetString(0, 0)
	if err != nil {
		return nil, fmt.Errorf("read gtid_binlog_pos on %s: %w", c.addr, err)
	}
	set, err := mysql.ParseMariadbGTIDSet(s)
	if err != nil {
		return nil, fmt.Errorf("gtid_binlog_pos %q on %s: %w", s, c.addr, err)
	}
	return set.(*mysql.MariadbGTIDSet), nil
}

// handle takes in one event: the tables it writes, the end of its
// transaction, the lag it shows.
func (c *conn) handle(ev *replication.BinlogEvent) error {
	t := c.t
	t.events.Add(1)
	m := t.o.Metrics
	m.event(t.o.Cluster)
	switch e := ev.Event.(type) {
	case *replication.MariadbGTIDEvent:
		m.lag(t.o.Cluster, ev.Header.Timestamp)
		// A new group means the one before it was read whole, whatever
		// ended it (an XA PREPARE has neither COMMIT nor XID).
		c.commit()
		c.cur, c.inTxn, c.standalone = e.GTID, true, e.IsStandalone()
	case *replication.RowsEvent:
		m.lag(t.o.Cluster, ev.Header.Timestamp)
		if e.Table != nil {
			t.o.OnChange(string(e.Table.Schema), string(e.Table.Table), false)
		}
	case *replication.QueryEvent:
		m.lag(t.o.Cluster, ev.Header.Timestamp)
		end, err := c.query(e)
		if err != nil {
			return err
		}
		if end || c.standalone {
			c.commit()
		}
	case *replication.XIDEvent:
		m.lag(t.o.Cluster, ev.Header.Timestamp)
		c.commit()
	default:
		if ev.Header.EventType == replication.HEARTBEAT_EVENT || ev.Header.EventType == replication.HEARTBEAT_LOG_EVENT_V2 {
			// The master has sent all it has: the tailer is caught up.
			t.heartbeats.Add(1)
			m.caughtUp(t.o.Cluster)
		}
	}
	return nil
}

// commit records the end of the transaction being read: a new connection
// starts after it.
func (c *conn) commit() {
	if !c.inTxn {
		return
	}
	c.inTxn = false
	if err := c.resume.AddSet(&c.cur); err != nil {
		return // AddSet fails only on a nil GTID or a domain mismatch, neither possible here
	}
	p := c.resume.String()
	c.t.position.Store(&p)
}

// errTriggers wraps a failure to read the master's triggers after one
// changed.
var errTriggers = errors.New("read the master's triggers")

// query takes in a statement the binary log holds as text (statement or
// mixed format, DDL, transaction control) and reports whether it ends its
// transaction.
func (c *conn) query(e *replication.QueryEvent) (end bool, err error) {
	t := c.t
	q := strings.TrimSpace(string(e.Query))
	switch strings.ToUpper(q) {
	case "BEGIN":
		return false, nil
	case "COMMIT", "ROLLBACK":
		return true, nil
	}
	schema := string(e.Schema)
	w, err := writtenTables(q, schema, e.StatusVars)
	if err != nil {
		// Cannot tell what it wrote: drop everything. The log names the
		// schema, not the text (it may hold secrets).
		t.log.Warn("binlog tailer cannot read a statement; resetting", zap.String("schema", schema), zap.String("error", err.Error()))
		t.reset("unreadable statement")
		return false, nil
	}
	if w.All {
		t.reset("a statement that may write tables it does not name")
		return false, nil
	}
	for _, tb := range w.Tables {
		t.o.OnChange(tb.Schema, tb.Table, w.DDL)
		if w.DDL {
			continue
		}
		// A trigger's writes are not in a statement-format log: the
		// replica runs the trigger again. Report what it writes.
		all, writes := c.trig.fired(tb)
		if all {
			t.reset("a statement-format write to a table whose triggers cannot be read")
			break
		}
		for _, x := range writes {
			t.o.OnChange(x.Schema, x.Table, false)
		}
	}
	if w.Routines || w.DDL {
		// A trigger may have been created or dropped (a DROP TABLE drops
		// the table's).
		if err := c.trig.load(c.ctl); err != nil {
			return false, fmt.Errorf("%w: %w", errTriggers, err)
		}
	}
	return false, nil
}

// lagNow is the lag an event with header timestamp ts shows now.
func lagNow(ts uint32) float64 {
	if ts == 0 {
		return 0
	}
	d := time.Since(time.Unix(int64(ts), 0)).Seconds()
	return max(d, 0)
}
