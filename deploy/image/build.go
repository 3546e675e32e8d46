package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Where things live in the image, and who runs sluice there.
const (
	BinaryPath = "/usr/bin/sluice"
	ConfigPath = "/etc/sluice/sluice.toml"
	// StateDir is the one directory the sluice user may write: what
	// [proxy] state_dir names in a containerised configuration, with a
	// volume mounted on it so the failover state outlives the container.
	StateDir = "/var/lib/sluice"
	// UID and GID are numeric in the image's User so that a runtime (and
	// a Kubernetes runAsNonRoot check) sees a non-root user without
	// reading /etc/passwd. 65532 is the conventional "nonroot" id of
	// minimal images, clear of the ids host distributions hand out.
	UID, GID = 65532, 65532
	UserName = "sluice"

	DefaultSource     = "https://github.com/sluice-proxy/sluice"
	DefaultRepository = "localhost/sluice"
)

// ExposedPorts are sluice's default client, admin and metrics ports.
var ExposedPorts = []string{"6033/tcp", "6032/tcp", "6070/tcp"}

// Spec is what Build puts into the image.
type Spec struct {
	Binary, Config string // files on this machine
	Version        string // the tag (see Tag) and the version label
	Revision       string // the commit, for the revision label
	Source         string // the source label
	Repository     string // the image name's repository, for WriteArchive
	// Created is the image's creation time and every file's mtime; the
	// zero value means the Unix epoch. A fixed time makes the build
	// reproducible.
	Created time.Time
}

// Build assembles the image from s. It refuses a binary that is not a
// static Linux executable: the image has no C library for a dynamic one to
// load, and it would fail only when run.
func Build(s Spec) (v1.Image, error) {
	if s.Created.IsZero() {
		s.Created = time.Unix(0, 0)
	}
	s.Created = s.Created.UTC()
	arch, err := staticArch(s.Binary)
	if err != nil {
		return nil, err
	}
	rootfs, err := rootFS(s)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(rootfs)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	base, err = mutate.ConfigFile(base, &v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		Config:       config(s),
	})
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: s.Created},
			CreatedBy: "deploy/image: static sluice binary, passwd and group, state dir, example configuration",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	img, err = mutate.CreatedAt(img, v1.Time{Time: s.Created})
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	return img, nil
}

// config is the image's run configuration.
func config(s Spec) v1.Config {
	ports := map[string]struct{}{}
	for _, p := range ExposedPorts {
		ports[p] = struct{}{}
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "sluice",
		"org.opencontainers.image.description": "MySQL wire-protocol proxy: read/write split, sharding, failover",
		"org.opencontainers.image.version":     s.Version,
		"org.opencontainers.image.revision":    s.Revision,
		"org.opencontainers.image.source":      s.Source,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.created":     s.Created.Format(time.RFC3339),
	}
	return v1.Config{
		// The configuration is a fixed path so that running the image is
		// mounting a file on it; another command is --entrypoint's job.
		Entrypoint:   []string{BinaryPath, "run", "-config", ConfigPath},
		User:         strconv.Itoa(UID) + ":" + strconv.Itoa(GID),
		WorkingDir:   StateDir,
		Env:          []string{"PATH=/usr/bin"},
		ExposedPorts: ports,
		Labels:       labels,
		// sluice drains its sessions on SIGTERM (shutdown_timeout); a
		// runtime's stop timeout should be longer than that.
		StopSignal: "SIGTERM",
	}
}

// staticArch returns the GOARCH of a static Linux executable, or an error
// naming why path is not one.
func staticArch(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("binary %s: %w", path, err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return "", fmt.Errorf("binary %s: not an executable (%v)", path, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("binary %s is dynamically linked (it names an ELF interpreter): build it with CGO_ENABLED=0", path)
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return "", fmt.Errorf("binary %s: %w", path, err)
	}
	if len(libs) > 0 {
		return "", fmt.Errorf("binary %s needs shared libraries %v: build it with CGO_ENABLED=0", path, libs)
	}
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	}
	return "", fmt.Errorf("binary %s: machine %v is not one the image is built for (amd64, arm64)", path, f.Machine)
}

