package agent

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"golang.org/x/sys/windows/registry"
)

// SystemRegistry is the registry of the running Windows system, in its
// 64-bit view.
type SystemRegistry struct{}

var _ RegistryWriter = SystemRegistry{}

// roots are the hives by the names regedit exports them under.
var roots = map[string]registry.Key{
	"HKEY_LOCAL_MACHINE": registry.LOCAL_MACHINE,
	"HKEY_USERS":         registry.USERS,
	"HKEY_CURRENT_USER":  registry.CURRENT_USER,
	"HKEY_CLASSES_ROOT":  registry.CLASSES_ROOT,
}

func openKey(path string, access uint32) (registry.Key, error) {
	root, sub, _ := strings.Cut(path, `\`)
	k, ok := roots[strings.ToUpper(root)]
	if !ok {
		return 0, fmt.Errorf("%s: unknown hive: %w", path, ErrNoKey)
	}
	key, err := registry.OpenKey(k, sub, access|registry.WOW64_64KEY)
	if errors.Is(err, registry.ErrNotExist) {
		return 0, fmt.Errorf("%s: %w", path, ErrNoKey)
	}
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", path, err)
	}
	return key, nil
}

// Values implements Registry.
func (SystemRegistry) Values(path string) (map[string]RegValue, error) {
	k, err := openKey(path, registry.QUERY_VALUE)
	if err != nil {
		return nil, err
	}
	defer k.Close()
	names, err := k.ReadValueNames(-1)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	out := make(map[string]RegValue, len(names))
	for _, name := range names {
		_, typ, err := k.GetValue(name, nil)
		if err != nil {
			continue
		}
		switch typ {
		case registry.SZ, registry.EXPAND_SZ:
			if s, _, err := k.GetStringValue(name); err == nil {
				out[name] = RegValue{Kind: RegString, String: s}
			}
		case registry.MULTI_SZ:
			if list, _, err := k.GetStringsValue(name); err == nil {
				out[name] = RegValue{Kind: RegMultiString, Strings: list}
			}
		case registry.DWORD, registry.QWORD:
			if n, _, err := k.GetIntegerValue(name); err == nil {
				out[name] = RegValue{Kind: RegNumber, Number: n}
			}
		default:
			if b, _, err := k.GetBinaryValue(name); err == nil {
				out[name] = RegValue{Kind: RegBinary, Bytes: b}
			}
		}
	}
	return out, nil
}

// SubKeys implements Registry.
func (SystemRegistry) SubKeys(path string) ([]string, error) {
	k, err := openKey(path, registry.ENUMERATE_SUB_KEYS)
	if err != nil {
		return nil, err
	}
	defer k.Close()
	names, err := k.ReadSubKeyNames(-1)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	sort.Strings(names)
	return names, nil
}

// SetValue implements RegistryWriter.
func (SystemRegistry) SetValue(path, name string, v RegValue) error {
	root, sub, _ := strings.Cut(path, `\`)
	hive, ok := roots[strings.ToUpper(root)]
	if !ok {
		return fmt.Errorf("%s: unknown hive", path)
	}
	k, _, err := registry.CreateKey(hive, sub, registry.SET_VALUE|registry.WOW64_64KEY)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	defer k.Close()
	switch v.Kind {
	case RegString:
		return k.SetStringValue(name, v.String)
	case RegMultiString:
		return k.SetStringsValue(name, v.Strings)
	case RegNumber:
		if v.Number > 0xffffffff {
			return k.SetQWordValue(name, v.Number)
		}
		return k.SetDWordValue(name, uint32(v.Number))
	}
	return k.SetBinaryValue(name, v.Bytes)
}
