// Command sluice is the MySQL wire-protocol proxy. It only parses flags,
// picks the subcommand and wires packages together; the logic lives in
// proxy, conf, auth, router, health and sandbox.
//
//	sluice [run] -config sluice.toml   serve
//	sluice check-config [-skip-secrets] FILE  validate a configuration and print its topology
//	sluice config push|get ...         the fleet's configuration in etcd
//	sluice sandbox [-replicas N] [-fleet N]  start a local MariaDB topology with sluice (or a fleet on etcd) in front
//	sluice version                     print the version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/coreos/go-systemd/v22/daemon"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sluice-proxy/sluice/admin"
	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/server"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if len(os.Args) < 2 || !isHelp(os.Args[1]) && !isVersion(os.Args[1]) {
		cmd, _ := command(os.Args[1:])
		execWithSmallStacks(cmd)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// command splits the subcommand (run when none is named) from its
// arguments.
func command(args []string) (string, []string) {
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		return args[0], args[1:]
	}
	return "run", args
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		usage(stdout)
		return exitOK
	}
	if len(args) > 0 && isVersion(args[0]) {
		fmt.Fprintln(stdout, versionLine())
		return exitOK
	}
	cmd, args := command(args)
	switch cmd {
	case "run":
		return runProxy(args, stdout, stderr)
	case "check-config":
		return checkConfig(args, stdout, stderr)
	case "sandbox":
		// Ctrl-C (or a service manager's SIGTERM) ends the sandbox and
		// everything it started.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runSandbox(ctx, args, stdout, stderr)
	case "config":
		return configCommand(args, stdout, stderr)
	}
	fmt.Fprintf(stderr, "sluice: unknown command %q\n", cmd)
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  sluice [run] [-config sluice.toml]  serve MySQL clients
  sluice check-config FILE            validate a configuration and print its topology
                                      (every problem, one per line; -skip-secrets leaves secrets unread)
  sluice config push [-config LOCAL] FILE
                                      validate FILE as check-config does, then store it in etcd
                                      as the fleet's configuration (LOCAL's [fleet] reaches etcd)
  sluice config get [-config LOCAL]   print the fleet's configuration and its revision
  sluice sandbox [flags]              local MariaDB master, replicas and auth server with sluice in front
                                      (-fleet N: N sluices sharing a local 3-member etcd cluster)
  sluice version                      print the version, the commit and the Go version
  sluice help                         print this

