package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestMakeImage runs the Makefile's image target itself, as a user would
// (`make image DIST=dir`), rather than Build with the tests' own flags: it
// must write dir/sluice_<git describe>_image.tar and the OCI layout
// dir/oci tagged with that version, and the archive, loaded into podman,
// must be localhost/sluice:<tag> with the version, the commit and the
// commit's time (IMAGE_CREATED) as its labels and creation time, and the
// same image as the layout holds.
func TestMakeImage(t *testing.T) {
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = "../.."
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	version := git("describe", "--tags", "--always", "--dirty")
	commit := git("rev-parse", "--short=12", "HEAD")
	created, err := time.Parse(time.RFC3339, git("log", "-1", "--format=%cI"))
	if err != nil {
		t.Fatal(err)
	}

	dist := t.TempDir()
	cmd := exec.Command("make", "--no-print-directory", "image", "DIST="+dist)
	cmd.Dir = "../.."
	// The target's own defaults, not an outer make's or the environment's
	// settings, are what the test checks.
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "VERSION", "COMMIT", "IMAGE_CREATED", "IMAGE_CONFIG", "LDFLAGS":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}

	// The layout: one image, tagged with the version.
	idx, err := layout.ImageIndexFromPath(filepath.Join(dist, "oci"))
	if err != nil {
		t.Fatalf("make image wrote no OCI layout in DIST/oci: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("the layout holds %d images, want 1", len(im.Manifests))
	}
	if got := im.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; got != Tag(version) {
		t.Errorf("the layout's image is tagged %q, want %q", got, Tag(version))
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	configDigest, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}

	archive := filepath.Join(dist, "sluice_"+version+"_image.tar")
	if _, err := os.Stat(archive); err != nil {
		t.Fatalf("make image wrote no %s: %v", filepath.Base(archive), err)
	}
	pm := newPodman(t)
	ref := DefaultRepository + ":" + Tag(version)
	if loaded := pm.must("load", "-q", "-i", archive); !strings.Contains(loaded, ref) {
		t.Fatalf("podman load said %q, want the image %s", loaded, ref)
	}
	t.Cleanup(func() {
		if _, err := pm.run("rmi", "-f", ref); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	var got []struct {
		ID      string `json:"Id"`
		Created time.Time
		Config  inspectConfig
	}
	if err := json.Unmarshal([]byte(pm.must("image", "inspect", ref)), &got); err != nil || len(got) != 1 {
		t.Fatalf("podman image inspect %s: %v (%d images)", ref, err, len(got))
	}
	if "sha256:"+got[0].ID != configDigest.String() {
		t.Errorf("podman loaded image %s, the layout holds the image with config %s", got[0].ID, configDigest)
	}
	labels := got[0].Config.Labels
	if v := labels["org.opencontainers.image.version"]; v != version {
		t.Errorf("version label %q, want git describe's %q", v, version)
	}
	if v := labels["org.opencontainers.image.revision"]; v != commit {
		t.Errorf("revision label %q, want the commit %q", v, commit)
	}
	if !got[0].Created.Equal(created) {
		t.Errorf("image created %v, want the commit's time %v", got[0].Created, created)
	}
	if v := labels["org.opencontainers.image.created"]; v != created.UTC().Format(time.RFC3339) {
		t.Errorf("created label %q, want the commit's time %s", v, created.UTC().Format(time.RFC3339))
	}
}
