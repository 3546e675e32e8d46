package tests

import (
	"database/sql"
	"testing"

	"github.com/sluice-proxy/sluice/sandbox"
)

// TestStrongConsistencyReadsOnMaster: with consistency = "strong" every
// read is served by the master.
func TestStrongConsistencyReadsOnMaster(t *testing.T) {
	srv, err := startProxyWith(env.topo, sandbox.SluiceOptions{ClusterKeys: []string{`consistency = "strong"`}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	d, err := sql.Open("mysql", dsn(srv.Addr().String(), "app", "app", "", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := ctxT(t)
	for range 10 {
		if id := serverID(t, ctx, d, ""); id != env.masterID {
			t.Fatalf("read served by %d, want the master %d", id, env.masterID)
		}
	}
}
