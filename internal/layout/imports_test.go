// Package layout holds the test that keeps the packages' import arrows as
// docs/architecture.md draws them: foundation ← leaves ← dataplane, admin
// ← server ← cmd.
package layout

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sluice-proxy/sluice/"

// Layers, lowest first. A package may import its own layer's utilities
// and anything in a lower layer, with the exceptions below.
var (
	// utilities any package may import.
	utilities = []string{"internal/mono", "internal/failpoint", "internal/promtest", "health/loadavg"}
	// foundation packages import only each other (and utilities).
	foundation = []string{"conf", "protocol", "router", "shard", "auth", "auth/grants", "health", "health/binlog"}
	// foundationDeps are the arrows inside the foundation.
	foundationDeps = map[string][]string{
		"conf":     nil,
		"protocol": nil,
		"router":   {"conf"},
		"shard":    {"conf", "protocol", "router"},
		"auth":     {"conf", "protocol", "auth/grants"},
		// What an account may do is checked against what the router says
		// a statement needs.
		"auth/grants": {"protocol", "router"},
		"health":      {"conf", "protocol"},
		// The binlog tailer reads the tables a statement of the master's
		// binary log writes with the router's parser.
		"health/binlog": {"router"},
	}
	// leaves import the foundation only: never each other.
	// fleet talks to etcd on goroutines of its own; the data plane never
	// imports it, so an etcd outage cannot hold a statement.
	leaves = []string{"internal/evloop", "policy", "observe", "rules", "cache", "fleet"}
	// planes import the foundation and the leaves: never each other.
	planes = []string{"dataplane", "admin"}
	// adminViews show what the admin port shows, through admin.Control and
	// admin's SHOW functions, so they sit on admin's layer above it: the
	// status page and REST API on the metrics listener.
	adminViews = []string{"admin/web"}
)

// allowed returns the packages of this module pkg may import, and whether
// the rules know pkg at all.
func allowed(pkg string) ([]string, bool) {
	base := slices.Concat(utilities, foundation)
	switch {
	case slices.Contains(utilities, pkg):
		return utilities, true
	case strings.HasPrefix(pkg, "protocol/"):
		return slices.Concat(utilities, []string{"protocol"}), true
	case slices.Contains(foundation, pkg):
		// The foundation's own arrows: router sees SQL, never packets.
		return slices.Concat(utilities, foundationDeps[pkg]), true
	case slices.Contains(leaves, pkg):
		return base, true
	case slices.Contains(planes, pkg):
		return slices.Concat(base, leaves), true
	case slices.Contains(adminViews, pkg):
		return slices.Concat(base, leaves, []string{"admin"}), true
	case pkg == "server":
		return slices.Concat(base, leaves, planes, adminViews), true
	case strings.HasPrefix(pkg, "cmd/"):
		return slices.Concat(base, leaves, planes, adminViews, []string{"server", "sandbox"}), true
	case pkg == "sandbox":
		return base, true
	case strings.HasPrefix(pkg, "deploy/"):
		// Packaging tools (deploy/deb builds the .deb); their tests run
		// the built artefacts against a sandbox topology.
		return []string{"sandbox"}, true
	case pkg == "bench" || strings.HasPrefix(pkg, "bench/"):
		return slices.Concat(base, []string{"sandbox"}), true
	case strings.HasPrefix(pkg, "deploy/"):
		// Build programs for the shipped artifacts (the OCI image); their
		// tests run sluice against a sandbox.
		return slices.Concat(base, []string{"sandbox"}), true
	case pkg == "internal/layout" || pkg == "tests" || strings.HasPrefix(pkg, "tests/"):
		return nil, true // tests may import anything
	}
	return nil, false
}

// TestImportRules fails on an import arrow the layering forbids, and on a
// package the rules do not place (a new package needs a row here and in
// docs/architecture.md).
func TestImportRules(t *testing.T) {
	cmd := exec.Command("go", "list", "-json", module+"...")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(out)
	seen := 0
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		seen++
		pkg := strings.TrimPrefix(p.ImportPath, module)
		ok, known := allowed(pkg)
		if !known {
			t.Errorf("package %s is not placed in a layer: add it to internal/layout and docs/architecture.md", pkg)
			continue
		}
		if ok == nil && (pkg == "internal/layout" || pkg == "tests" || strings.HasPrefix(pkg, "tests/")) {
			continue
		}
		for _, imp := range p.Imports {
			imp, _, _ = strings.Cut(imp, " ") // "pkg [test variant]"
			dep, ours := strings.CutPrefix(imp, module)
			if !ours || dep == pkg {
				continue
			}
			if !slices.Contains(ok, dep) && !strings.HasPrefix(dep, pkg+"/") {
				t.Errorf("%s imports %s, which the layering forbids (docs/architecture.md)", pkg, dep)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if seen < 15 {
		t.Fatalf("go list saw %d packages: the module was not listed", seen)
	}
}

// TestRulesCatchABadArrow: the rules refuse the arrows the layering names
// (a plane importing the other, a leaf importing a plane, the foundation
// importing upwards, router importing protocol).
func TestRulesCatchABadArrow(t *testing.T) {
	for _, bad := range [][2]string{
		{"dataplane", "admin"}, {"admin", "dataplane"}, {"dataplane", "server"}, {"admin", "server"},
		{"observe", "dataplane"}, {"policy", "observe"}, {"internal/evloop", "policy"},
		{"health", "dataplane"}, {"protocol", "router"}, {"router", "protocol"}, {"sandbox", "server"},
		{"admin/web", "dataplane"}, {"admin/web", "server"},
	} {
		ok, known := allowed(bad[0])
		if !known || slices.Contains(ok, bad[1]) {
			t.Errorf("%s may import %s", bad[0], bad[1])
		}
	}
}
