package health

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Discovery is what Discover found: which server is the master, and what else needs a
// DBA's or sluice's attention. It is a plain value.
type Discovery struct {
	// Master is the writable server that replicates from no one.
	Master string
	// Stale are other writable servers that replicate from no one while Master is known:
	// old masters to fence.
	Stale []string
	// WritableReplicas replicate from a master but are not read-only: to report, and to set
	// read-only when enforce_read_only is on.
	WritableReplicas []string
	// Unreachable servers with the reason.
	Unreachable map[string]string
}

// Discover logs in to every server of a cluster (addrs: the master and the replicas, any
// order) and works out which one is the master. known is the master a previous failover
// recorded (FailoverState.Master), or "" when there is none; the configured master must not
// be passed here, it is what a failover may have replaced. With exactly one writable server
// that replicates from no one, that is the master. With several, known settles it when it is
// one of them and no replica's IO thread is connected to another; otherwise Discover returns
// ErrAmbiguousMaster, and the caller must refuse writes to the cluster rather than guess.
// With none it returns ErrNoMaster. The Discovery is filled in either case.
func Discover(ctx context.Context, cluster string, addrs []string, known string, cred Credentials) (Discovery, error) {
	members := make([]*member, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		m := &member{addr: a}
		members[i] = m
		wg.Go(func() {
			m.conn, m.err = Dial(ctx, m.addr, cred)
			if m.err == nil {
				m.refresh(ctx)
				m.conn.Close()
			}
		})
	}
	wg.Wait()
	return discover(cluster, members, known)
}

// discover is Discover's decision over the servers' states.
func discover(cluster string, members []*member, known string) (Discovery, error) {
	var d Discovery
	var writable []string
	for _, m := range members {
		switch {
		case !m.reachable():
			if d.Unreachable == nil {
				d.Unreachable = map[string]string{}
			}
			d.Unreachable[m.addr] = m.err.Error()
		case m.st.ReadOnly:
		case m.st.Replica.Configured:
			d.WritableReplicas = append(d.WritableReplicas, m.addr)
		default:
			writable = append(writable, m.addr)
		}
	}
	switch {
	case len(writable) == 1:
		d.Master = writable[0]
		return d, nil
	case len(writable) == 0:
		return d, fmt.Errorf("health: cluster %s: %w", cluster, ErrNoMaster)
	}
	if known != "" && slices.Contains(writable, known) {
		// Trust the record unless a replica actually follows another of them.
		for _, m := range members {
			if !m.reachable() || !m.st.Replica.IOConnected() {
				continue
			}
			src := net.JoinHostPort(m.st.Replica.MasterHost, strconv.Itoa(m.st.Replica.MasterPort))
			if src != known && slices.Contains(writable, src) {
				return d, fmt.Errorf("health: cluster %s: %w: %s are writable and replicate from no one; the record names %s but %s replicates from %s",
					cluster, ErrAmbiguousMaster, strings.Join(writable, ", "), known, m.addr, src)
			}
		}
		d.Master = known
		for _, w := range writable {
			if w != known {
				d.Stale = append(d.Stale, w)
			}
		}
		return d, nil
	}
	return d, fmt.Errorf("health: cluster %s: %w: %s are writable and replicate from no one", cluster, ErrAmbiguousMaster, strings.Join(writable, ", "))
}

// FenceResult is what FenceOldMaster found on a master that came back after a failover.
type FenceResult struct {
	Addr string `json:"addr"`
	// WasWritable: read_only was off when sluice found it.
	WasWritable bool `json:"was_writable"`
	// BinlogPos is its binlog GTID position.
	BinlogPos string `json:"binlog_pos"`
	// Errant is what it has beyond the new master's position at promotion ("" when nothing):
	// transactions no client should have seen acknowledged, which a DBA must look at before
	// the server rejoins.
	Errant string `json:"errant,omitempty"`
}

// FenceOldMaster connects to a master that was failed over and has come back, turns
// read_only (super_read_only on MySQL) on, and compares its binlog with promotedAt, the new
// master's position when it was promoted (Result.PromotedPosition). Sluice sends the fenced
// server no traffic until a DBA puts it back.
func FenceOldMaster(ctx context.Context, addr string, cred Credentials, promotedAt GTIDSet) (FenceResult, error) {
	fr := FenceResult{Addr: addr}
	c, err := Dial(ctx, addr, cred)
	if err != nil {
		return fr, err
	}
	defer c.Close()
	st, err := c.State(ctx)
	if err != nil {
		return fr, err
	}
	fr.WasWritable = !st.ReadOnly
	if err := c.Fence(ctx); err != nil {
		return fr, fmt.Errorf("health: fencing old master: %w", err)
	}
	fr.BinlogPos = st.BinlogPos.String()
	fr.Errant = st.BinlogPos.Missing(promotedAt)
	return fr, nil
}
