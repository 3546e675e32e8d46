// Command sluice-agent is a tiny HTTP daemon for a database host: it serves
// the host's load averages (1, 5 and 15 minutes) and CPU count as JSON on
// GET /loadavg, for sluice's least-load balancer. It only parses flags and
// wires health/loadavg's handler to a listener.
//
//	sluice-agent -listen 127.0.0.1:9107 -loadavg /proc/loadavg
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/sluice-proxy/sluice/health/loadavg"
)

// version and commit are set at build time with -ldflags "-X
// main.version=... -X main.commit=..." (make build, make package), as for
// sluice.
var (
	version = "dev"
	commit  = "unknown"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run serves until SIGINT or SIGTERM; it returns the exit status.
func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("sluice-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:9107", "host:port to serve GET /loadavg on")
	path := fs.String("loadavg", "/proc/loadavg", "file to read the load averages from, in /proc/loadavg format")
	cpus := fs.Int("cpus", 0, "CPU count to report; 0 reports the host's (runtime.NumCPU)")
	showVersion := fs.Bool("version", false, "print the version, the commit and the Go version, and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *showVersion {
		fmt.Fprintf(stderr, "sluice-agent %s (commit %s, %s)\n", version, commit, runtime.Version())
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sluice-agent: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *cpus < 0 {
		fmt.Fprintf(stderr, "sluice-agent: -cpus must be >= 0 (got %d)\n", *cpus)
		return 2
	}
	n := *cpus
	if n == 0 {
		n = runtime.NumCPU()
	}
	// A file that cannot be read now is worth saying at once; the agent
	// still starts, and answers 500 until the file is readable.
	if _, _, _, err := loadavg.ReadFile(*path); err != nil {
		fmt.Fprintf(stderr, "sluice-agent: warning: %v\n", err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "sluice-agent: %v\n", err)
		return 1
	}
	// Signals are caught before the agent says it serves.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stderr, "sluice-agent: serving http://%s%s from %s, cpus %d\n", ln.Addr(), loadavg.Path, *path, n)
	hs := &http.Server{
		Handler:           loadavg.Handler(*path, n),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		fmt.Fprintf(stderr, "sluice-agent: %v\n", err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "sluice-agent: shutdown: %v\n", err)
		return 1
	}
	return 0
}
