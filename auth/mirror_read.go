package auth

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// MirrorServer is one server the schema mirror connects to: a cluster's
// master, which it reads, or the auth server, which it writes.
type MirrorServer struct {
	// Name says which server it is in errors and logs: the cluster's name,
	// or "auth".
	Name    string
	Address string
	// User and Password are the account the mirror logs in with: the
	// cluster's service account on a master, auth.service_user on the
	// auth server.
	User, Password string
	// TLS, when set, secures the connection; without TLSRequired a server
	// that offers no TLS is reached in plain text.
	TLS         *tls.Config
	TLSRequired bool
}

// systemSchemas are never read from a master nor touched on the auth
// server.
var systemSchemas = []string{"mysql", "information_schema", "performance_schema", "sys"}

// isSystemSchema reports a schema the mirror leaves alone: the system
// ones and MariaDB's names for directories that are no schema.
func isSystemSchema(name string) bool {
	for _, s := range systemSchemas {
		if strings.EqualFold(name, s) {
			return true
		}
	}
	return strings.HasPrefix(name, "#mysql50#") || name == "lost+found"
}

// notSystem is the WHERE condition of the catalog queries on column col.
func notSystem(col string) string {
	q := make([]string, len(systemSchemas))
	for i, s := range systemSchemas {
		q[i] = quoteString(s)
	}
	return col + " NOT IN (" + strings.Join(q, ", ") + ")"
}

// mirrorConn is one control connection of a mirror run (go-mysql's
// client, as the health probes use). Every statement runs within the
// run's per-statement timeout and is cut when the run's context ends. It
// belongs to the goroutine of its run.
type mirrorConn struct {
	srv     MirrorServer
	c       *client.Conn
	raw     net.Conn
	timeout time.Duration
}

// dialMirror logs in to srv and sets the session up for the mirror:
// utf8mb4, backquoted names in SHOW CREATE, an empty sql_mode (so a
// master's zero dates or backslashes read and create as they are).
func dialMirror(ctx context.Context, srv MirrorServer, timeout time.Duration) (*mirrorConn, error) {
	mc, err := dialMirrorTLS(ctx, srv, timeout, srv.TLS)
	if err != nil && srv.TLS != nil && !srv.TLSRequired && strings.Contains(err.Error(), "TLS") {
		// tls = "preferred" on a server without TLS.
		mc, err = dialMirrorTLS(ctx, srv, timeout, nil)
	}
	if err != nil {
		return nil, err
	}
	for _, q := range []string{"SET NAMES utf8mb4", "SET SESSION sql_mode = ''", "SET SESSION sql_quote_show_create = 1"} {
		if err := mc.exec(ctx, q); err != nil {
			mc.close()
			return nil, err
		}
	}
	return mc, nil
}

func dialMirrorTLS(ctx context.Context, srv MirrorServer, timeout time.Duration, t *tls.Config) (*mirrorConn, error) {
	mc := &mirrorConn{srv: srv, timeout: timeout}
	deadline := time.Now().Add(timeout)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := net.Dialer{Deadline: deadline}
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		_ = nc.SetDeadline(deadline)
		mc.raw = nc
		return nc, nil
	}
	c, err := client.ConnectWithDialer(ctx, "tcp", srv.Address, srv.User, srv.Password, "", dial, func(c *client.Conn) error {
		c.SetAttributes(map[string]string{"program_name": "sluice-mirror"})
		if t != nil {
			c.SetTLSConfig(t)
		}
		return nil
	})
	if err != nil {
		if mc.raw != nil {
			mc.raw.Close()
		}
		return nil, fmt.Errorf("%s %s: connect as %q: %w", srv.Name, srv.Address, srv.User, err)
	}
	mc.c = c
	return mc, nil
}

// close ends the connection.
func (mc *mirrorConn) close() {
	if mc.c != nil {
		_ = mc.raw.SetDeadline(time.Now().Add(time.Second))
		_ = mc.c.Close()
	}
}

