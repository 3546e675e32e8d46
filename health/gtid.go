package health

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Flavor is the server family of a cluster: the two write GTIDs differently and name their
// replication statements and status columns differently.
type Flavor uint8

const (
	// FlavorUnknown is the zero Flavor; nothing parses or runs with it.
	FlavorUnknown Flavor = iota
	// FlavorMariaDB: GTID positions domain-server-seq, CHANGE MASTER ... MASTER_USE_GTID.
	FlavorMariaDB
	// FlavorMySQL: GTID sets uuid:interval, CHANGE REPLICATION SOURCE ... SOURCE_AUTO_POSITION.
	FlavorMySQL
)

func (f Flavor) String() string {
	switch f {
	case FlavorMariaDB:
		return "mariadb"
	case FlavorMySQL:
		return "mysql"
	}
	return "unknown"
}

// ErrBadGTID is wrapped by every GTID parse error; the message names the input and the part
// of it that is wrong.
var ErrBadGTID = errors.New("bad GTID")

// maxGNO is the largest transaction number MySQL hands out (2^63 - 1).
const maxGNO = math.MaxInt64

// maxTagLen is the longest MySQL 8.4 GTID tag.
const maxTagLen = 32

// GTIDSet is a set of transactions identified by GTIDs, in one flavor's notation:
//
//   - MariaDB: a GTID position, one domain-server-seq triple per replication domain
//     ("0-1-100,1-2-7"). Per domain it stands for every transaction up to seq; the server id
//     only says who wrote the last one and takes no part in comparisons.
//   - MySQL: a GTID set, source uuid (with an optional 8.4 tag) and intervals of transaction
//     numbers ("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7,...:tag:1-3").
//
// A GTIDSet is an immutable value, safe to share between goroutines. The zero value is the
// empty set of no flavor; it is contained in every set.
type GTIDSet struct {
	flavor  Flavor
	domains []mariaGTID  // MariaDB: sorted by domain, one entry per domain
	sources []gtidSource // MySQL: sorted by uuid then tag, each with merged intervals
}

// mariaGTID is the last GTID of one MariaDB replication domain.
type mariaGTID struct {
	domain, server uint32
	seq            uint64
}

// gtidSource is the transactions of one MySQL source uuid (and tag).
type gtidSource struct {
	uuid string // lower case, 8-4-4-4-12
	tag  string // lower case; "" when untagged
	ivs  []gtidInterval
}

// gtidInterval is an inclusive range of transaction numbers.
type gtidInterval struct{ lo, hi uint64 }

// ParseGTID parses a GTID position (MariaDB: gtid_binlog_pos, gtid_slave_pos, Gtid_IO_Pos) or
// GTID set (MySQL: gtid_executed, Retrieved_Gtid_Set) as the server prints it. White space
// around the comma-separated parts is ignored (MySQL puts newlines there). An empty string is
// the empty set. Errors wrap ErrBadGTID and name the part that is wrong.
func ParseGTID(f Flavor, s string) (GTIDSet, error) {
	set := GTIDSet{flavor: f}
	s = strings.TrimSpace(s)
	switch f {
	case FlavorMariaDB, FlavorMySQL:
	default:
		return GTIDSet{}, fmt.Errorf("%w %q: unknown server flavor", ErrBadGTID, s)
	}
	if s == "" {
		return set, nil
	}
	bad := func(part, format string, args ...any) error {
		if part == s {
			return fmt.Errorf("%w %q: %s", ErrBadGTID, s, fmt.Sprintf(format, args...))
		}
		return fmt.Errorf("%w %q: %q: %s", ErrBadGTID, s, part, fmt.Sprintf(format, args...))
	}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return GTIDSet{}, bad(s, "empty part between commas")
		}
		var err error
		if f == FlavorMariaDB {
			err = set.addMariaDB(part, bad)
		} else {
			err = set.addMySQL(part, bad)
		}
		if err != nil {
			return GTIDSet{}, err
		}
	}
	if f == FlavorMariaDB {
		slices.SortFunc(set.domains, func(a, b mariaGTID) int { return cmpUint(a.domain, b.domain) })
	} else {
		set.sources = normalizeSources(set.sources)
	}
	return set, nil
}

// MustParseGTID is ParseGTID for constants in tests and examples; it panics on an error.
func MustParseGTID(f Flavor, s string) GTIDSet {
	g, err := ParseGTID(f, s)
	if err != nil {
		panic(err)
	}
	return g
}

