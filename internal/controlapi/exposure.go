package controlapi

import (
	"net/http"

	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/exposure"
	"github.com/patchline/patchline/internal/httpx"
)

// riskJSON is the risk of a CVE in the vulnerability lists.
type riskJSON struct {
	CVEID       string   `json:"cveId"`
	Severity    *string  `json:"severity"`
	CVSS        *float64 `json:"cvss"`
	EPSS        *float64 `json:"epss"`
	IsKEV       bool     `json:"isKev"`
	Description *string  `json:"description"`
}

func toRiskJSON(r exposure.Risk) riskJSON {
	return riskJSON{CVEID: r.CVEID, Severity: strPtr(r.Severity), CVSS: r.CVSS, EPSS: r.EPSS, IsKEV: r.KEV, Description: strPtr(r.Description)}
}

type agentVulnerabilityJSON struct {
	riskJSON
	Status   string             `json:"status"`
	Findings []exposure.Finding `json:"findings"`
}

type fleetVulnerabilityJSON struct {
	riskJSON
	AffectedAgents int            `json:"affectedAgents"`
	UnknownAgents  int            `json:"unknownAgents"`
	Fixes          []exposure.Fix `json:"fixes"`
}

type vulnerabilityAgentJSON struct {
	AgentID  string             `json:"agentId"`
	Hostname string             `json:"hostname"`
	Ring     *string            `json:"ring"`
	Status   string             `json:"status"`
	Findings []exposure.Finding `json:"findings"`
}

func (s *Server) exposureStore() (exposure.Store, error) {
	if s.cfg.Exposure == nil {
		return nil, errs.NotFoundf("endpoint exposure is not available on this server")
	}
	return s.cfg.Exposure, nil
}

func cursorOf(r exposure.Risk) exposure.Cursor {
	key, _ := cve.Key(r.CVEID)
	c := exposure.Cursor{KEV: r.KEV, EPSS: -1, CVSS: -1, CVEKey: key}
	if r.EPSS != nil {
		c.EPSS = *r.EPSS
	}
	if r.CVSS != nil {
		c.CVSS = *r.CVSS
	}
	return c
}

// listAgentVulnerabilities answers the CVEs of one agent, in risk order.
func (s *Server) listAgentVulnerabilities(w http.ResponseWriter, r *http.Request) error {
	store, err := s.exposureStore()
	if err != nil {
		return err
	}
	q, err := parseQuery(r, "limit", "cursor", "status")
	if err != nil {
		return err
	}
	limit, err := q.limit()
	if err != nil {
		return err
	}
	status, err := q.oneOf("status", string(exposure.Affected), string(exposure.Unknown))
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	fp := fingerprint("agent-vulnerabilities", id, status)
	var after exposure.Cursor
	hasCursor, err := decodeCursor(q, fp, &after.KEV, &after.EPSS, &after.CVSS, &after.CVEKey)
	if err != nil {
		return err
	}
	all, err := store.AgentVulnerabilities(r.Context(), id)
	if err != nil {
		return err
	}
	out := []agentVulnerabilityJSON{}
	next := ""
	var last exposure.Cursor
	for _, v := range all {
		if status != "" && string(v.Status) != status {
			continue
		}
		c := cursorOf(v.Risk)
		if hasCursor && !exposure.Less(after, c) {
			continue
		}
		if len(out) == limit {
			next = encodeCursor(fp, last.KEV, last.EPSS, last.CVSS, last.CVEKey)
			break
		}
		out = append(out, agentVulnerabilityJSON{riskJSON: toRiskJSON(v.Risk), Status: string(v.Status), Findings: v.Findings})
		last = c
	}
	return httpx.WriteJSON(w, http.StatusOK, newList(out, next))
}

