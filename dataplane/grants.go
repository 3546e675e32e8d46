package dataplane

import (
	"bytes"
	"context"
	"net"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/auth"
	"github.com/sluice-proxy/sluice/auth/grants"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
)

// sessionGrants is what a session checks its statements against when
// [auth] enforce_grants is on: its account's entry in the grants cache,
// the privileges of its enabled role, and the last check that passed (a
// statement repeated with the same plan, grants and schema is not checked
// again). Owned by the session.
type sessionGrants struct {
	entry  *auth.GrantsEntry
	active *grants.Active
	role   string
	// who names the session in privilege errors.
	who   grants.Who
	okAcc *router.Access
	okAct *grants.Active
	// okCat is the catalog the last check consulted, compared as the
	// pointer it wraps: wrapping it in the grants.Catalog interface
	// allocates, which the fast path of a statement must not.
	okCat *objectCatalog
	okDB  string
	// cat and catOf: the catalog last wrapped for a check, and what it
	// wraps, so that statements that change the check (a transaction's
	// reads and writes alternate) do not allocate one each.
	cat   grants.Catalog
	catOf *objectCatalog
	// prepared are what the session's SQL-level prepared statements need,
	// by name (lower case).
	prepared map[string]*router.Access
}

// startGrants gives the session the privileges its login learnt, or none
// when grants are not enforced. It runs before the session's first
// statement and on every COM_CHANGE_USER.
func (s *Session) startGrants(login *auth.Login) *protocol.SQLError {
	s.grants = nil
	if !s.env.config().Auth.EnforceGrants || s.env.grants == nil {
		return nil
	}
	if login.Grants == nil {
		return protocol.ERAccessDenied.New("sluice: the privileges of '%s' are not known (auth.enforce_grants = true)", login.User)
	}
	e := s.env.grants.Put(login.Grants)
	role := login.Grants.DefaultRole
	s.grants = &sessionGrants{entry: e, role: role, active: e.Active(role),
		who: grants.Who{ClientHost: s.clientHost(), Password: login.UsedPassword}}
	return nil
}

// allowed returns nil when the session may run a statement needing acc,
// else MariaDB's error for what it lacks. Grants older than
// auth.grants_ttl are read again first.
func (s *Session) allowed(acc *router.Access) *protocol.SQLError {
	g := s.grants
	if g == nil {
		return nil
	}
	if acc == nil {
		acc = router.UnknownAccess
	}
	if ttl := s.env.grants.TTL(); ttl > 0 && g.entry.Stale(s.cmdStart, ttl) {
		s.refreshGrants()
	}
	if !g.active.All() && s.env.catalogStale() && !s.awaitCatalog() {
		// The probes have not read the views and routines since a DDL:
		// a name may be a view the catalog does not know yet.
		return protocol.ERLockWaitTimeout.New("sluice: the clusters' views and routines were not read again within %v of a DDL; try again", catalogWait)
	}
	a, base := g.active, s.env.catalog()
	if g.okAcc == acc && g.okAct == a && g.okDB == s.schema && g.okCat == base {
		return nil
	}
	if g.catOf != base || g.cat == nil {
		g.cat, g.catOf = s.catalogOf(base), base
	}
	if err := a.Check(acc, s.schema, s.who(), g.cat); err != nil {
		return err
	}
	g.okAcc, g.okAct, g.okDB, g.okCat = acc, a, s.schema, base
	return nil
}

// refreshGrants reads the account's grants again (once for all its
// sessions) and takes its enabled role's privileges from them.
func (s *Session) refreshGrants() {
	g := s.grants
	ctx, cancel := context.WithTimeout(s.env.ctx, 5*time.Second)
	err := s.env.grants.Fresh(ctx, g.entry)
	cancel()
	if err != nil {
		s.log().Warn("could not read the account's grants again; the old ones stay in force", zap.Error(err))
	}
	g.active = g.entry.Active(g.role)
}

// clientHost is the client's address as MariaDB's privilege errors name it.
func (s *Session) clientHost() string {
	host, _, err := net.SplitHostPort(s.client.NetConn().RemoteAddr().String())
	if err != nil {
		return "localhost"
	}
	return host
}

