package admin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/protocol"
)

// FleetPeer is another member of the fleet as the fleet-wide commands
// reach it: by its admin port, with this instance's [admin] credentials
// (every member of a fleet shares them).
type FleetPeer struct {
	Instance, AdminAddress string
}

// BackendChange is one SET BACKEND: Op is "offline", "online" or "weight".
type BackendChange struct {
	Addr, Op string
	Weight   int
}

// Ops of BackendChange.
const (
	OpOffline = "offline"
	OpOnline  = "online"
	OpWeight  = "weight"
)

// peerTimeout bounds each question SHOW SESSIONS FLEET and a forwarded
// KILL ask another member: connecting, logging in and the answer. A member
// slower than that is reported, never waited for.
const peerTimeout = 3 * time.Second

// showSessionsFleet builds SHOW SESSIONS FLEET: this instance's sessions
// and those of every other member, asked of their admin ports at the same
// time. A member that does not answer within peerTimeout gives one row
// with its instance and, in state, why.
func (p *Port) showSessionsFleet() (*Table, error) {
	self, peers, err := p.ctl.FleetPeers()
	if err != nil {
		return nil, err
	}
	local := ShowSessions(p.ctl)
	t := &Table{Columns: append([]string{"instance"}, local.Columns...)}
	for _, r := range local.Rows {
		t.Rows = append(t.Rows, append([]string{self}, r...))
	}
	stateCol := slices.Index(t.Columns, "state")
	answers := make([][][]string, len(peers))
	var wg sync.WaitGroup
	for i, peer := range peers {
		wg.Go(func() {
			rows, err := p.peerSessions(peer, local.Columns)
			if err != nil {
				row := make([]string, len(t.Columns))
				row[0] = peer.Instance
				row[stateCol] = "unreachable: " + err.Error()
				rows = [][]string{row}
			}
			answers[i] = rows
		})
	}
	wg.Wait()
	for _, rows := range answers {
		t.Rows = append(t.Rows, rows...)
	}
	return t, nil
}

// peerSessions runs SHOW SESSIONS on peer and returns its rows in cols'
// order, each led by the peer's instance name.
func (p *Port) peerSessions(peer FleetPeer, cols []string) ([][]string, error) {
	res, err := p.askPeer(peer, "SHOW SESSIONS")
	if err != nil {
		return nil, err
	}
	if res.Resultset == nil {
		return nil, errors.New("SHOW SESSIONS returned no result set")
	}
	rs := res.Resultset
	out := make([][]string, 0, rs.RowNumber())
	for r := range rs.RowNumber() {
		row := make([]string, 0, len(cols)+1)
		row = append(row, peer.Instance)
		for _, c := range cols {
			v, err := rs.GetStringByName(r, c)
			if err != nil {
				v = "" // a member of another version may lack a column
			}
			row = append(row, v)
		}
		out = append(out, row)
	}
	return out, nil
}

// askPeer runs one admin command on peer's admin port within peerTimeout.
// The connection is closed when the time is up, so a member that stopped
// answering mid-result cannot hold the caller.
func (p *Port) askPeer(peer FleetPeer, command string) (*mysql.Result, error) {
	return p.askPeerWithin(peer, command, peerTimeout)
}

// askPeerWithin runs one admin command on peer's admin port within limit.
func (p *Port) askPeerWithin(peer FleetPeer, command string, limit time.Duration) (*mysql.Result, error) {
	if peer.AdminAddress == "" {
		return nil, fmt.Errorf("instance %s has no admin port (admin_listen)", peer.Instance)
	}
	ctx, cancel := context.WithTimeout(p.ctx, limit)
	defer cancel()
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		deadline, _ := ctx.Deadline()
		_ = nc.SetDeadline(deadline)
		return nc, nil
	}
	cfg := p.ctl.Config()
	c, err := client.ConnectWithDialer(ctx, "tcp", peer.AdminAddress, cfg.Admin.User, cfg.Admin.Password, "", dial,
		func(c *client.Conn) error {
			c.SetAttributes(map[string]string{"program_name": "sluice-fleet"})
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("admin port %s: %w", peer.AdminAddress, err)
	}
	defer c.Close()
	res, err := c.Execute(command)
	if err != nil {
		return nil, fmt.Errorf("admin port %s: %w", peer.AdminAddress, err)
	}
	return res, nil
}

// kill runs KILL [QUERY] on a session of this instance, or forwards it to
// the member named in KILL '<instance>:<id>'. Errors name the instance;
// the owning member's own error keeps its code.
func (p *Port) kill(a *session, cmd adminCommand) error {
	query := cmd.kind == adminKillQuery
	if cmd.instance != "" {
		self, peers, err := p.ctl.FleetPeers()
		if err != nil {
			return err
		}
		if cmd.instance != self {
			return p.killRemote(a, cmd.instance, peers, cmd.id, query)
		}
	}
	if query {
		return p.ctl.KillQuery(cmd.id)
	}
	return p.ctl.KillConnection(cmd.id)
}

// killRemote forwards a KILL to the member named instance.
func (p *Port) killRemote(a *session, instance string, peers []FleetPeer, id uint32, query bool) error {
	var peer *FleetPeer
	for i := range peers {
		if peers[i].Instance == instance {
			peer = &peers[i]
		}
	}
	if peer == nil {
		return protocol.ERNoSuchThread.New("sluice admin: no fleet member %q; SHOW FLEET lists them", instance)
	}
	command := "KILL CONNECTION " + strconv.FormatUint(uint64(id), 10)
	if query {
		command = "KILL QUERY " + strconv.FormatUint(uint64(id), 10)
	}
	a.log.Info("admin: forwarding KILL to its instance", zap.String("instance", instance), zap.String("command", command))
	_, err := p.askPeer(*peer, command)
	if err == nil {
		return nil
	}
	var me *mysql.MyError
	if errors.As(err, &me) {
		return &protocol.SQLError{Code: me.Code, State: me.State, Message: "sluice admin: instance " + instance + ": " + me.Message}
	}
	return protocol.ERUnknownError.New("sluice admin: instance %s: %v", instance, err)
}

// setBackend runs SET BACKEND '<addr>' OFFLINE | ONLINE | WEIGHT n. With
// [fleet] the change goes through etcd, so every member applies it; when
// etcd does not take it the command fails and nothing changes anywhere.
func (p *Port) setBackend(cmd adminCommand) (string, error) {
	ch := BackendChange{Addr: cmd.addr, Op: OpOffline, Weight: cmd.weight}
	switch cmd.kind {
	case adminSetOnline:
		ch.Op = OpOnline
	case adminSetWeight:
		ch.Op = OpWeight
	}
	// Check here what this instance can check, so a typo is refused
	// before it reaches the fleet.
	info, err := CheckBackendChange(p.ctl, ch)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(p.ctx, fleetTimeout)
	defer cancel()
	shared, err := p.ctl.SetBackendFleet(ctx, ch)
	if err != nil || shared {
		return info, err
	}
	return ApplyBackendChange(p.ctl, p.log, ch)
}
