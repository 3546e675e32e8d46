package dataplane

import (
	"context"
	"math"
	"strings"
	"time"

	"github.com/sluice-proxy/sluice/auth/grants"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/router"
)

// objectCatalog is the grants.Catalog of the views and stored routines on
// the masters of the clusters sessions reach: the default cluster's, and
// every cluster's once there are sharding rules. It is built from what the
// masters' last probes read (health.Status.Objects) and never changes
// afterwards; Env.catalog replaces it when a probe has read a change.
type objectCatalog struct {
	// all: every cluster is consulted (sharding), else def only.
	all bool
	def int
	// order lists the clusters consulted by index, def first: a name is
	// looked up in each in turn (the catalogs' union).
	order []int
	// from are the probes' catalogs by cluster index, nil for a cluster
	// not consulted or whose master no probe has read yet; parts are the
	// objects built from them, by key.
	from  []*health.Objects
	parts []map[health.ObjectKey]*catalogEntry
	// known: some cluster's catalog has been read.
	known bool
}

// catalogEntry is one object with the text its Body was parsed from.
type catalogEntry struct {
	obj  grants.Object
	body string
}

// Object finds the view (kind 't', a name in a table's place), procedure
// ('p') or function ('f') called name in db on any of the clusters. A
// view's name is compared exactly, a routine's without regard to case, as
// MariaDB does with lower_case_table_names = 0; db is compared exactly.
func (c *objectCatalog) Object(db, name string, kind byte) *grants.Object {
	var k health.ObjectKey
	switch kind {
	case 't':
		k = health.ObjectKeyOf(db, name, health.KindView)
	case 'p':
		k = health.ObjectKeyOf(db, name, health.KindProcedure)
	case 'f':
		k = health.ObjectKeyOf(db, name, health.KindFunction)
	default:
		return nil
	}
	for _, i := range c.order {
		if e := c.parts[i][k]; e != nil {
			return &e.obj
		}
	}
	return nil
}

// covers reports whether cluster i's views are in c: it is consulted and
// its master's catalog has been read.
func (c *objectCatalog) covers(i int) bool {
	return i >= 0 && i < len(c.from) && c.from[i] != nil && (c.all || i == c.def)
}

// catalog is the session's catalog of views and routines, nil until a
// probe of a master it reaches has read one.
func (s *Session) catalog() grants.Catalog {
	if c := s.env.catalog(); c != nil {
		return c
	}
	return nil
}

// catalog returns the catalog of the current snapshot's masters, building
// it again when a probe has read a change (or the sharding rules changed
// which clusters count), nil when no catalog has been read yet. The check
// of the current one allocates nothing; one session at a time builds a new
// one, parsing only the bodies that changed.
func (e *Env) catalog() *objectCatalog {
	snap := e.topo.Current()
	set := e.shardSet.Load()
	all := set.rules != nil
	c := e.objects.Load()
	if !c.current(snap, set.def, all) {
		e.objectsMu.Lock()
		c = e.objects.Load()
		if !c.current(snap, set.def, all) {
			c = buildCatalog(c, snap, set.def, all)
			e.objects.Store(c)
		}
		e.objectsMu.Unlock()
	}
	if !c.known {
		return nil
	}
	return c
}

// masterObjects is what the last probe of cluster i's master read, nil
// when it has read nothing.
func masterObjects(snap *health.Snapshot, i int) *health.Objects {
	if st := snap.Clusters[i].Master.Status(); st != nil {
		return st.Objects
	}
	return nil
}

// current reports whether c was built for the clusters def and all name
// and from what their masters' probes read last. A master with no catalog
// (a new master after a failover, before its first probe) keeps the one
// read before.
func (c *objectCatalog) current(snap *health.Snapshot, def int, all bool) bool {
	if c == nil || c.all != all || c.def != def || len(c.from) != len(snap.Clusters) {
		return false
	}
	for _, i := range c.order {
		if o := masterObjects(snap, i); o != nil && o != c.from[i] {
			return false
		}
	}
	return true
}

// buildCatalog builds the catalog of snap's masters (def's, or every
// cluster's when all), reusing what prev built from a catalog that did not
// change and the parsed bodies of objects whose text did not.
func buildCatalog(prev *objectCatalog, snap *health.Snapshot, def int, all bool) *objectCatalog {
	n := len(snap.Clusters)
	c := &objectCatalog{all: all, def: def, order: []int{def},
		from: make([]*health.Objects, n), parts: make([]map[health.ObjectKey]*catalogEntry, n)}
	if all {
		for i := range n {
			if i != def {
				c.order = append(c.order, i)
			}
		}
	}
	for _, i := range c.order {
		var oldFrom *health.Objects
		var old map[health.ObjectKey]*catalogEntry
		if prev != nil && i < len(prev.from) {
			oldFrom, old = prev.from[i], prev.parts[i]
		}
		switch o := masterObjects(snap, i); {
		case o == nil || o == oldFrom:
			c.from[i], c.parts[i] = oldFrom, old
		default:
			c.from[i], c.parts[i] = o, buildPart(o, old)
		}
		c.known = c.known || c.from[i] != nil
	}
	return c
}

