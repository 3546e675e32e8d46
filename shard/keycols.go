package shard

import (
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"unicode/utf8"
)

// KeyColumn is what a cluster master's information_schema.COLUMNS says
// about the key column of a rule: the proxy reads it at start-up and on
// reload and hands it to Rules.SetKeyColumn, so that a key is placed by the
// value the column stores and compares, not by how the client spelled it.
type KeyColumn struct {
	// DataType is DATA_TYPE ("int", "varchar", ...), ColumnType
	// COLUMN_TYPE ("int(10) unsigned", "varchar(32)").
	DataType, ColumnType string
	// Collation is COLLATION_NAME, "" for a column without one.
	Collation string
	// MaxChars is CHARACTER_MAXIMUM_LENGTH, 0 when the column has none.
	MaxChars int64
}

// String is the column's type and collation as COLUMNS shows them.
func (k KeyColumn) String() string {
	if k.Collation == "" {
		return k.ColumnType
	}
	return k.ColumnType + " " + k.Collation
}

// KeyLookup is one rule whose key column the proxy must look up: the
// column Column of each of the rule's physical tables.
type KeyLookup struct {
	// Logical is the rule's "schema.table" as configured.
	Logical, Schema, Column string
	// Tables are the rule's physical tables on all its clusters.
	Tables []PhysicalTable
}

// KeyLookups lists, for every rule, the physical tables whose key column
// type the proxy should read, in PhysicalTables order.
func (r *Rules) KeyLookups() []KeyLookup {
	rules := make(map[string]*rule, len(r.sharded))
	for _, ru := range r.sharded {
		rules[ru.schema+"."+ru.table] = ru
	}
	var out []KeyLookup
	for _, pt := range r.PhysicalTables() {
		ru := rules[pt.Logical]
		if ru == nil {
			continue // a broadcast table
		}
		if n := len(out); n == 0 || out[n-1].Logical != pt.Logical {
			out = append(out, KeyLookup{Logical: pt.Logical, Schema: ru.schema, Column: ru.key})
		}
		l := &out[len(out)-1]
		l.Tables = append(l.Tables, pt)
	}
	return out
}

// keyClass is how a rule turns a key value into the bytes or number its
// algorithm places: by the value the key column stores and compares.
type keyClass uint8

const (
	// classInt: an integer column; a key is its integer value.
	classInt keyClass = iota
	// classWeighed: a string column of a collation that weighs character
	// by character; a key is its weights (trailing spaces' weights cut
	// under PAD SPACE).
	classWeighed
	// classUTF8Bin: a string column of a utf8 _bin collation; a key is
	// its UTF-8 bytes (trailing spaces cut under PAD SPACE).
	classUTF8Bin
	// classBytes: a VARBINARY or BLOB column; a key is its bytes.
	classBytes
	// classOther: a column type hash rules do not place (the rule is
	// refused) or one mod, range and date rules treat as before.
	classOther
)

// keyInfo is what a rule knows about its key column. A rule without one
// (the column's type is not known yet, or its table exists nowhere) places
// mod, range and date keys as before and, for a hash rule, scatters reads
// and refuses every INSERT.
type keyInfo struct {
	class    keyClass
	col      KeyColumn
	unsigned bool
	// lo and hi bound an integer column's values (hi as uint64 for
	// BIGINT UNSIGNED, which is the only type above MaxInt64).
	lo  int64
	hi  uint64
	pad bool
	mb3 bool
	w   *Weights
	// refused, when set, is why the rule's statements are refused.
	refused error
}

// Weights are a collation's weight per Unicode code point, learnt from the
// server (WEIGHT_STRING) for collations that weigh one character at a
// time with one weight of a fixed width (utf8 *_general_ci: two bytes,
// ß weighs as s; latin1_swedish_ci, latin1_general_ci, latin1_bin: one
// byte; no contractions, no expansions). Built once, then read-only.
type Weights struct {
	collation string
	width     int      // bytes per weight: 1 or 2
	w         []uint16 // by code point, 0 .. 0xFFFF
	known     []uint64 // bit per code point: w holds its weight
	// supp is the one weight of every supplementary code point, valid
	// when suppKnown.
	supp      uint16
	suppKnown bool
}

