package ingest

import (
	"strconv"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// factsDecoder reads the JSON of facts. Its methods report false at
// anything they do not read as json.Unmarshal would. This file holds its
// readers of JSON values (white space, objects, arrays, strings, numbers,
// booleans, times); factsjson.go the members of cve.Facts it knows.
type factsDecoder struct {
	b []byte
	i int
}

func (d *factsDecoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// end reports whether only white space is left.
func (d *factsDecoder) end() bool {
	d.ws()
	return d.i == len(d.b)
}

// next returns the next byte after white space, 0 at the end.
func (d *factsDecoder) next() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// null reads a null if one comes next.
func (d *factsDecoder) null() bool {
	if d.next() == 'n' && len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// object reads an object, calling member for each member with the
// position at its value.
func (d *factsDecoder) object(member func(key string) bool) bool {
	if d.next() != '{' {
		return false
	}
	d.i++
	if d.next() == '}' {
		d.i++
		return true
	}
	for {
		key, ok := d.rawString()
		if !ok || d.next() != ':' {
			return false
		}
		d.i++
		if !member(key) {
			return false
		}
		switch d.next() {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

// array reads an array, calling elem for each element; it reports whether
// the array was empty through empty.
func (d *factsDecoder) array(elem func() bool) (ok, empty bool) {
	if d.next() != '[' {
		return false, false
	}
	d.i++
	if d.next() == ']' {
		d.i++
		return true, true
	}
	for {
		if !elem() {
			return false, false
		}
		switch d.next() {
		case ',':
			d.i++
		case ']':
			d.i++
			return true, false
		default:
			return false, false
		}
	}
}

// rawString reads a string without escapes (a member name as json.Marshal
// writes it).
func (d *factsDecoder) rawString() (string, bool) {
	if d.next() != '"' {
		return "", false
	}
	start := d.i + 1
	for j := start; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			d.i = j + 1
			return string(d.b[start:j]), true
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			return "", false
		}
	}
	return "", false
}

// str reads a string into *s, leaving it as it was for null.
func (d *factsDecoder) str(s *string) bool {
	if d.null() {
		return true
	}
	if d.next() != '"' {
		return false
	}
	start := d.i + 1
	plain := true
	j := start
	for ; j < len(d.b); j++ {
		c := d.b[j]
		if c == '"' {
			break
		}
		if c == '\\' {
			plain = false
			j++ // the escaped byte
			continue
		}
		if c < 0x20 {
			return false
		}
		if c >= utf8.RuneSelf {
			plain = false
		}
	}
	if j >= len(d.b) {
		return false
	}
	d.i = j + 1
	if plain {
		*s = string(d.b[start:j])
		return true
	}
	out, ok := unquote(d.b[start:j])
	*s = out
	return ok
}

// unquote decodes the text of a string with escapes or non-ASCII bytes,
// as encoding/json does; it reports false for invalid UTF-8, which
// encoding/json replaces.
func unquote(s []byte) (string, bool) {
	b := make([]byte, 0, len(s))
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			r++
			if r >= len(s) {
				return "", false
			}
			switch s[r] {
			case '"', '\\', '/':
				b = append(b, s[r])
				r++
			case 'b':
				b = append(b, '\b')
				r++
			case 'f':
				b = append(b, '\f')
				r++
			case 'n':
				b = append(b, '\n')
				r++
			case 'r':
				b = append(b, '\r')
				r++
			case 't':
				b = append(b, '\t')
				r++
			case 'u':
				r--
				rr := getu4(s[r:])
				if rr < 0 {
					return "", false
				}
				r += 6
				if utf16.IsSurrogate(rr) {
					if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != unicode.ReplacementChar {
						r += 6
						b = utf8.AppendRune(b, dec)
						break
					}
					rr = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, rr)
			default:
				return "", false
			}
		case c < utf8.RuneSelf:
			b = append(b, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			if rr == utf8.RuneError && size == 1 {
				return "", false
			}
			b = append(b, s[r:r+size]...)
			r += size
		}
	}
	return string(b), true
}

// getu4 decodes \uXXXX from the beginning of s, returning the hex value,
// or -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c = c - '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// optStr reads a string or null into *p: nil for null.
func (d *factsDecoder) optStr(p **string) bool {
	if d.null() {
		*p = nil
		return true
	}
	var s string
	if !d.str(&s) {
		return false
	}
	*p = &s
	return true
}

// token returns the bytes of the number or literal that comes next.
func (d *factsDecoder) token() []byte {
	d.ws()
	start := d.i
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return d.b[start:d.i]
		}
		d.i++
	}
	return d.b[start:d.i]
}

// float reads a number into *f, leaving it as it was for null.
func (d *factsDecoder) float(f *float64) bool {
	if d.null() {
		return true
	}
	t := d.token()
	if !isNumber(t) {
		return false
	}
	v, err := strconv.ParseFloat(string(t), 64)
	if err != nil {
		return false
	}
	*f = v
	return true
}

// isNumber reports whether t is a number of JSON's grammar.
func isNumber(t []byte) bool {
	digits := func(i int) int {
		j := i
		for j < len(t) && '0' <= t[j] && t[j] <= '9' {
			j++
		}
		return j
	}
	i := 0
	if i < len(t) && t[i] == '-' {
		i++
	}
	switch {
	case i < len(t) && t[i] == '0':
		i++
	case i < len(t) && '1' <= t[i] && t[i] <= '9':
		i = digits(i)
	default:
		return false
	}
	if i < len(t) && t[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(t) && (t[i] == 'e' || t[i] == 'E') {
		i++
		if i < len(t) && (t[i] == '+' || t[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return false
		}
		i = j
	}
	return i == len(t)
}

// boolean reads true or false into *v, leaving it as it was for null.
func (d *factsDecoder) boolean(v *bool) bool {
	if d.null() {
		return true
	}
	switch string(d.token()) {
	case "true":
		*v = true
	case "false":
		*v = false
	default:
		return false
	}
	return true
}

// optTime reads a time or null into *p.
func (d *factsDecoder) optTime(p **time.Time) bool {
	if d.null() {
		*p = nil
		return true
	}
	if d.next() != '"' {
		return false
	}
	start := d.i
	var s string
	if !d.str(&s) {
		return false
	}
	t := new(time.Time)
	if err := t.UnmarshalJSON(d.b[start:d.i]); err != nil {
		return false
	}
	*p = t
	return true
}

// strings reads an array of strings or null into *p.
func (d *factsDecoder) strings(p *[]string) bool {
	if d.null() {
		*p = nil
		return true
	}
	var out []string
	ok, empty := d.array(func() bool {
		var s string
		if !d.str(&s) {
			return false
		}
		out = append(out, s)
		return true
	})
	if empty {
		out = []string{}
	}
	*p = out
	return ok
}
