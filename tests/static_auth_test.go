package tests

import (
	"database/sql"
	"fmt"
	"testing"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/server"
)

// TestStaticAuth: backend = "static" checks mysql_native_password hashes
// held in the configuration, without an auth server.
func TestStaticAuth(t *testing.T) {
	// SELECT PASSWORD('s3cret') on MariaDB.
	const hash = "*B865CAE8F340F6CE1485A06F4492BB49718DF1EC"
	text := fmt.Sprintf(`[proxy]
listen = "127.0.0.1:0"
admin_listen = "127.0.0.1:0"
metrics_listen = "127.0.0.1:0"

[auth]
backend = "static"
  [[auth.user]]
  name = "svc_app"
  password_hash = %q

[[cluster]]
name = "main"
user = %q
password = %q
master = %q
`, hash, env.topo.Opts.ServiceUser, env.topo.Opts.ServicePassword, env.topo.Master.Addr())
	cfg, err := conf.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	addr := srv.Addr().String()
	ctx := ctxT(t)

	good, _ := sql.Open("mysql", dsn(addr, "svc_app", "s3cret", "", nil))
	defer good.Close()
	var id uint32
	// No replicas: reads fall back to the master.
	if err := good.QueryRowContext(ctx, "SELECT @@server_id").Scan(&id); err != nil || id != env.masterID {
		t.Fatalf("static login: id=%d err=%v", id, err)
	}
	for _, c := range []struct{ user, pw string }{{"svc_app", "wrong"}, {"nobody", "s3cret"}, {"svc_app", ""}} {
		bad, _ := sql.Open("mysql", dsn(addr, c.user, c.pw, "", nil))
		err := bad.PingContext(ctx)
		bad.Close()
		if mysqlErrNumber(err) != 1045 {
			t.Fatalf("%s/%q: err = %v, want 1045", c.user, c.pw, err)
		}
	}
}