// query runs q and returns its result; the error names the server and
// the statement.
func (mc *mirrorConn) query(ctx context.Context, q string) (*mysql.Result, error) {
	deadline := time.Now().Add(mc.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	_ = mc.raw.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = mc.raw.SetDeadline(time.Now()) })
	r, err := mc.c.Execute(q)
	stop()
	if err != nil {
		return nil, &mirrorError{server: mc.srv.Name + " " + mc.srv.Address, stmt: q, err: err}
	}
	return r, nil
}

// exec runs a statement whose result does not matter.
func (mc *mirrorConn) exec(ctx context.Context, q string) error {
	r, err := mc.query(ctx, q)
	if r != nil {
		r.Close()
	}
	return err
}

// mirrorError is a statement that failed on one server.
type mirrorError struct {
	server, stmt string
	err          error
}

func (e *mirrorError) Error() string {
	// The first line names the object; a table's columns, defaults and
	// comments (which may hold anything) stay out of logs.
	stmt, _, cut := strings.Cut(e.stmt, "\n")
	if len(stmt) > 200 {
		stmt, cut = stmt[:200], true
	}
	if cut {
		stmt += " ..."
	}
	return fmt.Sprintf("%s: %s: %v", e.server, stmt, e.err)
}

func (e *mirrorError) Unwrap() error { return e.err }

// serverRefused reports an error the server answered (an ERR packet), as
// opposed to a broken connection: the run may go on with other objects.
func serverRefused(err error) bool {
	var me *mysql.MyError
	return errors.As(err, &me)
}

// rows runs q and returns its rows as strings of their own (NULL as "").
func (mc *mirrorConn) rows(ctx context.Context, q string) ([][]string, error) {
	r, err := mc.query(ctx, q)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if r.Resultset == nil {
		return nil, nil
	}
	out := make([][]string, r.RowNumber())
	for i := range out {
		row := make([]string, r.ColumnNumber())
		for j := range row {
			// GetString's string shares the result's buffer, which
			// Close hands back to go-mysql's pool for the next result.
			v, _ := r.GetString(i, j)
			row[j] = strings.Clone(v)
		}
		out[i] = row
	}
	return out, nil
}

// mirrorKind is what a name in a schema's table namespace is.
type mirrorKind uint8

const (
	kindTable mirrorKind = iota
	kindView
	kindSequence
)

func (k mirrorKind) String() string {
	switch k {
	case kindView:
		return "view"
	case kindSequence:
		return "sequence"
	}
	return "table"
}

// mirrorObject is one table, view or sequence of a catalog.
type mirrorObject struct {
	kind mirrorKind
	// cols are the columns in order: "name type" for tables (normalType),
	// the name alone for views; none for sequences.
	cols []string
	// src is the index of the master that has it, and srcTable its name
	// there (a shard's physical table for a logical name).
	src      int
	srcTable string
}

// mirrorSchema is one schema of a catalog.
type mirrorSchema struct {
	name, charset, collation, comment string
	objects                           map[string]*mirrorObject
	// routines maps "PROCEDURE name" and "FUNCTION name", name in lower
	// case (routine names are not case-sensitive), to the name as written.
	routines map[string]string
}

// mirrorCatalog is what one server (or the union of the masters) holds
// outside the system schemas.
type mirrorCatalog struct {
	schemas map[string]*mirrorSchema
}

func newCatalog() *mirrorCatalog { return &mirrorCatalog{schemas: map[string]*mirrorSchema{}} }

// schema returns the named schema, adding it when missing.
func (c *mirrorCatalog) schema(name string) *mirrorSchema {
	s := c.schemas[name]
	if s == nil {
		s = &mirrorSchema{name: name, objects: map[string]*mirrorObject{}, routines: map[string]string{}}
		c.schemas[name] = s
	}
	return s
}