// loginSchemaAllowed checks the schema a login or COM_CHANGE_USER asks for
// as USE would be: MariaDB refuses the login with 1044.
func (s *Session) loginSchemaAllowed(db string) *protocol.SQLError {
	if db == "" || s.grants == nil {
		return nil
	}
	return s.grants.active.Check(router.UseAccess(db), "", s.who(), s.grantsCatalog())
}

// allowedPlan is allowed for a classified statement; doubt: the session's
// sql_mode or character set may make the server read the text otherwise
// than the router did, so what it needs is not known.
func (s *Session) allowedPlan(plan *router.Plan, doubt bool) *protocol.SQLError {
	if s.grants == nil {
		return nil
	}
	if doubt {
		return s.allowed(router.UnknownAccess)
	}
	return s.allowed(plan.Access)
}

// answerGrants answers SHOW GRANTS of the session's own account and SET
// ROLE, which sluice keeps itself (the backends know neither the account
// nor its roles); done is false for any other statement.
func (s *Session) answerGrants(plan *router.Plan) (done bool, err error) {
	g := s.grants
	if g == nil || !plan.Access.Grants && !plan.Access.SetRole {
		return false, nil
	}
	set := g.active.Set
	if plan.Access.Grants {
		return s.answerShowGrants()
	}
	role := plan.Access.Role
	switch {
	case role == "DEFAULT":
		role = set.DefaultRole
	case role != "" && !set.HasRole(role):
		e := protocol.ERInvalidRole.New("User `%s`@`%s` has not been granted role `%s`", set.User, set.Host, role)
		if !set.KnowsRole(role) && !(g.active.MayReadAccounts() && s.roleExists(role)) {
			// MariaDB words so a role that does not exist, or one the
			// account may not know exists (it cannot read mysql.user).
			e = protocol.ERInvalidRole.New("Invalid role specification `%s`", role)
		}
		s.noteResult(protocol.RelayResult{Err: e})
		return true, s.client.WriteErr(e)
	}
	g.role, g.active = role, g.entry.Active(role)
	return true, s.writeOK()
}

// grantedGlobal reports whether the session's account holds one of p
// globally (PROCESS to see others' sessions, SUPER or CONNECTION ADMIN to
// kill them). Without enforced grants no one does.
func (s *Session) grantedGlobal(p router.Priv) bool {
	return s.grants != nil && s.grants.active.HasGlobal(p)
}

// allowedPrepared is allowedPlan for a binary prepared statement, checked
// at COM_STMT_PREPARE and at each execution. SHOW GRANTS and SET ROLE,
// which sluice answers itself, are text statements only.
func (s *Session) allowedPrepared(plan *router.Plan) *protocol.SQLError {
	if s.grants == nil {
		return nil
	}
	if plan.Access.Grants || plan.Access.SetRole {
		return protocol.ERUnsupportedPS.New("This command is not supported in the prepared statement protocol yet: sluice answers SHOW GRANTS and SET ROLE in text queries only")
	}
	return s.allowedPlan(plan, s.lexDoubt(plan))
}

// allowedCommand is allowed for a command other than a statement
// (COM_INIT_DB, COM_FIELD_LIST), whose Access is built per call.
func (s *Session) allowedCommand(acc *router.Access) *protocol.SQLError {
	if s.grants == nil {
		return nil
	}
	return s.allowed(acc)
}

// allowedFieldList checks COM_FIELD_LIST, whose payload is the table name
// up to a NUL byte, then a column pattern.
func (s *Session) allowedFieldList(payload []byte) *protocol.SQLError {
	if s.grants == nil {
		return nil
	}
	table := payload
	if i := bytes.IndexByte(payload, 0); i >= 0 {
		table = payload[:i]
	}
	return s.allowed(router.FieldListAccess(string(table)))
}

// resetRole enables the account's default role again and forgets the
// SQL-level prepared statements, as COM_RESET_CONNECTION does on a server.
func (s *Session) resetRole() {
	if g := s.grants; g != nil {
		g.prepared = nil
		g.role = g.active.Set.DefaultRole
		g.active = g.entry.Active(g.role)
	}
}

