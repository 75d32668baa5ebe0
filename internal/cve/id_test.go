package cve

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/patchline/patchline/internal/errs"
)

func TestParseID(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{"CVE-2021-44228", "CVE-2021-44228", false},
		{"cve-2021-44228", "CVE-2021-44228", false},
		{"Cve-2024-0012", "CVE-2024-0012", false},
		{"CVE-2021-1234567", "CVE-2021-1234567", false},
		{"CVE-2021-123", "", true},
		{"CVE-21-12345", "", true},
		{"CVE-2021-44228 ", "", true},
		{"GHSA-jfh8-c2jp-5v3q", "", true},
		{"CVE-2021-4422a", "", true},
		{"../etc/passwd", "", true},
		{"", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseID(tt.in)
			if tt.wantErr {
				if !errors.Is(err, errs.ErrInvalid) {
					t.Fatalf("ParseID(%q) error = %v, want ErrInvalid", tt.in, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseID(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestOrderIsNumeric(t *testing.T) {
	ids := []string{"CVE-2021-10000", "CVE-2020-99999", "CVE-2021-9999", "CVE-2021-44228", "CVE-1999-0001"}
	slices.SortFunc(ids, Compare)
	want := []string{"CVE-1999-0001", "CVE-2020-99999", "CVE-2021-9999", "CVE-2021-10000", "CVE-2021-44228"}
	if !slices.Equal(ids, want) {
		t.Fatalf("sorted = %v, want %v", ids, want)
	}
}

func TestKeyRoundTrip(t *testing.T) {
	for _, id := range []string{"CVE-1999-0001", "CVE-2021-44228", "CVE-2024-1234567"} {
		k, ok := Key(id)
		if !ok || IDOfKey(k) != id {
			t.Errorf("Key(%q) = %d, %v; IDOfKey = %q", id, k, ok, IDOfKey(k))
		}
	}
	if _, ok := Key("CVE-2021-1234567890123"); ok {
		t.Error("Key accepted a 13-digit sequence")
	}
}

// FuzzParseID feeds path segments and batch ids to ParseID: an id it
// accepts is canonical and matches the documented pattern, and what it
// refuses is an ErrInvalid whose message, which goes back to the client,
// is short, valid UTF-8 text.
func FuzzParseID(f *testing.F) {
	for _, s := range []string{
		"CVE-2021-44228", "cve-1999-0001", "CVE-2021-", "CVE-0000-00000000000000",
		"CVE-2014-0160", "CVE-2024-3400", "CVE-2021-1234567", "CVE-2021-00001",
		"../../etc/passwd", "..%2F..%2Fetc%2Fpasswd", "CVE-2021-44228\r\nX-Injected: 1",
		"CVE-2021-4422\xff", "\xe2\x82\xacCVE-2021-44228" + strings.Repeat("\xe2\x82\xac", 20),
		"CVE-9999-999999999999", "CVE-9999-9999999999999", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseID(s)
		if err != nil {
			if !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("ParseID(%q) error = %v, want ErrInvalid", s, err)
			}
			msg := errs.Message(err)
			if !utf8.ValidString(msg) || len(msg) > 250 {
				t.Fatalf("ParseID(%q) error message %q is not short valid UTF-8", s, msg)
			}
			return
		}
		if !idPattern.MatchString(id) || !strings.EqualFold(id, s) {
			t.Fatalf("ParseID(%q) = %q, which is not the input in canonical form", s, id)
		}
		again, err := ParseID(id)
		if err != nil || again != id {
			t.Fatalf("canonical id %q does not parse to itself: %q, %v", id, again, err)
		}
		if k, ok := Key(id); ok {
			if IDOfKey(k) != id {
				t.Fatalf("IDOfKey(Key(%q)) = %q", id, IDOfKey(k))
			}
			if YearOfKey(k) < 0 || Compare(id, id) != 0 {
				t.Fatalf("Key(%q) = %d is inconsistent", id, k)
			}
		}
	})
}

// idPattern is the documented form of a CVE id.
var idPattern = regexp.MustCompile(`^CVE-\d{4}-\d{4,}$`)
