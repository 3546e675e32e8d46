package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/admin"
	"github.com/sluice-proxy/sluice/fleet"
	"github.com/sluice-proxy/sluice/protocol"
)

// fleetState is the Server's membership in a fleet ([fleet]): set once by
// startFleet before the Server serves anyone, read by the admin port and
// the metrics collector; nil fleet without [fleet].
type fleetState struct {
	p     atomic.Pointer[fleet.Fleet]
	close sync.Once
	// holds are, per cluster, why this instance holds its writes on the fleet's account
	// (owner -> reason; fleet_hold.go), and checking the switchover hold's watcher; under holdMu.
	holdMu   sync.Mutex
	holds    map[string]map[string]string
	checking map[string]bool
}

// fleet is the membership, nil without [fleet] or before Start.
func (s *fleetState) fleet() *fleet.Fleet { return s.p.Load() }

// startFleet joins the fleet when [fleet] names etcd endpoints. It needs
// the bound listeners (the record holds their addresses) and returns
// without waiting for etcd: an unreachable etcd is logged and retried in
// the background, never a reason not to serve.
func (srv *Server) startFleet(started time.Time) error {
	fc := &srv.cfg.Fleet
	if !fc.Enabled() {
		return nil
	}
	addr := advertised(srv.ln.Addr())
	self := fleet.Member{Instance: fc.Instance, Address: addr, Version: admin.BuildVersion(), Started: started}
	if srv.adminLn != nil {
		self.AdminAddress = advertised(srv.adminLn.Addr())
	}
	if self.Instance == "" {
		self.Instance = defaultInstance(srv.ln.Addr())
	}
	f, err := fleet.New(fc, self, srv.log)
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	f.OnBackend(srv.applyFleetBackend)
	// A configuration pushed to the fleet is applied over the local file
	// (fleetconfig.go), the stored one first, as soon as etcd answers.
	f.OnConfig(srv.applyFleetConfig)
	// One prober-leader per cluster changes its servers; every instance follows the
	// topology it records (fleet_topology.go).
	f.OnTopology(srv.fleetHooks())
	srv.fleet.p.Store(f)
	f.Start()
	// The fleet's topology is read before this instance serves (within dial_timeout), so
	// that it does not send writes to a master the fleet replaced while it was down.
	if !f.WaitTopology(fc.DialTimeout.Duration) {
		srv.log.Warn("fleet: the topology in etcd could not be read within dial_timeout; serving with the local view until it is",
			zap.Duration("dial_timeout", fc.DialTimeout.Duration))
	}
	return nil
}

// closeFleet leaves the fleet (its key goes away at once); safe to call
// more than once.
func (srv *Server) closeFleet() {
	if f := srv.fleet.fleet(); f != nil {
		srv.fleet.close.Do(func() { _ = f.Close() })
	}
}

// Fleet is the instance's fleet membership, nil without [fleet] (for tests).
func (srv *Server) Fleet() *fleet.Fleet { return srv.fleet.fleet() }

// advertised is how other instances reach a listener: its address, with
// the host name in place of an unspecified address (":6033", "[::]:6033").
func advertised(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return a.String()
	}
	return defaultInstance(a)
}

// defaultInstance names an instance by its host and data port
// ("db-proxy-1:6033"), [fleet] instance's default.
func defaultInstance(a net.Addr) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	port := "0"
	if tcp, ok := a.(*net.TCPAddr); ok {
		port = strconv.Itoa(tcp.Port)
	}
	return net.JoinHostPort(host, port)
}

// fleetRows lists the fleet's members for SHOW FLEET, with the time each
// member's lease has left, asked of etcd in parallel within ctx.
func (srv *Server) fleetRows(ctx context.Context) ([]admin.FleetRow, error) {
	f := srv.fleet.fleet()
	if f == nil {
		return nil, protocol.EROptionPreventsStmt.New("SHOW FLEET: this sluice runs without a fleet ([fleet] names no etcd endpoints)")
	}
	members := f.Members()
	self := f.Self()
	if !slices.ContainsFunc(members, func(m fleet.Member) bool { return m.Instance == self.Instance }) {
		// Not registered (etcd never answered, or the lease was lost):
		// the instance still lists itself, saying so.
		members = append([]fleet.Member{self}, members...)
	}
	rows := make([]admin.FleetRow, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		rows[i] = admin.FleetRow{Instance: m.Instance, Address: m.Address, AdminAddress: m.AdminAddress, Version: m.Version,
			ConfigRevision: m.ConfigRevision, Started: m.Started}
		switch {
		case m.Instance == self.Instance && !f.Registered():
			rows[i].LeaseTTL = "self (not registered: no lease)"
		case m.Instance == self.Instance:
			rows[i].LeaseTTL = "self"
		case !f.Up():
			rows[i].LeaseTTL = "unknown (etcd does not answer)"
		default:
			wg.Go(func() {
				ttl, err := f.LeaseTTL(ctx, m.Lease)
				if err != nil {
					rows[i].LeaseTTL = "unknown (" + err.Error() + ")"
					return
				}
				rows[i].LeaseTTL = ttl.String()
			})
		}
	}
	wg.Wait()
	return rows, nil
}

