package proxy

import (
	"context"

	"github.com/sluice-proxy/sluice/protocol"
)

// Placeholders for the Server methods other helpers write (switchover,
// failover on demand, reload); the lead deletes this file at merge.

// Switchover is a placeholder: not implemented in this branch.
func (s *Server) Switchover(ctx context.Context, cluster, target string) error {
	return protocol.NewError(protocol.ErNotSupportedYet, "sluice admin: SWITCHOVER CLUSTER %s TO '%s' is not implemented yet", cluster, target)
}

// FailoverCluster is a placeholder: not implemented in this branch.
func (s *Server) FailoverCluster(ctx context.Context, cluster string) error {
	return protocol.NewError(protocol.ErNotSupportedYet, "sluice admin: FAILOVER CLUSTER %s is not implemented yet", cluster)
}

// Reload is a placeholder: not implemented in this branch.
func (s *Server) Reload() (changes []string, err error) {
	return nil, protocol.NewError(protocol.ErNotSupportedYet, "sluice admin: RELOAD CONFIG is not implemented yet")
}
