package console

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/exposure"
	"github.com/patchline/patchline/internal/httpx"
)

// fleetPageSize is the number of CVEs on a page of the fleet risk list.
const fleetPageSize = 50

type vulnerabilitiesData struct {
	Rows []exposure.FleetVulnerability
	// Next is the link to the next page, "" on the last.
	Next string
}

func (s *Server) exposureStore() (exposure.Store, error) {
	if s.cfg.Exposure == nil {
		return nil, errs.NotFoundf("Endpoint exposure is not available on this server.")
	}
	return s.cfg.Exposure, nil
}

// vulnerabilitiesPage is the fleet risk page: the CVEs that affect agents,
// KEV first, then by EPSS and CVSS. Its cursor is the risk of the last row
// of the previous page, in the query string.
func (s *Server) vulnerabilitiesPage(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	store, err := s.exposureStore()
	if err != nil {
		return err
	}
	f := exposure.FleetFilter{Limit: fleetPageSize + 1}
	if q := r.URL.Query(); q.Get("after") != "" {
		key, ok := cve.Key(q.Get("after"))
		epss, err1 := strconv.ParseFloat(q.Get("epss"), 64)
		cvss, err2 := strconv.ParseFloat(q.Get("cvss"), 64)
		if !ok || err1 != nil || err2 != nil {
			return errs.Invalidf("This page link is not valid: start again from the first page.")
		}
		f.After = &exposure.Cursor{KEV: q.Get("kev") == "1", EPSS: epss, CVSS: cvss, CVEKey: key}
	}
	rows, err := store.FleetVulnerabilities(r.Context(), f)
	if err != nil {
		return err
	}
	d := vulnerabilitiesData{Rows: rows}
	if len(rows) > fleetPageSize {
		d.Rows = rows[:fleetPageSize]
		last := d.Rows[fleetPageSize-1].Risk
		v := url.Values{"after": {last.CVEID}, "kev": {"0"},
			"epss": {strconv.FormatFloat(orMinus(last.EPSS), 'g', -1, 64)},
			"cvss": {strconv.FormatFloat(orMinus(last.CVSS), 'g', -1, 64)}}
		if last.KEV {
			v.Set("kev", "1")
		}
		d.Next = "/vulnerabilities?" + v.Encode()
	}
	return s.render(w, c, http.StatusOK, "vulnerabilities", page{Title: "Fleet risk", Section: "vulnerabilities", Data: d})
}

func orMinus(f *float64) float64 {
	if f == nil {
		return -1
	}
	return *f
}

type vulnerabilityData struct {
	CVEID    string
	Risk     *exposure.FleetVulnerability
	Agents   []exposure.CVEAgent
	Affected int
	Fresh    bool
}

// vulnerabilityPage shows one CVE: its fixes, the agents it affects and
// the privileged "install the fix".
func (s *Server) vulnerabilityPage(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	store, err := s.exposureStore()
	if err != nil {
		return err
	}
	id, err := cve.ParseID(r.PathValue("cveId"))
	if err != nil {
		return errs.NotFoundf("There is no CVE %s.", r.PathValue("cveId"))
	}
	d := vulnerabilityData{CVEID: id, Fresh: c.fresh()}
	if d.Agents, err = store.VulnerabilityAgents(r.Context(), exposure.AgentFilter{CVEID: id, Limit: 500}); err != nil {
		return err
	}
	for _, a := range d.Agents {
		if a.Status == exposure.Affected {
			d.Affected++
		}
	}
	// The risk row of the CVE, from the fleet list.
	all, err := store.FleetVulnerabilities(r.Context(), exposure.FleetFilter{IncludeUnknown: true})
	if err != nil {
		return err
	}
	for i := range all {
		if all[i].CVEID == id {
			d.Risk = &all[i]
		}
	}
	if d.Risk == nil && len(d.Agents) == 0 {
		return errs.NotFoundf("No agent reports %s.", id)
	}
	return s.render(w, c, http.StatusOK, "vulnerability", page{Title: id, Section: "vulnerabilities", Data: d})
}

// installFix creates the install-updates rollout of the agents a CVE
// affects, through the same store method and audit event as the API's
// rollout creation, and shows the rollout to start ring by ring.
func (s *Server) installFix(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	store, err := s.exposureStore()
	if err != nil {
		return err
	}
	id, err := cve.ParseID(r.PathValue("cveId"))
	if err != nil {
		return errs.NotFoundf("There is no CVE %s.", r.PathValue("cveId"))
	}
	back := "/vulnerabilities/" + id
	ro, err := exposure.NewFixRollout(r.Context(), store, id, c.actor(), c.now.UTC())
	if errors.Is(err, errs.ErrConflict) {
		return s.redirect(w, r, back, flash{Error: true, Text: sentence(errs.Message(err))})
	}
	if err != nil {
		return err
	}
	err = s.cfg.Rollouts.CreateRollout(r.Context(), ro)
	if errors.Is(err, errs.ErrInvalid) {
		return s.redirect(w, r, back, flash{Error: true, Text: sentence(errs.Message(err))})
	}
	if err != nil {
		return err
	}
	if err := s.record(r, c, http.StatusSeeOther, audit.RolloutCreated{RolloutID: ro.ID, Kind: string(ro.Kind), Rings: ro.Rings}); err != nil {
		return err
	}
	return s.redirect(w, r, "/rollouts/"+ro.ID, flash{Text: fmt.Sprintf("Rollout created for the %d agent(s) %s affects. Start its first ring when you are ready.", len(ro.Agents), id)})
}

type agentVulnerabilitiesData struct {
	AgentID, Hostname string
	Vulns             []exposure.AgentVulnerability
}

// agentVulnerabilitiesPage is an agent's exposure tab.
func (s *Server) agentVulnerabilitiesPage(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	store, err := s.exposureStore()
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	a, err := s.cfg.Agents.FindAgentByID(r.Context(), id)
	if errors.Is(err, errs.ErrNotFound) {
		return errs.NotFoundf("There is no agent %s.", id)
	}
	if err != nil {
		return err
	}
	vulns, err := store.AgentVulnerabilities(r.Context(), id)
	if err != nil {
		return err
	}
	d := agentVulnerabilitiesData{AgentID: a.ID, Hostname: a.Hostname, Vulns: vulns}
	return s.render(w, c, http.StatusOK, "agent-vulnerabilities", page{Title: "Exposure of " + a.Hostname, Section: "agents", Data: d})
}

// kevReport builds the KEV report of the fleet.
func (s *Server) kevReport(r *http.Request, c *reqCtx) (*exposure.KEVReport, error) {
	store, err := s.exposureStore()
	if err != nil {
		return nil, err
	}
	if s.cfg.Catalog == nil {
		return nil, errs.NotFoundf("KEV due dates need the CVE catalog, which this server does not read.")
	}
	return exposure.BuildKEVReport(r.Context(), store, s.cfg.Catalog, c.now)
}

// kevPage is the KEV due dates page: the KEV CVEs present on the fleet,
// the earliest due first, and the agents that have them.
func (s *Server) kevPage(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	rep, err := s.kevReport(r, c)
	if err != nil {
		return err
	}
	return s.render(w, c, http.StatusOK, "kev", page{Title: "KEV due dates", Section: "kev", Data: rep})
}

// kevExport writes the KEV report as CSV, one row per agent and CVE.
func (s *Server) kevExport(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	rep, err := s.kevReport(r, c)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := rep.WriteCSV(&buf); err != nil {
		return err
	}
	return httpx.WriteCSV(w, "patchline-kev-"+rep.AsOf+".csv", buf.Bytes())
}
