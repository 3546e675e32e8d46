package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The version and commit the test binary is stamped with, as `make image`
// stamps its own.
const (
	testVersion  = "v0.0.0-imagetest+dirty"
	testRevision = "0123456789ab"
)

// sluiceBin is a static sluice built once for every test of the package
// by TestMain, exactly as `make image` builds it.
var sluiceBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-image-test-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sluiceBin = filepath.Join(dir, "sluice")
	if err := buildSluice(sluiceBin); err != nil {
		os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildSluice builds cmd/sluice into out the way the Makefile's image
// target does.
func buildSluice(out string) error {
	ldflags := "-X main.version=" + testVersion + " -X main.commit=" + testRevision
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, "../../cmd/sluice")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building a static sluice: %w\n%s", err, b)
	}
	return nil
}

// exampleConfig is the annotated example configuration the image installs.
func exampleConfig(t *testing.T) string {
	t.Helper()
	const p = "../sluice.toml"
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func testSpec(t *testing.T) Spec {
	return Spec{
		Binary: sluiceBin, Config: exampleConfig(t), Version: testVersion, Revision: testRevision,
		Source: DefaultSource, Repository: DefaultRepository,
		Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

func TestTag(t *testing.T) {
	for _, tc := range []struct{ version, want string }{
		{"v1.2.3", "v1.2.3"},
		{"v1.2.3-4-gabcdef0-dirty", "v1.2.3-4-gabcdef0-dirty"},
		{"0123abc", "0123abc"},
		{"v1.0.0+build.5", "v1.0.0-build.5"},
		{"feature/x", "feature-x"},
		{".hidden", "v.hidden"},
		{"-x", "v-x"},
		{strings.Repeat("a", 200), strings.Repeat("a", 128)},
	} {
		got := Tag(tc.version)
		if got != tc.want {
			t.Errorf("Tag(%q) = %q, want %q", tc.version, got, tc.want)
		}
		if _, err := name.NewTag(DefaultRepository+":"+got, name.StrictValidation); err != nil {
			t.Errorf("Tag(%q) = %q is not a valid tag: %v", tc.version, got, err)
		}
	}
}

// TestBuildRefusesWhatCannotRun: the image has no C library and no loader,
// so a dynamically linked binary (Debian's own /bin/true) is refused at
// build time, as is a file that is no executable at all.
func TestBuildRefusesWhatCannotRun(t *testing.T) {
	for _, tc := range []struct{ binary, want string }{
		{"/bin/true", "dynamically linked"},
		{exampleConfig(t), "bad magic number"},
	} {
		s := testSpec(t)
		s.Binary = tc.binary
		if _, err := Build(s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Build with binary %s: %v, want an error containing %q", tc.binary, err, tc.want)
		}
	}
}

// TestCommandLine: the builder's flags; a missing input is a usage error
// (2), a build that fails is 1.
func TestCommandLine(t *testing.T) {
	out := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"-binary", sluiceBin, "-config", exampleConfig(t), "-version", "v1"}, 2}, // no output named
		{[]string{"-binary", sluiceBin, "-version", "v1", "-archive", out + "/a.tar"}, 2},
		{[]string{"-binary", sluiceBin, "-config", exampleConfig(t), "-version", "v1", "-archive", out + "/a.tar", "-created", "yesterday"}, 2},
		{[]string{"-binary", "/bin/true", "-config", exampleConfig(t), "-version", "v1", "-archive", out + "/a.tar"}, 1},
		{[]string{"-h"}, 0},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != tc.code {
			t.Errorf("image %q: exit %d, want %d; stderr:\n%s", tc.args, code, tc.code, stderr.String())
		}
	}
}

