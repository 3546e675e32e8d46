package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/fleet"
)

// configCommand is `sluice config push|get`: the fleet's configuration in
// etcd, reached through the [fleet] table of the local file (-config).
func configCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || isHelp(args[0]) {
		w := stderr
		if len(args) > 0 {
			w = stdout
		}
		fmt.Fprint(w, configUsage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	switch args[0] {
	case "push":
		return configPush(args[1:], stdout, stderr)
	case "get":
		return configGet(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "sluice config: unknown command %q\n", args[0])
	fmt.Fprint(stderr, configUsage)
	return exitUsage
}

const configUsage = `usage:
  sluice config push [-config sluice.toml] [-skip-secrets] FILE
        validate FILE as check-config does and store it as the fleet's configuration
  sluice config get [-config sluice.toml]
        print the fleet's configuration and its revision
-config names the local file whose [fleet] table says how to reach etcd.
`

// fleetOf loads the local file at path and returns its [fleet] table, an
// error when it names no etcd endpoints.
func fleetOf(path string) (*conf.Fleet, error) {
	cfg, err := conf.Load(path)
	if err != nil {
		return nil, err
	}
	if !cfg.Fleet.Enabled() {
		return nil, fmt.Errorf("%s: [fleet] names no etcd endpoints; config push and get need one", path)
	}
	return &cfg.Fleet, nil
}

// configPush is `sluice config push`: FILE is checked first and nothing is
// stored when it has a problem (exit 1, check-config's messages).
func configPush(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("config push", flag.ContinueOnError)
	usageOf(fs, "sluice config push [-config sluice.toml] [-skip-secrets] FILE")
	local := fs.String("config", "sluice.toml", "local configuration file whose [fleet] table reaches etcd")
	skipSecrets := fs.Bool("skip-secrets", false,
		"check FILE without reading its password_env variables and password_file files (each instance reads them when it applies FILE)")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: sluice config push [-config sluice.toml] [-skip-secrets] FILE")
		return exitUsage
	}
	text, err := fleet.CheckConfigFile(fs.Arg(0), *skipSecrets)
	if err != nil {
		fmt.Fprintln(stderr, err)
		fmt.Fprintln(stderr, "sluice config push: nothing stored")
		return exitError
	}
	return onEtcd(*local, stderr, func(ctx context.Context, c *clientv3.Client, fc *conf.Fleet) int {
		rev, err := fleet.PushConfig(ctx, c, fc.Prefix, text)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitError
		}
		fmt.Fprintf(stdout, "stored %s as %s, revision %d\n", fs.Arg(0), fleet.ConfigKey(fc.Prefix), rev)
		return exitOK
	})
}

// configGet is `sluice config get`: the revision on a comment line, then
// the text as pushed.
func configGet(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("config get", flag.ContinueOnError)
	usageOf(fs, "sluice config get [-config sluice.toml]")
	local := fs.String("config", "sluice.toml", "local configuration file whose [fleet] table reaches etcd")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "sluice config get: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	return onEtcd(*local, stderr, func(ctx context.Context, c *clientv3.Client, fc *conf.Fleet) int {
		text, rev, err := fleet.GetConfig(ctx, c, fc.Prefix)
		if errors.Is(err, fleet.ErrNoConfig) {
			fmt.Fprintf(stderr, "sluice config get: nothing stored under %s\n", fleet.ConfigKey(fc.Prefix))
			return exitError
		}
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitError
		}
		fmt.Fprintf(stdout, "# revision %d of %s\n", rev, fleet.ConfigKey(fc.Prefix))
		_, _ = stdout.Write(text)
		return exitOK
	})
}

// onEtcd connects to the etcd cluster that the [fleet] table of the local
// file names and runs f with a context bounded by its dial timeout; what
// fails before f is printed to stderr.
func onEtcd(local string, stderr io.Writer, f func(ctx context.Context, c *clientv3.Client, fc *conf.Fleet) int) int {
	fc, err := fleetOf(local)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	c, err := fleet.Dial(fc)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), fc.DialTimeout.Duration+5*time.Second)
	defer cancel()
	return f(ctx, c, fc)
}
