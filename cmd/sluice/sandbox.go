package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluice-proxy/sluice/admin"
	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// runSandbox starts a local MariaDB topology (master, replicas, auth server),
// sluice in front of it, prints how to connect, and cleans everything up on
// Ctrl-C.
func runSandbox(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sandbox", flag.ContinueOnError)
	usageOf(fs, "sluice sandbox [-replicas N] [-listen ADDR] [-admin-listen ADDR] [-metrics-listen ADDR] [-log-level LEVEL]")
	replicas := fs.Int("replicas", 2, "number of replicas")
	listen := fs.String("listen", "127.0.0.1:6033", "sluice client listen address")
	adminListen := fs.String("admin-listen", "127.0.0.1:6032", `admin port address ("" for none)`)
	metricsListen := fs.String("metrics-listen", "127.0.0.1:6070", `metrics, health and status address ("" for none)`)
	logLevel := fs.String("log-level", "info", "log level")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 || *replicas < 0 {
		fmt.Fprintln(stderr, "sluice sandbox: takes flags only, and -replicas must be >= 0 (see sluice sandbox -h)")
		return exitUsage
	}
	// sluice's ports are checked before any server starts: a sandbox that
	// fails on a taken port after starting four servers wastes a minute.
	for _, p := range []struct{ flag, addr string }{{"-listen", *listen}, {"-admin-listen", *adminListen}, {"-metrics-listen", *metricsListen}} {
		if err := portFree(p.addr); err != nil {
			fmt.Fprintf(stderr, "sluice sandbox: %s %s: %v (choose another address with %s)\n", p.flag, p.addr, err, p.flag)
			return exitError
		}
	}
	admin.Version = version
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintln(stdout, "starting MariaDB master, replicas and auth server...")
	topo, err := sandbox.Start(ctx, sandbox.Options{Replicas: *replicas})
	if err != nil {
		fmt.Fprintln(stderr, "sluice sandbox:", err)
		return exitError
	}
	defer topo.Stop()
	// A throwaway local topology: the admin account gets a fixed password
	// so the admin port can be tried at once.
	text := topo.SluiceConfig(*listen, fmt.Sprintf("log_level = %q", *logLevel),
		fmt.Sprintf("admin_listen = %q", *adminListen), fmt.Sprintf("metrics_listen = %q", *metricsListen)) +
		fmt.Sprintf("\n[admin]\nuser = \"admin\"\npassword = %q\n", sandboxAdminPassword)
	cfg, err := conf.Parse([]byte(text))
	if err != nil {
		fmt.Fprintln(stderr, "sluice sandbox:", err)
		return exitError
	}
	log, err := newLogger(cfg.Proxy.LogLevel, true)
	if err != nil {
		fmt.Fprintln(stderr, "sluice sandbox:", err)
		return exitError
	}
	srv, err := server.New(cfg, log)
	if err == nil {
		srv.SetBuildInfo(version, buildCommit())
		err = srv.Start()
	}
	if err != nil {
		fmt.Fprintln(stderr, "sluice sandbox:", err)
		return exitError
	}
	defer srv.Close()
	host, port := splitAddr(srv.Addr().String())
	fmt.Fprintf(stdout, "\nsluice is serving on %s\n\n", srv.Addr())
	fmt.Fprintf(stdout, "  mariadb -h%s -P%s -u%s -p%s\n", host, port, topo.Opts.AppUser, topo.Opts.AppPassword)
	fmt.Fprintf(stdout, "  DSN: %s:%s@tcp(%s)/sluice_test\n", topo.Opts.AppUser, topo.Opts.AppPassword, srv.Addr())
	if a := srv.AdminAddr(); a != nil {
		ah, ap := splitAddr(a.String())
		fmt.Fprintf(stdout, "  admin: mariadb -h%s -P%s -uadmin -p%s -e 'SHOW BACKENDS'\n", ah, ap, sandboxAdminPassword)
	}
	if a := srv.MetricsAddr(); a != nil {
		fmt.Fprintf(stdout, "  status page: http://%s/\n", a)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintf(stdout, "master   %s (root over socket %s)\n", topo.Master.Addr(), topo.Master.Socket)
	for _, r := range topo.Replicas {
		fmt.Fprintf(stdout, "replica  %s\n", r.Addr())
	}
	fmt.Fprintf(stdout, "auth     %s (application users live here)\n\n", topo.Auth.Addr())
	fmt.Fprintln(stdout, "configuration in use:")
	fmt.Fprint(stdout, cfg.Describe())
	fmt.Fprintln(stdout, "\nCtrl-C stops sluice and the servers and removes their data.")
	<-ctx.Done()
	fmt.Fprintln(stdout, "stopping...")
	return exitOK
}

// sandboxAdminPassword is the admin port's password in `sluice sandbox`.
const sandboxAdminPassword = "admin"

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
