package apikey

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse feeds X-API-Key header values to Parse and Verify: whatever
// the header holds, Parse neither panics nor accepts anything but a
// well-formed key, and only the real secret verifies.
func FuzzParse(f *testing.F) {
	full, k, err := New(Params{Name: "fuzz", CreatedBy: "test"}, now)
	if err != nil {
		f.Fatal(err)
	}
	_, realSecret, _ := strings.Cut(full, ".")
	other, _, _ := New(Params{Name: "other", CreatedBy: "test"}, now)
	for _, s := range []string{
		full,
		other,
		// The example of docs/control-api.md (its checksum is not real).
		"plk_7Qm2XbT9cR1sLw4Z.plsk_2TfK9mQx7LbW3nVc8RzH1pYd6GsJ4uEa0XkN5oBqFtIe3Zw1Q",
		strings.ToUpper(full),
		full + ".",
		full + "\x00",
		" " + full,
		full[:len(full)-1],
		strings.Replace(full, ".", "..", 1),
		k.ID,
		k.ID + ".",
		"." + realSecret,
		realSecret,
		"plk_0000000000000000.plsk_x",
		"this-is-not-a-key",
		"plk_\xff\xff\xff\xff\xff\xff\xff\xff.plsk_",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, secret, err := Parse(s)
		if err != nil {
			if err != ErrMalformed {
				t.Fatalf("Parse(%q) error = %v, want ErrMalformed", s, err)
			}
			if secret != "" {
				t.Fatalf("Parse(%q) failed but returned a secret", s)
			}
			if id != "" && (!ValidID(id) || !strings.HasPrefix(s, id)) {
				t.Fatalf("Parse(%q) failed with keyId %q that is not the valid start of the input", s, id)
			}
			return
		}
		if id+"."+secret != s {
			t.Fatalf("Parse(%q) = %q, %q: not the input split at its dot", s, id, secret)
		}
		if !ValidID(id) || !CheckSecret(SecretPrefix, secret) || !utf8.ValidString(s) {
			t.Fatalf("Parse(%q) accepted a malformed key", s)
		}
		if len(s) != len(full) {
			t.Fatalf("Parse(%q) accepted a key of %d bytes, want %d", s, len(s), len(full))
		}
		if got := Verify(k, secret); got != (secret == realSecret) {
			t.Fatalf("Verify(%q) = %v", secret, got)
		}
	})
}

// FuzzCheckSecret checks the token format shared by API key secrets,
// enrollment secrets and agent credentials: a token passes only with its
// own prefix, its exact length and a checksum that a one-character change
// breaks.
func FuzzCheckSecret(f *testing.F) {
	for _, p := range []string{SecretPrefix, "ples_", "plat_"} {
		f.Add(p, NewSecret(p), uint(0), byte('x'))
	}
	f.Add("plsk_", "plsk_", uint(3), byte('0'))
	f.Add("", "", uint(0), byte(0))
	f.Fuzz(func(t *testing.T, prefix, s string, at uint, c byte) {
		if !CheckSecret(prefix, s) {
			return
		}
		if len(s) != len(prefix)+secretRandomLen+checksumLen || !strings.HasPrefix(s, prefix) || !isBase62(s[len(prefix):]) {
			t.Fatalf("CheckSecret(%q, %q) accepted a malformed token", prefix, s)
		}
		// Changing one character of the random part or the checksum must
		// be caught: CRC-32 detects every single-character change.
		i := len(prefix) + int(at%(secretRandomLen+checksumLen))
		if s[i] == c {
			return
		}
		mutated := s[:i] + string(c) + s[i+1:]
		if CheckSecret(prefix, mutated) && isBase62(string(c)) {
			t.Fatalf("CheckSecret accepted %q and its one-character change %q", s, mutated)
		}
	})
}
