package cve

import (
	"strconv"
	"strings"

	"github.com/patchline/patchline/internal/errs"
)

// maxSeqDigits bounds the sequence part of an id so that Key fits an int64.
// Real sequences have at most 7 digits today.
const maxSeqDigits = 12

// keyBase separates the year from the sequence in a Key.
const keyBase = 1_000_000_000_000

// ParseID checks that s matches ^CVE-\d{4}-\d{4,}$ case-insensitively and
// returns it in canonical upper-case form. It returns an errs.ErrInvalid error
// for anything else.
func ParseID(s string) (string, error) {
	if len(s) < 13 || len(s) > 64 || !strings.EqualFold(s[:4], "CVE-") || s[8] != '-' {
		return "", errs.Invalidf("malformed CVE id %q: want CVE-YYYY-NNNN", truncate(s))
	}
	for i := 4; i < len(s); i++ {
		if i == 8 {
			continue
		}
		if s[i] < '0' || s[i] > '9' {
			return "", errs.Invalidf("malformed CVE id %q: want CVE-YYYY-NNNN", truncate(s))
		}
	}
	return "CVE-" + s[4:], nil
}

// truncate shortens a client's string for an error message: at most 40
// bytes of it, made valid UTF-8 (a cut may split a character).
func truncate(s string) string {
	if len(s) > 40 {
		return strings.ToValidUTF8(s[:40], "\uFFFD") + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// Key returns the numeric sort key of a canonical id: ids order by (year,
// sequence), so CVE-2021-9999 sorts before CVE-2021-10000. ok is false for
// an id that is malformed or whose sequence is too long to be a real one.
func Key(id string) (key int64, ok bool) {
	if len(id) < 13 || id[:4] != "CVE-" || id[8] != '-' || len(id)-9 > maxSeqDigits {
		return 0, false
	}
	if len(id)-9 > 4 && id[9] == '0' {
		return 0, false // a sequence longer than four digits never starts with 0
	}
	year, err := strconv.ParseInt(id[4:8], 10, 64)
	if err != nil {
		return 0, false
	}
	seq, err := strconv.ParseInt(id[9:], 10, 64)
	if err != nil || seq < 0 {
		return 0, false
	}
	return year*keyBase + seq, true
}

// IDOfKey is the inverse of Key.
func IDOfKey(key int64) string {
	return string(AppendIDOfKey(make([]byte, 0, 9+maxSeqDigits), key))
}

// AppendIDOfKey appends the id of key, as IDOfKey returns it, to b.
func AppendIDOfKey(b []byte, key int64) []byte {
	year, seq := key/keyBase, key%keyBase
	b = append(b, "CVE-"...)
	if year < 0 || year > 9999 || seq < 0 {
		b = appendPadded(b, year)
		b = append(b, '-')
		return appendPadded(b, seq)
	}
	b = append(b, byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-')
	var digits [maxSeqDigits]byte
	i := len(digits)
	for n := 0; n < 4 || seq > 0; n++ {
		i--
		digits[i] = byte('0' + seq%10)
		seq /= 10
	}
	return append(b, digits[i:]...)
}

// appendPadded appends n in decimal, with zeros in front up to four digits.
func appendPadded(b []byte, n int64) []byte {
	for p := int64(1000); p > 1 && n < p; p /= 10 {
		b = append(b, '0')
	}
	return strconv.AppendInt(b, n, 10)
}

// YearOfKey returns the year of a key.
func YearOfKey(key int64) int { return int(key / keyBase) }

// Compare orders two canonical ids numerically. Malformed ids sort first.
func Compare(a, b string) int {
	ka, _ := Key(a)
	kb, _ := Key(b)
	switch {
	case ka < kb:
		return -1
	case ka > kb:
		return 1
	}
	return 0
}
