package agent

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustReadReg(tb testing.TB, name string) *MemRegistry {
	tb.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	reg, err := ParseRegFile(f)
	if err != nil {
		tb.Fatalf("ParseRegFile(%s): %v", name, err)
	}
	return reg
}

// wine8-environment.reg is regedit's own export (UTF-16 with a byte order
// mark, REG_EXPAND_SZ as hex(2) continued over lines).
func TestParseRegFileExport(t *testing.T) {
	reg := mustReadReg(t, "wine8-environment.reg")
	vals, err := reg.Values(`HKEY_LOCAL_MACHINE\SYSTEM\CurrentControlSet\Control\Session Manager\Environment`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, name := range []string{"PROCESSOR_ARCHITECTURE", "ComSpec", "windir", "NUMBER_OF_PROCESSORS"} {
		got[name] = vals[name].Text()
	}
	want := map[string]string{
		"PROCESSOR_ARCHITECTURE": "AMD64",
		"ComSpec":                `%SystemRoot%\system32\cmd.exe`,
		"windir":                 `%SystemRoot%`,
		"NUMBER_OF_PROCESSORS":   "2",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
	// Keys are found whatever their case, and parents exist.
	subs, err := reg.SubKeys(`hkey_local_machine\system\currentcontrolset\control`)
	if err != nil || len(subs) != 1 || subs[0] != "Session Manager" {
		t.Errorf("SubKeys = %v, %v; want [Session Manager]", subs, err)
	}
	if _, err := reg.Values(`HKEY_LOCAL_MACHINE\SOFTWARE\Nothing`); !errors.Is(err, ErrNoKey) {
		t.Errorf("missing key: err = %v, want ErrNoKey", err)
	}
}

func TestParseRegFileValues(t *testing.T) {
	const text = "Windows Registry Editor Version 5.00\r\n\r\n[HKEY_LOCAL_MACHINE\\K]\r\n" +
		`@="default"` + "\r\n" +
		`"Quoted"="a \"b\" c:\\d"` + "\r\n" +
		`"Dword"=dword:0000116c` + "\r\n" +
		`"Qword"=hex(b):6c,11,00,00,00,00,00,00` + "\r\n" +
		`"Multi"=hex(7):61,00,00,00,62,00,00,00,00,00` + "\r\n" +
		`"Bin"=hex:01,02,\` + "\r\n  03\r\n" +
		`"Gone"=-` + "\r\n"
	reg, err := ParseRegFile(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	vals, _ := reg.Values(`HKEY_LOCAL_MACHINE\K`)
	want := map[string]RegValue{
		"":       {Kind: RegString, String: "default"},
		"Quoted": {Kind: RegString, String: `a "b" c:\d`},
		"Dword":  {Kind: RegNumber, Number: 4460},
		"Qword":  {Kind: RegNumber, Number: 4460},
		"Multi":  {Kind: RegMultiString, Strings: []string{"a", "b"}},
		"Bin":    {Kind: RegBinary, Bytes: []byte{1, 2, 3}},
	}
	if diff := cmp.Diff(want, vals); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
}

func TestParseRegFileErrors(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"empty", "", "empty"},
		{"no header", "[HKEY_LOCAL_MACHINE\\K]\n", "line 1: not a regedit export"},
		{"value outside key", "REGEDIT4\n\"a\"=\"b\"\n", "line 2: a value outside any key"},
		{"bad dword", "REGEDIT4\n[HKEY_LOCAL_MACHINE\\K]\n\"a\"=dword:zz\n", "line 3: value \"a\": bad dword"},
		{"unterminated string", "REGEDIT4\n[HKEY_LOCAL_MACHINE\\K]\n\"a\"=\"b\n", "line 3: unterminated string"},
		{"unterminated key", "REGEDIT4\n[HKEY_LOCAL_MACHINE\\K\n", "line 2: unterminated key"},
		{"bad hex", "REGEDIT4\n[HKEY_LOCAL_MACHINE\\K]\n\"a\"=hex:0g\n", "line 3: value \"a\": bad hex data"},
		{"short dword", "REGEDIT4\n[HKEY_LOCAL_MACHINE\\K]\n\"a\"=hex(4):01\n", "line 3: value \"a\": a dword of 1 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRegFile(strings.NewReader(tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func FuzzParseRegFile(f *testing.F) {
	for _, name := range []string{"windows11-23h2.reg", "wine8-environment.reg"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		reg, err := ParseRegFile(strings.NewReader(string(b)))
		if err != nil {
			return
		}
		// Whatever parsed can be read as an inventory without a panic.
		ReadWindowsInventory(reg)
	})
}