Each command takes -h for its flags. Exit status: 0 done, 1 a runtime failure (a bad
configuration file, a port in use), 2 bad arguments.
`)
}

// startCPUProfile starts the runtime's CPU profiler, writing to path; the
// returned func stops it and closes the file. The profile is what
// cmd/sluice/default.pgo is made from (see bench/README.md).
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// checkConfig is `sluice check-config`: it prints the topology of a good
// file, or every problem of a bad one, one per line, and exits 1.
func checkConfig(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	usageOf(fs, "sluice check-config [-skip-secrets] FILE")
	skipSecrets := fs.Bool("skip-secrets", false,
		"do not read password_env variables and password_file files (for checking a file whose secrets exist only where it is deployed)")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	args = fs.Args()
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: sluice check-config [-skip-secrets] FILE")
		return exitUsage
	}
	if *skipSecrets {
		// Said first, so that nobody takes a pass for proof that the
		// secrets are in place.
		fmt.Fprintln(stderr, "note: -skip-secrets: password_env and password_file were not read, so secrets are not checked")
	}
	cfg, err := conf.LoadWith(args[0], conf.LoadOptions{SkipSecrets: *skipSecrets})
	if err != nil {
		fmt.Fprintln(stderr, err)
		if errors.Is(err, conf.ErrSecret) {
			fmt.Fprintln(stderr, "hint: set the variables and files the secrets name, or check the rest of the file with sluice check-config -skip-secrets")
		}
		return exitError
	}
	fmt.Fprint(stdout, cfg.Describe())
	// Unsafe but valid settings are warnings: the file still works.
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(stderr, "warning:", w)
	}
	return exitOK
}

func runProxy(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	usageOf(fs, "sluice [run] [-config sluice.toml] [-cpuprofile FILE]")
	path := fs.String("config", "sluice.toml", "configuration file")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile (pprof) of the whole run to this file")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sluice run: unexpected argument %q (flags only; see sluice run -h)\n", fs.Arg(0))
		return exitUsage
	}
	if *cpuProfile != "" {
		stopProfile, err := startCPUProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitError
		}
		// Deferred first, so it runs last: the profile covers the
		// shutdown too, and is complete when the process exits.
		defer stopProfile()
	}
	cfg, err := conf.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	level := zap.NewAtomicLevel()
	log, err := newLeveledLogger(cfg.Proxy.LogLevel, false, level)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	defer log.Sync()
	admin.Version = version
	srv, err := server.New(cfg, log)
	if err != nil {
		log.Error("cannot start", zap.Error(err))
		return exitError
	}
	srv.SetBuildInfo(version, buildCommit())
	if err := srv.Start(); err != nil {
		log.Error("cannot start", zap.Error(err))
		return exitError
	}
	fields := []zap.Field{zap.String("listen", srv.Addr().String()), zap.String("version", version)}
	if a := srv.MetricsAddr(); a != nil {
		// The bound address: a configured port 0 becomes a real one here.
		fields = append(fields, zap.String("metrics_listen", a.String()))
	}
	log.Info("sluice serving", fields...)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	// The listeners accept clients and the signal handlers are in place
	// from here on: a unit with Type=notify counts as started only now, so
	// units ordered after it find the ports open, and a reload systemd
	// sends from now on cannot find SIGHUP's default action (exit).
	notifySystemd(log, daemon.SdNotifyReady, "STATUS=serving on "+srv.Addr().String())
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case <-hup:
			notifySystemd(log, notifyReloading()...)
			status := reload(srv, level, log)
			// READY=1 ends the reload in systemd's view whether or not
			// the file was applied: a refused file leaves the running
			// configuration serving.
			notifySystemd(log, daemon.SdNotifyReady, "STATUS="+status)
		}
	}
	// Graceful: /readyz turns unready, the listener closes, work in flight
	// finishes within shutdown_timeout. A second SIGTERM or SIGINT cuts it
	// short (registered before the first handler goes, so no signal falls
	// through to the default action).
	hard, stopHard := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopHard()
	stop()
	notifySystemd(log, daemon.SdNotifyStopping, "STATUS=shutting down")
	log.Info("shutting down gracefully (a second signal stops at once)")
	if err := srv.Shutdown(hard); err != nil && !errors.Is(err, context.Canceled) {
		log.Warn("shutdown", zap.Error(err))
	}
	log.Info("sluice stopped")
	return exitOK
}

// reload applies the configuration file again (SIGHUP) and logs the
// outcome; proxy.log_level takes effect through the logger's atomic level.
// It returns a one-line status for the service manager.
func reload(srv *server.Server, level zap.AtomicLevel, log *zap.Logger) string {
	changes, err := srv.Reload()
	if err != nil {
		log.Error("SIGHUP: configuration not reloaded", zap.Error(err))
		return "serving; the last reload was refused (see the log)"
	}
	if lvl, err := zapcore.ParseLevel(srv.Config().Proxy.LogLevel); err == nil {
		level.SetLevel(lvl)
	}
	log.Info("SIGHUP: configuration reloaded", zap.Strings("changes", changes))
	return "serving; configuration reloaded"
}

// newLogger builds the process logger: JSON for servers, console text for
// the interactive sandbox.
func newLogger(level string, console bool) (*zap.Logger, error) {
	return newLeveledLogger(level, console, zap.NewAtomicLevel())
}

// newLeveledLogger is newLogger with an atomic level the caller may change
// later (a reload of proxy.log_level).
func newLeveledLogger(level string, console bool, atom zap.AtomicLevel) (*zap.Logger, error) {
	zc, err := loggerConfig(level, console, atom)
	if err != nil {
		return nil, err
	}
	return zc.Build()
}

// loggerConfig is the zap configuration of newLeveledLogger, writing to
// stderr.
func loggerConfig(level string, console bool, atom zap.AtomicLevel) (zap.Config, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return zap.Config{}, fmt.Errorf("proxy.log_level: %w", err)
	}
	atom.SetLevel(lvl)
	zc := zap.NewProductionConfig()
	if console {
		zc = zap.NewDevelopmentConfig()
	}
	// An error line says what failed and why; a Go stack trace on it (zap's
	// default at error level) tells an operator nothing and buries the
	// message, as it did on a bad reload. Panics log their own stack.
	zc.DisableStacktrace = true
	zc.Level = atom
	zc.Sampling = nil
	return zc, nil
}