func (g *GTIDSet) addMariaDB(part string, bad func(string, string, ...any) error) error {
	fields := strings.Split(part, "-")
	if len(fields) != 3 {
		return bad(part, "want domain-server-sequence")
	}
	domain, err := parseDigits(fields[0], 32)
	if err != nil {
		return bad(part, "domain id %q: %v", fields[0], err)
	}
	server, err := parseDigits(fields[1], 32)
	if err != nil {
		return bad(part, "server id %q: %v", fields[1], err)
	}
	seq, err := parseDigits(fields[2], 64)
	if err != nil {
		return bad(part, "sequence number %q: %v", fields[2], err)
	}
	for _, d := range g.domains {
		if d.domain == uint32(domain) {
			return bad(part, "domain %d appears twice", domain)
		}
	}
	g.domains = append(g.domains, mariaGTID{domain: uint32(domain), server: uint32(server), seq: seq})
	return nil
}

func (g *GTIDSet) addMySQL(part string, bad func(string, string, ...any) error) error {
	fields := strings.Split(part, ":")
	uuid, ok := normalizeUUID(strings.TrimSpace(fields[0]))
	if !ok {
		return bad(part, "source uuid %q is not a UUID", fields[0])
	}
	if len(fields) == 1 {
		return bad(part, "source %s has no transaction numbers", uuid)
	}
	tag := ""
	pendingTag := false // a tag waits for its first interval
	for _, field := range fields[1:] {
		field = strings.TrimSpace(field)
		if field == "" {
			return bad(part, "empty field between colons")
		}
		if c := field[0]; c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') {
			if pendingTag {
				return bad(part, "tag %q has no transaction numbers", tag)
			}
			t, err := parseTag(field)
			if err != nil {
				return bad(part, "tag %q: %v", field, err)
			}
			tag, pendingTag = t, true
			continue
		}
		lo, hi, err := parseInterval(field)
		if err != nil {
			return bad(part, "interval %q: %v", field, err)
		}
		g.sources = append(g.sources, gtidSource{uuid: uuid, tag: tag, ivs: []gtidInterval{{lo, hi}}})
		pendingTag = false
	}
	if pendingTag {
		return bad(part, "tag %q has no transaction numbers", tag)
	}
	return nil
}

// parseDigits parses a non-negative decimal number of at most bits bits. Unlike
// strconv.ParseUint it takes nothing but ASCII digits.
func parseDigits(s string, bits int) (uint64, error) {
	if s == "" {
		return 0, errors.New("empty")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("not a number")
		}
	}
	n, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return 0, fmt.Errorf("out of range for %d bits", bits)
	}
	return n, nil
}

// parseInterval parses "n" or "n-m" with 1 <= n <= m <= 2^63-1.
func parseInterval(s string) (lo, hi uint64, err error) {
	a, b, isRange := strings.Cut(s, "-")
	if lo, err = parseDigits(a, 64); err != nil {
		return 0, 0, fmt.Errorf("start: %w", err)
	}
	hi = lo
	if isRange {
		if hi, err = parseDigits(b, 64); err != nil {
			return 0, 0, fmt.Errorf("end: %w", err)
		}
	}
	switch {
	case lo == 0:
		return 0, 0, errors.New("transaction numbers start at 1")
	case hi > maxGNO:
		return 0, 0, fmt.Errorf("transaction number above %d", uint64(maxGNO))
	case hi < lo:
		return 0, 0, errors.New("end before start")
	}
	return lo, hi, nil
}

