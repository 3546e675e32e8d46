package grants

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-proxy/sluice/router"
)

// privs are one grantee's privileges (the account's own, or a role's).
type privs struct {
	global router.Priv
	// dbs are the database grants in the order MariaDB tries them: the
	// first pattern that matches a database decides.
	dbs      []dbGrant
	tables   map[tableKey]router.Priv
	columns  map[colKey]router.Priv
	routines map[routineKey]router.Priv
}

type dbGrant struct {
	pattern string
	priv    router.Priv
	// rank orders the patterns: a name without wildcards first, then the
	// later a pattern's first wildcard, the sooner.
	rank int
}

type tableKey struct{ db, table string }

type colKey struct{ db, table, col string }

type routineKey struct {
	db, name string
	kind     byte
}

// Set is what one account may do: its own privileges and its roles'.
// Lines are the account's SHOW GRANTS output without IDENTIFIED clauses,
// for answering SHOW GRANTS. A Set is immutable and safe for concurrent use.
type Set struct {
	// User and Host are the account (CURRENT_USER()).
	User, Host string
	Lines      []string
	// First, when set, are the sanitized lines of the SHOW GRANTS the
	// account's login ran as itself (its own grants and its default
	// role's, as the server printed them), nil for a set read otherwise.
	// A later login of the account whose first answer is the same may be
	// given this set again (auth.GrantsCache.Known). The one who parsed the
	// set sets First before sharing it.
	First []string
	// DefaultRole is the role a new session starts with ("" for none).
	DefaultRole string
	// Granted are the roles granted to the account itself.
	Granted []string
	own     privs
	roles   map[string]*privs
	// edges are the roles granted to each role.
	edges map[string][]string
	// shown are the lines' grantees and kinds, parallel to Lines.
	shown []shownLine
}

type shownLine struct {
	to   grantee
	kind byte
}

// Parse builds the Set of account user@host from its SHOW GRANTS lines
// (with the active role's lines, and any more role's, as SHOW GRANTS
// prints them after SET ROLE). Lines granting to CURRENT_USER count as the
// account's own. Every line is sanitized before it is kept.
func Parse(user, host string, lines []string) (*Set, error) {
	s := &Set{User: user, Host: host, roles: map[string]*privs{}, edges: map[string][]string{}}
	for _, raw := range lines {
		clean := Sanitize(raw)
		l, err := parseLine(clean)
		if err != nil {
			return nil, fmt.Errorf("%w %q: %v", ErrSyntax, firstWords(clean, 6), err)
		}
		if !slices.Contains(s.Lines, clean) {
			s.Lines = append(s.Lines, clean)
			s.shown = append(s.shown, shownLine{to: l.to, kind: l.kind})
		}
		s.take(l)
	}
	for i := range s.roles {
		s.roles[i].sortDBs()
	}
	s.own.sortDBs()
	return s, nil
}

// firstWords is at most n words of s, for error messages.
func firstWords(s string, n int) string {
	f := strings.Fields(s)
	if len(f) > n {
		f = f[:n]
	}
	return strings.Join(f, " ")
}

// isOwn reports whether g is the account itself.
func (s *Set) isOwn(g grantee) bool {
	return g == (grantee{}) || !g.role && g.user == s.User && g.host == s.Host
}

// privsOf returns the privileges of grantee g, made on first use.
func (s *Set) privsOf(g grantee) *privs {
	if s.isOwn(g) {
		return &s.own
	}
	p := s.roles[g.user]
	if p == nil {
		p = &privs{}
		s.roles[g.user] = p
	}
	return p
}

// take records one parsed line.
func (s *Set) take(l line) {
	switch l.kind {
	case 'd':
		if s.isOwn(l.to) {
			s.DefaultRole = l.role
		}
	case 'r':
		if s.isOwn(l.to) {
			if !slices.Contains(s.Granted, l.role) {
				s.Granted = append(s.Granted, l.role)
			}
		} else if !slices.Contains(s.edges[l.to.user], l.role) {
			s.edges[l.to.user] = append(s.edges[l.to.user], l.role)
		}
		s.privsOf(grantee{user: l.role, role: true})
	case 'p':
		s.privsOf(l.to).grant(l)
	}
}

// grant adds one privilege line.
func (p *privs) grant(l line) {
	switch l.obj.level {
	case 'g':
		p.global |= l.priv
	case 'd':
		for i := range p.dbs {
			if p.dbs[i].pattern == l.obj.db {
				p.dbs[i].priv |= l.priv
				return
			}
		}
		p.dbs = append(p.dbs, dbGrant{pattern: l.obj.db, priv: l.priv, rank: rankOf(l.obj.db)})
	case 't':
		if p.tables == nil {
			p.tables = map[tableKey]router.Priv{}
		}
		k := tableKey{l.obj.db, l.obj.table}
		p.tables[k] |= l.priv
		for _, c := range l.cols {
			if p.columns == nil {
				p.columns = map[colKey]router.Priv{}
			}
			p.columns[colKey{l.obj.db, l.obj.table, c.col}] |= c.priv
			// The table's column privileges, any column, under col "".
			p.columns[colKey{l.obj.db, l.obj.table, ""}] |= c.priv
		}
	default:
		if p.routines == nil {
			p.routines = map[routineKey]router.Priv{}
		}
		p.routines[routineKey{l.obj.db, strings.ToLower(l.obj.table), l.obj.level}] |= l.priv
	}
}

