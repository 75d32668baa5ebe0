package lookupapi

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/exposure"
	"github.com/patchline/patchline/internal/httpx"
	"github.com/patchline/patchline/internal/sbom"
)

//go:embed templates/*.html
var templateFiles embed.FS

// pages are the templates of the human pages.
type pages struct {
	search, record, error, packages *template.Template
	source                          *template.Template
}

func newPages() (*pages, error) {
	funcs := template.FuncMap{
		"deref": func(s *string) string {
			if s == nil {
				return ""
			}
			return *s
		},
	}
	parse := func(name string, more ...string) (*template.Template, error) {
		// Every page may show the package forms.
		files := []string{"templates/layout.html", "templates/packageforms.html", "templates/" + name}
		for _, m := range more {
			files = append(files, "templates/"+m)
		}
		t, err := template.New("layout").Funcs(funcs).ParseFS(templateFiles, files...)
		if err != nil {
			return nil, fmt.Errorf("parse page %s: %w", name, err)
		}
		return t, nil
	}
	var p pages
	var err error
	if p.search, err = parse("search.html", "front.html"); err != nil {
		return nil, err
	}
	if p.record, err = parse("record.html"); err != nil {
		return nil, err
	}
	if p.error, err = parse("error.html"); err != nil {
		return nil, err
	}
	if p.source, err = parse("source.html", "front.html"); err != nil {
		return nil, err
	}
	if p.packages, err = parse("packages.html"); err != nil {
		return nil, err
	}
	return &p, nil
}

// pageSecurity sets the headers of every human page: no script may run, no
// other site may frame it.
func pageSecurity(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "strict-origin-when-cross-origin")
	h.Set("X-Content-Type-Options", "nosniff")
}

// render executes a page into a buffer, then writes it.
func (s *Server) render(w http.ResponseWriter, r *http.Request, t *template.Template, status int, data any) error {
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", data); err != nil {
		return fmt.Errorf("render %s: %w", r.URL.Path, err)
	}
	pageSecurity(w.Header())
	if status == http.StatusOK {
		writeCacheable(w, r, "text/html; charset=utf-8", cachePage, buf.Bytes())
		return nil
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	w.Write(buf.Bytes())
	return nil
}

// htmlErrors adapts a page handler: a returned error becomes an HTML error
// page with the status of its kind.
func (s *Server) htmlErrors(h httpx.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		status := errs.StatusOf(err)
		detail := errs.Message(err)
		if status == http.StatusInternalServerError {
			s.logger.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			detail = "Something went wrong on our side. Please try again later."
		}
		if detail == "" {
			detail = http.StatusText(status)
		}
		data := struct{ Title, Detail string }{http.StatusText(status), detail}
		if err := s.render(w, r, s.pages.error, status, data); err != nil {
			s.logger.ErrorContext(r.Context(), "render error page", "err", err)
			http.Error(w, http.StatusText(status), status)
		}
	})
}

// notFoundPage answers the paths of the human pages that do not exist.
func (s *Server) notFoundPage(w http.ResponseWriter, r *http.Request) error {
	return errs.NotFoundf("There is no page at %s.", truncate(r.URL.Path))
}

// recordPage answers GET /cve/{id}: the record for people, remediation first.
func (s *Server) recordPage(w http.ResponseWriter, r *http.Request) error {
	raw := r.PathValue("id")
	id, err := cve.ParseID(raw)
	if err != nil {
		return err
	}
	if id != raw {
		http.Redirect(w, r, "/cve/"+id, http.StatusMovedPermanently)
		return nil
	}
	rec, err := s.catalog.Record(r.Context(), id)
	if err != nil {
		return err
	}
	return s.render(w, r, s.pages.record, http.StatusOK, struct {
		R    *cve.Record
		JSON string
	}{rec, BasePath + "/cve/" + id})
}

// option is a choice of a form control.
type option struct {
	Value, Label string
	Checked      bool
}

// searchForm is the search form as the user filled it.
type searchForm struct {
	Q, EPSSMin, Year string
}

