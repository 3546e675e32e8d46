package conf

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
)

// Fleet is the [fleet] table: the etcd cluster several sluices share and
// this instance's name in it. Without etcd endpoints the table is off and
// sluice runs alone, exactly as without it. Every key needs a restart.
type Fleet struct {
	// Etcd lists the etcd cluster's client endpoints, host:port or
	// http(s)://host:port; empty leaves the fleet off.
	Etcd []string `toml:"etcd"`
	// Prefix is the etcd key prefix of the fleet, "/sluice/<fleet name>";
	// several fleets may share one etcd cluster under different prefixes.
	Prefix string `toml:"prefix"`
	// Instance names this sluice in the fleet; "" takes the host name and
	// the data listener's port ("db-proxy-1:6033").
	Instance string `toml:"instance"`
	// EtcdCA, EtcdCert and EtcdKey are PEM files for TLS towards etcd: the
	// CA that signed etcd's certificate, and a client certificate and key
	// when etcd asks for one. Any of them switches the client to TLS.
	EtcdCA   string `toml:"etcd_ca"`
	EtcdCert string `toml:"etcd_cert"`
	EtcdKey  string `toml:"etcd_key"`
	// EtcdUser is the etcd user sluice authenticates as (etcd's auth);
	// its password comes from EtcdPasswordEnv or EtcdPasswordFile.
	EtcdUser         string `toml:"etcd_user"`
	EtcdPasswordEnv  string `toml:"etcd_password_env"`
	EtcdPasswordFile string `toml:"etcd_password_file"`
	// EtcdPassword is the resolved password of EtcdUser.
	EtcdPassword string `toml:"-"`
	// DialTimeout bounds connecting to etcd and each of sluice's requests
	// to it.
	DialTimeout Duration `toml:"dial_timeout"`
	// SessionTTL is the lease of this instance's membership key: how long
	// the fleet keeps listing an instance that stopped answering (a clean
	// shutdown removes it at once). Whole seconds.
	SessionTTL Duration `toml:"session_ttl"`
}

// Defaults of [fleet].
const (
	DefaultFleetPrefix      = "/sluice/default"
	DefaultFleetDialTimeout = 5 * time.Second
	DefaultFleetSessionTTL  = 10 * time.Second
	// MinFleetSessionTTL is below what an etcd server grants (it raises
	// shorter leases to about 1.5 election timeouts).
	MinFleetSessionTTL = 2 * time.Second
	MaxFleetSessionTTL = 5 * time.Minute
	// MaxFleetInstance bounds an instance name (part of an etcd key).
	MaxFleetInstance = 128
)

// Enabled reports whether [fleet] names an etcd cluster.
func (f *Fleet) Enabled() bool { return len(f.Etcd) > 0 }

// UsesTLS reports whether the etcd client must speak TLS.
func (f *Fleet) UsesTLS() bool { return f.EtcdCA != "" || f.EtcdCert != "" || f.EtcdKey != "" }

func fleetDefaults() Fleet {
	return Fleet{DialTimeout: Duration{DefaultFleetDialTimeout}, SessionTTL: Duration{DefaultFleetSessionTTL}}
}

// normalizeFleet gives an enabled fleet its default prefix.
func (f *Fleet) normalize() {
	if f.Enabled() && f.Prefix == "" {
		f.Prefix = DefaultFleetPrefix
	}
}

// validateFleet checks [fleet]: endpoints, prefix, instance, the TLS pair
// and the timeouts. Keys set without etcd endpoints are an error, since a
// DBA who wrote them expects a fleet.
func (c *Config) validateFleet(p *problems) {
	f := &c.Fleet
	if !f.Enabled() {
		var set []string
		for _, k := range [][2]string{{"prefix", f.Prefix}, {"instance", f.Instance}, {"etcd_ca", f.EtcdCA},
			{"etcd_cert", f.EtcdCert}, {"etcd_key", f.EtcdKey}, {"etcd_user", f.EtcdUser},
			{"etcd_password_env", f.EtcdPasswordEnv}, {"etcd_password_file", f.EtcdPasswordFile}} {
			if k[1] != "" {
				set = append(set, "fleet."+k[0])
			}
		}
		if len(set) > 0 {
			p.add("fleet.etcd: at least one etcd endpoint is required when %s is set", joinAnd(set))
		}
		return
	}
	for i, e := range f.Etcd {
		if err := checkEtcdEndpoint(e); err != nil {
			p.add("fleet.etcd: endpoint %d: %v", i+1, err)
		}
		if slices.Index(f.Etcd, e) < i {
			p.add("fleet.etcd: endpoint %q is listed twice", e)
		}
	}
	if err := checkFleetPrefix(f.Prefix); err != nil {
		p.add("fleet.prefix: %v", err)
	}
	if err := checkInstanceName(f.Instance); err != nil {
		p.add("fleet.instance: %v", err)
	}
	if (f.EtcdCert == "") != (f.EtcdKey == "") {
		p.add("fleet.etcd_cert and fleet.etcd_key must be set together")
	}
	if f.EtcdUser == "" && (f.EtcdPasswordEnv != "" || f.EtcdPasswordFile != "") {
		p.add("fleet.etcd_password_env and fleet.etcd_password_file need fleet.etcd_user")
	}
	if f.EtcdUser != "" && f.EtcdPasswordEnv == "" && f.EtcdPasswordFile == "" {
		p.add("fleet.etcd_user needs fleet.etcd_password_env or fleet.etcd_password_file")
	}
	if d := f.DialTimeout.Duration; d < 100*time.Millisecond || d > time.Minute {
		p.add("fleet.dial_timeout must be between 100ms and 1m (got %s)", f.DialTimeout)
	}
	switch ttl := f.SessionTTL.Duration; {
	case ttl < MinFleetSessionTTL || ttl > MaxFleetSessionTTL:
		p.add("fleet.session_ttl must be between %s and %s (got %s)", Duration{MinFleetSessionTTL}, Duration{MaxFleetSessionTTL}, f.SessionTTL)
	case ttl%time.Second != 0:
		p.add("fleet.session_ttl must be whole seconds: an etcd lease counts in seconds (got %s)", f.SessionTTL)
	}
}

