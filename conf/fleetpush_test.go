package conf

import (
	"os"
	"strings"
	"testing"
)

const pushedText = `
[proxy]
listen = "0.0.0.0:6033"
admin_listen = "0.0.0.0:6034"
metrics_listen = "0.0.0.0:9104"
tls_cert = "/pushed/cert.pem"
tls_key = "/pushed/key.pem"
state_dir = "/pushed/state"
threads = 8
max_client_connections = 777

[auth]
backend = "mysql"
address = "10.0.0.9:3306"
tls_ca = "/pushed/auth-ca.pem"

[admin]
user = "pushed-admin"
password = "pushed"

[[cluster]]
name = "main"
user = "svc"
password = "pushed-secret"
master = "10.0.0.1:3306"
tls_ca = "/pushed/ca.pem"
  [[cluster.replica]]
  address = "10.0.0.2:3306"
  weight = 5

[[cluster]]
name = "other"
user = "svc"
password = "x"
master = "10.0.1.1:3306"
tls_ca = "/pushed/other-ca.pem"

[[rule]]
name = "pushed"
pattern = "x"
kind = "read"
route = "replica"
`

const localText = `
[proxy]
listen = "127.0.0.1:7033"
admin_listen = "127.0.0.1:7034"
metrics_listen = ""
state_dir = "/local/state"
max_client_connections = 10

[auth]
backend = "mysql"
address = "10.0.0.9:3306"
tls_ca = "/local/auth-ca.pem"

[admin]
user = "local-admin"
password = "local"

[[cluster]]
name = "main"
user = "svc"
password = "local-secret"
master = "10.0.0.1:3306"
tls_ca = "/local/ca.pem"

[fleet]
etcd = ["127.0.0.1:2379"]
prefix = "/sluice/t"
instance = "here"
`

// TestWithLocal: the effective configuration takes every instance-local
// key from the local file and everything else from the pushed one.
func TestWithLocal(t *testing.T) {
	pushed, err := Parse([]byte(pushedText))
	if err != nil {
		t.Fatal(err)
	}
	local, err := Parse([]byte(localText))
	if err != nil {
		t.Fatal(err)
	}
	local.Path = "/etc/sluice/sluice.toml"
	eff := WithLocal(pushed, local)
	if err := eff.Validate(); err != nil {
		t.Fatalf("effective configuration: %v", err)
	}
	p := eff.Proxy
	for _, c := range []struct{ key, got, want string }{
		{"proxy.listen", p.Listen, "127.0.0.1:7033"},
		{"proxy.admin_listen", p.AdminListen, "127.0.0.1:7034"},
		{"proxy.metrics_listen", p.MetricsListen, ""},
		{"proxy.tls_cert", p.TLSCert, ""},
		{"proxy.tls_key", p.TLSKey, ""},
		{"proxy.state_dir", p.StateDir, "/local/state"},
		{"auth.tls_ca", eff.Auth.TLSCA, "/local/auth-ca.pem"},
		{"admin.user", eff.Admin.User, "local-admin"},
		{"admin.password", eff.Admin.Password, "local"},
		{"fleet.instance", eff.Fleet.Instance, "here"},
		{"fleet.prefix", eff.Fleet.Prefix, "/sluice/t"},
		{"path", eff.Path, "/etc/sluice/sluice.toml"},
		// Keys the fleet decides.
		{"auth.address", eff.Auth.Address, "10.0.0.9:3306"},
		{"cluster main password", eff.Cluster("main").Password, "pushed-secret"},
		{"cluster main tls_ca (local names main)", eff.Cluster("main").TLSCA, "/local/ca.pem"},
		{"cluster other tls_ca (local lacks other)", eff.Cluster("other").TLSCA, "/pushed/other-ca.pem"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.key, c.got, c.want)
		}
	}
	if p.Threads != 0 || p.MaxClientConnections != 777 {
		t.Errorf("threads %d (want local 0), max_client_connections %d (want pushed 777)", p.Threads, p.MaxClientConnections)
	}
	if len(eff.Rules) != 1 || eff.Rules[0].Name != "pushed" || eff.Cluster("main").Replicas[0].Weight != 5 {
		t.Errorf("rules %v, weight %d: want the pushed ones", eff.Rules, eff.Cluster("main").Replicas[0].Weight)
	}
	// Neither input changed, and the clusters are not shared.
	eff.Clusters[0].Name = "changed"
	if pushed.Proxy.Listen != "0.0.0.0:6033" || pushed.Admin.User != "pushed-admin" || pushed.Clusters[0].Name != "main" ||
		pushed.Cluster("main").TLSCA != "/pushed/ca.pem" || local.Proxy.MaxClientConnections != 10 {
		t.Error("WithLocal changed its arguments")
	}
}

// TestWithLocalWithoutFleetInLocal: a local file without [fleet] gives the
// effective configuration none, whatever the pushed file says.
func TestWithLocalWithoutFleetInLocal(t *testing.T) {
	pushed, err := Parse([]byte(pushedText + "\n[fleet]\netcd = [\"10.9.9.9:2379\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	local, err := Parse([]byte(strings.Split(localText, "[fleet]")[0]))
	if err != nil {
		t.Fatal(err)
	}
	if eff := WithLocal(pushed, local); eff.Fleet.Enabled() {
		t.Errorf("effective [fleet] = %v, want the local file's (none)", eff.Fleet.Etcd)
	}
}

// TestParsePushedRelativeSecret: a pushed file's relative password_file is
// read beside the instance's local file.
func TestParsePushedRelativeSecret(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/svc.pw", []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(pushedText, `password = "pushed-secret"`, `password_file = "svc.pw"`, 1)
	c, err := ParsePushed([]byte(text), dir+"/sluice.toml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Cluster("main").Password; got != "from-file" {
		t.Errorf("password from password_file = %q, want from-file", got)
	}
	if _, err := ParsePushed([]byte(text), t.TempDir()+"/sluice.toml"); err == nil || !strings.Contains(err.Error(), "svc.pw") {
		t.Errorf("without the file beside the local one: %v, want an error naming svc.pw", err)
	}
}
