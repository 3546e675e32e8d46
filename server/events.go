package server

import (
	"time"

	"github.com/sluice-proxy/sluice/observe"
)

// event records one row of SHOW EVENTS, with the topology epoch current
// when it is recorded. kind is one of "failover", "failover_refused",
// "repointed", "switchover", "fenced", "backend_up", "backend_down",
// "reload", "offline", "online", "mirror", "firewall". It is safe
// for concurrent use from any goroutine.
func (srv *Server) event(kind, cluster, backend, detail string) {
	var epoch uint64
	if srv.topo != nil {
		epoch = srv.topo.Current().Epoch
	}
	srv.events.Add(observe.Event{At: time.Now(), Kind: kind, Cluster: cluster, Backend: backend, Detail: detail, Epoch: epoch})
}
