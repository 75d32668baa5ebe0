package feed

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// ParseTime reads a timestamp of an upstream record: RFC 3339, or without a
// time zone ("2023-10-12T19:15:11.747", as NVD and records converted from
// the CVE List's older format write them), or a date alone; those without a
// zone are UTC. The time is returned in UTC. An empty string is no time.
func ParseTime(s string) (*time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", time.DateOnly} {
		if t, err := time.Parse(layout, s); err == nil {
			t = t.UTC()
			return &t, nil
		}
	}
	return nil, fmt.Errorf("malformed timestamp %q", excerpt(s))
}

// Time is ParseTime for timestamps that are optional: a malformed one, or
// one not after 1970 (a placeholder), is no time.
func Time(s string) *time.Time {
	t, err := ParseTime(s)
	if err != nil || t == nil || t.Unix() <= 0 {
		return nil
	}
	return t
}

// excerpt returns s cut to 40 bytes and made valid UTF-8, to quote a
// malformed value in an error.
func excerpt(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// LangValue is a text in a language, as the CVE List and NVD write
// descriptions.
type LangValue struct {
	Lang  string `json:"lang"`
	Value string `json:"value"`
}

// English returns the English text of a list of localized values: "en"
// first, then "en-US", then any other English variant; "" when there is
// none.
func English(vals []LangValue) string {
	best, rank := "", 0
	for _, v := range vals {
		text := strings.TrimSpace(v.Value)
		if text == "" {
			continue
		}
		r := 0
		switch lang := strings.ToLower(v.Lang); {
		case lang == "en":
			r = 3
		case lang == "en-us":
			r = 2
		case strings.HasPrefix(lang, "en-") || strings.HasPrefix(lang, "en_"):
			r = 1
		}
		if r > rank {
			best, rank = text, r
		}
	}
	return best
}

// ExpectDelim reads the next token of dec and reports an error unless it is
// the delimiter want.
func ExpectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("want %q, found %v", want, tok)
	}
	return nil
}
