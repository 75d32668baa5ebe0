// Package lookupapi serves the public CVE remediation lookup API under
// /api/v1 (records, OSV documents, keyset-paginated lists, batch lookups,
// the bulk JSON Lines dump and the modification feed), its OpenAPI
// description, and the human pages of the same listener: a search page at /
// and a page per record at /cve/{ID}.
//
// Every API response carries CORS headers for browser clients and, when a
// limiter is configured, the X-RateLimit-* headers of the client's quota;
// reads carry Cache-Control and an ETag so that a CDN in front can serve
// them. Errors are RFC 9457 problem+json documents.
package lookupapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/exposure"
	"github.com/patchline/patchline/internal/httpx"
	"github.com/patchline/patchline/internal/ratelimit"
	"github.com/patchline/patchline/internal/sources"
)

// BasePath is the path of the API on its listener.
const BasePath = "/api/v1"

// Config is what the lookup service needs.
type Config struct {
	// Catalog answers the queries.
	Catalog cve.Catalog
	// Logger receives internal errors and stream failures.
	Logger *slog.Logger
	// PublicURL is the base URL of the API as clients see it, ending in
	// /api/v1 (https://cve.example.org/api/v1). The _links of records are
	// built from it. Empty means http://{Host of the request}/api/v1
	// (https:// for a request over TLS).
	PublicURL string
	// Limiter limits the requests of each client; nil means no limit.
	Limiter ratelimit.Limiter
	// Proxies are the reverse proxies whose X-Forwarded-For names the
	// client.
	Proxies ratelimit.Proxies
	// Registry receives the metrics of the service and is served at
	// /metrics; nil means a registry of its own.
	Registry *prometheus.Registry
	// Status, when set, serves GET /api/v1/status: the sync status of the
	// catalog's sources.
	Status http.Handler
	// Sources, when set, serves GET /api/v1/sources and the pages of the
	// sources, and gives the front page its counts and source table.
	Sources *sources.Reporter
	// Packages, when set, answers the package queries: the OSV API under
	// /osv, /api/v1/packages/query and /api/v1/sbom, and the package
	// form of the search page. Its owner keeps it refreshed from
	// Catalog; until its first build those answer 503.
	Packages *exposure.Index
	// MaxStreams bounds the bulk and modification streams served at
	// once; beyond it a stream request gets 503 with Retry-After. Each
	// stream holds a catalog read connection for as long as its client
	// takes to read it, so the bound keeps connections for the other
	// routes. Zero means DefaultMaxStreams.
	MaxStreams int
}

// DefaultMaxStreams is the default of Config.MaxStreams: half of the
// catalog's pool of read connections.
const DefaultMaxStreams = 4

// Server is the lookup service: an http.Handler for its whole listener.
type Server struct {
	catalog cve.Catalog
	logger  *slog.Logger
	limiter ratelimit.Limiter
	proxies ratelimit.Proxies
	links   *linker
	metrics *metrics
	gather  prometheus.Gatherer
	pages   *pages
	status  http.Handler
	sources *sources.Reporter
	// packages is Config.Packages.
	packages *exposure.Index
	mux      *http.ServeMux
	// handler is mux behind the check of clean paths: a path with
	// empty, "." or ".." segments is a 400 rather than a redirect to
	// another route.
	handler http.Handler
	// streams holds a token per stream being served.
	streams chan struct{}
	// renditions holds the streams rendered for the catalog's version.
	renditions renditions
}

