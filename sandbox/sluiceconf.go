package sandbox

import (
	"fmt"
	"os"
	"strings"
)

// ProxyKeysEnv names an environment variable whose value, when set, is
// added to the [proxy] table of every configuration the sandbox writes.
const ProxyKeysEnv = "SLUICE_SANDBOX_PROXY_KEYS"

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
// [[cluster]] too. t must have an auth server (not started with
// Options.NoAuth); a NoAuth topology goes into ShardedSluiceConfig instead.
func (t *Topology) SluiceConfigWith(o SluiceOptions) string {
	return ShardedSluiceConfig(o, t.Auth, []NamedTopology{{Name: "main", Topology: t}}, "")
}

// NamedTopology is one [[cluster]] of a multi-cluster configuration: the
// cluster name the shard rules use and the topology serving it.
type NamedTopology struct {
	Name string
	*Topology
}

// setsKey reports whether one of lines sets a key that starts with prefix.
func setsKey(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), prefix) {
			return true
		}
	}
	return false
}

// ShardedSluiceConfig returns a sluice TOML configuration with auth as the
// auth backend (and auth's service account as [auth] service_user and
// service_password, when it has one and o.AuthKeys set no service_* key)
// and one [[cluster]] per entry of clusters, in the order given (the order [sharding] default_cluster falls back on and shard rules'
// clusters lists usually follow): each with that topology's master, replicas
// and service account, and o.ClusterKeys. extra is raw TOML appended at the
// end, for [sharding], [[shard]] and [[broadcast]] tables. auth must not be
// nil; the clusters are usually started with Options.NoAuth and auth taken
// from one more topology.
func ShardedSluiceConfig(o SluiceOptions, auth *Server, clusters []NamedTopology, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[proxy]\nlisten = %q\n", o.Listen)
	for _, k := range o.ProxyKeys {
		b.WriteString(k + "\n")
	}
	// make test runs the end-to-end suite once more with extra [proxy]
	// keys (event_loop = true) through this variable.
	if extra := os.Getenv(ProxyKeysEnv); extra != "" {
		b.WriteString(extra + "\n")
	}
	fmt.Fprintf(&b, "\n[auth]\nbackend = \"mysql\"\naddress = %q\n", auth.Addr())
	if auth.ServiceUser != "" && !setsKey(o.AuthKeys, "service_") {
		fmt.Fprintf(&b, "service_user = %q\nservice_password = %q\n", auth.ServiceUser, auth.ServicePassword)
	}
	for _, k := range o.AuthKeys {
		b.WriteString(k + "\n")
	}
	for _, c := range clusters {
		t := c.Topology
		fmt.Fprintf(&b, "\n[[cluster]]\nname = %q\nuser = %q\npassword = %q\nmaster = %q\n",
			c.Name, t.Opts.ServiceUser, t.Opts.ServicePassword, t.Master.Addr())
		for _, k := range o.ClusterKeys {
			b.WriteString(k + "\n")
		}
		for _, r := range t.Replicas {
			fmt.Fprintf(&b, "  [[cluster.replica]]\n  address = %q\n", r.Addr())
		}
	}
	if len(o.HealthKeys) > 0 {
		b.WriteString("\n[health]\n")
		for _, k := range o.HealthKeys {
			b.WriteString(k + "\n")
		}
	}
	if extra != "" {
		b.WriteString("\n" + extra)
		if !strings.HasSuffix(extra, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}