// parseTag checks a MySQL 8.4 GTID tag: a letter or underscore, then letters, digits or
// underscores, at most 32 in all; tags compare case-insensitively.
func parseTag(s string) (string, error) {
	if len(s) > maxTagLen {
		return "", fmt.Errorf("longer than %d characters", maxTagLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '_' && !(c|0x20 >= 'a' && c|0x20 <= 'z') && !(i > 0 && c >= '0' && c <= '9') {
			return "", fmt.Errorf("character %q not allowed", c)
		}
	}
	return strings.ToLower(s), nil
}

// normalizeUUID accepts a UUID in 8-4-4-4-12 form or as 32 hex digits and returns the lower
// case 8-4-4-4-12 form.
func normalizeUUID(s string) (string, bool) {
	hex := s
	if len(s) == 36 {
		if s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
			return "", false
		}
		hex = s[:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	}
	if len(hex) != 32 {
		return "", false
	}
	b := []byte(strings.ToLower(hex))
	for _, c := range b {
		if !(c >= '0' && c <= '9') && !(c >= 'a' && c <= 'f') {
			return "", false
		}
	}
	return string(b[:8]) + "-" + string(b[8:12]) + "-" + string(b[12:16]) + "-" + string(b[16:20]) + "-" + string(b[20:]), true
}

// normalizeSources sorts sources by uuid and tag, merges sources with the same uuid and tag,
// and sorts and merges their intervals (adjacent ones too: 1-3 and 4-5 become 1-5).
func normalizeSources(in []gtidSource) []gtidSource {
	if len(in) == 0 {
		return nil
	}
	slices.SortStableFunc(in, cmpSource)
	var out []gtidSource
	for _, s := range in {
		if n := len(out); n > 0 && cmpSource(out[n-1], s) == 0 {
			out[n-1].ivs = append(out[n-1].ivs, s.ivs...)
			continue
		}
		out = append(out, gtidSource{uuid: s.uuid, tag: s.tag, ivs: append([]gtidInterval(nil), s.ivs...)})
	}
	for i := range out {
		out[i].ivs = mergeIntervals(out[i].ivs)
	}
	return out
}

func cmpSource(a, b gtidSource) int {
	if c := strings.Compare(a.uuid, b.uuid); c != 0 {
		return c
	}
	return strings.Compare(a.tag, b.tag)
}

func mergeIntervals(ivs []gtidInterval) []gtidInterval {
	slices.SortFunc(ivs, func(a, b gtidInterval) int { return cmpUint(a.lo, b.lo) })
	out := ivs[:0]
	for _, iv := range ivs {
		if n := len(out); n > 0 && iv.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, iv.hi)
			continue
		}
		out = append(out, iv)
	}
	return slices.Clip(out)
}

func cmpUint[T uint32 | uint64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Flavor returns the notation the set was parsed in (FlavorUnknown for the zero value).
func (g GTIDSet) Flavor() Flavor { return g.flavor }

// IsEmpty reports whether the set holds no transaction.
func (g GTIDSet) IsEmpty() bool { return len(g.domains) == 0 && len(g.sources) == 0 }

// String returns the set in its flavor's canonical notation: MariaDB domains in ascending
// order, MySQL sources sorted by uuid with untagged intervals before tagged ones, intervals
// merged. ParseGTID of the result gives an equal set.
func (g GTIDSet) String() string {
	var b strings.Builder
	for i, d := range g.domains {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d-%d-%d", d.domain, d.server, d.seq)
	}
	prevUUID := ""
	for _, s := range g.sources {
		if s.uuid != prevUUID {
			if prevUUID != "" {
				b.WriteByte(',')
			}
			b.WriteString(s.uuid)
			prevUUID = s.uuid
		}
		if s.tag != "" {
			b.WriteByte(':')
			b.WriteString(s.tag)
		}
		writeIntervals(&b, s.ivs)
	}
	return b.String()
}

func writeIntervals(b *strings.Builder, ivs []gtidInterval) {
	for _, iv := range ivs {
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(iv.lo, 10))
		if iv.hi != iv.lo {
			b.WriteByte('-')
			b.WriteString(strconv.FormatUint(iv.hi, 10))
		}
	}
}

// Equal reports whether both sets hold the same transactions. Sets of different flavors are
// equal only when both are empty.
func (g GTIDSet) Equal(o GTIDSet) bool { return g.Contains(o) && o.Contains(g) }

// Contains reports whether every transaction of o is in g. An empty o is contained in every
// set; otherwise sets of different flavors contain nothing of each other.
//
// MariaDB: every domain of o is in g with a sequence number at least o's (server ids are not
// compared). MySQL: every interval of every source of o lies within g's intervals of the same
// source.
func (g GTIDSet) Contains(o GTIDSet) bool {
	if o.IsEmpty() {
		return true
	}
	if g.flavor != o.flavor {
		return false
	}
	if g.flavor == FlavorMariaDB {
		for _, od := range o.domains {
			gd, ok := g.domain(od.domain)
			if !ok || gd.seq < od.seq {
				return false
			}
		}
		return true
	}
	for _, os := range o.sources {
		gs, ok := g.source(os.uuid, os.tag)
		if !ok {
			return false
		}
		for _, iv := range os.ivs {
			if !covers(gs.ivs, iv) {
				return false
			}
		}
	}
	return true
}

func (g GTIDSet) domain(id uint32) (mariaGTID, bool) {
	i, ok := slices.BinarySearchFunc(g.domains, id, func(d mariaGTID, id uint32) int { return cmpUint(d.domain, id) })
	if !ok {
		return mariaGTID{}, false
	}
	return g.domains[i], true
}

func (g GTIDSet) source(uuid, tag string) (gtidSource, bool) {
	i, ok := slices.BinarySearchFunc(g.sources, gtidSource{uuid: uuid, tag: tag}, cmpSource)
	if !ok {
		return gtidSource{}, false
	}
	return g.sources[i], true
}

