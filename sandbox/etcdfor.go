package sandbox

import (
	"context"
	"errors"
	"os"
	"time"
)

// TB is the part of testing.TB that StartEtcdFor uses (the sandbox package does not import
// testing, since the binary uses it too).
type TB interface {
	Helper()
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
}

// StartEtcdFor starts an etcd cluster for the test t (opts.Logf defaults to t.Logf) and stops
// it when t ends. A missing etcd binary skips t outside CI and fails it when CI is set, so a
// CI machine without etcd cannot pass the fleet's tests by skipping them.
func StartEtcdFor(t TB, opts EtcdOptions) *EtcdCluster {
	t.Helper()
	if _, err := FindEtcdBinary(); errors.Is(err, ErrNoEtcd) {
		if os.Getenv("CI") == "" {
			t.Skipf("skipping: etcd is not installed (%v)", err)
		}
		t.Fatalf("CI is set and etcd is missing: %v", err)
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := StartEtcd(ctx, opts)
	if err != nil {
		t.Fatalf("starting etcd: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping etcd: %v", err)
		}
	})
	return c
}
