package router

import (
	"strings"
)

// textAccess is the Access of statements the parser rejects or sluice does
// not model from the tree, recognised by their leading words: the
// administrative SHOWs and PURGE, and the routine statements MariaDB
// accepts and the parser does not. Anything else, and any text holding a
// comment (which the server may run as code), is Unknown.
func textAccess(sql string) *Access {
	if strings.Contains(sql, "/*") || strings.Contains(sql, "#") || strings.Contains(sql, "--") || !singleStatementText(sql) {
		return unknownAccess
	}
	w := strings.Fields(strings.TrimRight(strings.TrimSpace(sql), ";"))
	up := make([]string, len(w))
	for i, x := range w {
		up[i] = strings.ToUpper(x)
	}
	is := func(want ...string) bool {
		if len(up) < len(want) {
			return false
		}
		for i, x := range want {
			if up[i] != x {
				return false
			}
		}
		return true
	}
	global := func(p Priv) *Access { return &Access{Needs: []Need{{Level: NeedGlobal, Priv: p}}} }
	switch {
	case is("KILL"):
		// sluice runs KILL itself, with MariaDB's checks
		// (sessioncmds.go).
		return noAccess
	case is("SHOW", "BINARY", "LOGS"), is("SHOW", "MASTER", "LOGS"), is("SHOW", "MASTER", "STATUS"), is("SHOW", "BINLOG", "STATUS"):
		return global(PrivSuper | PrivBinlogMonitor)
	case is("SHOW", "BINLOG", "EVENTS"):
		return global(PrivBinlogMonitor)
	case is("PURGE", "BINARY", "LOGS"), is("PURGE", "MASTER", "LOGS"):
		return global(PrivSuper | PrivBinlogAdmin)
	case is("SHOW", "ENGINE"):
		return global(PrivProcess)
	case is("SHOW", "SLAVE", "STATUS"), is("SHOW", "REPLICA", "STATUS"), is("SHOW", "ALL", "SLAVES", "STATUS"), is("SHOW", "ALL", "REPLICAS", "STATUS"):
		return global(PrivSuper | PrivSlaveMonitor)
	case is("SHOW", "CREATE", "PROCEDURE"), is("SHOW", "CREATE", "FUNCTION"):
		if len(w) != 4 {
			return unknownAccess
		}
		db, name, ok := splitName(w[3])
		if !ok {
			return unknownAccess
		}
		return &Access{Needs: []Need{{Level: NeedRoutine, DB: db, Routine: name, Any: true, Code: 1305, Function: up[2] == "FUNCTION"}}}
	case is("DROP", "PROCEDURE"), is("DROP", "FUNCTION"):
		rest := w[2:]
		if len(up) > 3 && up[2] == "IF" && up[3] == "EXISTS" {
			rest = w[4:]
		}
		if len(rest) != 1 {
			return unknownAccess
		}
		db, name, ok := splitName(rest[0])
		if !ok {
			return unknownAccess
		}
		return &Access{Needs: []Need{{Level: NeedRoutine, DB: db, Routine: name, Priv: PrivAlterRoutine, Function: up[1] == "FUNCTION"}}}
	case is("CREATE", "PROCEDURE"), is("CREATE", "FUNCTION"), is("CREATE", "OR", "REPLACE", "PROCEDURE"), is("CREATE", "OR", "REPLACE", "FUNCTION"):
		return createRoutineAccess(w, up)
	}
	return unknownAccess
}

// createRoutineAccess is what CREATE [OR REPLACE] PROCEDURE | FUNCTION
// [IF NOT EXISTS] name … needs: CREATE ROUTINE on its database (and ALTER
// ROUTINE on it with OR REPLACE). A DEFINER clause (which needs SET USER
// or SUPER to name another account) is not modelled.
func createRoutineAccess(w, up []string) *Access {
	i := 1
	replace := false
	if up[1] == "OR" {
		i, replace = 3, true
	}
	function := up[i] == "FUNCTION"
	i++
	if len(up) > i+2 && up[i] == "IF" && up[i+1] == "NOT" && up[i+2] == "EXISTS" {
		i += 3
	}
	if i >= len(w) {
		return unknownAccess
	}
	name := w[i]
	if p := strings.IndexByte(name, '('); p >= 0 {
		name = name[:p]
	}
	db, routine, ok := splitName(name)
	if !ok {
		return unknownAccess
	}
	// The routine itself, asked nothing: it names what the statement
	// creates (the data plane remembers its creator).
	a := &Access{Needs: []Need{{Level: NeedDB, DB: db, Priv: PrivCreateRoutine},
		{Level: NeedRoutine, DB: db, Routine: routine, Function: function, Creates: true}}}
	if replace {
		a.Needs = append(a.Needs, Need{Level: NeedRoutine, DB: db, Routine: routine, Priv: PrivAlterRoutine, Function: function})
	}
	if function {
		// With the binary log on, MariaDB wants SUPER of whoever creates
		// a function (unless log_bin_trust_function_creators): the
		// clusters log, and sluice's service account has SUPER.
		a.Needs = append(a.Needs, Need{Level: NeedGlobal, Priv: PrivSuper, Code: 1419})
	}
	return a
}

// splitName splits db.name or name, each part bare or in backquotes
// (without a backquote inside).
func splitName(s string) (db, name string, ok bool) {
	part := func(p string) (string, bool) {
		if len(p) >= 2 && p[0] == '`' && p[len(p)-1] == '`' {
			p = p[1 : len(p)-1]
			return p, !strings.Contains(p, "`") && p != ""
		}
		for i := 0; i < len(p); i++ {
			if !isWordByte(p[i]) {
				return "", false
			}
		}
		return p, p != ""
	}
	if i := strings.IndexByte(s, '.'); i >= 0 && !strings.HasPrefix(s, "`") || strings.HasPrefix(s, "`") && strings.Contains(s, "`.`") {
		j := strings.Index(s, "`.`")
		if j >= 0 {
			i = j + 1
		} else {
			i = strings.IndexByte(s, '.')
		}
		if db, ok = part(s[:i]); !ok {
			return "", "", false
		}
		name, ok = part(s[i+1:])
		return db, name, ok
	}
	name, ok = part(s)
	return "", name, ok
}
