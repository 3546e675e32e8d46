// Command image builds the OCI image of sluice without a container daemon:
// one layer holding a static sluice binary, a passwd and group file naming
// a non-root user, a writable state directory and the example
// configuration, on an empty base. `make image` builds the binary and runs
// this program; the image's config, labels and file list are described in
// docs/operations.md.
//
//	go run ./deploy/image -binary dist/image/sluice -config deploy/sluice.toml \
//	    -version v0.1.0 -revision 0123abcd -layout dist/oci -archive dist/sluice_v0.1.0_image.tar
//
// The image is reproducible: the same binary, configuration and flags give
// the same digest, because every timestamp in it is -created (the commit's
// time in `make image`).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the exit, for the tests: 0 done, 1 the build
// failed, 2 bad arguments.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var s Spec
	var created string
	fs.StringVar(&s.Binary, "binary", "", "the sluice binary to put in the image (static: CGO_ENABLED=0)")
	fs.StringVar(&s.Config, "config", "", "the configuration installed as "+ConfigPath)
	fs.StringVar(&s.Version, "version", "", "the version: the image's tag (with characters a tag cannot hold replaced by '-') and its version label")
	fs.StringVar(&s.Revision, "revision", "", "the commit the binary was built from (revision label)")
	fs.StringVar(&s.Source, "source", DefaultSource, "where the source lives (source label)")
	fs.StringVar(&s.Repository, "repository", DefaultRepository, "the repository part of the image's name in -archive")
	fs.StringVar(&created, "created", "", "the image's creation time and every file's mtime, RFC 3339 (empty: the Unix epoch)")
	layoutDir := fs.String("layout", "", "write an OCI image layout to this directory (replaced if it holds one)")
	archive := fs.String("archive", "", "write a docker-archive tarball, which `podman load` and `docker load` read, to this file")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || s.Binary == "" || s.Config == "" || s.Version == "" || *layoutDir == "" && *archive == "" {
		fmt.Fprintln(stderr, "usage: image -binary FILE -config FILE -version V [-revision C] [-created TIME] -layout DIR | -archive FILE")
		return 2
	}
	if created != "" {
		t, err := time.Parse(time.RFC3339, created)
		if err != nil {
			fmt.Fprintf(stderr, "image: -created: %v\n", err)
			return 2
		}
		s.Created = t
	}
	img, err := Build(s)
	if err != nil {
		fmt.Fprintf(stderr, "image: %v\n", err)
		return 1
	}
	digest, err := img.Digest()
	if err != nil {
		fmt.Fprintf(stderr, "image: %v\n", err)
		return 1
	}
	if *layoutDir != "" {
		if err := WriteLayout(*layoutDir, img, s.Version); err != nil {
			fmt.Fprintf(stderr, "image: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "image %s: OCI layout %s\n", digest, *layoutDir)
	}
	if *archive != "" {
		ref, err := WriteArchive(*archive, img, s.Repository, s.Version)
		if err != nil {
			fmt.Fprintf(stderr, "image: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "image %s: %s in %s\n", digest, ref, *archive)
	}
	return 0
}