// TestImageContents reads back what Build made: the run configuration a
// runtime sees and every file of the layer, with owners and modes.
func TestImageContents(t *testing.T) {
	s := testSpec(t)
	img, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("platform %s/%s, want linux/amd64", cf.OS, cf.Architecture)
	}
	if want := []string{"/usr/bin/sluice", "run", "-config", "/etc/sluice/sluice.toml"}; !slices.Equal(c.Entrypoint, want) {
		t.Errorf("Entrypoint %q, want %q", c.Entrypoint, want)
	}
	if len(c.Cmd) != 0 {
		t.Errorf("Cmd %q, want none", c.Cmd)
	}
	uid, _, _ := strings.Cut(c.User, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("User %q, want a numeric non-root uid", c.User)
	}
	for _, p := range []string{"6033/tcp", "6032/tcp", "6070/tcp"} {
		if _, ok := c.ExposedPorts[p]; !ok {
			t.Errorf("ExposedPorts %v lacks %s", c.ExposedPorts, p)
		}
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.version":  testVersion,
		"org.opencontainers.image.revision": testRevision,
		"org.opencontainers.image.source":   DefaultSource,
		"org.opencontainers.image.created":  "2026-01-02T03:04:05Z",
	} {
		if got := c.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	if !cf.Created.Equal(s.Created) {
		t.Errorf("Created %v, want %v", cf.Created, s.Created)
	}

	files := layerFiles(t, img)
	binary, _ := os.ReadFile(sluiceBin)
	cfg, _ := os.ReadFile(s.Config)
	for _, want := range []struct {
		path     string
		mode     int64
		uid      int
		dir      bool
		contents []byte
	}{
		{path: "usr/bin/sluice", mode: 0o755, contents: binary},
		{path: "etc/sluice/sluice.toml", mode: 0o644, contents: cfg},
		{path: "var/lib/sluice/", mode: 0o750, uid: UID, dir: true},
		{path: "tmp/", mode: 0o1777, dir: true},
		{path: "etc/passwd", mode: 0o644, contents: []byte("root:x:0:0:root:/root:/sbin/nologin\nsluice:x:65532:65532:sluice:/var/lib/sluice:/sbin/nologin\n")},
		{path: "etc/group", mode: 0o644, contents: []byte("root:x:0:\nsluice:x:65532:\n")},
	} {
		f, ok := files[want.path]
		if !ok {
			t.Errorf("the layer has no %s", want.path)
			continue
		}
		h := f.header
		if h.Mode != want.mode || h.Uid != want.uid || (h.Typeflag == tar.TypeDir) != want.dir {
			t.Errorf("%s: mode %o uid %d type %c, want mode %o uid %d dir %v", want.path, h.Mode, h.Uid, h.Typeflag, want.mode, want.uid, want.dir)
		}
		if !h.ModTime.Equal(s.Created) {
			t.Errorf("%s: mtime %v, want %v", want.path, h.ModTime, s.Created)
		}
		if want.contents != nil && !bytes.Equal(f.body, want.contents) {
			t.Errorf("%s differs from its source (%d bytes, want %d)", want.path, len(f.body), len(want.contents))
		}
	}
	if uid != strconv.Itoa(UID) {
		t.Errorf("User %q is not the uid that owns the state directory (%d)", c.User, UID)
	}
}

type layerFile struct {
	header *tar.Header
	body   []byte
}

// layerFiles reads the image's only layer.
func layerFiles(t *testing.T, img v1.Image) map[string]layerFile {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v; want one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]layerFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = layerFile{h, b}
	}
}

// TestImageIsReproducible: the same inputs give the same digest, another
// creation time another one; the OCI layout and the docker-archive
// written from it hold that image under its tag.
func TestImageIsReproducible(t *testing.T) {
	s := testSpec(t)
	digest := func(s Spec) v1.Hash {
		img, err := Build(s)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first, second := digest(s), digest(s)
	if first != second {
		t.Errorf("two builds of the same inputs: %s and %s", first, second)
	}
	later := s
	later.Created = s.Created.Add(time.Second)
	if d := digest(later); d == first {
		t.Errorf("a build with another creation time has the same digest %s", d)
	}

	img, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "oci")
	for range 2 { // the second write replaces the first layout
		if err := WriteLayout(dir, img, s.Version); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Digest != first ||
		im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != Tag(s.Version) {
		t.Errorf("OCI layout index %+v, want one manifest %s named %s", im.Manifests, first, Tag(s.Version))
	}
	notLayout := t.TempDir()
	if err := os.WriteFile(filepath.Join(notLayout, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteLayout(notLayout, img, s.Version); err == nil {
		t.Error("WriteLayout replaced a directory that is not an OCI layout")
	}

	archive := filepath.Join(t.TempDir(), "sluice.tar")
	ref, err := WriteArchive(archive, img, s.Repository, s.Version)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	back, err := tarball.ImageFromPath(archive, &tag)
	if err != nil {
		t.Fatalf("reading %s back as %s: %v", archive, ref, err)
	}
	want, _ := img.ConfigName()
	if got, _ := back.ConfigName(); got != want {
		t.Errorf("the archive's image has config %s, want %s", got, want)
	}
}