// entry is one file or directory of the image's only layer.
type entry struct {
	path     string // without the leading slash, as layers name files
	mode     int64  // permission bits (and sticky)
	uid, gid int
	body     []byte // nil for a directory
}

// rootFS returns the layer as an uncompressed tar. The entries are in a
// fixed order with fixed owners and times, so the same inputs give the
// same bytes.
func rootFS(s Spec) ([]byte, error) {
	binary, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, fmt.Errorf("binary: %w", err)
	}
	cfg, err := os.ReadFile(s.Config)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:sluice:%s:/sbin/nologin\n", UserName, UID, GID, StateDir)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", UserName, GID)
	entries := []entry{
		{path: "etc/", mode: 0o755},
		{path: "etc/group", mode: 0o644, body: []byte(group)},
		// Without this file Go's resolver asks DNS before /etc/hosts;
		// with it, names a runtime writes into /etc/hosts (--add-host,
		// a pod's hosts) win, as on a distribution.
		{path: "etc/nsswitch.conf", mode: 0o644, body: []byte("hosts: files dns\n")},
		{path: "etc/passwd", mode: 0o644, body: []byte(passwd)},
		{path: "etc/sluice/", mode: 0o755},
		{path: ConfigPath[1:], mode: 0o644, body: cfg},
		// Go's os.TempDir and a CPU profile's usual place.
		{path: "tmp/", mode: 0o1777},
		{path: "usr/", mode: 0o755},
		{path: "usr/bin/", mode: 0o755},
		{path: BinaryPath[1:], mode: 0o755, body: binary},
		{path: "var/", mode: 0o755},
		{path: "var/lib/", mode: 0o755},
		{path: StateDir[1:] + "/", mode: 0o750, uid: UID, gid: GID},
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{
			Name: e.path, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			ModTime: s.Created, Format: tar.FormatPAX,
		}
		if e.body == nil {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer %s: %w", e.path, err)
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, fmt.Errorf("layer %s: %w", e.path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return b.Bytes(), nil
}

// badTagChars are the characters an image tag cannot hold.
var badTagChars = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// Tag turns a version (git describe's output, say) into an image tag:
// characters a tag cannot hold become '-', a leading '.' or '-' gets a
// "v" before it, and it is cut to the 128 characters a tag may have.
func Tag(version string) string {
	t := badTagChars.ReplaceAllString(version, "-")
	if t == "" || t[0] == '.' || t[0] == '-' {
		t = "v" + t
	}
	if len(t) > 128 {
		t = t[:128]
	}
	return t
}

// WriteLayout writes img as the only image of an OCI image layout in dir,
// named by its tag (the org.opencontainers.image.ref.name annotation). A
// dir that exists must be an OCI layout (it is replaced) or empty: the
// builder removes nothing it did not write.
func WriteLayout(dir string, img v1.Image, version string) error {
	if err := clearLayout(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("layout %s: %w", dir, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": Tag(version),
	})); err != nil {
		return fmt.Errorf("layout %s: %w", dir, err)
	}
	return nil
}

// clearLayout empties dir when it holds an OCI layout and refuses when it
// holds anything else.
func clearLayout(dir string) error {
	names, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) || err == nil && len(names) == 0 {
		return nil
	}
	if err != nil {
		return fmt.Errorf("layout %s: %w", dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		return fmt.Errorf("layout %s exists and is not an OCI image layout: not replacing it", dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("layout %s: %w", dir, err)
	}
	return nil
}

// WriteArchive writes img to file as a docker-archive tarball, the format
// `podman load` and `docker load` read, named repository:Tag(version). It
// returns that name.
func WriteArchive(file string, img v1.Image, repository, version string) (string, error) {
	tag, err := name.NewTag(repository+":"+Tag(version), name.StrictValidation)
	if err != nil {
		return "", fmt.Errorf("image name: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return "", fmt.Errorf("archive: %w", err)
	}
	if err := tarball.WriteToFile(file, tag, img); err != nil {
		return "", fmt.Errorf("archive %s: %w", file, err)
	}
	return tag.String(), nil
}
