package sandbox

import (
	"fmt"
	"strings"
)

// SluiceConfig returns a sluice TOML configuration that puts sluice on listen
// in front of t: the auth server as auth backend, one cluster "main" with the
// master and every replica, the service account as data user. proxyKeys are
// extra lines for the [proxy] table (for example `log_level = "debug"`).
func (t *Topology) SluiceConfig(listen string, proxyKeys ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[proxy]\nlisten = %q\n", listen)
	for _, k := range proxyKeys {
		b.WriteString(k + "\n")
	}
	fmt.Fprintf(&b, "\n[auth]\nbackend = \"mysql\"\naddress = %q\n\n", t.Auth.Addr())
	fmt.Fprintf(&b, "[[cluster]]\nname = \"main\"\nuser = %q\npassword = %q\nmaster = %q\n",
		t.Opts.ServiceUser, t.Opts.ServicePassword, t.Master.Addr())
	for _, r := range t.Replicas {
		fmt.Fprintf(&b, "  [[cluster.replica]]\n  address = %q\n", r.Addr())
	}
	return b.String()
}
