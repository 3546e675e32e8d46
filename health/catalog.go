package health

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// A master's probe keeps four catalogs: its views and its stored routines
// (Objects, for grants), its stored functions (Functions, for routing) and
// its schemas (Schemas, for logins). Each probe asks the server for one
// short row of digests (catalogSigQuery) and reads a catalog itself only
// when its digest changed: an unchanged catalog costs sluice a few dozen
// bytes per probe, not a result set per catalog.

// The columns of catalogSigQuery's row.
const (
	sigViews = iota
	sigRoutines
	sigFunctions
	sigSchemas
	sigColumns
)

// catalogSigQuery is, for each catalog, the number of rows the query that
// reads it would return and the XOR of a 60-bit hash of each row
// (rowDigest), computed by the server.
var catalogSigQuery = "SELECT" +
	" (SELECT CONCAT(COUNT(*), ':', BIT_XOR(" + rowDigest("TABLE_SCHEMA, TABLE_NAME, SECURITY_TYPE, DEFINER, VIEW_DEFINITION") + "))" +
	" FROM information_schema.VIEWS WHERE TABLE_SCHEMA" + notSystem + ")," +
	" (SELECT CONCAT(COUNT(*), ':', BIT_XOR(" + rowDigest("ROUTINE_SCHEMA, ROUTINE_NAME, ROUTINE_TYPE, SECURITY_TYPE, DEFINER, IFNULL(ROUTINE_DEFINITION, '')") + "))" +
	" FROM information_schema.ROUTINES WHERE ROUTINE_TYPE IN ('PROCEDURE', 'FUNCTION') AND ROUTINE_SCHEMA" + notSystem + ")," +
	" (SELECT CONCAT(COUNT(*), ':', BIT_XOR(" + rowDigest("ROUTINE_SCHEMA, ROUTINE_NAME, SQL_DATA_ACCESS") + "))" +
	" FROM information_schema.ROUTINES WHERE ROUTINE_TYPE = 'FUNCTION')," +
	" (SELECT CONCAT(COUNT(*), ':', BIT_XOR(" + rowDigest("SCHEMA_NAME") + ")) FROM information_schema.SCHEMATA)"

// readCatalogs fills st's catalogs (Functions, Schemas, Objects) on a
// master's probe, reading each only when the server's digest of it changed
// since it was last read. It never fails the probe. A server that refuses
// the digests has every catalog read each time; one that fails to answer
// keeps the last catalogs (the readers fail on the closed connection).
func (w *worker) readCatalogs(c *client.Conn, st *Status) {
	sent := time.Now()
	sig := w.catalogDigests(c)
	if w.funcs != nil && sig[sigFunctions] != "" && sig[sigFunctions] == w.funcsDigest {
		st.Functions = w.funcs
	} else if w.readFunctions(c, st) {
		w.funcsDigest = sig[sigFunctions]
	}
	if w.schemas != nil && sig[sigSchemas] != "" && sig[sigSchemas] == w.schemasDigest {
		st.Schemas = w.schemas
	} else if w.readSchemas(c, st) {
		w.schemasDigest = sig[sigSchemas]
	}
	w.readObjects(c, st, [2]string{sig[sigViews], sig[sigRoutines]}, sent)
}

// catalogDigests runs catalogSigQuery; every digest is "" (unknown) when
// it failed. The strings are copies, to be kept.
func (w *worker) catalogDigests(c *client.Conn) [sigColumns]string {
	var sig [sigColumns]string
	r, err := c.Execute(catalogSigQuery)
	var refused *mysql.MyError
	switch {
	case errors.As(err, &refused):
		return sig
	case err != nil:
		w.closeConn()
		return sig
	}
	if r.Resultset == nil || r.RowNumber() != 1 {
		return sig
	}
	for i := range sig {
		sig[i] = cellString(r.Resultset, 0, i)
	}
	return sig
}

// readSchemas fills st.Schemas with the schemas the service account sees
// (SHOW DATABASES) and reports whether it read them. Like readFunctions it
// never fails the probe: a refusal leaves Schemas nil, a failure keeps the
// last list read.
func (w *worker) readSchemas(c *client.Conn, st *Status) bool {
	r, err := c.Execute("SHOW DATABASES")
	var refused *mysql.MyError
	switch {
	case errors.As(err, &refused):
		w.schemas = nil
		return false
	case err != nil:
		st.Schemas = w.schemas
		w.closeConn()
		return false
	}
	if r.Resultset == nil {
		return false
	}
	same := w.schemas != nil && len(w.schemas) == r.RowNumber()
	for row := 0; same && row < r.RowNumber(); row++ {
		v, _ := r.GetString(row, 0)
		same = w.schemas.Has(v)
	}
	if !same {
		l := make(Schemas, r.RowNumber())
		for row := range r.RowNumber() {
			l[row], _ = r.GetString(row, 0)
		}
		slices.Sort(l)
		w.schemas = l
	}
	st.Schemas = w.schemas
	return true
}

// functionsQuery lists the stored functions and what each declares it does
// with data.
const functionsQuery = "SELECT ROUTINE_SCHEMA, ROUTINE_NAME, SQL_DATA_ACCESS FROM information_schema.ROUTINES WHERE ROUTINE_TYPE = 'FUNCTION'"

// readFunctions fills st.Functions from the server's stored functions and
// reports whether it read them. It never fails the probe, which is about
// the server's health: a server that refuses the query leaves Functions nil
// (every function unknown), and one that fails to answer keeps the last
// catalog read (the control connection is dialled again next time).
func (w *worker) readFunctions(c *client.Conn, st *Status) bool {
	r, err := c.Execute(functionsQuery)
	var refused *mysql.MyError
	switch {
	case errors.As(err, &refused):
		w.funcs, w.funcsSig = nil, ""
		return false
	case err != nil:
		st.Functions = w.funcs
		w.closeConn()
		return false
	}
	if r.Resultset == nil {
		return false
	}
	var sig strings.Builder
	for row := range r.RowNumber() {
		for col := range 3 {
			v, _ := r.GetString(row, col)
			sig.WriteString(v)
			sig.WriteByte(0)
		}
	}
	if w.funcs == nil || sig.String() != w.funcsSig {
		f := make(Functions, r.RowNumber())
		for row := range r.RowNumber() {
			schema, _ := r.GetString(row, 0)
			name, _ := r.GetString(row, 1)
			access, _ := r.GetString(row, 2)
			f[FunctionKey{Schema: schema, Name: strings.ToLower(name)}] = access
		}
		w.funcs, w.funcsSig = f, sig.String()
	}
	st.Functions = w.funcs
	return true
}