// weighedCollations are the collations whose weight of a string is the
// concatenation of one weight of width bytes per character, with their
// character set and whether they pad with spaces. The proxy checks this on
// the server (Weights.Check) before use. latin1_german2_ci (ä as ae) and
// the *_unicode_ci collations (ß as ss) weigh some characters as several
// and are not here.
var weighedCollations = map[string]struct {
	charset string
	width   int
	pad     bool
}{
	"utf8mb4_general_ci":       {"utf8mb4", 2, true},
	"utf8mb3_general_ci":       {"utf8mb3", 2, true},
	"utf8_general_ci":          {"utf8mb3", 2, true},
	"utf8mb4_general_nopad_ci": {"utf8mb4", 2, false},
	"utf8mb3_general_nopad_ci": {"utf8mb3", 2, false},
	"utf8_general_nopad_ci":    {"utf8mb3", 2, false},
	"latin1_swedish_ci":        {"latin1", 1, true},
	"latin1_general_ci":        {"latin1", 1, true},
	"latin1_bin":               {"latin1", 1, true},
}

// utf8BinCollations are the utf8 collations that compare code points.
var utf8BinCollations = map[string]struct {
	mb3, pad bool
}{
	"utf8mb4_bin":       {false, true},
	"utf8mb3_bin":       {true, true},
	"utf8_bin":          {true, true},
	"utf8mb4_nopad_bin": {false, false},
	"utf8mb3_nopad_bin": {true, false},
	"utf8_nopad_bin":    {true, false},
}

// WeighedCharset returns the character set of a collation whose weights
// sluice learns from the server, and whether it is one.
func WeighedCharset(collation string) (string, bool) {
	c, ok := weighedCollations[strings.ToLower(collation)]
	return c.charset, ok
}

// NewWeights returns an empty weight table of collation, filled by Set;
// nil when the collation is not one WeighedCharset names.
func NewWeights(collation string) *Weights {
	c, ok := weighedCollations[strings.ToLower(collation)]
	if !ok {
		return nil
	}
	return &Weights{collation: strings.ToLower(collation), width: c.width, w: make([]uint16, 0x10000), known: make([]uint64, 0x10000/64)}
}

// Set records the weight of code point cp (0 .. 0xFFFF) as the server gave
// it; a weight that is not one unit of the collation's width leaves cp
// unknown (keys holding it are not placed by weight).
func (w *Weights) Set(cp int, weight []byte) {
	x, ok := w.unit(weight)
	if cp < 0 || cp > 0xFFFF || !ok {
		return
	}
	w.w[cp] = x
	w.known[cp/64] |= 1 << (cp % 64)
}

// SetSupplementary records that every code point above 0xFFFF weighs
// weight (utf8mb4_general_ci weighs them all as U+FFFD).
func (w *Weights) SetSupplementary(weight []byte) {
	if x, ok := w.unit(weight); ok {
		w.supp, w.suppKnown = x, true
	}
}

func (w *Weights) unit(weight []byte) (uint16, bool) {
	switch {
	case len(weight) != w.width:
		return 0, false
	case w.width == 1:
		return uint16(weight[0]), true
	}
	return uint16(weight[0])<<8 | uint16(weight[1]), true
}

// appendUnit appends weight x in the collation's width.
func (w *Weights) appendUnit(b []byte, x uint16) []byte {
	if w.width == 1 {
		return append(b, byte(x))
	}
	return append(b, byte(x>>8), byte(x))
}

// weight returns the weight of r and whether it is known.
func (w *Weights) weight(r rune) (uint16, bool) {
	if r > 0xFFFF {
		return w.supp, w.suppKnown && r <= utf8.MaxRune
	}
	if r < 0 || w.known[r/64]&(1<<(r%64)) == 0 {
		return 0, false
	}
	return w.w[r], true
}

// Check compares the weights the table gives s with the server's
// WEIGHT_STRING of s under the collation: a collation that weighs
// several characters together somewhere in s shows here.
func (w *Weights) Check(s string, server []byte) error {
	var got []byte
	for _, r := range s {
		x, ok := w.weight(r)
		if !ok {
			return fmt.Errorf("%s: no weight learnt for %U", w.collation, r)
		}
		got = w.appendUnit(got, x)
	}
	if string(got) != string(server) {
		return fmt.Errorf("%s: the weight of %q is %X on the server, %X by character", w.collation, s, server, got)
	}
	return nil
}

// Collation returns the collation the table weighs.
func (w *Weights) Collation() string { return w.collation }