// buildPart builds the objects of one cluster's catalog o, taking from
// old (what the cluster's previous catalog built) each entry that did not
// change and each body that was parsed already.
func buildPart(o *health.Objects, old map[health.ObjectKey]*catalogEntry) map[health.ObjectKey]*catalogEntry {
	defs := o.Defs()
	m := make(map[health.ObjectKey]*catalogEntry, len(defs))
	for i := range defs {
		d := &defs[i]
		k := d.Key()
		prev := old[k]
		if prev != nil && prev.body == d.Body && prev.obj.Invoker == d.Invoker && prev.obj.Definer == d.Definer {
			m[k] = prev
			continue
		}
		e := &catalogEntry{obj: grants.Object{Kind: d.Kind, Invoker: d.Invoker, Definer: d.Definer}, body: d.Body}
		if prev != nil && prev.body == d.Body {
			e.obj.Body = prev.obj.Body
		} else {
			e.obj.Body = router.BodyAccess(d.Body)
		}
		m[k] = e
	}
	return m
}

// catalogFence runs around a statement that may create or change a view
// or a stored routine (catalogDDL): while it runs, and until the probes
// have read the masters' views and routines again after it, the grants
// check waits (awaitCatalog), so it never takes a view just created for a
// table; the client may use the view on another connection the moment it
// has the OK. A view the session created is remembered with its account
// (noteCreator). Call the function it returns when the statement is done.
func (s *Session) catalogFence(plan *router.Plan) func() {
	if !catalogDDL(plan) {
		return noFence
	}
	e := s.env
	e.catalogDDLs.Add(1)
	return func() {
		if s.client.SentErr == 0 && s.rec.errCode == 0 {
			s.noteCreator(plan)
		}
		// A probe whose read of the views and routines was sent after
		// this moment sees what the statement did.
		now := time.Now().UnixNano()
		for {
			cur := e.ddlAt.Load()
			if cur >= now || e.ddlAt.CompareAndSwap(cur, now) {
				break
			}
		}
		e.catalogDDLs.Add(-1)
		e.topo.Kick()
	}
}

func noFence() {}

// catalogDDL reports a statement that may create a view or a stored
// routine, or change one's SQL SECURITY: CREATE / ALTER of a view, a
// procedure or a function (any of the words in the statement is enough),
// RENAME TABLE (a view may be renamed), and text sluice cannot read.
func catalogDDL(plan *router.Plan) bool {
	if !plan.DDL {
		return false
	}
	d := plan.Digest
	if d == "" || plan.Multi || plan.ParseErr != nil || strings.HasPrefix(d, "rename") {
		return true
	}
	if !strings.HasPrefix(d, "create") && !strings.HasPrefix(d, "alter") {
		return false
	}
	return strings.Contains(d, "view") || strings.Contains(d, "procedure") || strings.Contains(d, "function")
}

// catalogWait bounds how long a statement waits for the probes to read
// the views and routines again after a DDL.
const catalogWait = 10 * time.Second

// awaitCatalog waits while a statement that may change views or routines
// runs, and after it until every master the catalog is made from has read
// its views and routines again (health.Status.ObjectsAt), so the check
// never takes a view just created for a table. It polls, asking the
// prober for a round now and then, for at most catalogWait or until ctx
// ends; it reports false when the catalog is still older than the DDL.
func (e *Env) awaitCatalog(ctx context.Context) bool {
	deadline := time.Now().Add(catalogWait)
	for i := 0; e.catalogStale(); i++ {
		if time.Now().After(deadline) {
			return false
		}
		if i%10 == 0 {
			e.topo.Kick()
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
	return true
}

// catalogStale reports a statement that may change views or routines
// running, or one that ran since a master the catalog is made from last
// read them. Cheap while nothing changed: two atomic loads.
func (e *Env) catalogStale() bool {
	if e.catalogDDLs.Load() > 0 {
		return true
	}
	at := e.ddlAt.Load()
	if at <= e.objectsFresh.Load() {
		return false
	}
	fresh := e.objectsReadAt()
	for {
		cur := e.objectsFresh.Load()
		if cur >= fresh || e.objectsFresh.CompareAndSwap(cur, fresh) {
			break
		}
	}
	return at > fresh
}

// objectsReadAt is when the oldest of the masters the catalog is made
// from last read its views and routines (UnixNano; 0 when one has not).
func (e *Env) objectsReadAt() int64 {
	snap := e.topo.Current()
	set := e.shardSet.Load()
	oldest := int64(math.MaxInt64)
	for i := range snap.Clusters {
		if set.rules == nil && i != set.def {
			continue
		}
		st := snap.Clusters[i].Master.Status()
		if st == nil || st.ObjectsAt.IsZero() {
			return 0
		}
		oldest = min(oldest, st.ObjectsAt.UnixNano())
	}
	return oldest
}
