package sandbox

import (
	"fmt"
	"strings"
)

// SluiceOptions shape the configuration SluiceConfigWith writes. Keys are
// whole TOML lines added to their table.
type SluiceOptions struct {
	Listen      string
	ProxyKeys   []string
	AuthKeys    []string
	ClusterKeys []string
	// HealthKeys are lines for a [health] table (written only when set).
	HealthKeys []string
}

// SluiceConfig returns a sluice TOML configuration that puts sluice on listen
// in front of t: the auth server as auth backend, one cluster "main" with the
// master and every replica, the service account as data user. proxyKeys are
// extra lines for the [proxy] table (for example `log_level = "debug"`).
func (t *Topology) SluiceConfig(listen string, proxyKeys ...string) string {
	return t.SluiceConfigWith(SluiceOptions{Listen: listen, ProxyKeys: proxyKeys})
}

// SluiceConfigWith is SluiceConfig with extra lines for [auth] and
// [[cluster]] too.
func (t *Topology) SluiceConfigWith(o SluiceOptions) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[proxy]\nlisten = %q\n", o.Listen)
	for _, k := range o.ProxyKeys {
		b.WriteString(k + "\n")
	}
	fmt.Fprintf(&b, "\n[auth]\nbackend = \"mysql\"\naddress = %q\n", t.Auth.Addr())
	for _, k := range o.AuthKeys {
		b.WriteString(k + "\n")
	}
	fmt.Fprintf(&b, "\n[[cluster]]\nname = \"main\"\nuser = %q\npassword = %q\nmaster = %q\n",
		t.Opts.ServiceUser, t.Opts.ServicePassword, t.Master.Addr())
	for _, k := range o.ClusterKeys {
		b.WriteString(k + "\n")
	}
	for _, r := range t.Replicas {
		fmt.Fprintf(&b, "  [[cluster.replica]]\n  address = %q\n", r.Addr())
	}
	if len(o.HealthKeys) > 0 {
		b.WriteString("\n[health]\n")
		for _, k := range o.HealthKeys {
			b.WriteString(k + "\n")
		}
	}
	return b.String()
}
