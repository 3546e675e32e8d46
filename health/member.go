package health

import (
	"context"
	"sync"
)

// member is one server as a failover, switchover, repair or discovery sees it: its control
// connection (nil when unreachable) and state. The Run that dialled it owns it.
type member struct {
	addr   string
	conn   *ControlConn
	err    error // dial or state error: unreachable
	st     ServerState
	locked bool
}

func (m *member) reachable() bool { return m.err == nil }

func (m *member) report() ServerReport {
	r := ServerReport{Addr: m.addr}
	if m.err != nil {
		r.Error = m.err.Error()
		return r
	}
	rs := m.st.Replica
	r.ReadOnly, r.Replicating, r.IORunning, r.LastIOError = m.st.ReadOnly, rs.Configured, rs.IORunning, rs.LastIOError
	r.Received, r.Executed, r.BinlogPos = rs.Received.String(), rs.Executed.String(), m.st.BinlogPos.String()
	return r
}

// refresh re-reads the state of a reachable member; a failure makes it unreachable.
func (m *member) refresh(ctx context.Context) {
	if m.conn == nil {
		return
	}
	st, err := m.conn.State(ctx)
	if err != nil {
		m.err = err
		return
	}
	m.st, m.err = st, nil
}

// ping logs in to addr and pings it.
func ping(ctx context.Context, addr string, cred Credentials) error {
	c, err := Dial(ctx, addr, cred)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Ping(ctx)
}

// dialAll logs in to every member at once and reads its state; a member that cannot be
// reached keeps the reason in err. extra runs alongside (the failover's ping of the master).
func dialAll(ctx context.Context, members []*member, cred Credentials, extra func()) {
	var wg sync.WaitGroup
	if extra != nil {
		wg.Go(extra)
	}
	for _, m := range members {
		wg.Go(func() {
			m.conn, m.err = Dial(ctx, m.addr, cred)
			if m.err == nil {
				m.refresh(ctx)
			}
		})
	}
	wg.Wait()
}

// closeAll closes the members' connections, which releases their named locks.
func closeAll(members []*member) {
	for _, m := range members {
		if m.conn != nil {
			m.conn.Close()
		}
	}
}

// lockReachable takes the named lock without waiting on every reachable member, in order. It
// returns the address of a member where another connection holds it (at which it stops), or
// how many of how many reachable members it locked; a member that fails to answer counts
// against the majority.
func lockReachable(ctx context.Context, members []*member, lock string) (heldOn string, got, reachable int) {
	for _, m := range members {
		if !m.reachable() {
			continue
		}
		reachable++
		ok, err := m.conn.TryLock(ctx, lock)
		if err != nil {
			continue
		}
		if !ok {
			return m.addr, got, reachable
		}
		m.locked = true
		got++
	}
	return "", got, reachable
}

// refreshAll re-reads every member's state at once.
func refreshAll(ctx context.Context, members []*member) {
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() { m.refresh(ctx) })
	}
	wg.Wait()
}

// unlockAll releases the named lock where lockReachable took it.
func unlockAll(ctx context.Context, members []*member, lock string) {
	for _, m := range members {
		if m.locked && m.reachable() {
			_ = m.conn.Unlock(ctx, lock) // Close releases it anyway
			m.locked = false
		}
	}
}

// reports is what each member looked like, for Result.Servers.
func reports(members []*member) []ServerReport {
	out := make([]ServerReport, len(members))
	for i, m := range members {
		out[i] = m.report()
	}
	return out
}