// integer column types and their ranges.
var intTypes = map[string]struct {
	lo int64
	hi uint64 // signed maximum; the unsigned one is 2*hi+1
}{
	"tinyint":   {-1 << 7, 1<<7 - 1},
	"smallint":  {-1 << 15, 1<<15 - 1},
	"mediumint": {-1 << 23, 1<<23 - 1},
	"int":       {-1 << 31, 1<<31 - 1},
	"bigint":    {-1 << 63, 1<<63 - 1},
}

// SetKeyColumn tells the rule of logical ("schema.table", as KeyLookups
// names it) the type of its key column, as every physical table that has
// it agrees; w is the collation's weight table when WeighedCharset says the
// collation needs one (nil when the server's weights are not one per
// character; the proxy keeps a rule whose weights it could not ask for
// unsettled instead of calling this). It returns why the rule's
// statements are refused from now on, or nil. Safe to call
// while sessions route: each rule's key information is swapped atomically,
// and the template cache, whose join checks depend on it, is emptied.
func (r *Rules) SetKeyColumn(logical string, kc KeyColumn, w *Weights) error {
	ru := r.byLogical(logical)
	if ru == nil {
		return fmt.Errorf("shard: no rule %s", logical)
	}
	ki := classify(ru, kc, w)
	ru.meta.Store(ki)
	r.cache.clear()
	return ki.refused
}

// RefuseKey makes every statement of the rule of logical fail with
// ErrUnsupported and why (its key column differs between clusters).
func (r *Rules) RefuseKey(logical, why string) {
	ru := r.byLogical(logical)
	if ru == nil {
		return
	}
	ru.meta.Store(&keyInfo{class: classOther, refused: fmt.Errorf("%w: %s.%s column %s: %s", ErrUnsupported, ru.schema, ru.table, ru.key, why)})
	r.cache.clear()
}

func (r *Rules) byLogical(logical string) *rule {
	l := strings.ToLower(logical)
	i := strings.IndexByte(l, '.')
	if i < 0 {
		return nil
	}
	return r.sharded[tableKey{l[:i], l[i+1:]}]
}

func classify(ru *rule, kc KeyColumn, w *Weights) *keyInfo {
	ki := &keyInfo{class: classOther, col: kc}
	dt := strings.ToLower(kc.DataType)
	coll := strings.ToLower(kc.Collation)
	refuse := func(why string) *keyInfo {
		ki.refused = fmt.Errorf("%w: %s.%s column %s (%s): %s", ErrUnsupported, ru.schema, ru.table, ru.key, kc, why)
		return ki
	}
	if it, ok := intTypes[dt]; ok {
		ki.class = classInt
		ki.lo, ki.hi = it.lo, it.hi
		if strings.Contains(strings.ToLower(kc.ColumnType), "unsigned") {
			ki.unsigned, ki.lo, ki.hi = true, 0, 2*it.hi+1
		}
		return ki
	}
	if ru.algo == algoDate && dt == "timestamp" {
		return refuse("a date rule's key must not be a TIMESTAMP column: the server converts a TIMESTAMP from and to the session's time_zone, so the day a key names depends on the session and sluice cannot place it")
	}
	if ru.algo != algoHash {
		// mod, range and date read the key as a number or a date, as
		// they did before the column's type was known.
		return ki
	}
	switch dt {
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext":
		if c, ok := weighedCollations[coll]; ok {
			if w == nil {
				return refuse("the server does not weigh the collation one character at a time, so sluice cannot place keys by its weights")
			}
			ki.class, ki.w, ki.pad, ki.mb3 = classWeighed, w, c.pad, c.charset == "utf8mb3"
			if w.collation != coll && weighedCollations[w.collation] != c {
				return refuse("the weights given are of " + w.collation)
			}
		} else if c, ok := utf8BinCollations[coll]; ok {
			ki.class, ki.pad, ki.mb3 = classUTF8Bin, c.pad, c.mb3
		} else {
			return refuse("a hash key's collation must be utf8mb4_general_ci, utf8mb3_general_ci, their _nopad_ci variants, a utf8 _bin collation, latin1_swedish_ci, latin1_general_ci or latin1_bin (sluice places keys by the collation's weights, and these weigh one character at a time)")
		}
		if dt == "char" && !ki.pad {
			return refuse("a CHAR key under a NO PAD collation")
		}
		if dt != "char" && dt != "varchar" {
			ki.col.MaxChars = 0 // TEXT lengths count bytes
		}
		return ki
	case "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		ki.class = classBytes
		if dt != "varbinary" {
			ki.col.MaxChars = 0
		}
		return ki
	}
	return refuse("a hash key must be an integer, a utf8 string or a VARBINARY column")
}

