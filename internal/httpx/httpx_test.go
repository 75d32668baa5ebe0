package httpx

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/patchline/patchline/internal/errs"
)

func TestHandleWritesProblems(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantDetail string
	}{
		{"invalid", errs.Invalidf("limit must be between 1 and 100"), 400, "limit must be between 1 and 100"},
		{"bare not found", errs.ErrNotFound, 404, "not found"},
		{"internal hides details", errors.New("open /secret/path: permission denied"), 500, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Handle(logger, func(w http.ResponseWriter, r *http.Request) error { return tt.err })
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			if rec.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d", rec.Code, tt.wantStatus)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type = %q", ct)
			}
			var p Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
				t.Fatal(err)
			}
			if p.Status != tt.wantStatus || p.Detail != tt.wantDetail || p.Title == "" {
				t.Errorf("problem = %+v", p)
			}
		})
	}
}

func TestDecodeJSON(t *testing.T) {
	type body struct {
		IDs []string `json:"ids"`
	}
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"ok", `{"ids":["CVE-2021-44228"]}`, nil},
		{"not json", `ids=1`, errs.ErrInvalid},
		{"unknown field", `{"idz":[]}`, errs.ErrInvalid},
		{"trailing", `{"ids":[]} {}`, errs.ErrInvalid},
		{"trailing brace", `{"ids":[]}}`, errs.ErrInvalid},
		{"trailing whitespace", "{\"ids\":[]} \r\n", nil},
		{"not UTF-8", "{\"ids\":[\"\xff\"]}", errs.ErrInvalid},
		{"too big", `{"ids":["` + strings.Repeat("a", 2000) + `"]}`, errs.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("POST", "/", strings.NewReader(tt.in))
			var b body
			err := DecodeJSON(rec, req, 1024, &b)
			if !errors.Is(err, tt.want) && !(tt.want == nil && err == nil) {
				t.Fatalf("DecodeJSON error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestCSVCell(t *testing.T) {
	for in, want := range map[string]string{"=1+1": "'=1+1", "+x": "'+x", "-x": "'-x", "@x": "'@x", "\tx": "'\tx", "key:plk_x": "key:plk_x", "": ""} {
		if got := CSVCell(in); got != want {
			t.Errorf("CSVCell(%q) = %q, want %q", in, got, want)
		}
	}
}
