package shard

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
)

// algorithm is how a rule turns a key value into a shard number.
type algorithm uint8

const (
	algoMod algorithm = iota
	algoHash
	algoRange
	algoDate
)

// dateUnit is the granularity of algorithm date.
type dateUnit uint8

const (
	unitDay dateUnit = iota
	unitMonth
	unitYear
)

// rule is one [[shard]] entry in the form the planner uses. Rules are built
// by New and never modified, so any number of goroutines may use one.
type rule struct {
	// schema and table are the configured names; lower is "schema.table"
	// in lower case, the lookup key.
	schema, table, lower string
	// key and idColumn are the configured column names in lower case.
	key, idColumn string
	algo          algorithm
	unit          dateUnit
	// clusters indexes Rules.clusters for each of the rule's clusters.
	clusters []int
	// tables is tables_per_cluster, shards the number of physical tables
	// (len(clusters) * tables), virtual virtual_shards (0: none).
	tables, shards, virtual int
	bounds                  []int64
	// meta is what the cluster masters say about the key column; nil
	// until the proxy has learnt it (Rules.SetKeyColumn).
	meta atomic.Pointer[keyInfo]
}

// modulus is the number the key-derived number is reduced by: the virtual
// shards when the rule has them, else the physical shards.
func (r *rule) modulus() uint64 {
	if r.virtual > 0 {
		return uint64(r.virtual)
	}
	return uint64(r.shards)
}

// sameLayout reports whether rows of r and o with equal keys always land in
// the same shard number on the same cluster, so that a join of the two
// tables on their keys can run shard by shard.
func (r *rule) sameLayout(o *rule) bool {
	if !r.sameKeyType(o) {
		return false
	}
	if r.algo != o.algo || r.unit != o.unit || r.tables != o.tables || r.virtual != o.virtual ||
		len(r.clusters) != len(o.clusters) || len(r.bounds) != len(o.bounds) {
		return false
	}
	for i := range r.clusters {
		if r.clusters[i] != o.clusters[i] {
			return false
		}
	}
	for i := range r.bounds {
		if r.bounds[i] != o.bounds[i] {
			return false
		}
	}
	return true
}

// cluster returns the index into Rules.clusters of shard s.
func (r *rule) cluster(s int) int { return r.clusters[s/r.tables] }

