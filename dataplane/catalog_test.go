package dataplane

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/auth/grants"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/router"
)

// catalogDefs are the views and routines of the catalog tests' master.
func catalogDefs() []health.ObjectDef {
	return []health.ObjectDef{
		{Schema: "cat", Name: "v", Kind: health.KindView, Definer: "root@localhost", Body: "select `cat`.`t`.`a` AS `a` from `cat`.`t`"},
		{Schema: "cat", Name: "V", Kind: health.KindView, Invoker: true, Definer: "dba@%", Body: "select `cat`.`u`.`b` AS `b` from `cat`.`u`"},
		{Schema: "cat", Name: "P1", Kind: health.KindProcedure, Invoker: true, Definer: "root@localhost", Body: "SELECT a FROM cat.u"},
		{Schema: "cat", Name: "F1", Kind: health.KindFunction, Definer: "root@localhost", Body: "RETURN x + (SELECT COUNT(*) FROM cat.t)"},
		{Schema: "cat", Name: "hidden", Kind: health.KindView, Definer: "root@localhost"},
	}
}

// needsTable reports whether acc was parsed and names table db.name.
func needsTable(acc *router.Access, db, name string) bool {
	return acc != nil && !acc.Unknown && slices.ContainsFunc(acc.Needs, func(n router.Need) bool { return n.DB == db && n.Table == name })
}

// TestCatalogLookups: the catalog built from a master's probe holds each
// object's kind, SQL SECURITY, definer and parsed body, finds views by
// their exact name and routines by their name in any case, and tells
// procedures from functions.
func TestCatalogLookups(t *testing.T) {
	env := offlineServer(t, "", 0)
	s := withLegs(&Session{env: env})
	master := env.topo.Current().Clusters[0].Master
	if s.catalog() != nil {
		t.Fatal("a catalog before any probe")
	}
	master.SetStatus(&health.Status{})
	if s.catalog() != nil {
		t.Fatal("a catalog from a probe that read none")
	}
	master.SetStatus(&health.Status{Objects: health.NewObjects(catalogDefs())})
	c := s.catalog()
	if c == nil {
		t.Fatal("no catalog after a probe read one")
	}
	for _, tc := range []struct {
		db, name string
		kind     byte
		want     *grants.Object // Body: nil for Unknown, else any parsed one
		table    string         // a table the body needs
	}{
		{"cat", "v", 't', &grants.Object{Kind: 'v', Definer: "root@localhost"}, "t"},
		{"cat", "V", 't', &grants.Object{Kind: 'v', Invoker: true, Definer: "dba@%"}, "u"},
		{"cat", "P1", 'p', &grants.Object{Kind: 'p', Invoker: true, Definer: "root@localhost"}, "u"},
		{"cat", "p1", 'p', &grants.Object{Kind: 'p', Invoker: true, Definer: "root@localhost"}, "u"},
		{"cat", "f1", 'f', &grants.Object{Kind: 'f', Definer: "root@localhost"}, "t"},
		{"cat", "hidden", 't', &grants.Object{Kind: 'v', Definer: "root@localhost"}, ""},
		{"cat", "t", 't', nil, ""},
		{"cat", "Hidden", 't', nil, ""},
		{"CAT", "v", 't', nil, ""},
		{"cat", "P1", 'f', nil, ""},
		{"cat", "F1", 'p', nil, ""},
		{"cat", "v", 'p', nil, ""},
		{"cat", "v", 'x', nil, ""},
	} {
		got := c.Object(tc.db, tc.name, tc.kind)
		switch {
		case tc.want == nil:
			if got != nil {
				t.Errorf("Object(%q, %q, %c) = %+v, want none", tc.db, tc.name, tc.kind, *got)
			}
		case got == nil:
			t.Errorf("Object(%q, %q, %c) not found", tc.db, tc.name, tc.kind)
		case got.Kind != tc.want.Kind || got.Invoker != tc.want.Invoker || got.Definer != tc.want.Definer:
			t.Errorf("Object(%q, %q, %c) = %+v, want %+v", tc.db, tc.name, tc.kind, *got, *tc.want)
		case tc.table == "" && (got.Body == nil || !got.Body.Unknown):
			t.Errorf("Object(%q, %q, %c): a body not shown reads as %+v, want Unknown", tc.db, tc.name, tc.kind, got.Body)
		case tc.table != "" && !needsTable(got.Body, "cat", tc.table):
			t.Errorf("Object(%q, %q, %c): body %+v, want one that needs cat.%s", tc.db, tc.name, tc.kind, got.Body, tc.table)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		if s.catalog().Object("cat", "V", 't') == nil || s.catalog().Object("cat", "f1", 'f') == nil {
			t.Fatal("lost")
		}
	}); n != 0 {
		t.Errorf("a lookup in an unchanged catalog allocates %.1f times", n)
	}
}

