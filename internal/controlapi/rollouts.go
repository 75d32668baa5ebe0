package controlapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/httpx"
)

func (s *Server) listRings(w http.ResponseWriter, r *http.Request) error {
	rings, err := s.cfg.Rings.FindRings(r.Context())
	if err != nil {
		return err
	}
	out := make([]ringJSON, 0, len(rings))
	for _, ring := range rings {
		out = append(out, toRingJSON(ring))
	}
	return writeSmallList(w, r, "rings", out, func(j ringJSON) string { return j.Name })
}

// writeSmallList answers a list that the store returns whole (rings,
// policies: tens of them), paged by limit and cursor like every other list.
// key names an item; the cursor is the key of the last item of a page.
func writeSmallList[T any](w http.ResponseWriter, r *http.Request, route string, all []T, key func(T) string) error {
	q, err := parseQuery(r, "limit", "cursor")
	if err != nil {
		return err
	}
	limit, err := q.limit()
	if err != nil {
		return err
	}
	fp := fingerprint(route)
	var after string
	start := 0
	if ok, err := decodeCursor(q, fp, &after); err != nil {
		return err
	} else if ok {
		start = len(all)
		for i, item := range all {
			if key(item) == after {
				start = i + 1
				break
			}
		}
	}
	page := all[start:]
	next := ""
	if len(page) > limit {
		page = page[:limit]
		next = encodeCursor(fp, key(page[limit-1]))
	}
	return httpx.WriteJSON(w, http.StatusOK, newList(page, next))
}

func (s *Server) createRing(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Name        string           `json:"name"`
		Position    *int             `json:"position"`
		Description string           `json:"description"`
		Rule        *device.RingRule `json:"rule"`
	}
	if err := httpx.DecodeJSON(w, r, maxBody, &body); err != nil {
		return err
	}
	if err := device.CheckRingName(body.Name); err != nil {
		return err
	}
	if body.Position == nil {
		return errs.Invalidf("a ring needs a position: rings roll out in increasing position")
	}
	ring := &device.Ring{Name: body.Name, Position: *body.Position, Description: body.Description, Rule: body.Rule, CreatedAt: s.now().UTC()}
	if err := checkRing(ring); err != nil {
		return err
	}
	if err := s.cfg.Rings.CreateRing(r.Context(), ring); err != nil {
		return err
	}
	setEvent(r, audit.RingCreated{Name: ring.Name, Position: ring.Position})
	return httpx.WriteJSON(w, http.StatusCreated, toRingJSON(ring))
}

// checkRing checks the fields of a ring that a request may set.
func checkRing(ring *device.Ring) error {
	if utf8.RuneCountInString(ring.Description) > 500 {
		return errs.Invalidf("description must have at most 500 characters")
	}
	if ring.Rule != nil {
		return device.CheckRingRule(ring.Rule)
	}
	return nil
}

func (s *Server) getRing(w http.ResponseWriter, r *http.Request) error {
	ring, err := s.cfg.Rings.FindRingByName(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, toRingJSON(ring))
}

// patchRing changes the position, description or rule of a ring; a rule
// of null removes it. Agents that follow the rules move at once.
func (s *Server) patchRing(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Position    *int            `json:"position"`
		Description *string         `json:"description"`
		Rule        json.RawMessage `json:"rule"`
	}
	if err := httpx.DecodeJSON(w, r, maxBody, &body); err != nil {
		return err
	}
	if body.Position == nil && body.Description == nil && body.Rule == nil {
		return errs.Invalidf("nothing to change: send position, description or rule")
	}
	ring, err := s.cfg.Rings.FindRingByName(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	if body.Position != nil {
		ring.Position = *body.Position
	}
	if body.Description != nil {
		ring.Description = *body.Description
	}
	switch {
	case body.Rule == nil:
	case string(body.Rule) == "null":
		ring.Rule = nil
	default:
		ring.Rule = new(device.RingRule)
		dec := json.NewDecoder(bytes.NewReader(body.Rule))
		dec.DisallowUnknownFields()
		if err := dec.Decode(ring.Rule); err != nil {
			return errs.Invalidf("rule must be an object with os, hostname and osName, or null: %v", err)
		}
	}
	if err := checkRing(ring); err != nil {
		return err
	}
	if err := s.cfg.Rings.UpdateRing(r.Context(), ring); err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, toRingJSON(ring))
}

func (s *Server) listRollouts(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "limit", "cursor", "state")
	if err != nil {
		return err
	}
	limit, err := q.limit()
	if err != nil {
		return err
	}
	state, err := q.oneOf("state", string(device.RolloutPending), string(device.RolloutInProgress), string(device.RolloutCompleted))
	if err != nil {
		return err
	}
	fp := fingerprint("rollouts", state)
	f := device.RolloutFilter{State: device.RolloutState(state), Limit: limit + 1}
	if _, err := decodeCursor(q, fp, &f.Before); err != nil {
		return err
	}
	rollouts, err := s.cfg.Rollouts.FindRollouts(r.Context(), f)
	if err != nil {
		return err
	}
	next := ""
	if len(rollouts) > limit {
		rollouts = rollouts[:limit]
		next = encodeCursor(fp, rollouts[limit-1].ID)
	}
	out := make([]rolloutJSON, 0, len(rollouts))
	for _, ro := range rollouts {
		out = append(out, toRolloutJSON(ro, nil))
	}
	return httpx.WriteJSON(w, http.StatusOK, newList(out, next))
}