// readCatalog reads the schemas, tables, views, sequences, columns and
// routines of the server behind mc (four queries on information_schema);
// src is stored in every object. withComments asks for the schemas'
// comments (MariaDB 10.5 and later); a server without them is read
// without.
func readCatalog(ctx context.Context, mc *mirrorConn, src int, withComments bool) (*mirrorCatalog, error) {
	cat := newCatalog()
	q := "SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME, SCHEMA_COMMENT FROM information_schema.SCHEMATA"
	rows, err := mc.rows(ctx, q)
	if err != nil && withComments && serverRefused(err) {
		rows, err = mc.rows(ctx, "SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME, '' FROM information_schema.SCHEMATA")
	}
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		if isSystemSchema(r[0]) {
			continue
		}
		s := cat.schema(r[0])
		s.charset, s.collation = r[1], r[2]
		if withComments {
			s.comment = r[3]
		}
	}
	if rows, err = mc.rows(ctx, "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES WHERE "+notSystem("TABLE_SCHEMA")); err != nil {
		return nil, err
	}
	for _, r := range rows {
		s := cat.schemas[r[0]]
		if s == nil {
			continue
		}
		o := &mirrorObject{src: src, srcTable: r[1]}
		switch r[2] {
		case "BASE TABLE", "SYSTEM VERSIONED":
			o.kind = kindTable
		case "VIEW":
			o.kind = kindView
		case "SEQUENCE":
			o.kind = kindSequence
		default:
			continue // TEMPORARY, SYSTEM VIEW
		}
		s.objects[r[1]] = o
	}
	if rows, err = mc.rows(ctx, "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE "+
		notSystem("TABLE_SCHEMA")+" ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION"); err != nil {
		return nil, err
	}
	for _, r := range rows {
		s := cat.schemas[r[0]]
		if s == nil {
			continue
		}
		o := s.objects[r[1]]
		switch {
		case o == nil || o.kind == kindSequence:
		case o.kind == kindView:
			o.cols = append(o.cols, r[2])
		default:
			o.cols = append(o.cols, r[2]+" "+normalType(r[3]))
		}
	}
	if rows, err = mc.rows(ctx, "SELECT ROUTINE_SCHEMA, ROUTINE_NAME, ROUTINE_TYPE FROM information_schema.ROUTINES WHERE "+
		notSystem("ROUTINE_SCHEMA")+" AND ROUTINE_TYPE IN ('PROCEDURE', 'FUNCTION')"); err != nil {
		return nil, err
	}
	for _, r := range rows {
		if s := cat.schemas[r[0]]; s != nil {
			s.routines[r[2]+" "+strings.ToLower(r[1])] = r[1]
		}
	}
	return cat, nil
}

// mergeCatalogs is the union of the masters' catalogs (cats, in order of
// precedence: the default cluster first), which the auth server must
// hold. A name that several masters have takes the first one's kind and
// columns. logical, when set, names the logical table a master's
// physical table stands for (shard rules); a logical name no master
// has as such a table gets the structure of its first physical table.
func mergeCatalogs(cats []*mirrorCatalog, logical func(src int, schema, table string) string) *mirrorCatalog {
	out := newCatalog()
	for _, cat := range cats {
		for name, s := range cat.schemas {
			m := out.schema(name)
			if m.charset == "" {
				m.charset, m.collation = s.charset, s.collation
			}
			for on, o := range s.objects {
				if _, ok := m.objects[on]; !ok {
					m.objects[on] = o
				}
			}
			for k, v := range s.routines {
				if _, ok := m.routines[k]; !ok {
					m.routines[k] = v
				}
			}
		}
	}
	if logical == nil {
		return out
	}
	for _, cat := range cats {
		for name, s := range cat.schemas {
			for _, on := range sortedKeys(s.objects) {
				o := s.objects[on]
				if o.kind != kindTable {
					continue
				}
				ln := logical(o.src, name, on)
				if ln == "" || ln == on {
					continue
				}
				if _, ok := out.schemas[name].objects[ln]; !ok {
					out.schemas[name].objects[ln] = o
				}
			}
		}
	}
	return out
}
