package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"hash/crc32"
	"strings"
)

// The secret token format, shared by API key secrets, enrollment secrets and
// agent credentials:
//
//	<prefix><40 base62 characters of randomness><6 base62 characters of checksum>
//
// The prefix names the kind of token (plsk_ for an API key secret), so that
// secret scanners can recognise a leaked token, and the checksum is the
// CRC-32 (IEEE) of the prefix and the random part, written in base62 and
// left-padded with '0' to 6 characters, so that they can tell a real token
// from a string that merely looks like one without asking us.
const (
	secretRandomLen = 40 // 40 × log2(62) ≈ 238 bits
	checksumLen     = 6  // 62^6 > 2^32
	base62          = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

// NewSecret returns a new random token of the secret format with the given
// prefix, read from crypto/rand.
func NewSecret(prefix string) string {
	body := prefix + randomBase62(secretRandomLen)
	return body + checksum(body)
}

// CheckSecret reports whether s is a well-formed token with the given prefix
// and a correct checksum. It says nothing about whether the token is known.
func CheckSecret(prefix, s string) bool {
	if len(s) != len(prefix)+secretRandomLen+checksumLen || !strings.HasPrefix(s, prefix) {
		return false
	}
	if !isBase62(s[len(prefix):]) {
		return false
	}
	body := s[:len(s)-checksumLen]
	return subtle.ConstantTimeCompare([]byte(checksum(body)), []byte(s[len(body):])) == 1
}

// HashSecret returns the SHA-256 digest of a secret token, the only form in
// which secrets are stored.
//
// A fast hash is the right tool here: the secrets are 238 random bits, not
// passwords, so no dictionary or brute-force search can invert the digest,
// and a slow password hash would only make every authenticated request
// slower. The digest is compared in constant time (see Verify).
func HashSecret(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

// EqualHash compares two digests in constant time.
func EqualHash(a, b []byte) bool {
	return len(a) == sha256.Size && subtle.ConstantTimeCompare(a, b) == 1
}

// randomBase62 returns n base62 characters from crypto/rand, without modulo
// bias: bytes of 248 and above are rejected (248 = 4 × 62).
func randomBase62(n int) string {
	out := make([]byte, 0, n)
	buf := make([]byte, n+n/4+8)
	for len(out) < n {
		rand.Read(buf) // never fails (crypto/rand)
		for _, b := range buf {
			if b >= 248 {
				continue
			}
			out = append(out, base62[b%62])
			if len(out) == n {
				break
			}
		}
	}
	return string(out)
}

func checksum(body string) string {
	v := crc32.ChecksumIEEE([]byte(body))
	var out [checksumLen]byte
	for i := checksumLen - 1; i >= 0; i-- {
		out[i] = base62[v%62]
		v /= 62
	}
	return string(out[:])
}

func isBase62(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z') {
			return false
		}
	}
	return true
}
