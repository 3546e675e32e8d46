package protocol

import (
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"
)

// NewScramble returns a fresh 20-byte nonce of printable, non-NUL bytes, as
// servers send in their greeting.
func NewScramble() ([]byte, error) {
	s := make([]byte, 20)
	if _, err := rand.Read(s); err != nil {
		return nil, err
	}
	for i := range s {
		s[i] = s[i]&0x7f | 0x01
		if s[i] == '$' || s[i] == 0x7f {
			s[i] = 'a'
		}
	}
	return s, nil
}

// NativePasswordResponse computes a mysql_native_password auth response:
// SHA1(password) XOR SHA1(scramble + SHA1(SHA1(password))).
func NativePasswordResponse(scramble []byte, password string) []byte {
	if password == "" {
		return nil
	}
	h1 := sha1.Sum([]byte(password))
	h2 := sha1.Sum(h1[:])
	m := sha1.New()
	m.Write(scramble)
	m.Write(h2[:])
	x := m.Sum(nil)
	for i := range x {
		x[i] ^= h1[i]
	}
	return x
}

// CachingSHA2Response computes the caching_sha2_password fast-path response:
// SHA256(password) XOR SHA256(SHA256(SHA256(password)) + scramble).
func CachingSHA2Response(scramble []byte, password string) []byte {
	if password == "" {
		return nil
	}
	h1 := sha256.Sum256([]byte(password))
	h2 := sha256.Sum256(h1[:])
	m := sha256.New()
	m.Write(h2[:])
	m.Write(scramble)
	x := m.Sum(nil)
	for i := range x {
		x[i] ^= h1[i]
	}
	return x
}

// ParseNativeHash decodes a mysql_native_password hash as PASSWORD() prints it
// ("*" and 40 hex digits) into SHA1(SHA1(password)).
func ParseNativeHash(s string) ([]byte, error) {
	if len(s) != 41 || s[0] != '*' {
		return nil, fmt.Errorf("password hash must be '*' and 40 hex digits")
	}
	b, err := hex.DecodeString(strings.ToLower(s[1:]))
	if err != nil {
		return nil, fmt.Errorf("password hash: %w", err)
	}
	return b, nil
}

// VerifyNativePassword checks a mysql_native_password response against the
// stored SHA1(SHA1(password)) in constant time. An empty stored hash accepts
// only an empty response.
func VerifyNativePassword(scramble, response, stored []byte) bool {
	if len(stored) == 0 {
		return len(response) == 0
	}
	if len(response) != sha1.Size || len(stored) != sha1.Size {
		return false
	}
	m := sha1.New()
	m.Write(scramble)
	m.Write(stored)
	candidate := m.Sum(nil)
	for i := range candidate {
		candidate[i] ^= response[i]
	}
	h := sha1.Sum(candidate)
	return subtle.ConstantTimeCompare(h[:], stored) == 1
}
