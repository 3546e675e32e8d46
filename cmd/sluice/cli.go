package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Exit statuses of every subcommand.
const (
	exitOK    = 0 // done, or help or the version asked for
	exitError = 1 // a runtime failure: a bad configuration file, a port in use, a server that failed
	exitUsage = 2 // bad arguments: an unknown subcommand or flag, a missing file name
)

// commit is the VCS revision, set at build time with -ldflags "-X
// main.commit=..."; without it the revision the Go toolchain stamped is
// used, if any.
var commit = ""

// versionLine is what `sluice version` and `sluice --version` print: the
// version, the commit and the Go version that built the binary.
func versionLine() string {
	c := commit
	if c == "" {
		c = stampedRevision()
	}
	if c == "" {
		c = "unknown"
	}
	return fmt.Sprintf("sluice %s (commit %s, %s)", version, c, runtime.Version())
}

// stampedRevision is the VCS revision go build recorded in the binary,
// with "-dirty" when the tree had changes; "" when it recorded none.
func stampedRevision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" && dirty {
		rev += "-dirty"
	}
	return rev
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// isVersion reports whether arg asks for the version.
func isVersion(arg string) bool {
	return arg == "-version" || arg == "--version" || arg == "version"
}

// parseFlags parses args with fs. Help (-h, -help, --help) prints fs's
// usage on stdout and ends the command with status 0; a bad flag prints
// the error and the usage on stderr and ends it with status 2. ok is true
// when the command goes on.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	var out bytes.Buffer
	fs.SetOutput(&out)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		_, _ = stdout.Write(out.Bytes())
		return exitOK, false
	case err != nil:
		_, _ = stderr.Write(out.Bytes())
		return exitUsage, false
	}
	fs.SetOutput(stderr)
	return exitOK, true
}

// usageOf makes fs's usage a synopsis line followed by its flags.
func usageOf(fs *flag.FlagSet, synopsis string) {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s\n", synopsis)
		fs.PrintDefaults()
	}
}
