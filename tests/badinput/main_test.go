package badinput

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// handshakeTimeout is the shared sluice's handshake_timeout: short, so the
// cases that wait for it finish quickly.
const handshakeTimeout = 2 * time.Second

// maxPacket is the shared sluice's max_allowed_packet: one full 0xFFFFFF
// packet fits, a second one chained to it does not.
const maxPacket = 1 << 24

// env is the topology and proxy every test in the package shares; TestMain
// fills it and tests only read it.
var env struct {
	topo *sandbox.Topology
	srv  *server.Server
	addr string
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	// A missing server binary is a failure, never a skip.
	topo, err := sandbox.Start(ctx, sandbox.Options{Replicas: 1})
	if err != nil {
		fmt.Fprintln(os.Stderr, "badinput: cannot start the sandbox topology:", err)
		return 1
	}
	defer topo.Stop()
	// max_client_connections is above the 1,000 silent handshakes of
	// TestThousandSilentHandshakes, so that test measures handshake_timeout
	// and not the connection limit.
	srv, err := startProxy(topo,
		fmt.Sprintf(`handshake_timeout = "%s"`, handshakeTimeout),
		fmt.Sprintf(`max_allowed_packet = %d`, maxPacket),
		`max_client_connections = 5000`,
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "badinput: cannot start sluice:", err)
		return 1
	}
	defer srv.Close()
	env.topo, env.srv, env.addr = topo, srv, srv.Addr().String()
	fmt.Fprintf(os.Stderr, "badinput: topology and sluice up in %v (sluice %s)\n", time.Since(start).Round(time.Millisecond), env.addr)
	return m.Run()
}

// startProxy starts an in-process sluice in front of topo on free ports;
// proxyKeys are extra lines for its [proxy] table.
func startProxy(topo *sandbox.Topology, proxyKeys ...string) (*server.Server, error) {
	o := sandbox.SluiceOptions{Listen: "127.0.0.1:0"}
	o.ProxyKeys = append([]string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = "127.0.0.1:0"`}, proxyKeys...)
	cfg, err := conf.Parse([]byte(topo.SluiceConfigWith(o)))
	if err != nil {
		return nil, err
	}
	log := zap.NewNop()
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		log, _ = zap.NewDevelopment()
	}
	srv, err := server.New(cfg, log)
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		srv.Close()
		return nil, err
	}
	return srv, nil
}