// place returns the key's placement number: the virtual shard (0 ..
// virtual-1) when the rule has virtual shards, else the shard (0 ..
// shards-1). The shard is place % shards. It does not allocate unless it
// fails.
//
// The number is computed on the value the key column would store and
// compare, as the masters described the column (SetKeyColumn): an integer
// column's '042', ' 42' and 42.0 are 42; a string under a _ci PAD SPACE
// collation places by the collation's weights, so 'sKU-1 ' and 'SKU-1'
// land together. store tells an INSERT's key (the value the row will
// hold) from a WHERE's (a value rows are compared with); cs is the
// session's client character set, which says what a string's bytes are.
// A WHERE value that cannot be mapped exactly returns errNotExact: the
// caller scatters, which is always correct; a stored one returns an error
// naming the table, column and value.
//
// mod takes the absolute value of a negative key, so that every integer has
// a shard and a read never fails for a key no row can have.
func (r *rule) place(v Value, store bool, cs ClientCharset) (int, error) {
	ki := r.meta.Load()
	if ki != nil && ki.refused != nil {
		return 0, ki.refused
	}
	switch r.algo {
	case algoMod:
		mag, _, err := r.intKey(ki, v, store)
		if err != nil {
			return 0, err
		}
		return int(mag % r.modulus()), nil
	case algoHash:
		if ki == nil {
			// Whether the column holds integers or strings of some
			// collation decides where any key, 42 included, belongs: a
			// row placed before that is known could be misplaced for
			// good.
			if store {
				return 0, fmt.Errorf("%w: %s.%s column %s: the key column's type is not known yet (sluice reads it from the cluster masters), so %s cannot be placed",
					ErrUnsupported, r.schema, r.table, r.key, formatValue(v))
			}
			return 0, errNotExact
		}
		if ki.class == classInt {
			mag, neg, err := r.intKey(ki, v, store)
			if err != nil {
				return 0, err
			}
			// The decimal text of the integer, as before the column's
			// type was known: integer keys keep their placement.
			var buf [24]byte
			b := buf[:0]
			if neg {
				b = append(b, '-')
			}
			b = strconv.AppendUint(b, mag, 10)
			return int(uint64(crcIEEE(b)) % r.modulus()), nil
		}
		var h uint32
		ok := false
		switch v.Kind {
		case KindString:
			if v.Decimal {
				// A number compares with a string column as a number.
				return 0, r.inexact(v, store, "a number for a string key")
			}
			if store && ki.col.MaxChars > 0 && ki.charCount(v.S) > ki.col.MaxChars {
				return 0, r.badValue(v, fmt.Sprintf("longer than the column's %d characters", ki.col.MaxChars))
			}
			if v.Binary && ki.class == classWeighed && !strings.HasPrefix(ki.w.collation, "utf8") {
				// The server compares _binary bytes with the column's
				// latin1 bytes; keyHash would read them as UTF-8.
				return 0, r.inexact(v, store, "a _binary string of non-ASCII bytes for a "+ki.col.String()+" key")
			}
			h, ok = ki.keyHash(v.S, cs)
		case KindInt, KindUint:
			if !store {
				return 0, errNotExact // compared as numbers
			}
			var buf [24]byte
			b, _ := canonicalBytes(v, buf[:0])
			h, ok = ki.keyHash(b, ClientUTF8MB4)
		}
		if !ok {
			return 0, r.inexact(v, store, "not a value sluice can map to what the column stores ("+ki.col.String()+")")
		}
		return int(uint64(h) % r.modulus()), nil
	case algoRange:
		mag, neg, err := r.intKey(ki, v, store)
		if err != nil {
			return 0, err
		}
		if !neg && mag > math.MaxInt64 {
			return 0, r.outOfRange(v)
		}
		k := int64(mag)
		if neg {
			k = -k
		}
		if k < r.bounds[0] || k >= r.bounds[len(r.bounds)-1] {
			return 0, r.outOfRange(v)
		}
		// The first boundary above k ends k's range.
		i := sort.Search(len(r.bounds), func(i int) bool { return r.bounds[i] > k })
		return i - 1, nil
	default: // algoDate
		n, ok := dateNumber(v, r.unit)
		if !ok {
			return 0, r.inexact(v, store, "not a date sluice reads as the server does ('YYYY-MM-DD[ hh:mm:ss[.ffffff]]', YYYYMMDD or YYYYMMDDhhmmss)")
		}
		m := int64(r.shards)
		return int(((n % m) + m) % m), nil
	}
}

// exactFloat is the largest magnitude up to which a double holds every
// integer exactly.
const exactFloat = 1 << 53

// intKey returns the integer a key value is for an integer column: an
// integer, a float without fraction, a decimal or string holding a decimal
// integer (spaces around it, a sign and a zero fraction allowed, as the
// server converts ' 42' and '42.0' on INSERT and in comparisons: exactly,
// at any size, when the fraction is zero). A WHERE's float key above 2^53
// is not exact (a double there may stand for several integers); an
// INSERT's key outside the column type's range is refused (a range rule's
// boundaries say more).
func (r *rule) intKey(ki *keyInfo, v Value, store bool) (uint64, bool, error) {
	var mag uint64
	var neg, ok bool
	switch v.Kind {
	case KindInt, KindUint:
		mag, neg, ok = integerOf(v)
	case KindFloat:
		mag, neg, ok = integerOf(v)
		ok = ok && (store || mag <= exactFloat)
	case KindString:
		mag, neg, ok = parseInteger(v.S)
	}
	if !ok {
		return 0, false, r.inexact(v, store, "not an integer")
	}
	if store && ki != nil && ki.class == classInt && r.algo != algoRange {
		in := !neg && mag <= ki.hi || neg && mag <= uint64(-(ki.lo+1))+1
		if !in {
			return 0, false, r.badValue(v, "out of the range of "+ki.col.ColumnType)
		}
	}
	return mag, neg, nil
}

