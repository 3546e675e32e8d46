package admin

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/protocol"
)

// masterChangeWait bounds a SWITCHOVER or FAILOVER forwarded to the cluster's prober-leader
// beyond the instance's own bounds: the leader's drain and catch-up run within it.
const masterChangeWait = 2 * time.Minute

// masterChange runs SWITCHOVER or FAILOVER. With [fleet] only the cluster's prober-leader
// changes its servers, so on any other instance the command is forwarded to the leader's
// admin port and its answer (or error, with its code) returned as the leader gave it.
func (p *Port) masterChange(a *session, cmd adminCommand) error {
	ctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	leader, self, err := p.ctl.ClusterLeader(ctx, cmd.cluster)
	if err != nil {
		return err
	}
	command := "FAILOVER CLUSTER " + cmd.cluster
	if cmd.kind == adminSwitchover {
		command = "SWITCHOVER CLUSTER " + cmd.cluster + " TO " + quoteString(cmd.addr)
	}
	if !self {
		return p.forwardToLeader(a, leader, command)
	}
	a.log.Warn("admin: "+command, zap.String("cluster", cmd.cluster))
	if cmd.kind == adminSwitchover {
		return p.ctl.Switchover(ctx, cmd.cluster, cmd.addr)
	}
	return p.ctl.FailoverCluster(ctx, cmd.cluster)
}

// forwardToLeader runs command on the admin port of the fleet member named leader.
func (p *Port) forwardToLeader(a *session, leader, command string) error {
	_, peers, err := p.ctl.FleetPeers()
	if err != nil {
		return err
	}
	for _, peer := range peers {
		if peer.Instance != leader {
			continue
		}
		a.log.Warn("admin: forwarding to the cluster's prober-leader", zap.String("instance", leader), zap.String("command", command))
		_, err := p.askPeerWithin(peer, command, masterChangeWait)
		var me *mysql.MyError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &me):
			return &protocol.SQLError{Code: me.Code, State: me.State, Message: "sluice admin: prober-leader " + leader + ": " + me.Message}
		default:
			return protocol.ERUnknownError.New("sluice admin: %s: forwarding to the prober-leader %s: %v (the command may still run there: check SHOW CLUSTERS)", command, leader, err)
		}
	}
	return protocol.ERUnknownError.New("sluice admin: %s: the prober-leader %s is not in this instance's view of the fleet (SHOW FLEET)", command, leader)
}

// quoteString quotes s as the admin parser reads a string: in single quotes, a quote doubled.
func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
