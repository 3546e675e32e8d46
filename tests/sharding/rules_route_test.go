package sharding

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/sandbox"
)

// TestRuleRouteUnderSharding: with [[shard]] rules, a query rule's route to
// another cluster moves a statement that names no sharded table (the next
// statement is back on the default cluster), and refuses, naming the rule,
// a statement on a sharded table, which only the shard rules place, and a
// prepared statement with such a route.
func TestRuleRouteUnderSharding(t *testing.T) {
	srv, err := startSluice(named(clusterNames, clusterTopos()), shardingTOML()+
		"\n[[rule]]\nname = \"to-c1\"\npattern = \"to-c1\"\nroute = \"c1\"\n")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c := conn(t, sluiceDB(t, srv.Addr().String(), appSchema, false))
	ctx := ctxT(t)
	on := func(topo *sandbox.Topology, id uint32) bool {
		if topo.Master.ServerID == id {
			return true
		}
		for _, r := range topo.Replicas {
			if r.ServerID == id {
				return true
			}
		}
		return false
	}
	for range 3 {
		var id uint32
		if err := c.QueryRowContext(ctx, "SELECT @@server_id /* to-c1 */").Scan(&id); err != nil {
			t.Fatal(err)
		}
		if !on(env.clusters["c1"], id) {
			t.Errorf("a statement routed to c1 ran on server %d", id)
		}
		if err := c.QueryRowContext(ctx, "SELECT @@server_id").Scan(&id); err != nil {
			t.Fatal(err)
		}
		if !on(env.clusters[defaultCluster], id) {
			t.Errorf("the statement after a routed one ran on server %d, not on the default cluster %s", id, defaultCluster)
		}
	}
	refused := func(what string, err error, want string) {
		t.Helper()
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1235 || !strings.Contains(me.Message, `query rule "to-c1"`) || !strings.Contains(me.Message, want) {
			t.Errorf("%s: error %v, want 1235 naming the rule and %q", what, err, want)
		}
	}
	var n int
	err = c.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders /* to-c1 */").Scan(&n)
	refused("a sharded table", err, "sharded or broadcast table")
	bin := conn(t, sluiceDB(t, srv.Addr().String(), appSchema, true))
	var id uint32
	err = bin.QueryRowContext(ctx, "SELECT @@server_id + ? /* to-c1 */", 0).Scan(&id)
	refused("a prepared statement", err, "under sharding only text statements are routed to a cluster")
}
