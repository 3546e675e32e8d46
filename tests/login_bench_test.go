package tests

import (
	"context"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/sandbox"
)

// BenchmarkLogin measures a go-sql-driver login through sluice (connect,
// handshake relayed to the auth server, final OK; then close), on the
// direct path (auth server's scramble in the greeting) and on the deferred
// path (auth.max_pending_handshakes = 0: sluice's own scramble, then an auth
// switch, one round trip more). Run it with
// go test -run '^$' -bench BenchmarkLogin ./tests.
func BenchmarkLogin(b *testing.B) {
	for _, c := range []struct {
		name string
		keys []string
	}{
		{"direct", nil},
		{"deferred", []string{"max_pending_handshakes = 0"}},
	} {
		srv, err := startProxyWith(env.topo, sandbox.SluiceOptions{AuthKeys: c.keys})
		if err != nil {
			b.Fatal(err)
		}
		cfg := mysql.NewConfig()
		cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = env.topo.Opts.AppUser, env.topo.Opts.AppPassword, "tcp", srv.Addr().String()
		connector, err := mysql.NewConnector(cfg)
		if err != nil {
			b.Fatal(err)
		}
		login := func(b *testing.B) bool {
			conn, err := connector.Connect(context.Background())
			if err != nil {
				b.Error(err)
				return false
			}
			conn.Close()
			return true
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if !login(b) {
					return
				}
			}
		})
		b.Run(c.name+"-parallel", func(b *testing.B) {
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !login(b) {
						return
					}
				}
			})
		})
		srv.Close()
	}
}