// rankOf orders database patterns as MariaDB sorts its db grants: names
// without wildcards first, then by how late the first wildcard comes.
func rankOf(pattern string) int {
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			i++
		case '%', '_':
			return i
		}
	}
	return 1 << 30
}

func (p *privs) sortDBs() {
	slices.SortStableFunc(p.dbs, func(a, b dbGrant) int { return b.rank - a.rank })
}

// Active is what a session may do with one set of enabled roles: the
// account's privileges joined with those of the active role and every role
// granted to it. It is immutable and safe for concurrent use.
type Active struct {
	Set *Set
	// Role is the active role ("" for none).
	Role   string
	layers []*privs
	global router.Priv
	// all: every privilege globally, which lets anything through.
	all bool
}

// Activate returns the privileges of a session of s with role enabled
// ("" for none). A role that is not granted, or whose grants s does not
// hold, contributes nothing.
func (s *Set) Activate(role string) *Active {
	a := &Active{Set: s, Role: role, layers: []*privs{&s.own}}
	seen := map[string]bool{}
	var walk func(r string)
	walk = func(r string) {
		if r == "" || seen[r] {
			return
		}
		seen[r] = true
		if p := s.roles[r]; p != nil {
			a.layers = append(a.layers, p)
		}
		for _, n := range s.edges[r] {
			walk(n)
		}
	}
	walk(role)
	for _, l := range a.layers {
		a.global |= l.global
	}
	a.all = a.global&router.PrivAll == router.PrivAll
	return a
}

// HasRole reports whether role is granted to the account itself, which SET
// ROLE needs.
func (s *Set) HasRole(role string) bool { return slices.Contains(s.Granted, role) }

// ShowGrants is what SHOW GRANTS prints for a session with a's role
// enabled: the account's own lines, the lines of the enabled role and of
// the roles it holds, then SET DEFAULT ROLE.
func (a *Active) ShowGrants() []string {
	s := a.Set
	inRole := map[string]bool{}
	var walk func(r string)
	walk = func(r string) {
		if r == "" || inRole[r] {
			return
		}
		inRole[r] = true
		for _, n := range s.edges[r] {
			walk(n)
		}
	}
	walk(a.Role)
	var own, roles, last []string
	for i, l := range s.Lines {
		sh := s.shown[i]
		switch {
		case sh.kind == 'd':
			last = append(last, l)
		case s.isOwn(sh.to):
			own = append(own, l)
		case sh.to.role && inRole[sh.to.user]:
			roles = append(roles, l)
		}
	}
	return append(append(own, roles...), last...)
}

// All reports whether a may do anything (ALL PRIVILEGES ON *.*), which
// spares every check.
func (a *Active) All() bool { return a.all }

// HasGlobal reports whether a holds at least one of p globally (ON *.*).
func (a *Active) HasGlobal(p router.Priv) bool { return a.global&p != 0 }

// Object is what sluice knows of a view or a stored routine on the
// clusters, which the check needs beyond the grants: a view's SHOW CREATE
// and EXPLAIN need SHOW VIEW, and the tables an SQL SECURITY INVOKER view
// or routine uses are checked against the session's own privileges.
type Object struct {
	// Kind: 'v' a view, 'p' a procedure, 'f' a function.
	Kind byte
	// Invoker: SQL SECURITY INVOKER.
	Invoker bool
	// Definer is the DEFINER, user@host as information_schema prints it.
	Definer string
	// Body is what the view's query or the routine's body needs
	// (router.BodyAccess), checked with the object's database as the
	// current one; Unknown when sluice cannot read it.
	Body *router.Access
	// DefinerRights, for an SQL SECURITY DEFINER view, are its definer's
	// rights when they are less than everything (a view created through
	// sluice runs on the backends as the service account); nil: the
	// definer may read whatever the view reads.
	DefinerRights *Active
}

// Catalog finds the views and routines of the clusters. kind is 't' for
// a table name (which may be a view), 'p' or 'f' for a routine. A nil
// Catalog knows no object. Implementations are safe for concurrent use.
type Catalog interface {
	Object(db, name string, kind byte) *Object
}

// KnowsRole reports whether role is one of the account's roles or a role
// one of them holds.
func (s *Set) KnowsRole(role string) bool {
	_, ok := s.roles[role]
	return ok
}

// Equal reports whether s and o describe the same account with the same
// grants (their sanitized lines are equal).
func (s *Set) Equal(o *Set) bool {
	return s.User == o.User && s.Host == o.Host && slices.Equal(s.Lines, o.Lines)
}

// MayReadAccounts reports whether a may read the account tables
// (SELECT on mysql.user), which decides how much MariaDB tells it about
// roles it does not hold.
func (a *Active) MayReadAccounts() bool { return a.table("mysql", "user")&router.PrivSelect != 0 }

// SameFirst reports whether lines, the sanitized first SHOW GRANTS answer
// of a login, are s's First.
func (s *Set) SameFirst(lines []string) bool {
	return s.First != nil && slices.Equal(s.First, lines)
}