// grantsGate runs the grants check of a text statement and answers it when
// it is refused, or is SHOW GRANTS or SET ROLE; done reports an answer.
func (s *Session) grantsGate(plan *router.Plan, doubt bool) (done bool, err error) {
	if s.grants == nil {
		return false, nil
	}
	acc := plan.Access
	if acc.ShowUser != "" && !doubt {
		if set := s.grants.active.Set; acc.ShowUser == set.User && acc.ShowHost == set.Host {
			// SHOW GRANTS FOR the session's own account.
			return s.answerShowGrants()
		}
	}
	e := s.allowedPlan(plan, doubt)
	if e == nil && acc.Execute != "" {
		// SQL-level EXECUTE: what the PREPAREd text needs, asked again
		// (the grants may have changed since).
		e = s.allowed(s.grants.prepared[acc.Execute])
	}
	if e == nil && acc.Account {
		e = protocol.ERNotSupportedYet.New("sluice: accounts and their grants live on the auth server, not on the clusters: run %s there", "GRANT, REVOKE and the account statements")
	}
	if e != nil {
		s.noteResult(protocol.RelayResult{Err: e})
		return true, s.client.WriteErr(e)
	}
	s.notePrepared(acc)
	return s.answerGrants(plan)
}

// notePrepared keeps what an SQL-level PREPARE's text needs under its
// name, for its EXECUTEs, and forgets it at DEALLOCATE (a failed PREPARE
// leaves the name unknown to the server too; EXECUTE then fails there).
func (s *Session) notePrepared(acc *router.Access) {
	g := s.grants
	switch {
	case acc.Prepare != "":
		if g.prepared == nil {
			g.prepared = map[string]*router.Access{}
		}
		g.prepared[acc.Prepare] = acc.Inner
	case acc.Deallocate != "":
		delete(g.prepared, acc.Deallocate)
	}
}

// identity fills in v who the session is, for the reads of CURRENT_USER(),
// USER() and CURRENT_ROLE() sluice answers; without enforced grants those
// reads are left to the backend (they name sluice's service account).
// uses are the reads of the statement: nothing is built for others.
func (s *Session) identity(v *router.ScopedValues, uses router.ScopedFunc) {
	g := s.grants
	if uses&router.ScopedIdentity == 0 {
		return
	}
	if g == nil {
		v.Skip |= router.ScopedIdentity
		return
	}
	set := g.active.Set
	v.CurrentUser = set.User + "@" + set.Host
	v.User = s.user + "@" + g.who.ClientHost
	v.CurrentRole, v.RoleNone = g.role, g.role == ""
}

// who is how the session's privilege errors name it.
func (s *Session) who() grants.Who {
	if s.grants == nil {
		return grants.Who{ClientHost: s.clientHost()}
	}
	return s.grants.who
}

// grantsCatalog is the clusters' views and routines the check consults
// (catalog.go).
func (s *Session) grantsCatalog() grants.Catalog {
	return s.catalogOf(s.env.catalog())
}

// catalogOf is c as the grants check consults it; nil stays nil.
func (s *Session) catalogOf(c *objectCatalog) grants.Catalog {
	if c == nil {
		return nil
	}
	return definerCatalog{base: c, env: s.env}
}

// roleExists asks the auth server whether a role the account does not hold
// exists, for SET ROLE's error; without auth.service_user it is taken not
// to.
func (s *Session) roleExists(role string) bool {
	ctx, cancel := context.WithTimeout(s.env.ctx, 5*time.Second)
	defer cancel()
	ok, _ := s.env.grants.RoleExists(ctx, role)
	return ok
}

// awaitCatalog is Env.awaitCatalog off the session's event loop, whose
// other sessions (the one running the DDL among them) must go on.
func (s *Session) awaitCatalog() bool {
	if s.task.Detach() {
		defer s.task.Attach()
	}
	return s.env.awaitCatalog(&s.cmd)
}

// answerShowGrants answers SHOW GRANTS of the session's own account from
// the grants sluice holds (without any IDENTIFIED clause).
func (s *Session) answerShowGrants() (bool, error) {
	g := s.grants
	set := g.active.Set
	lines := g.active.ShowGrants()
	var err error
	s.scratch, err = protocol.WriteTextColumn(s.client, s.scratch, "Grants for "+set.User+"@"+set.Host, 1024, lines, s.status())
	s.answeredLocally(int64(len(lines)))
	return true, err
}