// checkEtcdEndpoint accepts host:port, or an http or https URL with a
// host, a port and nothing else.
func checkEtcdEndpoint(e string) error {
	if !strings.Contains(e, "://") {
		return checkAddr(e, false)
	}
	u, err := url.Parse(e)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("%q is neither host:port nor an http:// or https:// URL", e)
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return fmt.Errorf("%q: an endpoint URL holds only scheme, host and port", e)
	}
	return checkAddr(u.Host, false)
}

// checkFleetPrefix wants an absolute key prefix without a trailing slash
// or empty segments: sluice appends "/members/<instance>" and the like.
func checkFleetPrefix(prefix string) error {
	switch {
	case !strings.HasPrefix(prefix, "/"):
		return fmt.Errorf("%q must start with / (\"/sluice/<fleet name>\")", prefix)
	case prefix == "/" || strings.HasSuffix(prefix, "/"):
		return fmt.Errorf("%q must not end with /", prefix)
	case strings.Contains(prefix, "//"):
		return fmt.Errorf("%q has an empty segment (//)", prefix)
	case strings.ContainsFunc(prefix, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }):
		return fmt.Errorf("%q holds a blank or control character", prefix)
	}
	return nil
}

// checkInstanceName accepts "" (the default) or a printable name without
// "/" (it is one segment of an etcd key) of at most MaxFleetInstance bytes.
func checkInstanceName(name string) error {
	switch {
	case len(name) > MaxFleetInstance:
		return fmt.Errorf("is longer than %d bytes", MaxFleetInstance)
	case strings.Contains(name, "/"):
		return fmt.Errorf("%q must not hold / (it is one segment of an etcd key)", name)
	case strings.ContainsFunc(name, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }):
		return fmt.Errorf("%q holds a blank or control character", name)
	}
	return nil
}

// resolveFleetSecret fills Fleet.EtcdPassword from etcd_password_env or
// etcd_password_file.
func (c *Config) resolveFleetSecret(src secretSource) error {
	f := &c.Fleet
	return resolveSecret("fleet.etcd_", &f.EtcdPassword, f.EtcdPasswordEnv, f.EtcdPasswordFile, src)
}

// fleet records changes of [fleet]; every one needs a restart, since the
// instance's membership and its client were built from them.
func (d *differ) fleet(old, new *Fleet) {
	if !slices.Equal(old.Etcd, new.Etcd) {
		d.add("fleet.etcd", fmt.Sprintf("%q -> %q", old.Etcd, new.Etcd), restart)
	}
	same(d, "fleet.prefix", old.Prefix, new.Prefix, restart)
	same(d, "fleet.instance", old.Instance, new.Instance, restart)
	same(d, "fleet.etcd_ca", old.EtcdCA, new.EtcdCA, restart)
	same(d, "fleet.etcd_cert", old.EtcdCert, new.EtcdCert, restart)
	same(d, "fleet.etcd_key", old.EtcdKey, new.EtcdKey, restart)
	same(d, "fleet.etcd_user", old.EtcdUser, new.EtcdUser, restart)
	secret(d, "fleet.etcd_password", old.EtcdPassword, new.EtcdPassword, restart)
	same(d, "fleet.dial_timeout", old.DialTimeout, new.DialTimeout, restart)
	same(d, "fleet.session_ttl", old.SessionTTL, new.SessionTTL, restart)
}

// describeFleet prints [fleet] for Describe; nothing when it is off.
func (f *Fleet) describe(line func(string, ...any)) {
	if !f.Enabled() {
		return
	}
	instance := f.Instance
	if instance == "" {
		instance = "(host name:listen port)"
	}
	line("fleet: etcd %s, prefix %s, instance %s, dial_timeout %s, session_ttl %s",
		strings.Join(f.Etcd, ","), f.Prefix, instance, f.DialTimeout, f.SessionTTL)
	if f.UsesTLS() {
		line("  etcd tls: ca %s, cert %s, key %s", offIfEmpty(f.EtcdCA), offIfEmpty(f.EtcdCert), offIfEmpty(f.EtcdKey))
	}
	if f.EtcdUser != "" {
		line("  etcd user %q, %s", f.EtcdUser, passwordSource("", f.EtcdPasswordEnv, f.EtcdPasswordFile))
	}
}
