// Command deb builds sluice's Debian package with nfpm, used as a library:
// `make package` builds the two binaries with the version stamped, then runs
//
//	go run ./deploy/deb -version $(VERSION) -commit $(COMMIT) -count N -epoch SECONDS -bin DIR -out dist
//
// and prints the path of dist/sluice_<debian version>_amd64.deb. The file
// list is below (contents); the unit files and the example configuration
// come from deploy/, the maintainer scripts from deploy/deb/scripts.
// package_test.go installs, checks and purges the result.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the "deb" packager
	"github.com/goreleaser/nfpm/v2/files"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "deb:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("deb", flag.ContinueOnError)
	version := fs.String("version", "", "the version the binaries carry (git describe --tags --always --dirty)")
	commit := fs.String("commit", "", "the commit the binaries were built from")
	count := fs.Int("count", 0, "how many commits lead to the commit (git rev-list --count HEAD): orders untagged versions of one day")
	epoch := fs.Int64("epoch", 0, "the commit's time in Unix seconds: the files' time in the package, and the date in an untagged version")
	bin := fs.String("bin", "", "directory holding the built sluice and sluice-agent")
	out := fs.String("out", "dist", "directory to write the package to")
	root := fs.String("root", ".", "the repository's top directory (where deploy/ is)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *commit == "" || *epoch <= 0 || *bin == "" {
		return errors.New("-commit, -epoch and -bin are required")
	}
	mtime := time.Unix(*epoch, 0).UTC()
	debVersion, err := debianVersion(*version, *commit, *count, mtime)
	if err != nil {
		return err
	}
	path, err := build(debVersion, mtime, *bin, *root, *out)
	if err != nil {
		return err
	}
	fmt.Println(path)
	return nil
}

// releaseTag is a git describe output that starts at a release tag:
// v1.2.3 (or 1.2.3, or v1.2.0-rc1), optionally followed by -N-gHASH (N
// commits after the tag); -dirty is taken off before matching.
var releaseTag = regexp.MustCompile(`^v?([0-9][0-9A-Za-z.]*)(-[0-9A-Za-z.]+)?(?:-([0-9]+)-g([0-9a-f]+))?$`)

// debianVersion turns the binaries' version (git describe --tags --always
// --dirty) into a Debian version, which must start with a digit and sort
// the way the releases do:
//
//	v1.2.3               1.2.3
//	v1.2.3-rc1           1.2.3~rc1              (before 1.2.3)
//	v1.2.3-4-gabc1234    1.2.3+4.gabc1234       (after 1.2.3, before 1.2.4)
//	anything without a release tag (a bare commit, "dev")
//	                     0.0.0~git20261203.512.gabc1234
//	                     (the commit's date, its commit count, its hash)
//
// The commit count (git rev-list --count HEAD) stands before the hash so
// that a later commit of the same day sorts higher; the hash alone would
// order them at random.
// A tree with uncommitted changes adds ".dirty" to the part after + or ~
// (or "+dirty"), so such a package is never mistaken for the commit's.
func debianVersion(describe, commit string, count int, when time.Time) (string, error) {
	describe, dirty := strings.CutSuffix(describe, "-dirty")
	var v string
	if m := releaseTag.FindStringSubmatch(describe); m != nil && !looksLikeHash(describe) {
		v = m[1]
		if m[2] != "" {
			v += "~" + m[2][1:]
		}
		if m[3] != "" {
			v += "+" + m[3] + ".g" + m[4]
		}
	} else {
		if !regexp.MustCompile(`^[0-9a-f]{4,40}$`).MatchString(commit) {
			return "", fmt.Errorf("no release tag in version %q and commit %q is not a commit hash", describe, commit)
		}
		if count <= 0 {
			return "", fmt.Errorf("no release tag in version %q and no commit count (-count)", describe)
		}
		v = "0.0.0~git" + when.Format("20060102") + "." + strconv.Itoa(count) + ".g" + commit
	}
	if dirty {
		if strings.ContainsAny(v, "+~") {
			v += ".dirty"
		} else {
			v += "+dirty"
		}
	}
	return v, nil
}