// New returns the lookup service of c.
func New(c Config) (*Server, error) {
	if c.Catalog == nil {
		return nil, errors.New("lookupapi: no catalog")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	links, err := newLinker(c.PublicURL)
	if err != nil {
		return nil, err
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.MaxStreams < 0 {
		return nil, fmt.Errorf("lookupapi: MaxStreams %d: want 0 or more", c.MaxStreams)
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	m, err := newMetrics(c.Registry)
	if err != nil {
		return nil, err
	}
	p, err := newPages()
	if err != nil {
		return nil, err
	}
	s := &Server{
		catalog:  c.Catalog,
		logger:   c.Logger,
		limiter:  c.Limiter,
		proxies:  c.Proxies,
		links:    links,
		metrics:  m,
		gather:   c.Registry,
		pages:    p,
		status:   c.Status,
		sources:  c.Sources,
		packages: c.Packages,
		mux:      http.NewServeMux(),
		streams:  make(chan struct{}, c.MaxStreams),
	}
	s.routes()
	s.handler = httpx.RejectUncleanPaths(s.mux, BasePath+"/", OSVBasePath+"/")
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// routes registers every route of the listener.
func (s *Server) routes() {
	api := func(pattern string, h httpx.HandlerFunc) http.Handler {
		handler := s.instrument(pattern, s.cors(s.limit(httpx.Handle(s.logger, h))))
		s.mux.Handle(pattern, handler)
		return handler
	}
	api("GET "+BasePath+"/cve/{id}", s.getRecord)
	api("GET "+BasePath+"/cve/{id}/osv", s.getOSV)
	api("GET "+BasePath+"/cve", s.listRecords)
	api("POST "+BasePath+"/cve/batch", s.batch)
	api("GET "+BasePath+"/cve/bulk.jsonl", s.bulk)
	api("GET "+BasePath+"/cve/modified.csv", s.modified)
	api("GET "+BasePath+"/openapi.json", s.openAPI)
	if s.status != nil {
		api("GET "+BasePath+"/status", func(w http.ResponseWriter, r *http.Request) error {
			s.status.ServeHTTP(w, r)
			return nil
		})
	}
	if s.sources != nil {
		api("GET "+BasePath+"/sources", s.listSources)
		api("GET "+BasePath+"/sources/{name}", s.getSource)
	}
	api("POST "+BasePath+"/packages/query", s.queryPackages)
	api("POST "+BasePath+"/sbom", s.scanSBOM)
	apiNotFound := api(BasePath+"/", s.notFound)
	s.mux.Handle("OPTIONS "+BasePath+"/", s.instrument("OPTIONS "+BasePath+"/", s.cors(http.HandlerFunc(preflight))))

	osv := func(pattern string, h httpx.HandlerFunc) http.Handler {
		handler := s.instrument(pattern, s.cors(s.limit(s.osvHandle(h))))
		s.mux.Handle(pattern, handler)
		return handler
	}
	osv("POST "+OSVBasePath+"/v1/query", s.osvQuery)
	osv("POST "+OSVBasePath+"/v1/querybatch", s.osvQueryBatch)
	osv("GET "+OSVBasePath+"/v1/vulns/{id}", s.osvVuln)
	osvNotFound := osv(OSVBasePath+"/", s.notFound)
	s.mux.Handle("OPTIONS "+OSVBasePath+"/", s.instrument("OPTIONS "+OSVBasePath+"/", s.cors(http.HandlerFunc(preflight))))

	page := func(pattern string, h httpx.HandlerFunc) http.Handler {
		handler := s.instrument(pattern, s.limit(s.htmlErrors(h)))
		s.mux.Handle(pattern, handler)
		return handler
	}
	page("GET /{$}", s.searchPage)
	page("GET /cve/{id}", s.recordPage)
	if s.sources != nil {
		page("GET /sources/{name}", s.sourcePage)
	}
	page("GET /packages", s.packagesPage)
	page("POST /packages", s.packagesPage)
	// The routes match the path as sent: one under an API's base only
	// once decoded ("/api/v1%2Fcve") falls through to here, and gets that
	// API's answer rather than a page.
	notFoundPage := s.instrument("/", s.limit(s.htmlErrors(s.notFoundPage)))
	s.mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, BasePath+"/"):
			apiNotFound.ServeHTTP(w, r)
		case strings.HasPrefix(r.URL.Path, OSVBasePath+"/"):
			osvNotFound.ServeHTTP(w, r)
		default:
			notFoundPage.ServeHTTP(w, r)
		}
	}))

	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Write([]byte("ok\n"))
	})
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.gather, promhttp.HandlerOpts{}))
}

// notFound answers the API paths no route matches: 405 with Allow when the
// path exists for another method, 404 otherwise.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) error {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != BasePath+"/" && pattern != OSVBasePath+"/" && pattern != "/" && pattern != "" {
			allow = append(allow, m)
			if m == http.MethodGet {
				allow = append(allow, http.MethodHead)
			}
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(append(allow, http.MethodOptions), ", "))
		httpx.WriteProblem(w, http.StatusMethodNotAllowed,
			fmt.Sprintf("method %s is not allowed here; use %s", r.Method, strings.Join(allow, " or ")))
		return nil
	}
	return errs.NotFoundf("no such resource: %s", r.URL.Path)
}

// linker builds the _links of records.
type linker struct {
	// self and html are the link bases the ids are appended to; empty
	// when they come from the request's Host.
	self, html string
}

func newLinker(publicURL string) (*linker, error) {
	if publicURL == "" {
		return &linker{}, nil
	}
	u, err := url.Parse(publicURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("lookupapi: public URL %q: want an http(s) URL", publicURL)
	}
	base := strings.TrimRight(publicURL, "/")
	site := strings.TrimSuffix(base, BasePath)
	if site == base {
		site = u.Scheme + "://" + u.Host
	}
	return &linker{self: base + "/cve/", html: site + "/cve/"}, nil
}

// bases returns the link bases for a request.
func (l *linker) bases(r *http.Request) (self, html string) {
	if l.self != "" {
		return l.self, l.html
	}
	site := "http://" + r.Host
	if r.TLS != nil {
		site = "https://" + r.Host
	}
	return site + BasePath + "/cve/", site + "/cve/"
}

// appendLinks appends to dst the record JSON object body with
// "_links":{"self":…,"html":…} added before its closing brace. The store
// gives records without _links; adding them needs no decoding.
func (l *linker) appendLinks(dst, body []byte, id string, r *http.Request) ([]byte, error) {
	start := len(dst)
	dst, err := l.addLinks(append(dst, body...), start, id, r)
	if err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// addLinks adds the _links of appendLinks, in place, to the record JSON
// object that ends dst from start on, for a body read into the buffer of
// the response.
func (l *linker) addLinks(dst []byte, start int, id string, r *http.Request) ([]byte, error) {
	body := dst[start:]
	end := len(body)
	for end > 0 && isSpace(body[end-1]) {
		end--
	}
	if end < 2 || body[0] != '{' || body[end-1] != '}' {
		return dst, fmt.Errorf("record %s: stored JSON is not an object", id)
	}
	self, html := l.bases(r)
	empty := isEmptyObject(body[:end])
	dst = dst[:start+end-1]
	if !empty {
		dst = append(dst, ',')
	}
	dst = append(dst, `"_links":{"self":`...)
	dst = appendString2(dst, self, id)
	dst = append(dst, `,"html":`...)
	dst = appendString2(dst, html, id)
	dst = append(dst, `}}`...)
	return dst, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func isEmptyObject(b []byte) bool {
	for _, c := range b[1 : len(b)-1] {
		if !isSpace(c) {
			return false
		}
	}
	return true
}
