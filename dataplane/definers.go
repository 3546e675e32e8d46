package dataplane

import (
	"strings"

	"github.com/sluice-proxy/sluice/auth"
	"github.com/sluice-proxy/sluice/auth/grants"
	"github.com/sluice-proxy/sluice/router"
)

// A view or routine created through sluice has the clusters' service account as its
// DEFINER (the backends know no other), so on the backends it reads with
// every right, where on a single server it reads with its creator's. The
// data plane remembers who created each view (Env.viewCreators: "db\x00view"
// → *auth.GrantsEntry) and the check reads such a view's query with the
// creator's own rights (default role, as MariaDB runs a definer), as
// MariaDB does. The memory is the process's: a view created before a
// restart, or through another sluice, reads with the service account's.

// noteCreator remembers the session's account as the creator of the view
// or routine plan created (CREATE VIEW / PROCEDURE / FUNCTION), or forgets any creator of it
// when the account may do anything (like the service account).
func (s *Session) noteCreator(plan *router.Plan) {
	if s.grants == nil {
		return
	}
	for _, n := range plan.Access.Needs {
		var key string
		db := n.DB
		if db == "" {
			db = s.schema
		}
		switch {
		case n.Level == router.NeedTable && n.Priv&router.PrivCreateView != 0:
			key = creatorKey(db, n.Table, 'v')
		case n.Level == router.NeedRoutine && n.Creates:
			kind := byte('p')
			if n.Function {
				kind = 'f'
			}
			key = creatorKey(db, n.Routine, kind)
		default:
			continue
		}
		if s.grants.active.All() {
			s.env.viewCreators.Delete(key)
		} else {
			s.env.viewCreators.Store(key, s.grants.entry)
		}
		return
	}
}

// definerCatalog is the session's catalog with the creators of views made
// through sluice (grants.Object.DefinerRights).
type definerCatalog struct {
	base *objectCatalog
	env  *Env
}

// Object implements grants.Catalog.
func (c definerCatalog) Object(db, name string, kind byte) *grants.Object {
	o := c.base.Object(db, name, kind)
	if o == nil || o.Invoker || !c.env.isServiceAccount(o.Definer) {
		return o
	}
	v, ok := c.env.viewCreators.Load(creatorKey(db, name, o.Kind))
	if !ok {
		return o
	}
	e := v.(*auth.GrantsEntry)
	cp := *o
	cp.DefinerRights = e.DefaultActive()
	return &cp
}

// isServiceAccount reports whether definer (user@host) is a cluster's
// service account.
func (e *Env) isServiceAccount(definer string) bool {
	user := definer
	if i := strings.LastIndexByte(definer, '@'); i >= 0 {
		user = definer[:i]
	}
	for i := range e.cfg.Clusters {
		if e.cfg.Clusters[i].User == user {
			return true
		}
	}
	return false
}

// creatorKey is the key of a view ('v') or routine ('p', 'f') in
// Env.viewCreators; routine names are not case-sensitive.
func creatorKey(db, name string, kind byte) string {
	if kind != 'v' {
		name = strings.ToLower(name)
	}
	return string(kind) + db + "\x00" + name
}
