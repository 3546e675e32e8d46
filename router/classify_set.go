package router

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// replayableValue reports whether a SET value is a constant, which
// evaluates the same on every connection that carries the session's
// replayed state: a literal, DEFAULT, a bare word (ON, ANSI, utf8mb4, which
// the server reads as a string), and operators and deterministic built-in
// functions of those. Anything else — a variable (even the session's own
// sql_mode: CONCAT(@@sql_mode, ',ANSI_QUOTES') twice must not become one
// ANSI_QUOTES), a parameter marker, a stored or non-deterministic function,
// a subquery — is evaluated once, on the master, and its result read back
// (SessionVar.ReadBack).
func replayableValue(e ast.ExprNode) bool {
	switch x := e.(type) {
	case ast.ParamMarkerExpr:
		return false
	case ast.ValueExpr:
		return true
	case *ast.DefaultExpr:
		return x.Name == nil
	case *ast.ColumnNameExpr:
		return x.Name.Table.L == "" && x.Name.Schema.L == ""
	case *ast.ParenthesesExpr:
		return replayableValue(x.Expr)
	case *ast.UnaryOperationExpr:
		return replayableValue(x.V)
	case *ast.BinaryOperationExpr:
		return replayableValue(x.L) && replayableValue(x.R)
	case *ast.FuncCallExpr:
		if x.Schema.L != "" || !pureFuncs[x.FnName.L] {
			return false
		}
		for _, a := range x.Args {
			if !replayableValue(a) {
				return false
			}
		}
		return true
	}
	return false
}

// pureFuncs are built-in functions whose result depends on their arguments
// alone: a SET value built with them replays exactly.
var pureFuncs = map[string]bool{
	"concat": true, "concat_ws": true, "replace": true, "if": true, "ifnull": true, "coalesce": true,
	"nullif": true, "lower": true, "upper": true, "lcase": true, "ucase": true, "trim": true,
	"ltrim": true, "rtrim": true, "substring": true, "substr": true, "left": true, "right": true,
	"lpad": true, "rpad": true, "greatest": true, "least": true, "abs": true, "floor": true,
	"ceil": true, "ceiling": true, "round": true, "find_in_set": true,
}

// wordValue is the text of a SET value that names something (a character
// set, a list of modes): a string literal's value or a bare word. ok is
// false for anything else (DEFAULT, a number, an expression).
func wordValue(e ast.ExprNode) (string, bool) {
	switch x := e.(type) {
	case ast.ValueExpr:
		if v, ok := x.GetValue().(string); ok {
			return strings.Clone(v), true
		}
	case *ast.ColumnNameExpr:
		if x.Name.Table.L == "" {
			return strings.Clone(x.Name.Name.O), true
		}
	}
	return "", false
}

// classifySet classifies SET: session system variables, SET NAMES and SET CHARACTER SET
// become KindSet with one SessionVar per assignment (a value that is not a constant is
// marked for reading back, SessionVar.ReadBack); anything global, SET TRANSACTION or
// touching user variables as the assigned name is a KindWrite the proxy does not track.
func classifySet(s *ast.SetStmt, sql string) analysis {
	write := analysis{kind: KindWrite}
	words := leadingWords(sql, 3)
	if wordsAre(words, "SET", "TRANSACTION") || len(s.Variables) == 0 {
		// SET TRANSACTION ...: the next transaction only.
		return write
	}
	sessionTxn := wordsAre(words, "SET", "SESSION", "TRANSACTION")
	vars := make([]SessionVar, 0, len(s.Variables))
	for _, va := range s.Variables {
		var sv SessionVar
		switch {
		case va.Name == ast.SetNames || va.Name == ast.SetCharset:
			val, err := restore(va.Value)
			if err != nil {
				return write
			}
			if !replayableValue(va.Value) {
				return write
			}
			if va.Name == ast.SetNames {
				sv = SessionVar{Name: "names", SQL: "SET NAMES " + val}
				if va.ExtendValue != nil {
					coll, err := restore(va.ExtendValue)
					if err != nil {
						return write
					}
					sv.SQL += " COLLATE " + coll
				}
			} else {
				sv = SessionVar{Name: "character set", SQL: "SET CHARACTER SET " + val}
			}
			sv.Charset, _ = wordValue(va.Value)
		case !va.IsSystem || va.IsGlobal || va.IsInstance:
			return write // @user_var, GLOBAL, INSTANCE
		case sessionTxn:
			// SET SESSION TRANSACTION ISOLATION LEVEL ... / READ ONLY / READ WRITE: the
			// parser turns each characteristic into a tx_* assignment; replay it in the
			// statement form, which every MySQL and MariaDB version accepts.
			v, ok := va.Value.(ast.ValueExpr)
			if !ok {
				return write
			}
			switch strings.ToLower(va.Name) {
			case "tx_isolation":
				sv = SessionVar{Name: "transaction_isolation",
					SQL: "SET SESSION TRANSACTION ISOLATION LEVEL " + strings.ReplaceAll(v.GetString(), "-", " ")}
			case "tx_read_only":
				mode := "READ WRITE"
				if v.GetString() == "1" {
					mode = "READ ONLY"
				}
				sv = SessionVar{Name: "transaction_read_only", SQL: "SET SESSION TRANSACTION " + mode}
			default:
				return write // TiDB's READ ONLY AS OF ...
			}
		default:
			name := strings.ToLower(va.Name)
			if name == "tx_isolation_one_shot" || name == "tx_read_ts" {
				return write
			}
			val, err := restore(va.Value)
			if err != nil {
				return write
			}
			sv = SessionVar{Name: canonicalVarName(name), SQL: "SET SESSION " + quoteVarName(name) + " = " + val}
			if !replayableValue(va.Value) {
				// Evaluated again elsewhere it could give another value
				// (or side effect): the proxy replays what it gave here.
				// A stored function or UDF may also change other session
				// state, which nothing reads back: that stays untracked.
				var in inspector
				va.Value.Accept(&in)
				if len(in.funcs) > 0 {
					return write
				}
				sv.ReadBack = name
			}
			switch name {
			case "character_set_client":
				sv.Charset, _ = wordValue(va.Value)
			case "sql_mode":
				// Only a list of mode names is read here; the proxy reads
				// any other value (DEFAULT, a number, an expression) back
				// from the server that ran it.
				if w, ok := wordValue(va.Value); ok {
					sv.Modes, sv.ModesKnown = ParseSQLMode(w), true
				}
			}
		}
		vars = append(vars, sv)
	}
	return analysis{kind: KindSet, vars: vars}
}

// canonicalVarName maps old aliases to the variable they set, so that a session tracks
// one entry per variable.
func canonicalVarName(name string) string {
	switch name {
	case "tx_isolation":
		return "transaction_isolation"
	case "tx_read_only":
		return "transaction_read_only"
	}
	return name
}

// quoteVarName writes a system variable name bare when it is a plain (possibly dotted)
// identifier, and in backquotes otherwise.
func quoteVarName(name string) string {
	plain := name != ""
	for i := 0; i < len(name) && plain; i++ {
		plain = isWordByte(name[i]) && name[i] < 0x80 || name[i] == '.'
	}
	if plain {
		return name
	}
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}
