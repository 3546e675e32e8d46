package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Mirror keeps the auth server's schemas equal to the masters' in what
// grants need ([auth] mirror_schema): MariaDB refuses a table-, column- or
// routine-level GRANT on an object that does not exist, so the auth
// server must hold every schema, table, view, sequence and routine that
// clients reach through sluice, by name, with the tables' columns. It
// holds no rows: tables are created empty, views and routines as stubs
// (stubView, stubRoutine).
//
// A Mirror is a description; Run does the work and may be called again
// (not concurrently with itself: the caller runs one at a time).
type Mirror struct {
	// Auth is the auth server and sluice's own account there.
	Auth MirrorServer
	// Masters are the clusters' masters, the default cluster's first:
	// where several hold the same name, the first one's structure wins.
	Masters []MirrorServer
	// Logical, when set, names the logical table (shard rules) that table
	// of schema on Masters[src] is a physical part of, "" for none; the
	// auth server then holds the logical name too, which is what grants
	// name.
	Logical func(src int, schema, table string) string
	// Timeout bounds each connection's login and each statement.
	Timeout time.Duration
}

// MirrorResult is what one run changed on the auth server, each entry
// naming the change and the object ("create table shop.orders").
type MirrorResult struct {
	Changes []string
	// Schemas counts the schemas the auth server mirrors after the run.
	Schemas int
}

// Run reads every master's catalog and makes the auth server's mirrored
// schemas hold the union: it creates missing schemas, tables, views,
// sequences and routines, replaces a table whose columns (names, types,
// order) or a view whose column names changed, drops what no master has
// any more inside a mirrored schema, and drops a schema that no master
// has when the mirror created it (its comment says so). Nothing outside
// those schemas, and nothing in mysql, information_schema,
// performance_schema or sys, is touched.
//
// Nothing is changed unless every master and the auth server could be
// read. A statement the auth server refuses for one object is reported
// in the error (joined with the others) and the run goes on with the
// rest; a broken connection ends the run. The error names the server,
// the statement and the object.
func (m *Mirror) Run(ctx context.Context) (*MirrorResult, error) {
	timeout := m.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	srcs := make([]*mirrorConn, 0, len(m.Masters))
	defer func() {
		for _, c := range srcs {
			c.close()
		}
	}()
	cats := make([]*mirrorCatalog, 0, len(m.Masters))
	for i, ms := range m.Masters {
		c, err := dialMirror(ctx, ms, timeout)
		if err != nil {
			return nil, fmt.Errorf("reading cluster %s: %w", ms.Name, err)
		}
		srcs = append(srcs, c)
		cat, err := readCatalog(ctx, c, i, false)
		if err != nil {
			return nil, fmt.Errorf("reading cluster %s: %w", ms.Name, err)
		}
		cats = append(cats, cat)
	}
	want := mergeCatalogs(cats, m.Logical)
	dst, err := dialMirror(ctx, m.Auth, timeout)
	if err != nil {
		return nil, fmt.Errorf("auth server: %w", err)
	}
	defer dst.close()
	have, err := readCatalog(ctx, dst, -1, true)
	if err != nil {
		return nil, fmt.Errorf("reading the auth server: %w", err)
	}
	a := &mirrorApply{ctx: ctx, dst: dst, srcs: srcs, res: &MirrorResult{Schemas: len(want.schemas)}}
	err = a.apply(want, have)
	return a.res, err
}

// mirrorApply is one run's changes to the auth server.
type mirrorApply struct {
	ctx  context.Context
	dst  *mirrorConn
	srcs []*mirrorConn
	res  *MirrorResult
	// errs are the statements the auth server refused.
	errs []error
}

// errBroken ends a run: a connection failed, not a statement.
var errBroken = errors.New("connection failed")

// do runs the statements on the auth server until one succeeds (each is
// a fallback for the one before) and records change on success. A refusal
// of the last one is recorded for the run's error; a broken connection
// is returned.
func (a *mirrorApply) do(change string, stmts ...string) error {
	var err error
	for _, q := range stmts {
		if err = a.dst.exec(a.ctx, q); err == nil {
			a.res.Changes = append(a.res.Changes, change)
			return nil
		}
		if !serverRefused(err) {
			return errors.Join(errBroken, err)
		}
	}
	a.errs = append(a.errs, fmt.Errorf("%s: %w", change, err))
	return nil
}