// fleetCollector exports the fleet's state at scrape time from the Fleet's
// atomics (no request to etcd). Without [fleet] the series exist at 0.
type fleetCollector struct {
	s                       *Server
	up, members, registered *prometheus.Desc
	registrations           *prometheus.Desc
	configRev, rejectedRev  *prometheus.Desc
	leader, topologyRev     *prometheus.Desc
}

func newFleetCollector(s *Server) *fleetCollector {
	return &fleetCollector{
		s: s,
		up: prometheus.NewDesc("sluice_fleet_etcd_up",
			"1 while etcd answers this instance's quorum reads (every second), 0 while it does not or without [fleet].", nil, nil),
		members: prometheus.NewDesc("sluice_fleet_members",
			"Instances in this instance's view of the fleet (the last one read while etcd does not answer); 0 without [fleet].", nil, nil),
		registered: prometheus.NewDesc("sluice_fleet_registered",
			"1 while this instance's membership key is held by a live etcd lease, else 0.", nil, nil),
		registrations: prometheus.NewDesc("sluice_fleet_registrations_total",
			"Membership keys this instance wrote: 1 on joining, one more each time it joined again after losing its lease.", nil, nil),
		configRev: prometheus.NewDesc("sluice_fleet_config_revision",
			"etcd revision of the fleet configuration (sluice config push) this instance applied; 0 before any or without [fleet].", nil, nil),
		rejectedRev: prometheus.NewDesc("sluice_fleet_config_rejected_revision",
			"etcd revision of the last fleet configuration this instance refused (it kept the one it ran); 0 when none was refused since the last one applied.", nil, nil),
		leader: prometheus.NewDesc("sluice_fleet_leader",
			"1 while this instance is the cluster's prober-leader (the one that fails it over), else 0; 0 without [fleet].", []string{"cluster"}, nil),
		topologyRev: prometheus.NewDesc("sluice_fleet_topology_revision",
			"etcd revision of the cluster's topology record this instance applied (the cluster's epoch in the fleet); 0 before any or without [fleet].", []string{"cluster"}, nil),
	}
}

func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.members, c.registered, c.registrations, c.configRev, c.rejectedRev, c.leader, c.topologyRev} {
		ch <- d
	}
}

func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	var up, registered bool
	var members int
	var registrations uint64
	var configRev, rejectedRev int64
	if f := c.s.fleet.fleet(); f != nil {
		up, registered, members, registrations = f.Up(), f.Registered(), len(f.Members()), f.Registrations()
		configRev = f.ConfigRevision()
		rejectedRev, _ = f.RejectedRevision()
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, boolValue(up))
	ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(members))
	ch <- prometheus.MustNewConstMetric(c.registered, prometheus.GaugeValue, boolValue(registered))
	ch <- prometheus.MustNewConstMetric(c.registrations, prometheus.CounterValue, float64(registrations))
	ch <- prometheus.MustNewConstMetric(c.configRev, prometheus.GaugeValue, float64(configRev))
	ch <- prometheus.MustNewConstMetric(c.rejectedRev, prometheus.GaugeValue, float64(rejectedRev))
	f := c.s.fleet.fleet()
	for _, cc := range c.s.cfg.Clusters {
		var leads bool
		var rev int64
		if f != nil {
			_, leads = f.Leader(cc.Name)
			rev = f.TopologyRevision(cc.Name)
		}
		ch <- prometheus.MustNewConstMetric(c.leader, prometheus.GaugeValue, boolValue(leads), cc.Name)
		ch <- prometheus.MustNewConstMetric(c.topologyRev, prometheus.GaugeValue, float64(rev), cc.Name)
	}
}
