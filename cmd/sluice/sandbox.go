package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/admin"
	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// sandboxAdminPassword is the admin port's password in `sluice sandbox`.
const sandboxAdminPassword = "admin"

// sandboxFleetPrefix is the etcd prefix of the sandbox's fleet.
const sandboxFleetPrefix = "/sluice/sandbox"

// sandboxFleetAdminListen is -admin-listen's default with -fleet: the
// plain default (6032) would be sluice2's data port (6033 + 1).
const sandboxFleetAdminListen = "127.0.0.1:7032"

// sandboxFlags are the parsed flags of `sluice sandbox`.
type sandboxFlags struct {
	replicas, fleet                              int
	listen, adminListen, metricsListen, logLevel string
}

// sandboxAddrs are one in-process sluice's addresses; "" is a listener
// switched off, port 0 one the system picks.
type sandboxAddrs struct {
	name                   string // "sluice1".. with -fleet, "sluice" without
	listen, admin, metrics string
}

// sandboxRun is one `sluice sandbox`: what it started and must stop. It is
// owned by runSandbox's goroutine.
type sandboxRun struct {
	flags  sandboxFlags
	topo   *sandbox.Topology
	etcd   *sandbox.EtcdCluster
	dir    string // with -fleet: each sluice's file and the fleet's shared one
	srvs   []*server.Server
	addrs  []sandboxAddrs
	config *conf.Config // the first sluice's, for the printout
}

// runSandbox starts a local MariaDB topology (master, replicas, auth server)
// and sluice in front of it, or with -fleet N a 3-member etcd cluster and N
// sluices sharing it, prints how to connect, and stops and removes
// everything when ctx ends (Ctrl-C: run's caller cancels it on SIGINT and
// SIGTERM). It returns the exit status: 1 also when something did not stop
// cleanly.
func runSandbox(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	f, code, ok := parseSandboxFlags(args, stdout, stderr)
	if !ok {
		return code
	}
	addrs, err := f.instances()
	if err != nil {
		fmt.Fprintln(stderr, "sluice sandbox:", err)
		return exitUsage
	}
	// sluice's ports are checked before any server starts: a sandbox that
	// fails on a taken port after starting four servers wastes a minute.
	if !portsFree(addrs, stderr) {
		return exitError
	}
	if f.fleet > 0 {
		if _, err := sandbox.FindEtcdBinary(); err != nil {
			fmt.Fprintf(stderr, "sluice sandbox: -fleet needs etcd: %v\n", err)
			return exitError
		}
	}
	admin.Version = version
	sb := &sandboxRun{flags: f, addrs: addrs}
	defer func() {
		if err := sb.stop(); err != nil {
			fmt.Fprintln(stderr, "sluice sandbox: stopping:", err)
			code = exitError
		}
	}()
	if err := sb.start(ctx, stdout); err != nil {
		fmt.Fprintln(stderr, "sluice sandbox:", err)
		return exitError
	}
	sb.print(stdout)
	<-ctx.Done()
	fmt.Fprintln(stdout, "stopping...")
	return exitOK
}

// parseSandboxFlags parses the flags of `sluice sandbox`; ok is false when
// the command ends with code (help, a bad flag, a bad value).
func parseSandboxFlags(args []string, stdout, stderr io.Writer) (f sandboxFlags, code int, ok bool) {
	fs := flag.NewFlagSet("sandbox", flag.ContinueOnError)
	usageOf(fs, "sluice sandbox [-replicas N] [-fleet N] [-listen ADDR] [-admin-listen ADDR] [-metrics-listen ADDR] [-log-level LEVEL]")
	fs.IntVar(&f.replicas, "replicas", 2, "number of replicas")
	fs.IntVar(&f.fleet, "fleet", 0, "start a 3-member etcd cluster and this many sluices sharing it as a fleet; sluice i listens on\nthe -listen, -admin-listen and -metrics-listen ports plus i-1 (0: one sluice, no etcd)")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:6033", "sluice client listen address")
	fs.StringVar(&f.adminListen, "admin-listen", "127.0.0.1:6032", `admin port address ("" for none; `+sandboxFleetAdminListen+" with -fleet)")
	fs.StringVar(&f.metricsListen, "metrics-listen", "127.0.0.1:6070", `metrics, health and status address ("" for none)`)
	fs.StringVar(&f.logLevel, "log-level", "info", "log level")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return f, code, false
	}
	if fs.NArg() > 0 || f.replicas < 0 || f.fleet < 0 {
		fmt.Fprintln(stderr, "sluice sandbox: takes flags only, and -replicas and -fleet must be >= 0 (see sluice sandbox -h)")
		return f, exitUsage, false
	}
	adminSet := false
	fs.Visit(func(fl *flag.Flag) { adminSet = adminSet || fl.Name == "admin-listen" })
	if f.fleet > 0 && !adminSet {
		f.adminListen = sandboxFleetAdminListen
	}
	return f, exitOK, true
}