// searchPage answers GET /: the search form over the list endpoint, and the
// results of a search.
func (s *Server) searchPage(w http.ResponseWriter, r *http.Request) error {
	// The form sends every control, the empty ones too; other parameters
	// are ignored.
	in, err := queryValues(r)
	if err != nil {
		return err
	}
	v := url.Values{}
	for name, vals := range in {
		if listParams[name] {
			if ne := nonEmpty(vals); len(ne) > 0 {
				v[name] = ne
			}
		}
	}
	if len(v) == 1 && v.Has("q") {
		if id, err := cve.ParseID(v.Get("q")); err == nil {
			http.Redirect(w, r, "/cve/"+id, http.StatusSeeOther)
			return nil
		}
	}
	data := struct {
		Form                 searchForm
		Severities, KEV, Fix []option
		Sorts, Dirs          []option
		Searched             bool
		Rows                 []cve.Summary
		Next, Error, APIBase string
		Front                *frontView
		PackageForm          packageQuery
	}{
		Form:     searchForm{Q: v.Get("q"), EPSSMin: v.Get("epss_min"), Year: v.Get("year")},
		Searched: len(v) > 0,
	}
	self, _ := s.links.bases(r)
	data.APIBase = self[:len(self)-len("/cve/")]
	for _, sev := range []string{cve.SeverityCritical, cve.SeverityHigh, cve.SeverityMedium, cve.SeverityLow} {
		checked := false
		for _, x := range v["severity"] {
			checked = checked || x == sev
		}
		data.Severities = append(data.Severities, option{Value: sev, Checked: checked})
	}
	tri := func(name string) []option {
		return []option{
			{Value: "", Label: "any", Checked: v.Get(name) == ""},
			{Value: "true", Label: "yes", Checked: v.Get(name) == "true"},
			{Value: "false", Label: "no", Checked: v.Get(name) == "false"},
		}
	}
	data.KEV, data.Fix = tri("kev"), tri("fix")
	for _, o := range [][2]string{{"published", "published"}, {"epss", "EPSS"}, {"cvss", "CVSS"}, {"cve", "CVE id"}, {"kev", "known exploited"}, {"fix", "fix available"}} {
		data.Sorts = append(data.Sorts, option{Value: o[0], Label: o[1], Checked: v.Get("sort") == o[0] || (o[0] == "published" && v.Get("sort") == "")})
	}
	data.Dirs = []option{
		{Value: "desc", Label: "descending", Checked: v.Get("dir") != "asc"},
		{Value: "asc", Label: "ascending", Checked: v.Get("dir") == "asc"},
	}
	status := http.StatusOK
	if !data.Searched {
		if data.Front, err = s.front(r); err != nil {
			return err
		}
	}
	if data.Searched {
		q, err := parseListQuery(v)
		if err == nil {
			var page cve.Page
			page, err = s.catalog.List(r.Context(), q.ListQuery)
			if err == nil {
				data.Rows = page.Rows
				if page.Next != nil {
					next := url.Values{}
					for name, vals := range v {
						next[name] = vals
					}
					next.Set("cursor", encodeCursor(*page.Next, q.digest))
					data.Next = "/?" + next.Encode()
				}
			}
		}
		if err != nil {
			status = errs.StatusOf(err)
			if status == http.StatusInternalServerError {
				return err
			}
			data.Error = errs.Message(err)
		}
	}
	return s.render(w, r, s.pages.search, status, data)
}

// packageRow is one finding of the package page.
type packageRow struct {
	Package sbom.Package
	V       exposure.PackageVulnerability
}

// packagesPage answers GET /packages, a package given as a purl or as an
// ecosystem, a name and a version, and POST /packages, an SBOM uploaded
// as multipart/form-data (field "sbom"): the findings as a table.
func (s *Server) packagesPage(w http.ResponseWriter, r *http.Request) error {
	data := struct {
		Form    packageQuery
		Checked bool
		Label   string
		Summary Summary
		Rows    []packageRow
		Skipped []sbom.Skipped
		Error   string
	}{}
	var (
		doc *sbom.Document
		err error
	)
	switch r.Method {
	case http.MethodPost:
		doc, err = uploadedSBOM(w, r)
		if err == nil {
			data.Label = doc.Format + " " + doc.Version
		}
	default:
		q := r.URL.Query()
		data.Form = packageQuery{PURL: strings.TrimSpace(q.Get("purl")), Ecosystem: strings.TrimSpace(q.Get("ecosystem")),
			Name: strings.TrimSpace(q.Get("name")), Version: strings.TrimSpace(q.Get("version"))}
		if data.Form == (packageQuery{}) {
			return s.render(w, r, s.pages.packages, http.StatusOK, data)
		}
		var p sbom.Package
		if p, err = data.Form.resolve(); err == nil {
			doc = &sbom.Document{Packages: []sbom.Package{p}}
			data.Label = strings.TrimSpace(p.Ecosystem + " " + p.Name + " " + p.Version)
		}
	}
	var idx *exposure.Index
	if err == nil {
		idx, err = s.packageIndex()
	}
	if err == nil {
		var results []exposure.PackageResult
		if results, err = idx.QueryPackages(r.Context(), s.catalog, doc.Packages); err != nil {
			return err
		}
		rep := NewSBOMReport(doc, results)
		data.Checked, data.Summary, data.Skipped = true, rep.Summary, doc.Skipped
		for _, res := range results {
			for _, v := range res.Vulnerabilities {
				data.Rows = append(data.Rows, packageRow{res.Package, v})
			}
		}
	}
	status := http.StatusOK
	if err != nil {
		status = errs.StatusOf(err)
		switch {
		case errors.Is(err, errIndexBuilding):
			status = http.StatusServiceUnavailable
			w.Header().Set("Retry-After", "5")
			data.Error = err.Error()
		case status == http.StatusInternalServerError:
			return err
		default:
			data.Error = errs.Message(err)
		}
	}
	return s.render(w, r, s.pages.packages, status, data)
}

// uploadedSBOM reads the SBOM of a multipart/form-data upload.
func uploadedSBOM(w http.ResponseWriter, r *http.Request) (*sbom.Document, error) {
	r.Body = http.MaxBytesReader(w, r.Body, MaxSBOMBody+64<<10)
	f, _, err := r.FormFile("sbom")
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, errs.Invalidf("The file is larger than %d bytes.", MaxSBOMBody)
		}
		return nil, errs.Invalidf("Choose an SBOM file to upload (%v).", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSBOMBody+1))
	if err != nil {
		return nil, errs.Invalidf("The upload could not be read: %v.", err)
	}
	if len(data) > MaxSBOMBody {
		return nil, errs.Invalidf("The file is larger than %d bytes.", MaxSBOMBody)
	}
	return sbom.Parse(data)
}
