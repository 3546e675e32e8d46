package router

// ReplaySQL is the statement that re-applies, on another connection, the
// value v's assignment left on the connection that ran it: lit is that value
// read back (SELECT @@SESSION.<ReadBack>) and written as an SQL literal.
func (v SessionVar) ReplaySQL(lit string) string {
	name := v.ReadBack
	if name == "" {
		name = v.Name
	}
	return "SET SESSION " + quoteVarName(name) + " = " + lit
}

// ReadBackQuery is the query that reads the value v's assignment left.
func (v SessionVar) ReadBackQuery() string {
	name := v.ReadBack
	if name == "" {
		name = v.Name
	}
	return "SELECT @@SESSION." + quoteVarName(name)
}