// instances are the addresses of every sluice the flags ask for: one
// without -fleet, else N whose ports count up from the flags' (a port 0
// stays 0). An address past port 65535, or a port two listeners would
// share, is an error naming the flags.
func (f sandboxFlags) instances() ([]sandboxAddrs, error) {
	if f.fleet == 0 {
		return []sandboxAddrs{{name: "sluice", listen: f.listen, admin: f.adminListen, metrics: f.metricsListen}}, nil
	}
	out := make([]sandboxAddrs, f.fleet)
	owner := map[string]string{} // port -> "sluiceI's <flag>"
	for i := range out {
		a := &out[i]
		a.name = fmt.Sprintf("sluice%d", i+1)
		for _, p := range []struct {
			flag, base string
			dst        *string
		}{{"-listen", f.listen, &a.listen}, {"-admin-listen", f.adminListen, &a.admin}, {"-metrics-listen", f.metricsListen, &a.metrics}} {
			addr, err := offsetPort(p.base, i)
			if err != nil {
				return nil, fmt.Errorf("-fleet %d: %s %s: %v", f.fleet, p.flag, p.base, err)
			}
			*p.dst = addr
			if _, port := splitAddr(addr); addr != "" && port != "0" {
				who := a.name + "'s " + p.flag
				if prev, taken := owner[port]; taken {
					return nil, fmt.Errorf("-fleet %d: port %s would be both %s and %s; choose -listen, -admin-listen and -metrics-listen at least %d ports apart",
						f.fleet, port, prev, who, f.fleet)
				}
				owner[port] = who
			}
		}
	}
	return out, nil
}

