package conf

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Warnings lists settings of a valid configuration that work but are
// unsafe, one sentence each, for `sluice check-config` to print. Today they
// are listeners that accept connections from other hosts without TLS: the
// client port without proxy.tls_cert / tls_key, and the admin and metrics
// ports on any address that is not loopback (the admin port has no TLS; the
// metrics port is not warned about with both basic auth and TLS); and
// auth.enforce_grants = false. The
// function does no I/O: a host name other than "localhost" is taken to be
// reachable from other hosts.
func (c *Config) Warnings() []string {
	var out []string
	x := &c.Proxy
	if !IsLoopbackListen(x.Listen) && x.TLSCert == "" {
		out = append(out, fmt.Sprintf("proxy.listen %q accepts clients from other hosts without TLS: "+
			"passwords and data cross the network in clear text (set proxy.tls_cert and proxy.tls_key, or listen on 127.0.0.1)", x.Listen))
	}
	if x.AdminListen != "" && !IsLoopbackListen(x.AdminListen) {
		out = append(out, fmt.Sprintf("proxy.admin_listen %q accepts admin logins from other hosts without TLS "+
			"(the admin port has no TLS; listen on 127.0.0.1 and reach it through SSH or a local agent)", x.AdminListen))
	}
	if x.MetricsListen != "" && !IsLoopbackListen(x.MetricsListen) && (x.MetricsUser == "" || x.MetricsTLSCert == "") {
		out = append(out, fmt.Sprintf("proxy.metrics_listen %q serves /metrics to other hosts without TLS or authentication "+
			"(listen on 127.0.0.1, set proxy.metrics_user and proxy.metrics_tls_cert/key, or make sure a firewall limits who can reach it)", x.MetricsListen))
	}
	if !c.Auth.EnforceGrants {
		out = append(out, "auth.enforce_grants = false: every logged-in user may do whatever the clusters' service accounts may, "+
			"whatever the auth server grants them")
	}
	return append(out, c.firewallWarnings()...)
}

// IsLoopbackListen reports whether a host:port listen address binds only
// loopback: "localhost" or a loopback IP (127.0.0.0/8, ::1). An empty host,
// 0.0.0.0, ::, any other IP and other host names are not.
func IsLoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