// TestCatalogRebuilds: the catalog is built again only for a new probe
// catalog, reusing the objects that did not change (each body is parsed
// once); a master whose probe has read none keeps the last.
func TestCatalogRebuilds(t *testing.T) {
	env := offlineServer(t, "", 1)
	s := withLegs(&Session{env: env})
	master := env.topo.Current().Clusters[0].Master
	objs := health.NewObjects(catalogDefs())
	master.SetStatus(&health.Status{Objects: objs})
	first := env.catalog()
	master.SetStatus(&health.Status{Objects: objs})
	if env.catalog() != first {
		t.Fatal("the same probe catalog was built again")
	}
	v := first.Object("cat", "v", 't')
	// A replaced view and a new procedure.
	defs := catalogDefs()
	defs[1].Body = "select `cat`.`w`.`b` AS `b` from `cat`.`w`"
	defs = append(defs, health.ObjectDef{Schema: "cat", Name: "p2", Kind: health.KindProcedure, Body: "DELETE FROM cat.t"})
	master.SetStatus(&health.Status{Objects: health.NewObjects(defs)})
	second := env.catalog()
	if second == first {
		t.Fatal("a changed probe catalog was not built again")
	}
	if second.Object("cat", "v", 't') != v {
		t.Error("an unchanged view was built again")
	}
	if !needsTable(second.Object("cat", "V", 't').Body, "cat", "w") {
		t.Errorf("the replaced view's body: %+v", second.Object("cat", "V", 't').Body)
	}
	if second.Object("cat", "P2", 'p') == nil {
		t.Error("a new procedure is missing")
	}
	if first.Object("cat", "p2", 'p') != nil || !needsTable(first.Object("cat", "V", 't').Body, "cat", "u") {
		t.Error("the old catalog changed")
	}
	master.SetStatus(&health.Status{})
	if s.catalog() != grants.Catalog(second) {
		t.Error("a master with no catalog read dropped the last one")
	}
}

// TestCatalogUnion: with sharding the catalog is the union of every
// cluster's, the default cluster's first; without, the default cluster's
// alone.
func TestCatalogUnion(t *testing.T) {
	second := "[[cluster]]\nname = \"b\"\nuser = \"sluice\"\nmaster = \"127.0.0.1:9\"\n"
	rule := "[[shard]]\nschema = \"cat\"\ntable = \"t\"\nkey = \"id\"\nalgorithm = \"mod\"\nclusters = [\"main\", \"b\"]\n"
	onB := []health.ObjectDef{
		{Schema: "cat", Name: "v", Kind: health.KindView, Definer: "b@%", Body: "select 1 AS `1`"},
		{Schema: "cat", Name: "onb", Kind: health.KindFunction, Definer: "b@%", Body: "RETURN 1"},
	}
	for _, sharded := range []bool{true, false} {
		extra := second
		if sharded {
			extra += rule
		}
		env := offlineServerWith(t, "", 0, extra)
		clusters := env.topo.Current().Clusters
		if len(clusters) != 2 {
			t.Fatalf("%d clusters", len(clusters))
		}
		clusters[1].Master.SetStatus(&health.Status{Objects: health.NewObjects(onB)})
		c := env.catalog()
		if got := c != nil && c.Object("cat", "ONB", 'f') != nil; got != sharded {
			t.Errorf("sharded %v: a function of the second cluster alone found: %v", sharded, got)
		}
		clusters[0].Master.SetStatus(&health.Status{Objects: health.NewObjects(catalogDefs())})
		c = env.catalog()
		if o := c.Object("cat", "v", 't'); o == nil || o.Definer != "root@localhost" {
			t.Errorf("sharded %v: view on both clusters: %+v, want the default cluster's", sharded, o)
		}
		if got := c.Object("cat", "onb", 'f') != nil; got != sharded {
			t.Errorf("sharded %v: function of the second cluster found: %v", sharded, got)
		}
	}
}

// TestCatalogConcurrent: sessions read the catalog while probes publish
// new ones (run with -race); each read is a complete catalog.
func TestCatalogConcurrent(t *testing.T) {
	env := offlineServer(t, "", 0)
	master := env.topo.Current().Clusters[0].Master
	master.SetStatus(&health.Status{Objects: health.NewObjects(catalogDefs())})
	var wg sync.WaitGroup
	var reads atomic.Int64
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c := env.catalog()
				if c.Object("cat", "v", 't') == nil || c.Object("cat", "p1", 'p') == nil {
					t.Error("an incomplete catalog")
					return
				}
				reads.Add(1)
			}
		})
	}
	// Publish until the readers have read many times in between (or have
	// given up).
	deadline := time.Now().Add(10 * time.Second)
	for n := 0; n < 200 || reads.Load() < 2000 && !t.Failed() && time.Now().Before(deadline); n++ {
		master.SetStatus(&health.Status{Objects: health.NewObjects(catalogDefs())})
		runtime.Gosched()
	}
	close(stop)
	wg.Wait()
}