// inexact is the error of a key value place cannot map: errNotExact for a
// WHERE's, which the caller turns into a scatter; a bad value for an
// INSERT's.
func (r *rule) inexact(v Value, store bool, why string) error {
	if store {
		return r.badValue(v, why)
	}
	return errNotExact
}

// sameKeyType reports whether equal keys of r and o are equal values of
// the same column type and collation, so one placement function serves
// both (integer columns of any width compare alike).
func (r *rule) sameKeyType(o *rule) bool {
	a, b := r.meta.Load(), o.meta.Load()
	switch {
	case a == nil || b == nil:
		return a == b || r.algo != algoHash
	case a.refused != nil || b.refused != nil:
		return false
	case a.class == classInt && b.class == classInt:
		return true
	}
	return a.class == b.class && strings.EqualFold(a.col.Collation, b.col.Collation) && a.pad == b.pad
}

func (r *rule) badValue(v Value, why string) error {
	return fmt.Errorf("%w: %s.%s column %s: %s: %s", ErrBadKeyValue, r.schema, r.table, r.key, formatValue(v), why)
}

func (r *rule) outOfRange(v Value) error {
	return fmt.Errorf("%w: %s.%s column %s: %s is outside [%d, %d)", ErrKeyOutOfRange, r.schema, r.table, r.key,
		formatValue(v), r.bounds[0], r.bounds[len(r.bounds)-1])
}

// formatValue writes v for an error message.
func formatValue(v Value) string {
	switch v.Kind {
	case KindNull:
		return "NULL"
	case KindInt:
		return strconv.FormatInt(v.I, 10)
	case KindUint:
		return strconv.FormatUint(v.U, 10)
	case KindFloat:
		return strconv.FormatFloat(v.F, 'g', -1, 64)
	default:
		const max = 64
		if len(v.S) > max {
			return strconv.Quote(string(v.S[:max])) + "..."
		}
		return strconv.Quote(string(v.S))
	}
}

// integerOf returns the magnitude and sign of an integer value: an integer,
// a float without fraction, or a string holding a decimal integer (optional
// sign, surrounding spaces and a zero fraction allowed, as MySQL converts
// '9527' or '9527.0').
func integerOf(v Value) (mag uint64, neg bool, ok bool) {
	switch v.Kind {
	case KindInt:
		if v.I < 0 {
			return uint64(-(v.I + 1)) + 1, true, true
		}
		return uint64(v.I), false, true
	case KindUint:
		return v.U, false, true
	case KindFloat:
		f := v.F
		if f != math.Trunc(f) || math.IsInf(f, 0) || math.IsNaN(f) || math.Abs(f) >= 1<<63 {
			return 0, false, false
		}
		if f < 0 {
			return uint64(-f), true, true
		}
		return uint64(f), false, true
	case KindString:
		return parseInteger(v.S)
	}
	return 0, false, false
}

func parseInteger(s []byte) (mag uint64, neg bool, ok bool) {
	for len(s) > 0 && s[0] == ' ' {
		s = s[1:]
	}
	for len(s) > 0 && s[len(s)-1] == ' ' {
		s = s[:len(s)-1]
	}
	if len(s) > 0 && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if dot := indexByte(s, '.'); dot >= 0 {
		for _, c := range s[dot+1:] {
			if c != '0' {
				return 0, false, false
			}
		}
		s = s[:dot]
	}
	if len(s) == 0 {
		return 0, false, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false, false
		}
		d := uint64(c - '0')
		if mag > (math.MaxUint64-d)/10 {
			return 0, false, false
		}
		mag = mag*10 + d
	}
	if mag == 0 {
		neg = false
	}
	return mag, neg, true
}

