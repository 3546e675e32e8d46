package shard

import (
	"fmt"
	"math"
	"strconv"
)

// ParamType is what of a prepared statement parameter's bound type decides
// the type the server gives the parameter, so that a literal written in
// its place has the same type (a DOUBLE stays a DOUBLE, not a DECIMAL).
type ParamType uint8

const (
	// ParamString: a string in the connection's character set (the
	// string types), or a number (Value.Kind tells).
	ParamString ParamType = iota
	// ParamInt1, ParamInt2, ParamInt4 and ParamInt8: TINYINT, SMALLINT
	// (and YEAR), INT (and MEDIUMINT), BIGINT. The server gives such a
	// parameter the width of the type whatever its value (4, 6, 11 and 21
	// characters), and a literal the width of its text, which decides the
	// type of arithmetic on it: the literal is written that wide.
	ParamInt1
	ParamInt2
	ParamInt4
	ParamInt8
	// ParamDecimal: DECIMAL, its text in Value.S.
	ParamDecimal
	// ParamDate, ParamDatetime, ParamTime: temporal values in the text
	// form of protocol.Param.AppendText.
	ParamDate
	ParamDatetime
	ParamTime
	// ParamBinary: the BLOB types, which the server takes as binary
	// strings.
	ParamBinary
)

// Interpolate writes the parameter values of a prepared statement's
// execution into sql, a Part's text with ? markers, so the Part can run as
// a plain query (what the proxy does with executions whose Parts cannot each
// take the client's packet: split INSERTs, scatter-gather reads). params
// selects args per marker as Part.Params does (nil: args in order); types
// are the args' bound types (nil: all ParamString), and each literal is
// written so the server gives it the type it gives a bound parameter of that
// type: FLOAT and DOUBLE as a double literal with the value's exact digits
// (a FLOAT as the double the server widens it to), DECIMAL as a decimal
// literal, dates and times as DATE, TIMESTAMP and TIME literals, BLOBs as
// binary strings, other strings quoted. noBackslashEscapes says the
// session's sql_mode reads backslashes literally, so they must not be
// doubled.
func Interpolate(sql string, args []Value, types []ParamType, params []int, noBackslashEscapes bool) (string, error) {
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
			tp := ParamString
			if k < len(types) {
				tp = types[k]
			}
			// The parser folds a unary minus into the number literal it
			// applies to (and - -7 into 7), where a bound parameter stays
			// an operand of the negation, which the server types by the
			// value (DECIMAL when it is negative); a CAST keeps the
			// literal an operand as well.
			v, minus := args[k], operandOfMinus(b)
			cast := minus && (v.Kind == KindInt || v.Kind == KindUint)
			if minus && (v.Kind == KindInt && v.I == math.MinInt64 || v.Kind == KindUint && v.U == 1<<63) {
				// The server negates such a parameter into a BIGINT that
				// overflows; no literal does the same.
				return "", fmt.Errorf("%w: parameter %d, %s after a minus sign", ErrUnsupported, k+1, formatValue(v))
			}
			if cast {
				b = append(b, "CAST("...)
			}
			var err error
			if b, err = appendLiteral(b, v, tp, noBackslashEscapes); err != nil {
				return "", fmt.Errorf("parameter %d: %w", k+1, err)
			}
			switch {
			case cast && v.Kind == KindUint:
				b = append(b, " AS UNSIGNED)"...)
			case cast:
				b = append(b, " AS SIGNED)"...)
			}
			marker++
		default:
			b = append(b, c)
		}
	}
	return string(b), nil
}