// looksLikeHash reports whether describe is what git describe --always
// prints without a tag: an abbreviated commit hash, which
// may start with a digit but is no release.
func looksLikeHash(describe string) bool {
	h := describe
	if len(h) < 7 {
		return false
	}
	_, err := strconv.ParseUint(h, 16, 64)
	return err == nil && !strings.Contains(h, ".")
}

// contents lists the package's files: the two binaries, the example
// configuration as a conffile (dpkg keeps an edited one on upgrade and
// removes it on purge), the unit files, and the README and the licence
// (Debian's copyright file) as documentation.
func contents(bin, root string) files.Contents {
	file := func(src, dst string, mode os.FileMode) *files.Content {
		return &files.Content{Source: src, Destination: dst, FileInfo: &files.ContentFileInfo{Mode: mode}}
	}
	conf := file(filepath.Join(root, "deploy/sluice.toml"), "/etc/sluice/sluice.toml", 0o644)
	conf.Type = files.TypeConfig
	return files.Contents{
		file(filepath.Join(bin, "sluice"), "/usr/bin/sluice", 0o755),
		file(filepath.Join(bin, "sluice-agent"), "/usr/bin/sluice-agent", 0o755),
		conf,
		file(filepath.Join(root, "deploy/systemd/sluice.service"), "/lib/systemd/system/sluice.service", 0o644),
		file(filepath.Join(root, "deploy/systemd/sluice-agent.service"), "/lib/systemd/system/sluice-agent.service", 0o644),
		file(filepath.Join(root, "README.md"), "/usr/share/doc/sluice/README.md", 0o644),
		file(filepath.Join(root, "LICENSE"), "/usr/share/doc/sluice/copyright", 0o644),
		file(filepath.Join(root, "CHANGELOG.md"), "/usr/share/doc/sluice/CHANGELOG.md", 0o644),
	}
}

// maintainer is the package's Maintainer field. package_test.go knows a
// package it may purge by it.
const maintainer = "sluice maintainers <maintainers@sluice-proxy.invalid>"

// build writes the package for version into out and returns its path.
func build(version string, mtime time.Time, bin, root, out string) (string, error) {
	scripts := filepath.Join(root, "deploy/deb/scripts")
	info := nfpm.WithDefaults(&nfpm.Info{
		Name:          "sluice",
		Arch:          "amd64",
		Platform:      "linux",
		Version:       version,
		VersionSchema: "none", // already a Debian version; nfpm must not reparse it as semver
		Section:       "database",
		Priority:      "optional",
		Maintainer:    maintainer,
		Description: "MySQL wire-protocol proxy\n" +
			"sluice sends writes to the master and reads to the least-loaded healthy\n" +
			"replica, shards tables by key and promotes a replica when the master dies.\n" +
			"This package holds sluice, sluice-agent and their systemd units.",
		License: "Apache-2.0",
		MTime:   mtime,
		Overridables: nfpm.Overridables{
			Contents: contents(bin, root),
			Scripts: nfpm.Scripts{
				PostInstall: filepath.Join(scripts, "postinst"),
				PreRemove:   filepath.Join(scripts, "prerm"),
				PostRemove:  filepath.Join(scripts, "postrm"),
			},
		},
	})
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return "", fmt.Errorf("package contents: %w", err)
	}
	pkg, err := nfpm.Get("deb")
	if err != nil {
		return "", fmt.Errorf("nfpm: %w", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", fmt.Errorf("output directory: %w", err)
	}
	path := filepath.Join(out, pkg.ConventionalFileName(info))
	f, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("package file: %w", err)
	}
	if err := pkg.Package(info, f); err != nil {
		f.Close()
		os.Remove(path)
		return "", fmt.Errorf("building %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}
