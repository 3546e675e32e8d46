package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/health"
	"go.uber.org/zap"
)

func TestStartRefusesMissingStateDir(t *testing.T) {
	cfg, err := conf.Parse([]byte(`
[proxy]
listen = "127.0.0.1:0"
metrics_listen = ""
state_dir = "/nonexistent/sluice-state"
[auth]
address = "127.0.0.1:1"
[[cluster]]
name = "main"
user = "sluice"
master = "127.0.0.1:2"
`))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	err = srv.Start()
	if err == nil || !strings.Contains(err.Error(), "proxy.state_dir /nonexistent/sluice-state") {
		t.Fatalf("Start = %v, want an error naming proxy.state_dir", err)
	}
}

// offlineServer returns a Server, never started, for a master and replicas
// on addresses nothing listens on, with healthKeys as its [health] table.
func offlineServer(tb testing.TB, healthKeys string, replicas int) *Server {
	tb.Helper()
	doc := "[auth]\naddress = \"127.0.0.1:1\"\n[health]\n" + healthKeys +
		"\n[[cluster]]\nname = \"main\"\nuser = \"sluice\"\nmaster = \"127.0.0.1:2\"\n"
	for i := range replicas {
		doc += fmt.Sprintf("  [[cluster.replica]]\n  address = \"127.0.0.1:%d\"\n", 3+i)
	}
	cfg, err := conf.Parse([]byte(doc))
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := New(cfg, zap.NewNop())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = srv.Close() })
	return srv
}

func TestPromoteRepointsPools(t *testing.T) {
	srv := offlineServer(t, "", 2)
	snap, err := srv.topo.Promote("main", "127.0.0.1:3", nil)
	if err != nil {
		t.Fatal(err)
	}
	if b := srv.pool("127.0.0.1:3").Backend(); b != snap.Cluster("main").Master || b.Role != health.RoleMaster {
		t.Fatalf("pool of the new master lends for %+v", b)
	}
}