// offsetPort is addr with its port raised by n; "" and port 0 stay as
// they are.
func offsetPort(addr string, n int) (string, error) {
	if addr == "" {
		return "", nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return "", fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	if p == 0 {
		return addr, nil
	}
	if p+n > 65535 {
		return "", fmt.Errorf("port %d + %d is past 65535", p, n)
	}
	return net.JoinHostPort(host, strconv.Itoa(p+n)), nil
}

// portsFree checks every address of addrs and prints each taken one with
// the flag to change; it reports whether all are free.
func portsFree(addrs []sandboxAddrs, stderr io.Writer) bool {
	ok := true
	for _, a := range addrs {
		for _, p := range []struct{ flag, addr string }{{"-listen", a.listen}, {"-admin-listen", a.admin}, {"-metrics-listen", a.metrics}} {
			if err := portFree(p.addr); err != nil {
				who := ""
				if len(addrs) > 1 {
					who = a.name + "'s "
				}
				fmt.Fprintf(stderr, "sluice sandbox: %s%s %s: %v (choose another address with %s)\n", who, p.flag, p.addr, err, p.flag)
				ok = false
			}
		}
	}
	return ok
}

// start starts the servers, etcd with -fleet, and the sluices, keeping
// what it started in sb for stop, also on error.
func (sb *sandboxRun) start(ctx context.Context, stdout io.Writer) error {
	fmt.Fprintln(stdout, "starting MariaDB master, replicas and auth server...")
	topo, err := sandbox.Start(ctx, sandbox.Options{Replicas: sb.flags.replicas})
	if err != nil {
		return err
	}
	sb.topo = topo
	if sb.flags.fleet > 0 {
		fmt.Fprintln(stdout, "starting a 3-member etcd cluster...")
		if sb.etcd, err = sandbox.StartEtcd(ctx, sandbox.EtcdOptions{Members: 3}); err != nil {
			return err
		}
		if sb.dir, err = os.MkdirTemp("", "sluice-sandbox-fleet-*"); err != nil {
			return err
		}
		if err := os.WriteFile(sb.sharedFile(), []byte(sb.sharedConfig()), 0o600); err != nil {
			return err
		}
	}
	log, err := newLogger(sb.flags.logLevel, true)
	if err != nil {
		return err
	}
	for _, a := range sb.addrs {
		cfg, err := sb.configure(a)
		if err != nil {
			return err
		}
		l := log
		if sb.flags.fleet > 0 {
			l = log.With(zap.String("sluice", a.name))
		}
		srv, err := server.New(cfg, l)
		if err != nil {
			return fmt.Errorf("%s: %w", a.name, err)
		}
		srv.SetBuildInfo(version, buildCommit())
		if err := srv.Start(); err != nil {
			_ = srv.Close() // what Start opened before it failed
			return fmt.Errorf("%s: %w", a.name, err)
		}
		sb.srvs = append(sb.srvs, srv)
		if sb.config == nil {
			sb.config = cfg
		}
	}
	return nil
}

// configure builds the configuration of the sluice on a: in front of the
// topology, with the admin account, and with -fleet the [fleet] table
// naming it, written to its own file (so that RELOAD CONFIG and a pushed
// configuration find it) and loaded from there.
func (sb *sandboxRun) configure(a sandboxAddrs) (*conf.Config, error) {
	// A throwaway local topology: the admin account gets a fixed password
	// so the admin port can be tried at once.
	text := sb.topo.SluiceConfig(a.listen, fmt.Sprintf("log_level = %q", sb.flags.logLevel),
		fmt.Sprintf("admin_listen = %q", a.admin), fmt.Sprintf("metrics_listen = %q", a.metrics)) +
		fmt.Sprintf("\n[admin]\nuser = \"admin\"\npassword = %q\n", sandboxAdminPassword)
	if sb.flags.fleet == 0 {
		return conf.Parse([]byte(text))
	}
	// A short lease: an instance that is gone leaves SHOW FLEET within
	// seconds, which is what one wants to watch in a sandbox.
	text += fmt.Sprintf("\n[fleet]\netcd = [%s]\nprefix = %q\ninstance = %q\nsession_ttl = \"2s\"\n",
		quoteAll(sb.etcd.Endpoints()), sandboxFleetPrefix, a.name)
	path := sb.instanceFile(a.name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return nil, err
	}
	return conf.Load(path)
}

// sharedConfig is the fleet's configuration as `sluice config push` would
// store it: the topology without any instance's ports, admin account or
// [fleet] (each sluice keeps its own file's for those).
func (sb *sandboxRun) sharedConfig() string {
	return "# The sandbox fleet's shared configuration. Edit it (a replica's weight, a rule) and push it\n" +
		"# with the command `sluice sandbox` printed; every sluice applies it over its own file's\n" +
		"# listen addresses, [admin] and [fleet].\n" + sb.topo.SluiceConfig(sb.addrs[0].listen)
}

func (sb *sandboxRun) sharedFile() string { return filepath.Join(sb.dir, "fleet.toml") }

func (sb *sandboxRun) instanceFile(name string) string { return filepath.Join(sb.dir, name+".toml") }

// quoteAll is ss as the items of a TOML array of strings.
func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// print tells how to reach every sluice, the servers and, with -fleet,
// etcd and the fleet's commands.
func (sb *sandboxRun) print(w io.Writer) {
	o := sb.topo.Opts
	if sb.flags.fleet == 0 {
		fmt.Fprintf(w, "\nsluice is serving on %s\n\n", sb.srvs[0].Addr())
	} else {
		fmt.Fprintf(w, "\n%d sluices are serving as one fleet\n", len(sb.srvs))
	}
	for i, srv := range sb.srvs {
		if sb.flags.fleet > 0 {
			fmt.Fprintf(w, "\n%s  data %s  admin %s  metrics %s\n", sb.addrs[i].name, srv.Addr(), addrOrOff(srv.AdminAddr()), addrOrOff(srv.MetricsAddr()))
		}
		host, port := splitAddr(srv.Addr().String())
		fmt.Fprintf(w, "  mariadb -h%s -P%s -u%s -p%s\n", host, port, o.AppUser, o.AppPassword)
		fmt.Fprintf(w, "  DSN: %s:%s@tcp(%s)/sluice_test\n", o.AppUser, o.AppPassword, srv.Addr())
		if a := srv.AdminAddr(); a != nil {
			ah, ap := splitAddr(a.String())
			show := "SHOW BACKENDS"
			if sb.flags.fleet > 0 {
				show = "SHOW FLEET"
			}
			fmt.Fprintf(w, "  admin: mariadb -h%s -P%s -uadmin -p%s -e '%s'\n", ah, ap, sandboxAdminPassword, show)
		}
		if a := srv.MetricsAddr(); a != nil {
			fmt.Fprintf(w, "  status page: http://%s/\n", a)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "master   %s (root over socket %s)\n", sb.topo.Master.Addr(), sb.topo.Master.Socket)
	for _, r := range sb.topo.Replicas {
		fmt.Fprintf(w, "replica  %s\n", r.Addr())
	}
	fmt.Fprintf(w, "auth     %s (application users live here)\n", sb.topo.Auth.Addr())
	if sb.etcd != nil {
		fmt.Fprintf(w, "etcd     %s (the fleet's keys under %s)\n\n", strings.Join(sb.etcd.Endpoints(), ", "), sandboxFleetPrefix)
		fmt.Fprintf(w, "each sluice's file is %s; the fleet's shared configuration is %s.\n",
			sb.instanceFile("sluiceN"), sb.sharedFile())
		fmt.Fprintln(w, "Edit the shared one and push it to every sluice:")
		fmt.Fprintf(w, "  sluice config push -config %s %s\n", sb.instanceFile(sb.addrs[0].name), sb.sharedFile())
		fmt.Fprintf(w, "  sluice config get -config %s\n", sb.instanceFile(sb.addrs[0].name))
	}
	fmt.Fprintln(w)
	if sb.flags.fleet == 0 {
		fmt.Fprintln(w, "configuration in use:")
	} else {
		fmt.Fprintf(w, "configuration in use (%s's; the others differ in their ports and instance name):\n", sb.addrs[0].name)
	}
	fmt.Fprint(w, sb.config.Describe())
	fmt.Fprintln(w, "\nCtrl-C stops sluice and the servers and removes their data.")
}

// addrOrOff is a's text, or "off" for a listener switched off.
func addrOrOff(a net.Addr) string {
	if a == nil {
		return "off"
	}
	return a.String()
}

// stop closes the sluices (each leaves the fleet as it goes), then stops
// etcd and the servers and removes the files; it returns what did not go
// cleanly.
func (sb *sandboxRun) stop() error {
	var errs []error
	for i, srv := range sb.srvs {
		if err := srv.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", sb.addrs[i].name, err))
		}
	}
	if sb.etcd != nil {
		errs = append(errs, sb.etcd.Stop())
	}
	if sb.topo != nil {
		errs = append(errs, sb.topo.Stop())
	}
	if sb.dir != "" {
		errs = append(errs, os.RemoveAll(sb.dir))
	}
	return errors.Join(errs...)
}

// portFree reports an error when addr ("" or port 0: nothing to check)
// cannot be listened on now.
func portFree(addr string) error {
	if addr == "" {
		return nil
	}
	if _, port := splitAddr(addr); port == "0" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		var se *os.SyscallError
		if errors.As(err, &se) {
			return se.Err
		}
		return err
	}
	return ln.Close()
}

func splitAddr(a string) (string, string) {
	for i := len(a) - 1; i >= 0; i-- {
		if a[i] == ':' {
			return a[:i], a[i+1:]
		}
	}
	return a, ""
}
