package agent

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
)

// Registry is what the Windows collectors read of the Windows registry.
// Keys are full paths with the root hive spelled out as regedit exports
// it: `HKEY_LOCAL_MACHINE\SOFTWARE\Microsoft\Windows NT\CurrentVersion`.
// The running system's registry implements it on Windows; a regedit
// export (ParseRegFile) implements it everywhere, which is how the
// collectors are tested on captured registries.
type Registry interface {
	// Values returns the values of a key by name ("" for the default
	// value). It returns an error wrapping ErrNoKey when the key does not
	// exist.
	Values(key string) (map[string]RegValue, error)
	// SubKeys returns the names of a key's subkeys, sorted. It returns an
	// error wrapping ErrNoKey when the key does not exist.
	SubKeys(key string) ([]string, error)
}

// ErrNoKey is the error of a registry key that does not exist.
var ErrNoKey = errors.New("registry key not found")

// RegValue is a registry value: a string (REG_SZ, REG_EXPAND_SZ), a list
// of strings (REG_MULTI_SZ), a number (REG_DWORD, REG_QWORD) or bytes
// (REG_BINARY and the rest).
type RegValue struct {
	Kind    RegKind
	String  string
	Strings []string
	Number  uint64
	Bytes   []byte
}

// RegKind is the type of a registry value.
type RegKind int

// The kinds of registry values.
const (
	RegString RegKind = iota + 1
	RegMultiString
	RegNumber
	RegBinary
)

// Text returns the value as text: a string as it is, a number in decimal,
// a list of strings joined by newlines.
func (v RegValue) Text() string {
	switch v.Kind {
	case RegString:
		return v.String
	case RegNumber:
		return strconv.FormatUint(v.Number, 10)
	case RegMultiString:
		return strings.Join(v.Strings, "\n")
	}
	return ""
}

// regString returns the string value name of key, "" when the key or the
// value is missing or not a string.
func regString(reg Registry, key, name string) string {
	vals, err := reg.Values(key)
	if err != nil {
		return ""
	}
	v, ok := vals[name]
	if !ok || (v.Kind != RegString && v.Kind != RegNumber) {
		return ""
	}
	return strings.TrimSpace(v.Text())
}

// MemRegistry is a registry held in memory, as ParseRegFile reads it.
type MemRegistry struct {
	keys map[string]*memKey // by lower-case path
}

type memKey struct {
	path   string
	values map[string]RegValue
	subs   map[string]string // lower-case name → name
}

var _ RegistryWriter = (*MemRegistry)(nil)

// NewMemRegistry returns an empty registry.
func NewMemRegistry() *MemRegistry { return &MemRegistry{keys: map[string]*memKey{}} }

// SetValue implements RegistryWriter.
func (m *MemRegistry) SetValue(key, name string, v RegValue) error {
	m.key(key).values[name] = v
	return nil
}

