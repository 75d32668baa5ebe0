package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/errs"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static/console.css static/console.js
var staticFiles embed.FS

// pages holds the parsed templates, one per page, each with the layout.
type pages struct {
	byName map[string]*template.Template
	assets map[string]asset // by file name
}

// asset is an embedded static file with its versioned URL.
type asset struct {
	body        []byte
	contentType string
	url         string // /static/NAME?v=HASH: cached for good, changed with the file
}

// page is what every template gets.
type page struct {
	Title   string
	Section string // the navigation entry to highlight
	Admin   string // email of the signed-in administrator, "" when signed out
	CSRF    string // the token every form carries
	Flash   flash
	CSS, JS string // asset URLs
	Data    any
}

var templateFuncs = template.FuncMap{
	"when":    formatWhen,
	"whenPtr": formatWhenPtr,
	"join":    strings.Join,
	"add":     func(a, b int) int { return a + b },
	// score is an optional score (EPSS, CVSS), which printf would show as
	// a pointer.
	"score": func(f *float64) float64 { return *f },
	// days is an optional number of days (a KEV due date's days left).
	"days": func(d *int) int { return *d },
	"neg":  func(n int) int { return -n },
}

// formatWhen writes a time for people: minutes, UTC.
func formatWhen(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

func formatWhenPtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return formatWhen(*t)
}

// prettyJSON indents a JSON value for display.
func prettyJSON(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return string(b)
	}
	return buf.String()
}

func newPages() (*pages, error) {
	p := &pages{byName: map[string]*template.Template{}, assets: map[string]asset{}}
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		base := strings.TrimSuffix(path.Base(name), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New("layout").Funcs(templateFuncs).ParseFS(templateFiles, "templates/layout.html", name)
		if err != nil {
			return nil, fmt.Errorf("parse console page %s: %w", base, err)
		}
		p.byName[base] = t
	}
	for _, f := range []struct{ name, contentType string }{
		{"console.css", "text/css; charset=utf-8"},
		{"console.js", "text/javascript; charset=utf-8"},
	} {
		body, err := staticFiles.ReadFile("static/" + f.name)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(body)
		p.assets[f.name] = asset{body: body, contentType: f.contentType, url: "/static/" + f.name + "?v=" + hex.EncodeToString(sum[:6])}
	}
	return p, nil
}

// render writes a page with the given status. Pages are never cached:
// they show keys, agents and the audit log.
func (s *Server) render(w http.ResponseWriter, c *reqCtx, status int, name string, p page) error {
	t := s.pages.byName[name]
	if t == nil {
		return fmt.Errorf("render: no page %q", name)
	}
	if c.sess != nil {
		p.Admin = c.sess.AdminEmail
		if p.CSRF == "" {
			p.CSRF = c.csrf
		}
	}
	if c.flash.Text != "" {
		if p.Flash.Text == "" {
			p.Flash = c.flash
		}
		clearCookie(w, flashCookie, c.secure)
		c.flash = flash{}
	}
	p.CSS = s.pages.assets["console.css"].url
	p.JS = s.pages.assets["console.js"].url
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		return fmt.Errorf("render %s: %w", name, err)
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, err := w.Write(buf.Bytes())
	return err
}

// writeError renders err as an error page with the status of its kind.
// Internal errors are logged and shown as a generic message.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, c *reqCtx, err error) {
	status := errs.StatusOf(err)
	msg := errs.Message(err)
	var se *statusError
	if errors.As(err, &se) {
		status, msg = se.status, se.msg
		if se.allow != "" {
			w.Header().Set("Allow", se.allow)
		}
	}
	if status == http.StatusInternalServerError {
		s.log.ErrorContext(r.Context(), "console request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		msg = "Something went wrong on the server. The error has been logged; try again in a moment."
	}
	if msg == "" {
		msg = http.StatusText(status) + "."
	}
	title := http.StatusText(status)
	switch status {
	case http.StatusNotFound:
		title = "Not found"
	case http.StatusForbidden:
		title = "Refused"
	}
	if rerr := s.render(w, c, status, "error", page{Title: title, Data: struct {
		Status  int
		Message string
	}{status, msg}}); rerr != nil {
		s.log.ErrorContext(r.Context(), "render error page", "err", rerr)
		http.Error(w, msg, status)
	}
}

// static serves the embedded stylesheet and script. Their URLs carry a
// hash of their content, so they may be cached for good.
func (s *Server) static(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	a, ok := s.pages.assets[r.PathValue("file")]
	if !ok {
		return errs.NotFoundf("There is no file %s.", r.URL.Path)
	}
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("Content-Length", strconv.Itoa(len(a.body)))
	if r.URL.Query().Get("v") != "" {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(a.body)
	}
	return nil
}
