package router

import (
	"strconv"

	"github.com/pingcap/tidb/pkg/parser"
)

// DigestID is the 64-bit id of a digest (Plan.Digest): FNV-1a over its
// text. SHOW QUERY DIGESTS prints it with FormatDigestID, and a query
// rule may name a digest by it. It allocates nothing.
func DigestID(digest string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(digest); i++ {
		h ^= uint64(digest[i])
		h *= prime
	}
	return h
}

// FormatDigestID spells a digest id as SHOW QUERY DIGESTS prints it:
// 16 lower-case hex digits.
func FormatDigestID(id uint64) string {
	s := strconv.FormatUint(id, 16)
	for len(s) < 16 {
		s = "0" + s
	}
	return s
}

// ParseDigestID reads a digest id as FormatDigestID spells it, with or
// without a 0x prefix, in either case. ok is false for anything else.
func ParseDigestID(s string) (id uint64, ok bool) {
	if len(s) == 18 && (s[:2] == "0x" || s[:2] == "0X") {
		s = s[2:]
	}
	if len(s) != 16 {
		return 0, false
	}
	id, err := strconv.ParseUint(s, 16, 64)
	return id, err == nil
}

// DigestOf returns the digest of text as Plan.Digest would hold it. The
// plan of a text over 1 MiB, which the router does not parse, has no
// digest: a caller that must still tell such texts apart (the firewall)
// computes it here, at the cost of a pass over the text.
func DigestOf(text string) string { return parser.Normalize(text, "ON") }
