package sharding

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestShowShardsThroughAdminPort: the mariadb client on the admin port
// lists every [[shard]] rule with its key, algorithm, clusters and physical
// tables, and the broadcast table, as the configuration declares them.
func TestShowShardsThroughAdminPort(t *testing.T) {
	bin, err := exec.LookPath("mariadb")
	if err != nil {
		t.Fatalf("the mariadb client is required (make deps): %v", err)
	}
	host, port, _ := net.SplitHostPort(env.srv.AdminAddr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--no-defaults", "--skip-ssl", "-h"+host, "-P"+port,
		"-uadmin", "-p"+adminPassword, "-B", "-N", "-e", "SHOW SHARDS").CombinedOutput()
	if err != nil {
		t.Fatalf("SHOW SHARDS: %v: %s", err, out)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(l, "\t")
		if len(f) != 7 {
			t.Fatalf("SHOW SHARDS row %q: %d columns, want 7", l, len(f))
		}
		lines[f[0]+"."+f[1]] = strings.Join(f[2:], " | ")
	}
	for _, r := range allRules() {
		got, ok := lines[r.schema+"."+r.table]
		want := r.key + " | " + r.algo + " | " + strings.Join(r.clusters, ",")
		if !ok || !strings.HasPrefix(got, want) {
			t.Errorf("SHOW SHARDS for %s.%s: %q, want it to start %q", r.schema, r.table, got, want)
		}
	}
	if got := lines[appSchema+".countries"]; !strings.Contains(got, "broadcast") {
		t.Errorf("SHOW SHARDS for the broadcast table: %q", got)
	}
}