func indexByte(s []byte, c byte) int {
	for i := range s {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// canonicalBytes appends the bytes algorithm hash hashes: the decimal text
// of an integer (or of a float without fraction), a string's bytes as given.
func canonicalBytes(v Value, buf []byte) ([]byte, bool) {
	switch v.Kind {
	case KindInt:
		return strconv.AppendInt(buf, v.I, 10), true
	case KindUint:
		return strconv.AppendUint(buf, v.U, 10), true
	case KindFloat:
		mag, neg, ok := integerOf(v)
		if !ok {
			return nil, false
		}
		if neg {
			buf = append(buf, '-')
		}
		return strconv.AppendUint(buf, mag, 10), true
	case KindString:
		return v.S, true
	}
	return nil, false
}

// dateNumber returns the unit number of a DATE/DATETIME/TIMESTAMP value:
// days since 1970-01-01, year*12 + month-1, or the year.
func dateNumber(v Value, unit dateUnit) (int64, bool) {
	var y, m, d int64
	switch v.Kind {
	case KindInt, KindUint:
		n := v.I
		if v.Kind == KindUint {
			if v.U > math.MaxInt64 {
				return 0, false
			}
			n = int64(v.U)
		}
		// The server reads a number of 6 digits as YYMMDD, of 12 as
		// YYMMDDhhmmss and shorter ones likewise, with a two-digit year
		// of its own choosing: only 8 digits (YYYYMMDD) and 14
		// (YYYYMMDDhhmmss) name a date sluice reads the same way.
		switch {
		case n >= 10000101 && n <= 99991231:
		case n >= 10000101000000 && n <= 99991231235959:
			if n/10000%100 > 23 || n/100%100 > 59 || n%100 > 59 {
				return 0, false
			}
			n /= 1000000
		default:
			return 0, false
		}
		y, m, d = n/10000, n/100%100, n%100
	case KindString:
		s := v.S
		if len(s) < 10 || s[4] != '-' || s[7] != '-' {
			return 0, false
		}
		var ok1, ok2, ok3 bool
		y, ok1 = digits(s[0:4])
		m, ok2 = digits(s[5:7])
		d, ok3 = digits(s[8:10])
		if !ok1 || !ok2 || !ok3 || !validTime(s[10:]) {
			return 0, false
		}
	default:
		return 0, false
	}
	if y < 1 || y > 9999 || m < 1 || m > 12 || d < 1 || d > daysIn(y, m) {
		return 0, false
	}
	switch unit {
	case unitYear:
		return y, true
	case unitMonth:
		return y*12 + m - 1, true
	}
	return daysFromCivil(y, m, d), true
}

// validTime checks the rest of a DATETIME text after the date: nothing, or
// ' ' or 'T' then hh:mm:ss and an optional fraction of up to six digits.
func validTime(s []byte) bool {
	if len(s) == 0 {
		return true
	}
	if (s[0] != ' ' && s[0] != 'T') || len(s) < 9 || s[3] != ':' || s[6] != ':' {
		return false
	}
	h, ok1 := digits(s[1:3])
	mi, ok2 := digits(s[4:6])
	se, ok3 := digits(s[7:9])
	if !ok1 || !ok2 || !ok3 || h > 23 || mi > 59 || se > 59 {
		return false
	}
	frac := s[9:]
	if len(frac) == 0 {
		return true
	}
	if frac[0] != '.' || len(frac) < 2 || len(frac) > 7 {
		return false
	}
	_, ok := digits(frac[1:])
	return ok
}

func digits(s []byte) (int64, bool) {
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, len(s) > 0
}

func daysIn(y, m int64) int64 {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil counts days from 1970-01-01 to y-m-d in the proleptic
// Gregorian calendar (the era arithmetic keeps it exact for any year).
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}
