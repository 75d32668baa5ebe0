package feed

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	tests := []struct {
		in      string
		want    string // RFC 3339 in UTC; "" for no time
		wantErr bool
	}{
		{in: "2024-08-13T17:29:58.392Z", want: "2024-08-13T17:29:58.392Z"},
		{in: "2099-01-03T00:00:00+02:00", want: "2099-01-02T22:00:00Z"},
		{in: "2023-10-12T19:15:11.747", want: "2023-10-12T19:15:11.747Z"},
		{in: "2021-07-12T00:00:00", want: "2021-07-12T00:00:00Z"},
		{in: " 2024-01-02 ", want: "2024-01-02T00:00:00Z"},
		{in: ""},
		{in: "yesterday", wantErr: true},
		{in: "2024-13-01", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseTime(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseTime(%q) error %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		s := ""
		if got != nil {
			if got.Location() != time.UTC {
				t.Errorf("ParseTime(%q) = %v, not in UTC", tt.in, got)
			}
			s = got.Format(time.RFC3339Nano)
		}
		if s != tt.want {
			t.Errorf("ParseTime(%q) = %q, want %q", tt.in, s, tt.want)
		}
	}
	if _, err := ParseTime(strings.Repeat("x", 100)); err == nil || len(err.Error()) > 80 {
		t.Errorf("error for a long value: %v", err)
	}
}

func TestTime(t *testing.T) {
	for in, want := range map[string]bool{
		"2024-08-13T17:29:58Z": true,
		"0001-01-01T00:00:00Z": false, // a placeholder
		"1970-01-01":           false,
		"not a time":           false,
		"":                     false,
	} {
		if got := Time(in); (got != nil) != want {
			t.Errorf("Time(%q) = %v, want a time %v", in, got, want)
		}
	}
}

func TestEnglish(t *testing.T) {
	tests := []struct {
		vals []LangValue
		want string
	}{
		{[]LangValue{{"es", "hola"}, {"en-GB", "colour"}, {"en-US", "color"}}, "color"},
		{[]LangValue{{"en-US", "color"}, {"en", " plain "}}, "plain"},
		{[]LangValue{{"en_AU", "g'day"}, {"fr", "salut"}}, "g'day"},
		{[]LangValue{{"en", "  "}, {"de", "hallo"}}, ""},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := English(tt.vals); got != tt.want {
			t.Errorf("English(%v) = %q, want %q", tt.vals, got, tt.want)
		}
	}
}

func TestExpectDelim(t *testing.T) {
	dec := json.NewDecoder(strings.NewReader(`{"a":1}`))
	if err := ExpectDelim(dec, '{'); err != nil {
		t.Fatal(err)
	}
	if err := ExpectDelim(dec, ']'); err == nil {
		t.Error("a key read as a closing bracket")
	}
}
