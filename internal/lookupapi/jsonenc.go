package lookupapi

import (
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// The stream and link writers encode JSON by hand: they write the same few
// shapes millions of times.

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, s)
	return append(dst, '"')
}

// appendString2 appends a+b as one JSON string.
func appendString2(dst []byte, a, b string) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, a)
	dst = appendEscaped(dst, b)
	return append(dst, '"')
}

// plainASCII says of each byte whether it stands for itself inside a
// JSON string: printable ASCII but the quote and the backslash.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendEscaped appends s escaped for the inside of a JSON string, as
// encoding/json does with HTML escaping off. Strings of plain ASCII, such
// as ids, scores' labels and links, are appended whole.
func appendEscaped(dst []byte, s string) []byte {
	i := 0
	for i < len(s) && plainASCII[s[i]] {
		i++
	}
	if i == len(s) {
		return append(dst, s...)
	}
	start := 0
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if plainASCII[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(dst, s[start:]...)
}

// appendFloat appends f as encoding/json writes a float64.
func appendFloat(dst []byte, f float64) []byte {
	if out, ok := appendShortFloat(dst, f); ok {
		return out
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// Clean up e-09 to e-9, as encoding/json does.
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// shortDecimals is the number of decimals appendShortFloat writes at most.
const shortDecimals = 1e5

// appendShortFloat appends f as appendFloat does when f is from 0 to 1e9
// and has at most five decimals, as scores do, without the general
// algorithm; ok is false for any other f. Its decimals then name f
// exactly (n/1e5 rounds to f, as the division does) and are its shortest
// form: any other decimal of as few digits is at least 1e-5 away, more
// than the spacing of floats below 1e9.
func appendShortFloat(dst []byte, f float64) ([]byte, bool) {
	if !(f >= 0 && f < 1e9) || f == 0 && math.Signbit(f) {
		return dst, false
	}
	n := math.Round(f * shortDecimals)
	if n/shortDecimals != f {
		return dst, false
	}
	i := int64(n)
	dst = strconv.AppendInt(dst, i/shortDecimals, 10)
	frac := i % shortDecimals
	if frac == 0 {
		return dst, true
	}
	var digits [5]byte
	for k := 4; k >= 0; k-- {
		digits[k] = byte('0' + frac%10)
		frac /= 10
	}
	end := len(digits)
	for digits[end-1] == '0' {
		end--
	}
	dst = append(dst, '.')
	return append(dst, digits[:end]...), true
}

// appendTime appends t as a JSON string in RFC 3339, UTC.
func appendTime(dst []byte, t time.Time) []byte {
	dst = append(dst, '"')
	if u := t.Unix(); u >= 0 && u < maxUnixDate {
		dst = appendUnixDate(dst, u)
	} else {
		dst = t.UTC().AppendFormat(dst, time.RFC3339)
	}
	return append(dst, '"')
}

// maxUnixDate is the Unix time of the year 10000.
const maxUnixDate = 253402300800

// appendUnixDate appends the Unix time u, from 0 to maxUnixDate, in RFC
// 3339 in UTC, as time.Time's AppendFormat does (without its general
// layout machinery): the civil date of its day by Howard Hinnant's
// days_from_civil inverse, then the time of day.
func appendUnixDate(dst []byte, u int64) []byte {
	days, secs := u/86400, u%86400
	z := days + 719468
	era := z / 146097
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if mp >= 10 {
		m = mp - 9
	}
	y := yoe + era*400
	if m <= 2 {
		y++
	}
	dst = append(dst, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-')
	dst = append2(dst, m, '-')
	dst = append2(dst, d, 'T')
	dst = append2(dst, secs/3600, ':')
	dst = append2(dst, secs/60%60, ':')
	return append2(dst, secs%60, 'Z')
}

// append2 appends n, from 0 to 99, in two digits, then sep.
func append2(dst []byte, n int64, sep byte) []byte {
	return append(dst, byte('0'+n/10), byte('0'+n%10), sep)
}