// errNotExact marks a key value the rule cannot map to the value the
// column stores: a WHERE scatters, an INSERT is refused.
var errNotExact = errors.New("not exact")

// ClientCharset is what a session's client character set says about the
// bytes of its string values: the key column holds characters, and a
// string's bytes name the same characters only in a UTF-8 client set.
type ClientCharset uint8

const (
	// ClientOther: latin1, gbk, ascii or any other set, or one not known:
	// only ASCII bytes are the characters they look like in UTF-8.
	ClientOther ClientCharset = iota
	// ClientUTF8MB3: utf8 (utf8mb3), UTF-8 of the Basic Multilingual Plane
	// only; the server does not read a 4-byte sequence as a character.
	ClientUTF8MB3
	// ClientUTF8MB4: utf8mb4.
	ClientUTF8MB4
)

// keyHash returns the 32-bit hash algorithm hash places a string key by
// under ki, and whether the value could be mapped exactly; cs is the
// client character set the bytes of s are in.
func (ki *keyInfo) keyHash(s []byte, cs ClientCharset) (uint32, bool) {
	if cs != ClientUTF8MB4 {
		for _, c := range s {
			// Any non-ASCII byte in another set; a 4-byte sequence's
			// lead byte in utf8mb3.
			if c >= 0x80 && (cs == ClientOther || c >= 0xF0) {
				return 0, false
			}
		}
	}
	switch ki.class {
	case classBytes:
		return crcIEEE(s), true
	case classUTF8Bin:
		if !validUTF8(s, ki.mb3) {
			return 0, false
		}
		if ki.pad {
			for len(s) > 0 && s[len(s)-1] == ' ' {
				s = s[:len(s)-1]
			}
		}
		return crcIEEE(s), true
	}
	// classWeighed: the weights, cut of trailing spaces' weights.
	space, _ := ki.w.weight(' ')
	end := len(s)
	if ki.pad {
		for end > 0 {
			r, n := utf8.DecodeLastRune(s[:end])
			x, ok := ki.w.weight(r)
			if r == utf8.RuneError && n <= 1 || !ok || x != space {
				break
			}
			end -= n
		}
	}
	h := ^uint32(0)
	for i := 0; i < end; {
		r, size := utf8.DecodeRune(s[i:end])
		if r == utf8.RuneError && size <= 1 || ki.mb3 && size > 3 {
			return 0, false
		}
		x, ok := ki.w.weight(r)
		if !ok {
			return 0, false
		}
		i += size
		if ki.w.width == 2 {
			h = crcByte(h, byte(x>>8))
		}
		h = crcByte(h, byte(x))
	}
	return ^h, true
}

// ieeeTable is CRC-32's (IEEE) table; crcByte and crcIEEE compute what
// crc32.ChecksumIEEE does without handing the bytes to a function value,
// through which a stack buffer would escape to the heap.
var ieeeTable = crc32.MakeTable(crc32.IEEE)

// crcByte feeds one byte to a running CRC-32 kept inverted (start from
// ^0, finish with ^).
func crcByte(h uint32, c byte) uint32 { return ieeeTable[byte(h)^c] ^ h>>8 }

// crcIEEE is crc32.ChecksumIEEE of p.
func crcIEEE(p []byte) uint32 {
	h := ^uint32(0)
	for _, c := range p {
		h = crcByte(h, c)
	}
	return ^h
}

// charCount returns the number of characters of s, trailing spaces cut
// under PAD SPACE.
func (ki *keyInfo) charCount(s []byte) int64 {
	if ki.pad {
		for len(s) > 0 && s[len(s)-1] == ' ' {
			s = s[:len(s)-1]
		}
	}
	if ki.class == classBytes {
		return int64(len(s))
	}
	return int64(utf8.RuneCount(s))
}

func validUTF8(s []byte, mb3 bool) bool {
	if !mb3 {
		return utf8.Valid(s)
	}
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && n <= 1 || n > 3 {
			return false
		}
		i += n
	}
	return true
}
