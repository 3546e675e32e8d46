package server

import (
	"context"
	"fmt"
	"github.com/sluice-proxy/sluice/cache"
	"net"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/admin"
	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/dataplane"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/internal/mono"
	"github.com/sluice-proxy/sluice/observe"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/rules"
)

// startAdmin binds admin_listen and serves the admin port until the
// Server closes; "" leaves it off.
func (srv *Server) startAdmin() error {
	addr := srv.cfg.Proxy.AdminListen
	if addr == "" {
		return nil
	}
	port, err := admin.NewPort(control{srv}, srv.log, admin.Options{
		User: srv.cfg.Admin.User, Password: srv.cfg.Admin.Password,
		Capabilities: dataplane.Capabilities, Collation: dataplane.DefaultCollation,
		HandshakeTimeout: srv.cfg.Proxy.HandshakeTimeout.Duration,
	})
	if err != nil {
		return fmt.Errorf("proxy: admin: %w", err)
	}
	if srv.cfg.Admin.Password == "" {
		srv.log.Warn("[admin] has no password: the admin port refuses every login", zap.String("admin_listen", addr))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("proxy: admin_listen %s: %w", addr, err)
	}
	srv.adminLn, srv.admin = ln, port
	srv.wg.Add(2)
	go func() {
		defer srv.wg.Done()
		<-srv.ctx.Done()
		port.Close()
	}()
	go func() { defer srv.wg.Done(); port.Serve(ln) }()
	return nil
}

// AdminAddr is the bound admin address, nil when the admin port is off.
func (srv *Server) AdminAddr() net.Addr {
	if srv.adminLn == nil {
		return nil
	}
	return srv.adminLn.Addr()
}

// control is the Server as the admin port sees it (admin.Control).
type control struct{ s *Server }

func (c control) Config() *conf.Config           { return c.s.config() }
func (c control) Topology() *health.Topology     { return c.s.topo }
func (c control) Digests() *observe.Digests      { return c.s.digests }
func (c control) Rules() *rules.Set              { return c.s.env.Rules() }
func (c control) Cache() *cache.Cache            { return c.s.env.Cache() }
func (c control) Events() *observe.Events        { return &c.s.events }
func (c control) ServerVersion() string          { return c.s.env.ServerVersion() }
func (c control) NextConnectionID() uint32       { return c.s.env.Registry().NextConnectionID() }
func (c control) KillConnection(id uint32) error { return c.s.killConnection(id) }
func (c control) KillQuery(id uint32) error      { return c.s.killQuery(id) }
func (c control) Reload() ([]string, error)      { return c.s.Reload() }
func (c control) FlushPrivileges()               { c.s.grants.Flush() }
func (c control) Firewall() *rules.Allowlist     { return c.s.env.Firewall() }
func (c control) SaveFirewall() error            { return c.s.saveFirewall() }
func (c control) Event(kind, cluster, backend, detail string) {
	c.s.event(kind, cluster, backend, detail)
}
func (c control) BackendStateChanged(b *health.Backend, from, to health.State, reason string) {
	c.s.backendStateChanged(b, from, to, reason)
}
func (c control) Switchover(ctx context.Context, cluster, target string) error {
	return c.s.Switchover(ctx, cluster, target)
}
func (c control) FailoverCluster(ctx context.Context, cluster string) error {
	return c.s.FailoverCluster(ctx, cluster)
}
func (c control) LoginRefusal(remote net.Addr) *protocol.SQLError {
	return c.s.env.LoginRefusal(remote)
}
func (c control) LoginRefused(remote net.Addr, port string) func(string) {
	return c.s.env.LoginRefused(remote, port)
}
func (c control) LoginSucceeded(remote net.Addr) { c.s.env.LoginSucceeded(remote) }
func (c control) Fleet(ctx context.Context) ([]admin.FleetRow, error) {
	return c.s.fleetRows(ctx)
}

// Pool describes the pool of the backend at addr.
func (c control) Pool(addr string) (admin.PoolInfo, bool) {
	p := c.s.pool(addr)
	if p == nil {
		return admin.PoolInfo{}, false
	}
	open, idle, closed := p.Stats()
	return admin.PoolInfo{Size: p.Size(), Open: open, Idle: idle, Closed: closed, Queries: p.Queries(),
		WaitTimeout: p.WaitTimeout()}, true
}

// Sessions lists the logged-in sessions by id, as SHOW SESSIONS shows them.
func (c control) Sessions() []admin.SessionRow {
	all := c.s.env.Registry().All()
	now := mono.Now()
	rows := make([]admin.SessionRow, 0, len(all))
	for _, h := range all {
		v, ok := h.View(now)
		if !ok {
			continue // still logging in
		}
		rows = append(rows, admin.SessionRow{ID: h.ID(), User: v.User, Client: h.Client(),
			Schema: v.Schema, Backend: v.Backend, State: v.State, Time: v.Time, Digest: v.Digest, Pins: v.Pins})
	}
	return rows
}

// refuseAdminOnDataPort is the ERR the data port gives the admin user.
func (srv *Server) refuseAdminOnDataPort(host string) *protocol.SQLError {
	where := "the admin port"
	if srv.adminLn != nil {
		where = "the admin port " + srv.adminLn.Addr().String()
	} else if srv.cfg.Proxy.AdminListen != "" {
		where = "the admin port " + srv.cfg.Proxy.AdminListen
	}
	return protocol.ERAccessDenied.New("Access denied for user '%s'@'%s': it is sluice's admin user, which logs in only on %s", srv.cfg.Admin.User, host, where)
}