func (s *Server) createRollout(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Name     string   `json:"name"`
		Kind     string   `json:"kind"`
		Updates  []string `json:"updates"`
		PolicyID string   `json:"policyId"`
		Rings    []string `json:"rings"`
	}
	if err := httpx.DecodeJSON(w, r, maxBody, &body); err != nil {
		return err
	}
	if n := utf8.RuneCountInString(body.Name); n == 0 || n > 100 {
		return errs.Invalidf("a rollout needs a name of 1 to 100 characters")
	}
	if len(body.Updates) > 500 {
		return errs.Invalidf("at most 500 updates per rollout")
	}
	now := s.now().UTC()
	ro := &device.Rollout{
		ID:        device.NewID(device.RolloutIDPrefix),
		Name:      body.Name,
		Rings:     body.Rings,
		CreatedBy: actor(r),
		CreatedAt: now,
		UpdatedAt: now,
	}
	switch device.CommandType(body.Kind) {
	case device.InstallUpdates:
		if body.PolicyID != "" {
			return errs.Invalidf("policyId belongs to apply-policy rollouts")
		}
		if len(body.Updates) > 0 {
			b, err := json.Marshal(device.InstallUpdatesParams{Updates: body.Updates})
			if err != nil {
				return err
			}
			ro.Params = b
		}
	case device.ApplyPolicy:
		if body.PolicyID == "" {
			return errs.Invalidf("an apply-policy rollout needs a policyId")
		}
		if len(body.Updates) > 0 {
			return errs.Invalidf("updates belong to install-updates rollouts")
		}
		ro.PolicyID = body.PolicyID
	default:
		return errs.Invalidf("kind must be install-updates or apply-policy, got %q", body.Kind)
	}
	ro.Kind = device.CommandType(body.Kind)
	for _, ring := range body.Rings {
		if err := device.CheckRingName(ring); err != nil {
			return err
		}
	}
	if err := s.cfg.Rollouts.CreateRollout(r.Context(), ro); err != nil {
		return err
	}
	setEvent(r, audit.RolloutCreated{RolloutID: ro.ID, Kind: string(ro.Kind), Rings: ro.Rings})
	return httpx.WriteJSON(w, http.StatusCreated, toRolloutJSON(ro, nil))
}

func (s *Server) getRollout(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	ro, err := s.cfg.Rollouts.FindRolloutByID(r.Context(), id)
	if err != nil {
		return err
	}
	progress, err := s.cfg.Rollouts.RolloutProgress(r.Context(), id)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, toRolloutJSON(ro, progress))
}

func (s *Server) advanceRollout(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		FromRing string `json:"fromRing"`
	}
	if err := decodeOptionalJSON(w, r, &body); err != nil {
		return err
	}
	id := r.PathValue("id")
	ro, cmds, err := s.cfg.Rollouts.AdvanceRollout(r.Context(), id, device.Advance{FromRing: body.FromRing, CreatedBy: actor(r), Now: s.now()})
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(cmds))
	for _, c := range cmds {
		ids = append(ids, c.ID)
	}
	setEvent(r, audit.RolloutAdvanced{RolloutID: ro.ID, Ring: ro.CurrentRing(), Commands: ids})
	progress, err := s.cfg.Rollouts.RolloutProgress(r.Context(), id)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusAccepted, struct {
		Rollout  rolloutJSON   `json:"rollout"`
		Commands []commandJSON `json:"commands"`
	}{toRolloutJSON(ro, progress), toCommandsJSON(cmds)})
}

func (s *Server) listPolicies(w http.ResponseWriter, r *http.Request) error {
	policies, err := s.cfg.Policies.FindPolicies(r.Context())
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(policies))
	for _, p := range policies {
		ids = append(ids, p.ID)
	}
	compliance, err := s.cfg.Policies.PolicyCompliance(r.Context(), ids)
	if err != nil {
		return err
	}
	out := make([]policyJSON, 0, len(policies))
	for _, p := range policies {
		out = append(out, toPolicyJSON(p, compliance[p.ID]))
	}
	return writeSmallList(w, r, "policies", out, func(j policyJSON) string { return j.ID })
}