// operandOfMinus reports whether what follows b is the operand of a minus
// sign: b ends with '-' but for spaces and opening parentheses.
func operandOfMinus(b []byte) bool {
	for i := len(b) - 1; i >= 0; i-- {
		switch b[i] {
		case ' ', '\t', '\n', '\r', '(':
		case '-':
			return true
		default:
			return false
		}
	}
	return false
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

// appendLiteral appends v as an SQL literal of the type the server gives a
// parameter bound with type tp.
func appendLiteral(b []byte, v Value, tp ParamType, noBackslashEscapes bool) ([]byte, error) {
	switch v.Kind {
	case KindNull:
		return append(b, "NULL"...), nil
	case KindInt, KindUint:
		var digits [20]byte
		d := digits[:0]
		neg := false
		if v.Kind == KindUint {
			d = strconv.AppendUint(d, v.U, 10)
		} else {
			neg = v.I < 0
			d = strconv.AppendUint(d, absInt(v.I), 10)
		}
		width := 0
		switch tp {
		case ParamInt1:
			width = 4
		case ParamInt2:
			width = 6
		case ParamInt4:
			width = 11
		case ParamInt8:
			width = 21
		}
		if v.Kind == KindInt && v.I == math.MinInt64 {
			width = 0 // MariaDB reads -9223372036854775808 as a BIGINT only as written
		}
		return appendPadded(b, neg, d, width), nil
	case KindFloat:
		if math.IsNaN(v.F) || math.IsInf(v.F, 0) {
			return nil, fmt.Errorf("%w: a FLOAT or DOUBLE parameter that is not a number", ErrUnsupported)
		}
		// The exponent makes it a double literal; the shortest digits
		// that read back as the same float64 keep its value exact; the
		// width is the parameter's (23).
		var digits [32]byte
		d := strconv.AppendFloat(digits[:0], math.Abs(v.F), 'e', -1, 64)
		return appendPadded(b, math.Signbit(v.F) && v.F != 0, d, 23), nil
	}
	switch tp {
	case ParamDecimal:
		if !isDecimalText(v.S) {
			return nil, fmt.Errorf("%w: DECIMAL parameter %q", ErrUnsupported, v.S)
		}
		return append(b, v.S...), nil
	case ParamDate, ParamDatetime, ParamTime:
		if !isTemporalText(v.S) || tp != ParamTime && hasZeroDatePart(v.S) {
			// A zero date is refused as a literal under strict modes,
			// where the server may take it as a parameter.
			return nil, fmt.Errorf("%w: date or time parameter %q", ErrUnsupported, v.S)
		}
		switch tp {
		case ParamDate:
			b = append(b, "DATE'"...)
		case ParamDatetime:
			b = append(b, "TIMESTAMP'"...)
		default:
			b = append(b, "TIME'"...)
		}
		return append(append(b, v.S...), '\''), nil
	case ParamBinary:
		// A binary string, not X'..', which MariaDB types otherwise in
		// arithmetic.
		b = append(b, "_binary"...)
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
	return append(b, '\''), nil
}

// appendPadded appends the number digits, after a minus sign when neg,
// with leading zeros to make the literal width characters long: MariaDB
// gives a number literal the width of its text, and leading zeros change
// nothing else.
func appendPadded(b []byte, neg bool, digits []byte, width int) []byte {
	n := len(digits)
	if neg {
		b = append(b, '-')
		n++
	}
	for ; n < width; n++ {
		b = append(b, '0')
	}
	return append(b, digits...)
}

// absInt is |i| as an unsigned number (math.MinInt64 included).
func absInt(i int64) uint64 {
	if i < 0 {
		return uint64(-(i + 1)) + 1
	}
	return uint64(i)
}

// isDecimalText reports whether s is a decimal number: an optional sign,
// digits and at most one point.
func isDecimalText(s []byte) bool {
	if len(s) > 0 && (s[0] == '-' || s[0] == '+') {
		s = s[1:]
	}
	digits, point := 0, false
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !point:
			point = true
		default:
			return false
		}
	}
	return digits > 0
}

// isTemporalText reports whether s holds only what AppendText writes for
// dates and times: digits, '-', ':', '.' and one space.
func isTemporalText(s []byte) bool {
	if len(s) == 0 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c == '-' || c == ':' || c == '.' || c == ' ') {
			return false
		}
	}
	return true
}

// hasZeroDatePart reports whether the date YYYY-MM-DD that s starts with
// has a zero month or day.
func hasZeroDatePart(s []byte) bool {
	return len(s) >= 10 && (string(s[5:7]) == "00" || string(s[8:10]) == "00")
}
