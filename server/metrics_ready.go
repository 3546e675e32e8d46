package server

import (
	"net/http"
	"strings"

	"github.com/sluice-proxy/sluice/health"
)

// masterWritable reports whether c's master can take writes as far as
// sluice knows: it is up, sluice is not refusing the cluster's writes (an
// ambiguous master), and its last probe did not find it read-only.
func masterWritable(c *health.Cluster) bool {
	if c.WritesRefused != "" || c.Master == nil || !c.Master.Up() {
		return false
	}
	st := c.Master.Status()
	return st == nil || !st.ReadOnly
}

// servingReplicas counts c's replicas that are up, the ones reads may go to.
func servingReplicas(c *health.Cluster) int {
	n := 0
	for _, r := range c.Replicas {
		if r.Up() {
			n++
		}
	}
	return n
}

// Ready reports whether sluice can serve its clients: every cluster has a
// writable master or a serving replica. When it cannot, reason names each
// cluster that cannot serve and why. It reads the current snapshot only and
// is safe for concurrent use.
func (srv *Server) Ready() (ok bool, reason string) {
	if srv.ctx.Err() != nil || srv.unready.Load() {
		return false, "sluice is shutting down"
	}
	var why []string
	for _, c := range srv.topo.Current().Clusters {
		if masterWritable(c) || servingReplicas(c) > 0 {
			continue
		}
		master := "master " + c.Master.Address + " is " + c.Master.State().String()
		switch {
		case c.WritesRefused != "":
			master = "writes refused: " + c.WritesRefused
		case c.Master.Up():
			master = "master " + c.Master.Address + " is read-only"
		}
		replicas := "no replicas"
		if len(c.Replicas) > 0 {
			replicas = "replicas " + c.ReplicaStates()
		}
		why = append(why, "cluster "+c.Name+": "+master+"; "+replicas)
	}
	if len(why) > 0 {
		return false, strings.Join(why, "\n")
	}
	return true, ""
}

// serveReadyz answers /readyz: 200 "ready" when Ready, else 503 with the
// reason, one line per cluster that cannot serve. A fleet member whose etcd
// does not answer is ready, with a second line that says so.
func (srv *Server) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	ok, reason := srv.Ready()
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("not ready: " + reason + "\n"))
		return
	}
	_, _ = w.Write([]byte("ready\n"))
	if f := srv.fleet.fleet(); f != nil && !f.Up() {
		// Still ready: the fleet's etcd is never on a client's path.
		_, _ = w.Write([]byte("fleet: etcd does not answer; serving without it\n"))
	}
}
