package lookupapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/sources"
)

// SourcesDocument is the body of GET /api/v1/sources.
type SourcesDocument struct {
	// AsOf is the time the ages are counted to: the request's minute, so
	// that the document, and its ETag, hold for the minute it may be
	// cached.
	AsOf time.Time `json:"asOf"`
	// Stale is true when any source is stale.
	Stale   bool             `json:"stale"`
	Sources []sources.Source `json:"sources"`
}

// asOf is the time the ages of a response are counted to: the minute of
// the request.
func (s *Server) asOf() time.Time { return s.sources.Now().Truncate(time.Minute) }

// listSources answers GET /api/v1/sources: every source of the catalog.
func (s *Server) listSources(w http.ResponseWriter, r *http.Request) error {
	now := s.asOf()
	list, err := s.sources.SourcesAt(r.Context(), now)
	if err != nil {
		return err
	}
	doc := SourcesDocument{AsOf: now, Sources: list}
	for _, src := range list {
		doc.Stale = doc.Stale || src.Freshness == sources.Stale
	}
	return writeSourceJSON(w, r, doc)
}

// getSource answers GET /api/v1/sources/{name}: one source.
func (s *Server) getSource(w http.ResponseWriter, r *http.Request) error {
	src, err := s.findSource(r)
	if err != nil {
		return err
	}
	return writeSourceJSON(w, r, src)
}

func writeSourceJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	writeCacheable(w, r, "application/json", cacheList, append(body, '\n'))
	return nil
}

// findSource returns the source named by the request's {name}.
func (s *Server) findSource(r *http.Request) (sources.Source, error) {
	name := r.PathValue("name")
	src, ok, err := s.sources.SourceAt(r.Context(), name, s.asOf())
	if err != nil {
		return src, err
	}
	if !ok {
		return src, errs.NotFoundf("the catalog has no source named %q", truncate(name))
	}
	return src, nil
}

// sourceView is a source as the pages show it.
type sourceView struct {
	sources.Source
	// Path is the source's page; Color the class of its freshness.
	Path, Color string
	// Data says where its data comes from and how old it is; Upstream
	// how old the upstream's newest change is.
	Data, Upstream string
}

func viewSource(src sources.Source, now time.Time) sourceView {
	return sourceView{
		Source: src, Path: "/sources/" + url.PathEscape(src.Name),
		Color: map[sources.Freshness]string{sources.Fresh: "green", sources.Aging: "amber", sources.Stale: "red"}[src.Freshness],
		Data:  src.DataText(now), Upstream: src.UpstreamText(now),
	}
}

// frontView is what the front page shows beside the search form.
type frontView struct {
	Records, Rejected, WithFix, KEV int
	LatestKEV                       []kevView
	ModifiedToday                   int
	Modified                        []cve.Summary
	Sources                         []sourceView
	AsOf                            time.Time
}

// kevView is a latest KEV addition with its first fixes.
type kevView struct {
	R     *cve.Record
	Fixes []fixView
	More  int // fixes not shown
}

type fixView struct {
	Product, Version, Source string
}

// fixesShown is the number of fixes shown per KEV addition.
const fixesShown = 3

// front returns what the front page shows, nil without a Reporter.
func (s *Server) front(r *http.Request) (*frontView, error) {
	if s.sources == nil {
		return nil, nil
	}
	now := s.asOf()
	o, err := s.sources.OverviewAt(r.Context(), now)
	if err != nil {
		return nil, err
	}
	f := &frontView{Records: o.Records, Rejected: o.Rejected, WithFix: o.WithFix, KEV: o.KEV,
		ModifiedToday: o.ModifiedToday, Modified: o.Modified, AsOf: now}
	for _, rec := range o.LatestKEV {
		k := kevView{R: rec}
		for _, p := range rec.Remediation.Products {
			for _, a := range p.Atoms {
				if !a.HasFix() {
					continue
				}
				if len(k.Fixes) == fixesShown {
					k.More++
					continue
				}
				k.Fixes = append(k.Fixes, fixView{Product: p.Ecosystem + " " + p.Product, Version: a.FixedVersion, Source: a.Source})
			}
		}
		f.LatestKEV = append(f.LatestKEV, k)
	}
	for _, src := range o.Sources {
		f.Sources = append(f.Sources, viewSource(src, now))
	}
	return f, nil
}

// sourcePage answers GET /sources/{name}: one source for people.
func (s *Server) sourcePage(w http.ResponseWriter, r *http.Request) error {
	src, err := s.findSource(r)
	if err != nil {
		return err
	}
	return s.render(w, r, s.pages.source, http.StatusOK, struct {
		S    sourceView
		JSON string
	}{viewSource(src, s.asOf()), BasePath + "/sources/" + url.PathEscape(src.Name)})
}
