// Package httpx holds the HTTP conventions shared by both services: handlers
// that return errors, RFC 9457 problem+json error bodies and buffered JSON
// responses.
package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/patchline/patchline/internal/errs"
)

// HandlerFunc is an HTTP handler that returns an error instead of writing
// one. Use Handle to turn it into an http.Handler.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Handle adapts h: a returned error is written as problem+json with the
// status of its kind (errs.StatusOf). Internal errors are logged and answered
// with a generic 500 that reveals nothing.
func Handle(logger *slog.Logger, h HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			status := errs.StatusOf(err)
			if status == http.StatusInternalServerError {
				logger.ErrorContext(r.Context(), "request failed",
					"method", r.Method, "path", r.URL.Path, "err", err)
			}
			WriteError(w, err)
		}
	})
}

// Problem is an RFC 9457 problem details object.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// WriteError writes err as problem+json with the status of its kind.
func WriteError(w http.ResponseWriter, err error) {
	status := errs.StatusOf(err)
	detail := errs.Message(err)
	if detail == "" && status != http.StatusInternalServerError {
		// A bare kind such as errs.ErrNotFound, perhaps wrapped with
		// internal context: say no more than the status does.
		detail = strings.ToLower(http.StatusText(status))
	}
	WriteProblem(w, status, detail)
}

// WriteProblem writes a problem+json body with the given status and detail.
func WriteProblem(w http.ResponseWriter, status int, detail string) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // a JSON body, never HTML: keep < and > readable
	enc.Encode(Problem{
		Type:   "about:blank",
		Title:  http.StatusText(status),
		Status: status,
		Detail: detail,
	})
	body := buf.Bytes()
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Del("ETag")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(body)
}

// WriteJSON encodes v into a buffer first, so that an encoding error can
// still become a 500, then writes it with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	WriteJSONBytes(w, status, buf.Bytes())
	return nil
}

// WriteJSONBytes writes an already encoded JSON body.
func WriteJSONBytes(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(body)
}

// DecodeJSON decodes a JSON request body of at most max bytes into v,
// refusing unknown fields, trailing data and bodies that are not UTF-8.
// Every failure is an errs.ErrInvalid (or errs.ErrTooLarge) with a message
// for the client.
func DecodeJSON(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	return decodeJSON(w, r, max, v, true)
}

// DecodeJSONLenient is DecodeJSON for peers that may be newer than the
// server (agents): it ignores the fields it does not know.
func DecodeJSONLenient(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	return decodeJSON(w, r, max, v, false)
}

func decodeJSON(w http.ResponseWriter, r *http.Request, max int64, v any, strict bool) error {
	body, err := ReadBody(w, r, max)
	if err != nil {
		return err
	}
	// JSON text is UTF-8 (RFC 8259 section 8.1). encoding/json would
	// quietly turn invalid bytes into U+FFFD, storing something the client
	// never sent.
	if !utf8.Valid(body) {
		return errs.Invalidf("request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return errs.Invalidf("request body is not valid JSON: %v", err)
	}
	// Decoder.More looks for the next element of an array or object, and
	// says nothing of a stray "}" or "]" after a whole value.
	if len(bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n")) > 0 {
		return errs.Invalidf("request body has data after the JSON value")
	}
	return nil
}

// ReadBody reads a request body of at most max bytes. A larger body is an
// errs.ErrTooLarge error, one that cannot be read an errs.ErrInvalid one.
// A body that announces more than max bytes in Content-Length is refused
// before any of it is read.
func ReadBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if r.ContentLength > max {
		return nil, errs.TooLargef("request body is larger than %d bytes", max)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, errs.TooLargef("request body is larger than %d bytes", max)
		}
		return nil, errs.Invalidf("reading the request body: %v", err)
	}
	return body, nil
}

// IsCleanPath reports whether p, a request's escaped path, is absolute and
// has no empty, "." or ".." segments: the paths a ServeMux routes as they
// are instead of redirecting them elsewhere.
func IsCleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c == p
}

// RejectUncleanPaths answers 400 to requests whose path is not clean (see
// IsCleanPath), which a ServeMux would otherwise redirect to a route the
// client did not name. Paths under one of apiPrefixes get problem+json,
// the others plain text.
func RejectUncleanPaths(next http.Handler, apiPrefixes ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect || IsCleanPath(r.URL.EscapedPath()) {
			next.ServeHTTP(w, r)
			return
		}
		for _, p := range apiPrefixes {
			if strings.HasPrefix(r.URL.Path, p) {
				WriteProblem(w, http.StatusBadRequest, UncleanPathDetail)
				return
			}
		}
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, UncleanPathDetail, http.StatusBadRequest)
	})
}

// UncleanPathDetail is the message of a request refused by
// RejectUncleanPaths.
const UncleanPathDetail = `the path has empty, "." or ".." segments: send it without them`

// CSVCell defuses a CSV value that a spreadsheet would take for a
// formula (CWE-1236): one that starts with =, +, -, @, a tab or a
// carriage return gets a leading apostrophe.
func CSVCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// WriteCSV answers 200 with body as a CSV attachment named filename,
// never cached.
func WriteCSV(w http.ResponseWriter, filename string, body []byte) error {
	h := w.Header()
	h.Set("Content-Type", "text/csv; charset=utf-8")
	h.Set("Content-Disposition", `attachment; filename="`+filename+`"`)
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(body)
	return err
}
