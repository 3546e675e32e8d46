package grants

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// Environment variables and flags of the package.
const (
	// targetEnv picks what the reference is compared with: "sluice" (the
	// default) or "direct-master", the cluster's master itself with the
	// accounts created there too, which checks the harness: it must find
	// no difference at all.
	targetEnv = "SLUICE_GRANTS_PARITY_TARGET"
	// seedEnv replays a run (as -grants.seed does); 0 or unset picks a new
	// seed from the clock.
	seedEnv = "SLUICE_GRANTS_SEED"
	// statementsEnv sets the corpus size (default defaultStatements).
	statementsEnv = "SLUICE_GRANTS_STATEMENTS"
	// shareEnv sets the share of the corpus each account runs, (0, 1]
	// (default defaultShare), picked per group of statements by the seed.
	shareEnv = "SLUICE_GRANTS_SHARE"
	// verboseEnv, when set, lists every difference instead of the first
	// listLimit of each kind.
	verboseEnv = "SLUICE_GRANTS_VERBOSE"
	// dumpEnv names a file the test writes every run to, one line each:
	// account, statement index, kind, the reference's and the target's
	// answers, the statement.
	dumpEnv = "SLUICE_GRANTS_DUMP"
)

const (
	targetSluice       = "sluice"
	targetDirectMaster = "direct-master"
)

var seedFlag = flag.Uint64("grants.seed", 0, "seed of the parity test's generator (0: from the clock; env "+seedEnv+")")

// env is the setup the package's tests share; TestMain fills it and the
// tests only read it.
var env struct {
	cluster *sandbox.Topology // master, one replica, the auth server
	ref     *sandbox.Topology // the standalone reference master
	srv     *server.Server    // sluice in front of cluster (nil in direct-master mode)
	target  string            // targetSluice or targetDirectMaster
	// targetAddr is where the compared side's clients connect: sluice, or
	// the cluster's master.
	targetAddr string
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	env.target = os.Getenv(targetEnv)
	if env.target == "" {
		env.target = targetSluice
	}
	if env.target != targetSluice && env.target != targetDirectMaster {
		fmt.Fprintf(os.Stderr, "grants: %s=%q: want %q or %q\n", targetEnv, env.target, targetSluice, targetDirectMaster)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	// A missing server binary is a failure, never a skip.
	topos, err := sandbox.StartAll(ctx, []sandbox.Options{{Replicas: 1}, {Replicas: -1, NoAuth: true}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "grants: cannot start the sandbox topologies:", err)
		return 1
	}
	defer func() {
		for _, t := range topos {
			t.Stop()
		}
	}()
	env.cluster, env.ref = topos[0], topos[1]
	if err := setUp(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "grants:", err)
		return 1
	}
	if env.target == targetSluice {
		srv, err := startSluice(env.cluster)
		if err != nil {
			fmt.Fprintln(os.Stderr, "grants: cannot start sluice:", err)
			return 1
		}
		defer srv.Close()
		env.srv, env.targetAddr = srv, srv.Addr().String()
	} else {
		env.targetAddr = env.cluster.Master.Addr()
	}
	fmt.Fprintf(os.Stderr, "grants: cluster, reference and %s up in %v (target %s, reference %s)\n",
		env.target, time.Since(start).Round(time.Millisecond), env.targetAddr, env.ref.Master.Addr())
	return m.Run()
}

// setUp creates the schemas (in full on the cluster's master and the
// reference, structure only on the auth server, whose table- and
// column-level GRANTs need the tables) and the accounts (on the auth server
// and the reference, and on the cluster's master when it is the target).
func setUp(ctx context.Context) error {
	c := env.cluster
	if err := createSchemas(ctx, []*sandbox.Server{c.Master, env.ref.Master}, []*sandbox.Server{c.Auth}); err != nil {
		return fmt.Errorf("creating the schemas: %w", err)
	}
	accounts := []*sandbox.Server{c.Auth, env.ref.Master}
	if env.target == targetDirectMaster {
		accounts = append(accounts, c.Master)
	}
	if err := createAccounts(ctx, accounts...); err != nil {
		return fmt.Errorf("creating the accounts: %w", err)
	}
	return c.WaitReplicated(ctx)
}

// startSluice starts an in-process sluice in front of t with grants
// enforced (the default, stated so that a change of default cannot pass
// unnoticed) and causal reads, so a session reads its own writes.
func startSluice(t *sandbox.Topology) (*server.Server, error) {
	o := sandbox.SluiceOptions{
		Listen:      "127.0.0.1:0",
		ProxyKeys:   []string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = "127.0.0.1:0"`},
		AuthKeys:    []string{"enforce_grants = true"},
		ClusterKeys: []string{`consistency = "causal"`},
	}
	cfg, err := conf.Parse([]byte(t.SluiceConfigWith(o)))
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
