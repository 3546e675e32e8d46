package health

import (
	"errors"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// Kinds of ObjectDef.
const (
	KindView      byte = 'v'
	KindProcedure byte = 'p'
	KindFunction  byte = 'f'
)

// ObjectKey names a view or a stored routine as the server compares names
// with lower_case_table_names = 0: the schema exactly, a view's name
// exactly, a routine's name in lower case (routine names are not
// case-sensitive). Build it with ObjectKeyOf.
type ObjectKey struct {
	Schema, Name string
	Kind         byte
}

// ObjectKeyOf is the key of the object of kind (KindView, KindProcedure or
// KindFunction) called name in schema. It allocates only for a routine
// name with upper-case letters.
func ObjectKeyOf(schema, name string, kind byte) ObjectKey {
	if kind != KindView {
		name = strings.ToLower(name)
	}
	return ObjectKey{Schema: schema, Name: name, Kind: kind}
}

// ObjectDef is a view or a stored routine as information_schema shows it
// to the service account.
type ObjectDef struct {
	Schema, Name string
	Kind         byte
	// Invoker: SQL SECURITY INVOKER (else DEFINER).
	Invoker bool
	// Definer is DEFINER, user@host.
	Definer string
	// Body is VIEW_DEFINITION or ROUTINE_DEFINITION; "" when the server
	// does not show it to the service account.
	Body string
}

// Key is d's ObjectKey.
func (d *ObjectDef) Key() ObjectKey { return ObjectKeyOf(d.Schema, d.Name, d.Kind) }

// Objects are the views and stored routines of a server, outside its
// system schemas. A nil *Objects is an empty catalog. Objects are shared
// between Statuses and never change once built.
type Objects struct {
	defs  []ObjectDef
	byKey map[ObjectKey]int
}

// NewObjects builds the catalog of defs, which it keeps (the caller must
// not change them afterwards). Of two definitions with the same key the
// last wins.
func NewObjects(defs []ObjectDef) *Objects {
	o := &Objects{defs: defs, byKey: make(map[ObjectKey]int, len(defs))}
	for i := range defs {
		o.byKey[defs[i].Key()] = i
	}
	return o
}

// Defs are the definitions in the server's order. The slice is shared:
// it must not be modified.
func (o *Objects) Defs() []ObjectDef {
	if o == nil {
		return nil
	}
	return o.defs
}

// Len is the number of definitions.
func (o *Objects) Len() int {
	if o == nil {
		return 0
	}
	return len(o.defs)
}

// Find returns the object of kind called name in schema (compared as
// ObjectKeyOf says), nil when there is none.
func (o *Objects) Find(schema, name string, kind byte) *ObjectDef {
	if o == nil {
		return nil
	}
	i, ok := o.byKey[ObjectKeyOf(schema, name, kind)]
	if !ok {
		return nil
	}
	return &o.defs[i]
}

// notSystem restricts a query of information_schema to the schemas of
// applications.
const notSystem = " NOT IN ('mysql', 'sys', 'performance_schema', 'information_schema')"

// viewsQuery and routinesQuery read the catalog of views and routines.
const (
	viewsQuery = "SELECT TABLE_SCHEMA, TABLE_NAME, SECURITY_TYPE, DEFINER, VIEW_DEFINITION FROM information_schema.VIEWS" +
		" WHERE TABLE_SCHEMA" + notSystem
	routinesQuery = "SELECT ROUTINE_SCHEMA, ROUTINE_NAME, ROUTINE_TYPE, SECURITY_TYPE, DEFINER, ROUTINE_DEFINITION" +
		" FROM information_schema.ROUTINES WHERE ROUTINE_TYPE IN ('PROCEDURE', 'FUNCTION') AND ROUTINE_SCHEMA" + notSystem
)

// rowDigest is the SQL of a 60-bit hash of the columns cols: the first 15
// hexadecimal digits of the MD5 of the columns joined by NUL bytes.
func rowDigest(cols string) string {
	return "CAST(CONV(LEFT(MD5(CONCAT_WS(CHAR(0), " + cols + ")), 15), 16, 10) AS UNSIGNED)"
}

// readObjects fills st.Objects with the server's views and stored routines.
// Like readFunctions it never fails the probe: a server that refuses a
// query leaves Objects nil, one that fails to answer keeps the last
// catalog read (the control connection is dialled again next time). sig is
// the server's digest of its views and of its routines (catalogSigQuery;
// zero when unknown): the catalog is read again only when it changed, and
// otherwise the last one is shared. sent is when the probe asked.
func (w *worker) readObjects(c *client.Conn, st *Status, sig [2]string, sent time.Time) {
	if w.objs != nil && sig != ([2]string{}) && sig == w.objsSig {
		st.Objects, st.ObjectsAt = w.objs, sent
		return
	}
	defs, err := readViews(c, nil)
	if err == nil {
		defs, err = readRoutines(c, defs)
	}
	if !w.objectsAnswer(err, st) {
		return
	}
	w.objs, w.objsSig = NewObjects(defs), sig
	st.Objects, st.ObjectsAt = w.objs, sent
}

// objectsAnswer handles err, a query's error in readObjects, and reports
// whether the reading goes on (err is nil).
func (w *worker) objectsAnswer(err error, st *Status) bool {
	var refused *mysql.MyError
	switch {
	case err == nil:
		return true
	case errors.As(err, &refused):
		w.objs, w.objsSig = nil, [2]string{}
	default:
		st.Objects = w.objs
		w.closeConn()
	}
	return false
}

// readViews appends the rows of viewsQuery to defs.
func readViews(c *client.Conn, defs []ObjectDef) ([]ObjectDef, error) {
	r, err := c.Execute(viewsQuery)
	if err != nil {
		return nil, err
	}
	if r.Resultset == nil {
		return defs, nil
	}
	for row := range r.RowNumber() {
		d := ObjectDef{Kind: KindView}
		d.Schema = cellString(r.Resultset, row, 0)
		d.Name = cellString(r.Resultset, row, 1)
		d.Invoker = cell(r.Resultset, row, 2) == "INVOKER"
		d.Definer = cellString(r.Resultset, row, 3)
		d.Body = cellString(r.Resultset, row, 4)
		defs = append(defs, d)
	}
	return defs, nil
}

// readRoutines appends the rows of routinesQuery to defs.
func readRoutines(c *client.Conn, defs []ObjectDef) ([]ObjectDef, error) {
	r, err := c.Execute(routinesQuery)
	if err != nil {
		return nil, err
	}
	if r.Resultset == nil {
		return defs, nil
	}
	for row := range r.RowNumber() {
		d := ObjectDef{Kind: KindProcedure}
		if cell(r.Resultset, row, 2) == "FUNCTION" {
			d.Kind = KindFunction
		}
		d.Schema = cellString(r.Resultset, row, 0)
		d.Name = cellString(r.Resultset, row, 1)
		d.Invoker = cell(r.Resultset, row, 3) == "INVOKER"
		d.Definer = cellString(r.Resultset, row, 4)
		d.Body = cellString(r.Resultset, row, 5)
		defs = append(defs, d)
	}
	return defs, nil
}

// cell is the text of a cell, "" for NULL. It aliases the result's
// buffer: cellString copies it out.
func cell(rs *mysql.Resultset, row, col int) string {
	v, _ := rs.GetString(row, col)
	return v
}

// cellString is cell copied out of the result's buffer, to be kept.
func cellString(rs *mysql.Resultset, row, col int) string {
	return strings.Clone(cell(rs, row, col))
}