// apply makes have (the auth server) hold want, in an order where nothing
// waits on what comes later: schemas, then what must go, sequences (a
// column's DEFAULT may name one), tables, views, routines, and last the
// schemas no master has.
func (a *mirrorApply) apply(want, have *mirrorCatalog) error {
	names := sortedKeys(want.schemas)
	for _, name := range names {
		if have.schemas[name] == nil {
			full, plain := createSchema(want.schemas[name])
			if err := a.do("create schema "+name, full, plain); err != nil {
				return err
			}
		}
	}
	for _, name := range names {
		if err := a.schema(want.schemas[name], have.schema(name)); err != nil {
			return err
		}
	}
	for _, name := range sortedKeys(have.schemas) {
		s := have.schemas[name]
		if want.schemas[name] != nil || s.comment != mirrorComment {
			continue
		}
		if err := a.do("drop schema "+name, "DROP DATABASE IF EXISTS "+quoteIdent(name)); err != nil {
			return err
		}
	}
	return errors.Join(a.errs...)
}

// schema makes the auth server's schema have hold what want holds.
func (a *mirrorApply) schema(want, have *mirrorSchema) error {
	db := want.name
	for _, on := range sortedKeys(have.objects) {
		o := have.objects[on]
		if w := want.objects[on]; w != nil && w.kind == o.kind {
			continue
		}
		what := o.kind.String()
		if err := a.do("drop "+what+" "+db+"."+on, "DROP "+strings.ToUpper(what)+" IF EXISTS "+qualify(db, on)); err != nil {
			return err
		}
		delete(have.objects, on)
	}
	for _, k := range sortedKeys(have.routines) {
		if _, ok := want.routines[k]; ok {
			continue
		}
		typ, _, _ := strings.Cut(k, " ")
		name := have.routines[k]
		if err := a.do("drop "+strings.ToLower(typ)+" "+db+"."+name, "DROP "+typ+" IF EXISTS "+qualify(db, name)); err != nil {
			return err
		}
	}
	objs := sortedKeys(want.objects)
	for _, kind := range []mirrorKind{kindSequence, kindTable, kindView} {
		for _, on := range objs {
			w := want.objects[on]
			if w.kind != kind {
				continue
			}
			if err := a.object(db, on, w, have.objects[on]); err != nil {
				return err
			}
		}
	}
	for _, k := range sortedKeys(want.routines) {
		if _, ok := have.routines[k]; ok {
			continue
		}
		typ, _, _ := strings.Cut(k, " ")
		name := want.routines[k]
		if err := a.do("create "+strings.ToLower(typ)+" "+db+"."+name, stubRoutine(db, name, typ == "FUNCTION")); err != nil {
			return err
		}
	}
	return nil
}

// object creates or replaces one table, view or sequence when the auth
// server's (h, nil when it has none) differs from the master's (w).
func (a *mirrorApply) object(db, name string, w, h *mirrorObject) error {
	label := w.kind.String() + " " + db + "." + name
	switch w.kind {
	case kindSequence:
		if h != nil {
			return nil
		}
		return a.do("create "+label, stubSequence(db, name))
	case kindView:
		if h != nil && slices.Equal(h.cols, w.cols) {
			return nil
		}
		if len(w.cols) == 0 {
			// information_schema lists no column for a view whose
			// tables are gone: it cannot be queried, nor be mirrored.
			a.errs = append(a.errs, fmt.Errorf("view %s.%s: the master lists no column for it (does it read a table that is gone?)", db, name))
			return nil
		}
		verb := "create "
		if h != nil {
			verb = "replace "
		}
		return a.do(verb+label, stubView(db, name, w.cols))
	}
	if h != nil && slices.Equal(h.cols, w.cols) {
		return nil
	}
	src := a.srcs[w.src]
	rows, err := src.rows(a.ctx, "SHOW CREATE TABLE "+qualify(db, w.srcTable))
	if err != nil {
		if !serverRefused(err) {
			return errors.Join(errBroken, err)
		}
		a.errs = append(a.errs, fmt.Errorf("%s: %w", label, err))
		return nil
	}
	if len(rows) != 1 || len(rows[0]) < 2 {
		a.errs = append(a.errs, fmt.Errorf("%s: %s: SHOW CREATE TABLE %s gave no statement", label, src.srv.Name, w.srcTable))
		return nil
	}
	ct, err := cleanCreateTable(rows[0][1], db, name)
	if err != nil {
		a.errs = append(a.errs, fmt.Errorf("%s: %s: %w", label, src.srv.Name, err))
		return nil
	}
	verb := "create "
	if h != nil {
		// Table grants outlive DROP TABLE in MariaDB and MySQL: the
		// DBA's grants on the table and its columns stay.
		verb = "replace "
		if err := a.dst.exec(a.ctx, "DROP TABLE IF EXISTS "+qualify(db, name)); err != nil {
			if !serverRefused(err) {
				return errors.Join(errBroken, err)
			}
			a.errs = append(a.errs, fmt.Errorf("%s: %w", label, err))
			return nil
		}
	}
	return a.do(verb+label, ct.Full, ct.Bare)
}

// sortedKeys returns m's keys in order, so runs change things in the same
// order every time.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
