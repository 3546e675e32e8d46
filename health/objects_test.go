package health

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/sandbox"
)

// masterWorker is a probe worker for the master of a sandbox topology,
// logged in as user.
func masterWorker(t *testing.T, topo *sandbox.Topology, user, password string) *worker {
	t.Helper()
	cfg, err := conf.Parse(fmt.Appendf(nil, "[auth]\naddress = \"127.0.0.1:1\"\n[[cluster]]\nname = \"main\"\nuser = %q\npassword = %q\nmaster = %q\n",
		user, password, topo.Master.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	c := NewTopology(cfg).Current().Clusters[0]
	w := &worker{p: &Prober{Timeout: 10 * time.Second}, b: c.Master, c: c}
	t.Cleanup(w.closeConn)
	return w
}

// probeObjects runs one probe of w and returns the catalog it read.
func probeObjects(t *testing.T, ctx context.Context, w *worker) *Objects {
	t.Helper()
	st, err := w.query(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st.Objects
}

// TestProbeReadsObjects: a master's probe reads its views and routines
// (outside the system schemas), with the case rules of their names, shares
// an unchanged catalog between probes and reads it again after each kind of
// change.
func TestProbeReadsObjects(t *testing.T) {
	topo, cred := startTopology(t, sandbox.Options{Replicas: -1, NoAuth: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := topo.Master.Exec(ctx,
		"CREATE DATABASE cat",
		"CREATE TABLE cat.t (a INT, b INT)",
		"CREATE TABLE cat.u (a INT)",
		"CREATE VIEW cat.v AS SELECT a FROM cat.t",
		"CREATE SQL SECURITY INVOKER VIEW cat.V AS SELECT b FROM cat.t",
		"CREATE PROCEDURE cat.P1() SQL SECURITY INVOKER SELECT a FROM cat.u",
		"CREATE FUNCTION cat.F1(x INT) RETURNS INT DETERMINISTIC RETURN x + (SELECT COUNT(*) FROM cat.u)",
	); err != nil {
		t.Fatal(err)
	}
	w := masterWorker(t, topo, cred.User, cred.Password)
	o := probeObjects(t, ctx, w)
	// The system schemas hold objects of their own (sys its views), which
	// the catalog leaves out.
	r, err := w.conn.Execute("SELECT COUNT(*) FROM information_schema.VIEWS WHERE TABLE_SCHEMA = 'sys'")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := r.GetInt(0, 0); n == 0 {
		t.Error("no view in sys: the test of the system schemas checks nothing")
	}
	if o.Len() != 4 {
		t.Fatalf("catalog of %d objects, want 4: %+v", o.Len(), o.Defs())
	}
	for _, d := range o.Defs() {
		switch d.Schema {
		case "mysql", "sys", "performance_schema", "information_schema":
			t.Errorf("object of a system schema: %+v", d)
		}
	}
	check := func(o *Objects, name string, kind byte, invoker bool, body string) {
		t.Helper()
		d := o.Find("cat", name, kind)
		switch {
		case d == nil:
			t.Errorf("%c cat.%s not found", kind, name)
		case d.Kind != kind || d.Invoker != invoker || !strings.Contains(d.Body, body) || !strings.Contains(d.Definer, "@"):
			t.Errorf("%c cat.%s: %+v, want invoker %v, a definer and a body with %q", kind, name, *d, invoker, body)
		}
	}
	check(o, "v", KindView, false, "`a`")
	check(o, "V", KindView, true, "`b`")
	check(o, "p1", KindProcedure, true, "cat.u")
	check(o, "P1", KindProcedure, true, "cat.u")
	check(o, "f1", KindFunction, false, "RETURN x")
	for _, miss := range []struct {
		name string
		kind byte
	}{{"t", KindView}, {"P1", KindFunction}, {"F1", KindProcedure}, {"v ", KindView}} {
		if d := o.Find("cat", miss.name, miss.kind); d != nil {
			t.Errorf("%c cat.%q found: %+v", miss.kind, miss.name, *d)
		}
	}
	if d := o.Find("CAT", "v", KindView); d != nil {
		t.Errorf("schema names compare exactly, found %+v", *d)
	}
	if again := probeObjects(t, ctx, w); again != o {
		t.Error("an unchanged catalog was built again")
	}
	same := testing.AllocsPerRun(20, func() { w.readCatalogs(w.conn, &Status{}) })
	full := testing.AllocsPerRun(20, func() { w.objs = nil; w.readCatalogs(w.conn, &Status{}) })
	t.Logf("allocations of readCatalogs: %.0f unchanged, %.0f reading 4 objects", same, full)

	// Each change is seen at the next probe.
	for _, c := range []struct {
		stmt  string
		check func(o *Objects)
	}{
		{"CREATE OR REPLACE VIEW cat.v AS SELECT a FROM cat.u", func(o *Objects) { check(o, "v", KindView, false, "`cat`.`u`") }},
		{"ALTER SQL SECURITY DEFINER VIEW cat.V AS SELECT b FROM cat.t", func(o *Objects) { check(o, "V", KindView, false, "`b`") }},
		{"ALTER PROCEDURE cat.p1 SQL SECURITY DEFINER", func(o *Objects) { check(o, "p1", KindProcedure, false, "cat.u") }},
		{"DROP FUNCTION cat.f1", func(o *Objects) {
			if o.Find("cat", "f1", KindFunction) != nil || o.Len() != 3 {
				t.Errorf("dropped function still there: %+v", o.Defs())
			}
		}},
		{"CREATE VIEW cat.w AS SELECT 1 AS one", func(o *Objects) { check(o, "w", KindView, false, "1") }},
	} {
		if err := topo.Master.Exec(ctx, c.stmt); err != nil {
			t.Fatal(err)
		}
		next := probeObjects(t, ctx, w)
		if next == o {
			t.Errorf("%s: the probe kept the old catalog", c.stmt)
			continue
		}
		c.check(next)
		o = next
	}
}

// TestReadObjectsFailures: a refused query forgets the catalog (unknown);
// any other failure keeps the last one and drops the control connection.
func TestReadObjectsFailures(t *testing.T) {
	last := NewObjects([]ObjectDef{{Schema: "s", Name: "v", Kind: KindView, Body: "select 1"}})
	w := &worker{objs: last, objsSig: [2]string{"1:5", "0:0"}}
	st := &Status{}
	if w.objectsAnswer(io.ErrUnexpectedEOF, st) || st.Objects != last || w.objs != last {
		t.Errorf("a failed read: catalog %p, kept %p, want %p", st.Objects, w.objs, last)
	}
	st = &Status{}
	refused := fmt.Errorf("wrapped: %w", &mysql.MyError{Code: 1142, Message: "denied"})
	if w.objectsAnswer(refused, st) || st.Objects != nil || w.objs != nil || w.objsSig != [2]string{} {
		t.Errorf("a refused read: catalog %p, kept %p, signature %q", st.Objects, w.objs, w.objsSig)
	}
	if !w.objectsAnswer(nil, st) {
		t.Error("no error stops the read")
	}
}

// TestProbeReadsCatalogsOnlyWhenChanged: a master's probe that finds its
// catalogs unchanged reads none of them (the server counts no SHOW
// DATABASES and no query of the routines beyond the digests), shares the
// last ones, and a new function or schema is in the next probe's catalogs.
func TestProbeReadsCatalogsOnlyWhenChanged(t *testing.T) {
	topo, cred := startTopology(t, sandbox.Options{Replicas: -1, NoAuth: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := topo.Master.Exec(ctx, "CREATE DATABASE cat2",
		"CREATE FUNCTION cat2.f(x INT) RETURNS INT DETERMINISTIC NO SQL RETURN x"); err != nil {
		t.Fatal(err)
	}
	w := masterWorker(t, topo, cred.User, cred.Password)
	first, err := w.query(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Schemas.Has("cat2") || !first.Functions.Has(FunctionKey{Schema: "cat2", Name: "f"}) {
		t.Fatalf("first probe: schemas %v, functions %v; want cat2 and cat2.f", first.Schemas, first.Functions)
	}
	db, err := topo.Master.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	showDatabases := func() int {
		var name string
		var n int
		if err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Com_show_databases'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := showDatabases()
	for range 5 {
		st, err := w.query(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%p", st.Functions) != fmt.Sprintf("%p", first.Functions) || &st.Schemas[0] != &first.Schemas[0] || st.Objects != first.Objects {
			t.Fatalf("an unchanged catalog was read again")
		}
	}
	if n := showDatabases() - before; n != 0 {
		t.Errorf("5 probes of unchanged catalogs ran SHOW DATABASES %d times, want 0", n)
	}

	if err := topo.Master.Exec(ctx, "CREATE DATABASE cat3",
		"CREATE FUNCTION cat2.g(x INT) RETURNS INT DETERMINISTIC MODIFIES SQL DATA RETURN x"); err != nil {
		t.Fatal(err)
	}
	st, err := w.query(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Schemas.Has("cat3") {
		t.Errorf("a new schema is not in the next probe's list: %v", st.Schemas)
	}
	if k := (FunctionKey{Schema: "cat2", Name: "g"}); !st.Functions.Has(k) || st.Functions.ReadOnly(k) {
		t.Errorf("a new writing function is not in the next probe's catalog: %v", st.Functions)
	}

	// Threads_running comes with the server's variables: three
	// statements running elsewhere count (the probe's own does not).
	const sleepers = 3
	sleeping := make(chan error, sleepers)
	for range sleepers {
		go func() { _, err := db.ExecContext(ctx, "DO SLEEP(3)"); sleeping <- err }()
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		st, err := w.query(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.ThreadsRunning >= sleepers {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d running SLEEPs never showed: %d threads running", sleepers, st.ThreadsRunning)
		}
	}
	for range sleepers {
		if err := <-sleeping; err != nil {
			t.Fatal(err)
		}
	}
}