func (s *Server) createPolicy(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Name     string          `json:"name"`
		Settings json.RawMessage `json:"settings"`
	}
	if err := httpx.DecodeJSON(w, r, maxBody, &body); err != nil {
		return err
	}
	body.Name = strings.TrimSpace(body.Name)
	if err := device.CheckPolicy(body.Name, body.Settings); err != nil {
		return err
	}
	now := s.now().UTC()
	p := &device.Policy{
		ID:        device.NewID(device.PolicyIDPrefix),
		Name:      body.Name,
		Settings:  body.Settings,
		CreatedBy: actor(r),
		CreatedAt: now,
		UpdatedAt: now,
	}
	if err := s.cfg.Policies.CreatePolicy(r.Context(), p); err != nil {
		return err
	}
	setEvent(r, audit.PolicyCreated{PolicyID: p.ID, Name: p.Name})
	return httpx.WriteJSON(w, http.StatusCreated, toPolicyJSON(p, nil))
}

func (s *Server) getPolicy(w http.ResponseWriter, r *http.Request) error {
	p, err := s.cfg.Policies.FindPolicyByID(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return s.writePolicy(w, r, http.StatusOK, p)
}

// writePolicy answers with p and its compliance counts.
func (s *Server) writePolicy(w http.ResponseWriter, r *http.Request, status int, p *device.Policy) error {
	compliance, err := s.cfg.Policies.PolicyCompliance(r.Context(), []string{p.ID})
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, status, toPolicyJSON(p, compliance[p.ID]))
}

// listPolicyAgents lists what the agents that applied a policy report
// about it, in agent list order.
func (s *Server) listPolicyAgents(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "limit", "cursor", "state")
	if err != nil {
		return err
	}
	limit, err := q.limit()
	if err != nil {
		return err
	}
	state, err := q.oneOf("state", device.ComplianceStates...)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	fp := fingerprint("policy-agents", id, state)
	f := device.PolicyAgentFilter{PolicyID: id, State: state, Limit: limit + 1}
	var after device.AgentCursor
	if ok, err := decodeCursor(q, fp, &after.Hostname, &after.ID); err != nil {
		return err
	} else if ok {
		f.After = &after
	}
	agents, err := s.cfg.Policies.FindPolicyAgents(r.Context(), f)
	if err != nil {
		return err
	}
	next := ""
	if len(agents) > limit {
		agents = agents[:limit]
		last := agents[limit-1]
		next = encodeCursor(fp, last.Hostname, last.AgentID)
	}
	out := make([]policyAgentJSON, 0, len(agents))
	for _, pa := range agents {
		out = append(out, toPolicyAgentJSON(pa))
	}
	return httpx.WriteJSON(w, http.StatusOK, newList(out, next))
}

func (s *Server) updatePolicy(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Settings json.RawMessage `json:"settings"`
	}
	if err := httpx.DecodeJSON(w, r, maxBody, &body); err != nil {
		return err
	}
	id := r.PathValue("id")
	cur, err := s.cfg.Policies.FindPolicyByID(r.Context(), id)
	if err != nil {
		return err
	}
	if err := device.CheckPolicy(cur.Name, body.Settings); err != nil {
		return err
	}
	p, err := s.cfg.Policies.UpdatePolicy(r.Context(), id, body.Settings, actor(r), s.now())
	if err != nil {
		return err
	}
	setEvent(r, audit.PolicyUpdated{PolicyID: p.ID, Version: p.Version})
	return s.writePolicy(w, r, http.StatusOK, p)
}

func (s *Server) deployPolicy(w http.ResponseWriter, r *http.Request) error {
	var t target
	if err := httpx.DecodeJSON(w, r, maxBody, &t); err != nil {
		return err
	}
	p, err := s.cfg.Policies.FindPolicyByID(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	agents, more, missing, err := s.resolve(r, t, nil)
	if err != nil {
		return err
	}
	params, err := json.Marshal(device.ApplyPolicyParams{PolicyID: p.ID, Version: p.Version, Settings: p.Settings})
	if err != nil {
		return err
	}
	now := s.now()
	cmds := make([]*device.Command, 0, len(agents))
	for _, a := range agents {
		cmds = append(cmds, device.NewCommand(a.ID, device.ApplyPolicy, params, actor(r), now))
	}
	created, err := s.cfg.Commands.CreateCommands(r.Context(), cmds, false)
	if err != nil {
		return err
	}
	compliance, err := s.cfg.Policies.PolicyCompliance(r.Context(), []string{p.ID})
	if err != nil {
		return err
	}
	out := struct {
		Policy policyJSON `json:"policy"`
		bulkJSON
	}{Policy: toPolicyJSON(p, compliance[p.ID]), bulkJSON: bulkJSON{Commands: toCommandsJSON(created), Skipped: []skippedJSON{}, More: more}}
	for _, id := range missing {
		out.Skipped = append(out.Skipped, skippedJSON{id, "agent not found"})
	}
	ids := make([]string, 0, len(created))
	for _, c := range created {
		ids = append(ids, c.ID)
	}
	setEvent(r, audit.PolicyDeployed{PolicyID: p.ID, Version: p.Version, Commands: ids})
	return httpx.WriteJSON(w, http.StatusAccepted, out)
}