// key returns the key at path, created with its parents when missing.
func (m *MemRegistry) key(path string) *memKey {
	path = strings.Trim(path, `\`)
	lower := strings.ToLower(path)
	if k, ok := m.keys[lower]; ok {
		return k
	}
	k := &memKey{path: path, values: map[string]RegValue{}, subs: map[string]string{}}
	m.keys[lower] = k
	if i := strings.LastIndexByte(path, '\\'); i > 0 {
		parent := m.key(path[:i])
		parent.subs[strings.ToLower(path[i+1:])] = path[i+1:]
	}
	return k
}

func (m *MemRegistry) find(path string) (*memKey, error) {
	k, ok := m.keys[strings.ToLower(strings.Trim(path, `\`))]
	if !ok {
		return nil, fmt.Errorf("%s: %w", path, ErrNoKey)
	}
	return k, nil
}

// Values implements Registry.
func (m *MemRegistry) Values(path string) (map[string]RegValue, error) {
	k, err := m.find(path)
	if err != nil {
		return nil, err
	}
	return k.values, nil
}

// SubKeys implements Registry.
func (m *MemRegistry) SubKeys(path string) ([]string, error) {
	k, err := m.find(path)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(k.subs))
	for _, name := range k.subs {
		out = append(out, name)
	}
	sort.Strings(out)
	return out, nil
}

// ParseRegFile reads a registry export in regedit's format ("Windows
// Registry Editor Version 5.00" or "REGEDIT4"), in UTF-16 with its byte
// order mark as regedit writes it, or in UTF-8. It returns the first
// malformed line as an error naming its number.
func ParseRegFile(r io.Reader) (*MemRegistry, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read registry export: %w", err)
	}
	text := decodeRegText(raw)
	reg := NewMemRegistry()
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var cur *memKey
	lineNo, header := 0, false
	var pending strings.Builder
	startLine := 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimRight(sc.Text(), "\r")
		if pending.Len() > 0 {
			line = pending.String() + strings.TrimSpace(line)
			pending.Reset()
		} else {
			startLine = lineNo
		}
		if strings.HasSuffix(line, `\`) && !strings.HasPrefix(strings.TrimSpace(line), "[") {
			pending.WriteString(strings.TrimSuffix(line, `\`))
			continue
		}
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "" || strings.HasPrefix(trimmed, ";"):
			continue
		case !header:
			if trimmed != "Windows Registry Editor Version 5.00" && trimmed != "REGEDIT4" {
				return nil, fmt.Errorf("registry export line %d: not a regedit export (%q)", startLine, trimmed)
			}
			header = true
		case strings.HasPrefix(trimmed, "["):
			if !strings.HasSuffix(trimmed, "]") {
				return nil, fmt.Errorf("registry export line %d: unterminated key %q", startLine, trimmed)
			}
			path := trimmed[1 : len(trimmed)-1]
			if strings.HasPrefix(path, "-") {
				cur = nil // a deletion: nothing to hold
				continue
			}
			cur = reg.key(path)
		default:
			if cur == nil {
				return nil, fmt.Errorf("registry export line %d: a value outside any key", startLine)
			}
			name, v, err := parseRegValue(trimmed)
			if err != nil {
				return nil, fmt.Errorf("registry export line %d: %w", startLine, err)
			}
			if v != nil {
				cur.values[name] = *v
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read registry export: %w", err)
	}
	if !header {
		return nil, errors.New("registry export: empty")
	}
	return reg, nil
}

// decodeRegText returns the text of an export in UTF-16 (with a byte
// order mark) or UTF-8.
func decodeRegText(raw []byte) string {
	switch {
	case bytes.HasPrefix(raw, []byte{0xff, 0xfe}):
		return decodeUTF16(raw[2:], binary.LittleEndian)
	case bytes.HasPrefix(raw, []byte{0xfe, 0xff}):
		return decodeUTF16(raw[2:], binary.BigEndian)
	}
	return string(bytes.TrimPrefix(raw, []byte{0xef, 0xbb, 0xbf}))
}

func decodeUTF16(b []byte, order binary.ByteOrder) string {
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = order.Uint16(b[2*i:])
	}
	return string(utf16.Decode(u))
}

// parseRegValue parses one `"name"=data` line. A deletion ("name"=-)
// returns a nil value.
func parseRegValue(line string) (string, *RegValue, error) {
	var name, rest string
	switch {
	case strings.HasPrefix(line, "@="):
		rest = line[2:]
	case strings.HasPrefix(line, `"`):
		s, n, err := unquoteReg(line)
		if err != nil {
			return "", nil, err
		}
		if !strings.HasPrefix(line[n:], "=") {
			return "", nil, fmt.Errorf("value %q: no '='", s)
		}
		name, rest = s, line[n+1:]
	default:
		return "", nil, fmt.Errorf("not a value: %q", line)
	}
	switch {
	case rest == "-":
		return name, nil, nil
	case strings.HasPrefix(rest, `"`):
		s, n, err := unquoteReg(rest)
		if err != nil {
			return "", nil, err
		}
		if strings.TrimSpace(rest[n:]) != "" {
			return "", nil, fmt.Errorf("value %q: text after the string", name)
		}
		return name, &RegValue{Kind: RegString, String: s}, nil
	case strings.HasPrefix(rest, "dword:"):
		n, err := strconv.ParseUint(strings.TrimSpace(rest[len("dword:"):]), 16, 32)
		if err != nil {
			return "", nil, fmt.Errorf("value %q: bad dword: %w", name, err)
		}
		return name, &RegValue{Kind: RegNumber, Number: n}, nil
	case strings.HasPrefix(rest, "hex"):
		kind := "3"
		body := rest[len("hex"):]
		if strings.HasPrefix(body, "(") {
			end := strings.IndexByte(body, ')')
			if end < 0 {
				return "", nil, fmt.Errorf("value %q: bad hex type", name)
			}
			kind, body = body[1:end], body[end+1:]
		}
		if !strings.HasPrefix(body, ":") {
			return "", nil, fmt.Errorf("value %q: no ':' after hex", name)
		}
		data, err := hex.DecodeString(strings.NewReplacer(",", "", " ", "").Replace(body[1:]))
		if err != nil {
			return "", nil, fmt.Errorf("value %q: bad hex data: %w", name, err)
		}
		v, err := regHexValue(kind, data)
		if err != nil {
			return "", nil, fmt.Errorf("value %q: %w", name, err)
		}
		return name, v, nil
	}
	return "", nil, fmt.Errorf("value %q: unknown data %q", name, rest)
}

// regHexValue decodes the data of a hex(N) value of type N.
func regHexValue(kind string, data []byte) (*RegValue, error) {
	switch kind {
	case "2", "1": // REG_EXPAND_SZ, REG_SZ in UTF-16
		return &RegValue{Kind: RegString, String: strings.TrimRight(decodeUTF16(data, binary.LittleEndian), "\x00")}, nil
	case "7": // REG_MULTI_SZ
		var list []string
		for _, s := range strings.Split(decodeUTF16(data, binary.LittleEndian), "\x00") {
			if s != "" {
				list = append(list, s)
			}
		}
		return &RegValue{Kind: RegMultiString, Strings: list}, nil
	case "4": // REG_DWORD
		if len(data) != 4 {
			return nil, fmt.Errorf("a dword of %d bytes", len(data))
		}
		return &RegValue{Kind: RegNumber, Number: uint64(binary.LittleEndian.Uint32(data))}, nil
	case "b": // REG_QWORD
		if len(data) != 8 {
			return nil, fmt.Errorf("a qword of %d bytes", len(data))
		}
		return &RegValue{Kind: RegNumber, Number: binary.LittleEndian.Uint64(data)}, nil
	}
	return &RegValue{Kind: RegBinary, Bytes: data}, nil
}

// unquoteReg reads the quoted string at the start of s, with regedit's
// escapes (\\ and \"), and returns it and the length it took.
func unquoteReg(s string) (string, int, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
		case '"':
			return b.String(), i + 1, nil
		default:
			b.WriteByte(s[i])
		}
	}
	return "", 0, fmt.Errorf("unterminated string %q", s)
}
