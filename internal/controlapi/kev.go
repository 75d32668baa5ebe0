package controlapi

import (
	"bytes"
	"net/http"

	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/exposure"
	"github.com/patchline/patchline/internal/httpx"
)

// kevSources returns what the KEV compliance routes read: the exposure
// store and the catalog.
func (s *Server) kevSources() (exposure.Store, exposure.RecordReader, error) {
	store, err := s.exposureStore()
	if err != nil {
		return nil, nil, err
	}
	if s.cfg.Catalog == nil {
		return nil, nil, errs.NotFoundf("KEV compliance needs the CVE catalog, which this server does not read")
	}
	return store, s.cfg.Catalog, nil
}

// buildKEVReport builds the KEV report of a request without parameters.
func (s *Server) buildKEVReport(r *http.Request) (*exposure.KEVReport, error) {
	store, cat, err := s.kevSources()
	if err != nil {
		return nil, err
	}
	if _, err := parseQuery(r); err != nil {
		return nil, err
	}
	return exposure.BuildKEVReport(r.Context(), store, cat, s.now())
}

// kevReport answers GET /api/compliance/kev: the KEV CVEs present on the
// fleet with their due dates, and the agents they affect.
func (s *Server) kevReport(w http.ResponseWriter, r *http.Request) error {
	rep, err := s.buildKEVReport(r)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, rep)
}

// kevReportCSV answers GET /api/compliance/kev.csv: the same report, one
// row per agent and KEV CVE.
func (s *Server) kevReportCSV(w http.ResponseWriter, r *http.Request) error {
	rep, err := s.buildKEVReport(r)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := rep.WriteCSV(&buf); err != nil {
		return err
	}
	return httpx.WriteCSV(w, "patchline-kev-"+rep.AsOf+".csv", buf.Bytes())
}

// agentKEVJSON answers GET /api/agents/{id}/compliance/kev.
type agentKEVJSON struct {
	AgentID string                `json:"agentId"`
	AsOf    string                `json:"asOf"`
	Overdue int                   `json:"overdueCves"`
	Results []exposure.KEVFinding `json:"results"`
}

// agentKEV answers GET /api/agents/{id}/compliance/kev: the KEV CVEs of
// one agent, the earliest due first.
func (s *Server) agentKEV(w http.ResponseWriter, r *http.Request) error {
	store, cat, err := s.kevSources()
	if err != nil {
		return err
	}
	if _, err := parseQuery(r); err != nil {
		return err
	}
	now := s.now()
	id := r.PathValue("id")
	found, err := exposure.AgentKEV(r.Context(), store, cat, id, now)
	if err != nil {
		return err
	}
	out := agentKEVJSON{AgentID: id, AsOf: now.UTC().Format("2006-01-02"), Results: found}
	for _, f := range found {
		if f.Overdue {
			out.Overdue++
		}
	}
	return httpx.WriteJSON(w, http.StatusOK, out)
}