// covers reports whether the merged, sorted ivs include all of iv.
func covers(ivs []gtidInterval, iv gtidInterval) bool {
	i, _ := slices.BinarySearchFunc(ivs, iv.lo, func(x gtidInterval, lo uint64) int {
		if x.hi < lo {
			return -1
		}
		if x.lo > lo {
			return 1
		}
		return 0
	})
	return i < len(ivs) && ivs[i].lo <= iv.lo && ivs[i].hi >= iv.hi
}

// Union returns the transactions of both sets: MariaDB takes, per domain, the entry with the
// higher sequence number; MySQL merges the intervals. When the flavors differ the result is
// whichever set is not empty, or g when both are (mixing flavors has no meaning).
func (g GTIDSet) Union(o GTIDSet) GTIDSet {
	switch {
	case o.IsEmpty():
		return g
	case g.IsEmpty(), g.flavor != o.flavor:
		if g.IsEmpty() {
			return o
		}
		return g
	}
	out := GTIDSet{flavor: g.flavor}
	if g.flavor == FlavorMariaDB {
		out.domains = append(slices.Clone(g.domains), o.domains...)
		slices.SortStableFunc(out.domains, func(a, b mariaGTID) int { return cmpUint(a.domain, b.domain) })
		merged := out.domains[:0]
		for _, d := range out.domains {
			if n := len(merged); n > 0 && merged[n-1].domain == d.domain {
				if d.seq > merged[n-1].seq {
					merged[n-1] = d
				}
				continue
			}
			merged = append(merged, d)
		}
		out.domains = merged
		return out
	}
	all := make([]gtidSource, 0, len(g.sources)+len(o.sources))
	for _, s := range append(slices.Clone(g.sources), o.sources...) {
		all = append(all, gtidSource{uuid: s.uuid, tag: s.tag, ivs: slices.Clone(s.ivs)})
	}
	out.sources = normalizeSources(all)
	return out
}

// Count returns how many transactions the set holds, saturating at the largest uint64. For a
// MariaDB position that is the sum of the sequence numbers, an upper bound (the seq of a
// domain counts every transaction before it, including ones filtered out).
func (g GTIDSet) Count() uint64 {
	var n uint64
	add := func(k uint64) {
		if n+k < n {
			n = math.MaxUint64
			return
		}
		n += k
	}
	for _, d := range g.domains {
		add(d.seq)
	}
	for _, s := range g.sources {
		for _, iv := range s.ivs {
			add(iv.hi - iv.lo + 1)
		}
	}
	return n
}

// Missing describes the transactions of g that o lacks, or returns "" when o contains g. It
// serves reports of errant transactions (on an old master, not on the master promoted in its
// place). MySQL: the difference as a GTID set. MariaDB, where a position cannot name a range:
// per domain "domain D seq A-B (last D-S-B)", joined with commas.
func (g GTIDSet) Missing(o GTIDSet) string {
	if o.Contains(g) {
		return ""
	}
	if g.flavor != o.flavor && !o.IsEmpty() {
		return g.String() + " (not comparable with " + o.flavor.String() + " " + o.String() + ")"
	}
	var parts []string
	if g.flavor == FlavorMariaDB {
		for _, d := range g.domains {
			var from uint64 = 1
			if od, ok := o.domain(d.domain); ok {
				if od.seq >= d.seq {
					continue
				}
				from = od.seq + 1
			}
			parts = append(parts, fmt.Sprintf("domain %d seq %s (last %d-%d-%d)", d.domain,
				seqRange(from, d.seq), d.domain, d.server, d.seq))
		}
		return strings.Join(parts, ", ")
	}
	var b strings.Builder
	prevUUID := ""
	for _, s := range g.sources {
		ivs := s.ivs
		if os, ok := o.source(s.uuid, s.tag); ok {
			ivs = subtractIntervals(ivs, os.ivs)
		}
		if len(ivs) == 0 {
			continue
		}
		if s.uuid != prevUUID {
			if prevUUID != "" {
				b.WriteByte(',')
			}
			b.WriteString(s.uuid)
			prevUUID = s.uuid
		}
		if s.tag != "" {
			b.WriteByte(':')
			b.WriteString(s.tag)
		}
		writeIntervals(&b, ivs)
	}
	return b.String()
}

func seqRange(lo, hi uint64) string {
	if lo == hi {
		return strconv.FormatUint(lo, 10)
	}
	return strconv.FormatUint(lo, 10) + "-" + strconv.FormatUint(hi, 10)
}

