package shard

import (
	"fmt"
	"strconv"
)

// Interpolate writes the parameter values of a prepared statement's
// execution into sql, a Part's text with ? markers, so the Part can run as
// a plain query (what the proxy does with executions whose Parts cannot each
// take the client's packet: split INSERTs, scatter-gather reads). params
// selects args per marker as Part.Params does (nil: args in order).
// Strings are quoted; noBackslashEscapes says the session's sql_mode reads
// backslashes literally, so they must not be doubled.
func Interpolate(sql string, args []Value, params []int, noBackslashEscapes bool) (string, error) {
	b := make([]byte, 0, len(sql)+16*len(args))
	marker := 0
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			j := skipQuoted(sql, i, noBackslashEscapes)
			b = append(b, sql[i:j]...)
			i = j - 1
		case c == '#' || (c == '-' && i+2 < len(sql) && sql[i+1] == '-' && (sql[i+2] == ' ' || sql[i+2] == '\t')):
			j := i
			for j < len(sql) && sql[j] != '\n' {
				j++
			}
			b = append(b, sql[i:j]...)
			i = j - 1
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			j := i + 2
			for j+1 < len(sql) && (sql[j] != '*' || sql[j+1] != '/') {
				j++
			}
			j = min(j+2, len(sql))
			b = append(b, sql[i:j]...)
			i = j - 1
		case c == '?':
			k := marker
			if params != nil {
				if marker >= len(params) {
					return "", fmt.Errorf("%w: the statement has more markers than parameters", ErrUnsupported)
				}
				k = params[marker]
			}
			if k < 0 || k >= len(args) {
				return "", fmt.Errorf("%w: parameter %d of %d", ErrUnsupported, k, len(args))
			}
			b = appendLiteral(b, args[k], noBackslashEscapes)
			marker++
		default:
			b = append(b, c)
		}
	}
	return string(b), nil
}

// skipQuoted returns the index just past the quoted string or name that
// starts at sql[i].
func skipQuoted(sql string, i int, noBackslashEscapes bool) int {
	q := sql[i]
	for j := i + 1; j < len(sql); j++ {
		switch sql[j] {
		case '\\':
			if q != '`' && !noBackslashEscapes {
				j++
			}
		case q:
			if j+1 < len(sql) && sql[j+1] == q {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(sql)
}

// appendLiteral appends v as an SQL literal.
func appendLiteral(b []byte, v Value, noBackslashEscapes bool) []byte {
	switch v.Kind {
	case KindNull:
		return append(b, "NULL"...)
	case KindInt:
		return strconv.AppendInt(b, v.I, 10)
	case KindUint:
		return strconv.AppendUint(b, v.U, 10)
	case KindFloat:
		return strconv.AppendFloat(b, v.F, 'g', -1, 64)
	}
	b = append(b, '\'')
	for _, c := range v.S {
		switch c {
		case '\'':
			b = append(b, '\'', '\'')
		case '\\':
			if noBackslashEscapes {
				b = append(b, c)
			} else {
				b = append(b, '\\', '\\')
			}
		case 0:
			if noBackslashEscapes {
				b = append(b, c)
			} else {
				b = append(b, '\\', '0')
			}
		default:
			b = append(b, c)
		}
	}
	return append(b, '\'')
}