// listVulnerabilities answers the CVEs of the fleet, in risk order.
func (s *Server) listVulnerabilities(w http.ResponseWriter, r *http.Request) error {
	store, err := s.exposureStore()
	if err != nil {
		return err
	}
	q, err := parseQuery(r, "limit", "cursor", "kev", "includeUnknown")
	if err != nil {
		return err
	}
	limit, err := q.limit()
	if err != nil {
		return err
	}
	kev, err := q.oneOf("kev", "true", "false")
	if err != nil {
		return err
	}
	unknown, err := q.oneOf("includeUnknown", "true", "false")
	if err != nil {
		return err
	}
	f := exposure.FleetFilter{Limit: limit + 1, IncludeUnknown: unknown == "true"}
	if kev != "" {
		b := kev == "true"
		f.KEV = &b
	}
	fp := fingerprint("vulnerabilities", kev, unknown)
	var after exposure.Cursor
	if ok, err := decodeCursor(q, fp, &after.KEV, &after.EPSS, &after.CVSS, &after.CVEKey); err != nil {
		return err
	} else if ok {
		f.After = &after
	}
	list, err := store.FleetVulnerabilities(r.Context(), f)
	if err != nil {
		return err
	}
	next := ""
	if len(list) > limit {
		list = list[:limit]
		c := cursorOf(list[limit-1].Risk)
		next = encodeCursor(fp, c.KEV, c.EPSS, c.CVSS, c.CVEKey)
	}
	out := make([]fleetVulnerabilityJSON, 0, len(list))
	for _, v := range list {
		fixes := v.Fixes
		if fixes == nil {
			fixes = []exposure.Fix{}
		}
		out = append(out, fleetVulnerabilityJSON{riskJSON: toRiskJSON(v.Risk), AffectedAgents: v.Affected, UnknownAgents: v.Unknown, Fixes: fixes})
	}
	return httpx.WriteJSON(w, http.StatusOK, newList(out, next))
}

// listVulnerabilityAgents answers the agents of one CVE, by agent id.
func (s *Server) listVulnerabilityAgents(w http.ResponseWriter, r *http.Request) error {
	store, err := s.exposureStore()
	if err != nil {
		return err
	}
	id, err := cve.ParseID(r.PathValue("cveId"))
	if err != nil {
		return err
	}
	q, err := parseQuery(r, "limit", "cursor", "status")
	if err != nil {
		return err
	}
	limit, err := q.limit()
	if err != nil {
		return err
	}
	status, err := q.oneOf("status", string(exposure.Affected), string(exposure.Unknown))
	if err != nil {
		return err
	}
	fp := fingerprint("vulnerability-agents", id, status)
	f := exposure.AgentFilter{CVEID: id, Status: exposure.Status(status), Limit: limit + 1}
	if _, err := decodeCursor(q, fp, &f.After); err != nil {
		return err
	}
	agents, err := store.VulnerabilityAgents(r.Context(), f)
	if err != nil {
		return err
	}
	next := ""
	if len(agents) > limit {
		agents = agents[:limit]
		next = encodeCursor(fp, agents[limit-1].AgentID)
	}
	out := make([]vulnerabilityAgentJSON, 0, len(agents))
	for _, a := range agents {
		out = append(out, vulnerabilityAgentJSON{AgentID: a.AgentID, Hostname: a.Hostname, Ring: strPtr(a.Ring), Status: string(a.Status), Findings: a.Findings})
	}
	return httpx.WriteJSON(w, http.StatusOK, newList(out, next))
}

// installFix creates the install-updates rollout of a CVE's affected
// agents, ring by ring; advancing it is POST /api/rollouts/{id}/advance.
func (s *Server) installFix(w http.ResponseWriter, r *http.Request) error {
	store, err := s.exposureStore()
	if err != nil {
		return err
	}
	id, err := cve.ParseID(r.PathValue("cveId"))
	if err != nil {
		return err
	}
	var body struct {
		Rings []string `json:"rings"`
	}
	if err := decodeOptionalJSON(w, r, &body); err != nil {
		return err
	}
	ro, err := exposure.NewFixRollout(r.Context(), store, id, actor(r), s.now().UTC())
	if err != nil {
		return err
	}
	ro.Rings = body.Rings
	if err := s.cfg.Rollouts.CreateRollout(r.Context(), ro); err != nil {
		return err
	}
	setEvent(r, audit.RolloutCreated{RolloutID: ro.ID, Kind: string(ro.Kind), Rings: ro.Rings})
	return httpx.WriteJSON(w, http.StatusCreated, struct {
		rolloutJSON
		CVEID  string   `json:"cveId"`
		Agents []string `json:"agents"`
	}{toRolloutJSON(ro, nil), id, ro.Agents})
}