// subtractIntervals returns a minus b; both are sorted and merged.
func subtractIntervals(a, b []gtidInterval) []gtidInterval {
	var out []gtidInterval
	j := 0
	for _, iv := range a {
		lo := iv.lo
		for j < len(b) && b[j].hi < lo {
			j++
		}
		k := j
		for k < len(b) && b[k].lo <= iv.hi {
			if b[k].lo > lo {
				out = append(out, gtidInterval{lo, b[k].lo - 1})
			}
			if b[k].hi >= iv.hi {
				lo = iv.hi + 1
				break
			}
			lo = b[k].hi + 1
			k++
		}
		if lo <= iv.hi && lo != 0 {
			out = append(out, gtidInterval{lo, iv.hi})
		}
	}
	return out
}

// BinlogState is what a server's binary log holds, for telling whether it has every
// transaction of a replica's position. A MariaDB position keeps only the last GTID per domain
// and compares sequence numbers, so once a new master has written past a replica's sequence
// number the position says "contained" even when the replica's last transactions came from the
// old master and never reached the new one. gtid_binlog_state keeps the last GTID each server
// wrote in each domain, which tells them apart. For MySQL it is gtid_executed, whose uuids need
// no such help. A BinlogState is an immutable value.
type BinlogState struct {
	pos GTIDSet
	// last is MariaDB's gtid_binlog_state: the last sequence number per (domain, server).
	last map[[2]uint32]uint64
	// applied is MariaDB's gtid_slave_pos: a domain the binary log never saw (a server
	// provisioned from a backup) is held as far as replication applied it.
	applied GTIDSet
}

// WithApplied returns b knowing the server's replica position (MariaDB gtid_slave_pos), for
// domains its binary log never saw.
func (b BinlogState) WithApplied(pos GTIDSet) BinlogState {
	b.applied = pos
	return b
}

// ParseBinlogState reads gtid_binlog_state (MariaDB: "domain-server-seq" for each server that
// wrote in each domain) or gtid_executed (MySQL). Errors wrap ErrBadGTID.
func ParseBinlogState(f Flavor, s string) (BinlogState, error) {
	if f != FlavorMariaDB {
		pos, err := ParseGTID(f, s)
		return BinlogState{pos: pos}, err
	}
	b := BinlogState{last: map[[2]uint32]uint64{}}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		var one GTIDSet
		one.flavor = FlavorMariaDB
		bad := func(p, format string, args ...any) error {
			return fmt.Errorf("%w: gtid_binlog_state %q: %q: %s", ErrBadGTID, s, p, fmt.Sprintf(format, args...))
		}
		if err := one.addMariaDB(part, bad); err != nil {
			return BinlogState{}, err
		}
		d := one.domains[0]
		key := [2]uint32{d.domain, d.server}
		b.last[key] = max(b.last[key], d.seq)
		b.pos = b.pos.Union(one)
	}
	return b, nil
}

// BinlogStateOf is the state known only by a position: Lacks then compares sequence numbers.
func BinlogStateOf(pos GTIDSet) BinlogState { return BinlogState{pos: pos} }

// Position is the binary log's GTID position.
func (b BinlogState) Position() GTIDSet { return b.pos }

// Lacks describes the transactions of g, a replica's position or set, that the binary log does
// not hold, or returns "" when it holds them all. On MariaDB the last GTID of each of g's
// domains must be in the log: the log's last sequence number from that GTID's server must
// reach it. When the log holds nothing from that server (it never logged a transaction
// replicated from it), only the sequence numbers are compared.
func (b BinlogState) Lacks(g GTIDSet) string {
	if g.flavor != FlavorMariaDB || b.last == nil {
		return g.Missing(b.pos)
	}
	var parts []string
	for _, d := range g.domains {
		seq, ok := b.last[[2]uint32{d.domain, d.server}]
		if !ok {
			od, inLog := b.pos.domain(d.domain)
			if inLog && od.seq >= d.seq {
				continue
			}
			if ad, ok := b.applied.domain(d.domain); !inLog && ok && ad.seq >= d.seq {
				continue
			}
			parts = append(parts, fmt.Sprintf("%d-%d-%d (the binary log ends at %s in domain %d)", d.domain, d.server, d.seq, b.pos.String(), d.domain))
			continue
		}
		if seq >= d.seq {
			continue
		}
		parts = append(parts, fmt.Sprintf("%d-%d-%d (the binary log's last from server %d is %d-%d-%d)", d.domain, d.server, d.seq, d.server, d.domain, d.server, seq))
	}
	return strings.Join(parts, ", ")
}
