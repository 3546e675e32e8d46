package conf

import "path/filepath"

// InstanceLocalKeys are the keys a configuration pushed to the fleet
// (sluice config push) does not decide: each instance keeps the values of
// its own file for them, because they name this host's ports, files and
// secrets, or the fleet itself. The pushed file may set them (it must pass
// check-config on its own); the instance ignores what it says.
var InstanceLocalKeys = []string{
	"proxy.listen", "proxy.admin_listen", "proxy.metrics_listen",
	"proxy.metrics_user", "proxy.metrics_password_env", "proxy.metrics_password_file",
	"proxy.metrics_tls_cert", "proxy.metrics_tls_key",
	"proxy.tls_cert", "proxy.tls_key", "proxy.state_dir",
	"proxy.threads", "proxy.event_loop",
	"auth.tls_ca", "cluster.tls_ca (of a cluster the local file also names)",
	"[admin]", "[fleet]",
}

// WithLocal is the effective configuration of an instance of a fleet:
// pushed, with local's value for every key InstanceLocalKeys names. Path
// is local's, so that RELOAD CONFIG reads the local file again. Neither
// argument is changed; the result shares no slice with pushed's clusters.
// The caller validates the result.
func WithLocal(pushed, local *Config) *Config {
	out := *pushed
	lp, op := &local.Proxy, &out.Proxy
	op.Listen, op.AdminListen, op.MetricsListen = lp.Listen, lp.AdminListen, lp.MetricsListen
	op.MetricsUser, op.MetricsPassword = lp.MetricsUser, lp.MetricsPassword
	op.MetricsPasswordEnv, op.MetricsPasswordFile = lp.MetricsPasswordEnv, lp.MetricsPasswordFile
	op.MetricsTLSCert, op.MetricsTLSKey = lp.MetricsTLSCert, lp.MetricsTLSKey
	op.TLSCert, op.TLSKey, op.StateDir = lp.TLSCert, lp.TLSKey, lp.StateDir
	op.Threads, op.EventLoop = lp.Threads, lp.EventLoop
	out.Auth.TLSCA = local.Auth.TLSCA
	out.Clusters = make([]Cluster, len(pushed.Clusters))
	for i, c := range pushed.Clusters {
		if lc := local.Cluster(c.Name); lc != nil {
			c.TLSCA = lc.TLSCA
		}
		out.Clusters[i] = c
	}
	out.Admin = local.Admin
	out.Fleet = local.Fleet
	out.Path = local.Path
	return &out
}

// ParsePushed is Parse for the text of a configuration pushed to the fleet,
// as the instance whose local file is at localPath reads it: a relative
// password_file is taken relative to that file's directory (the working
// directory when localPath is ""). The result's Path is "".
func ParsePushed(data []byte, localPath string) (*Config, error) {
	src := secretSource{}
	if localPath != "" {
		src.dir = filepath.Dir(localPath)
	}
	return parse(data, src)
}
