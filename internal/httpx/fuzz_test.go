package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/patchline/patchline/internal/errs"
)

// FuzzDecodeJSON feeds request bodies to DecodeJSON and DecodeJSONLenient:
// every failure is a client error (ErrInvalid or ErrTooLarge) with a
// message that is valid UTF-8, and what they accept is one UTF-8 JSON
// value within the bound, with known fields only for DecodeJSON.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		`{"ids":["CVE-2021-44228"]}`,
		`{"name":"pilot","position":10,"description":"IT and volunteers"}`,
		`{"ids":["CVE-2021-44228"]} {}`,
		`{"idz":[]}`,
		`{"ids":null}`,
		"{\"ids\":[\"\xff\"]}",
		`{"ids":["\ud800"]}`,
		strings.Repeat("[", 200),
		`{"ids":[1e309]}`,
		"\ufeff{}",
		` `,
		``,
	} {
		f.Add([]byte(s), int64(1024))
	}
	f.Fuzz(func(t *testing.T, body []byte, max int64) {
		if max <= 0 || max > 1<<20 {
			max = 1 << 10
		}
		type request struct {
			IDs  []string `json:"ids"`
			Name string   `json:"name"`
			N    *float64 `json:"position"`
			More any      `json:"description"`
		}
		for _, strict := range []bool{true, false} {
			var v request
			req := httptest.NewRequest("POST", "/", bytes.NewReader(body))
			var err error
			if strict {
				err = DecodeJSON(httptest.NewRecorder(), req, max, &v)
			} else {
				err = DecodeJSONLenient(httptest.NewRecorder(), req, max, &v)
			}
			if err != nil {
				if !errors.Is(err, errs.ErrInvalid) && !errors.Is(err, errs.ErrTooLarge) {
					t.Fatalf("DecodeJSON(%q) error = %v: not a client error", body, err)
				}
				if msg := errs.Message(err); msg == "" || !utf8.ValidString(msg) {
					t.Fatalf("DecodeJSON(%q) error message %q", body, msg)
				}
				continue
			}
			if int64(len(body)) > max || !utf8.Valid(body) || !json.Valid(body) {
				t.Fatalf("DecodeJSON(%q) with max %d accepted it", body, max)
			}
		}
	})
}

// FuzzIsCleanPath checks IsCleanPath against the definition: a path is
// clean when no segment between its slashes is empty, "." or "..".
func FuzzIsCleanPath(f *testing.F) {
	for _, s := range []string{"/", "/api/v1/cve", "/api/v1/cve/", "/api//x", "/api/./x", "/api/../x", "/..", "/.../x", "x", "", "/a/.", "/a/..b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		want := strings.HasPrefix(p, "/")
		if want && p != "/" {
			segs := strings.Split(strings.TrimSuffix(p[1:], "/"), "/")
			for _, s := range segs {
				if s == "" || s == "." || s == ".." {
					want = false
				}
			}
		}
		if got := IsCleanPath(p); got != want {
			t.Fatalf("IsCleanPath(%q) = %v, want %v", p, got, want)
		}
	})
}
