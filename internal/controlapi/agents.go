package controlapi

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/httpx"
)

// MaxBulk bounds the agents one bulk request acts on.
const MaxBulk = 1000

// agentFilterParams are the agent filters, as query parameters of the list
// and as the filter object of bulk requests.
type agentFilterParams struct {
	Status         string `json:"status"`
	OS             string `json:"os"`
	Ring           string `json:"ring"`
	Q              string `json:"q"`
	FeatureUpgrade string `json:"featureUpgrade"`
}

// filter checks the parameters and returns the store filter.
func (p agentFilterParams) filter(now time.Time) (device.AgentFilter, error) {
	f := device.AgentFilter{Platform: p.OS, Ring: p.Ring, Text: p.Q, FeatureUpgrade: p.FeatureUpgrade, Now: now}
	switch device.Status(p.Status) {
	case "", device.StatusOnline, device.StatusOffline:
		f.Status = device.Status(p.Status)
	default:
		return f, errs.Invalidf("status must be online or offline, got %q", p.Status)
	}
	if p.OS != "" && !device.ValidPlatform(p.OS) {
		return f, errs.Invalidf("os must be one of %s, got %q", strings.Join(device.Platforms, ", "), p.OS)
	}
	if p.Ring != "" {
		if err := device.CheckRingName(p.Ring); err != nil {
			return f, err
		}
	}
	if utf8.RuneCountInString(p.Q) > 200 {
		return f, errs.Invalidf("q must have at most 200 characters")
	}
	if p.FeatureUpgrade != "" && !device.ValidFeatureUpgradeState(p.FeatureUpgrade) {
		return f, errs.Invalidf("featureUpgrade must be one of %s, got %q", strings.Join(device.FeatureUpgradeStates, ", "), p.FeatureUpgrade)
	}
	return f, nil
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "limit", "cursor", "status", "os", "ring", "q", "featureUpgrade")
	if err != nil {
		return err
	}
	limit, err := q.limit()
	if err != nil {
		return err
	}
	p := agentFilterParams{Status: q.get("status"), OS: q.get("os"), Ring: q.get("ring"), Q: q.get("q"), FeatureUpgrade: q.get("featureUpgrade")}
	now := s.now()
	f, err := p.filter(now)
	if err != nil {
		return err
	}
	fp := fingerprint("agents", p.Status, p.OS, p.Ring, p.Q, p.FeatureUpgrade)
	var after device.AgentCursor
	if ok, err := decodeCursor(q, fp, &after.Hostname, &after.ID); err != nil {
		return err
	} else if ok {
		f.After = &after
	}
	f.Limit = limit + 1
	agents, err := s.cfg.Agents.FindAgents(r.Context(), f)
	if err != nil {
		return err
	}
	next := ""
	if len(agents) > limit {
		agents = agents[:limit]
		last := agents[limit-1]
		next = encodeCursor(fp, last.Hostname, last.ID)
	}
	out := make([]agentJSON, 0, len(agents))
	for _, a := range agents {
		out = append(out, toAgentJSON(a, now))
	}
	return httpx.WriteJSON(w, http.StatusOK, newList(out, next))
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request) error {
	a, err := s.cfg.Agents.FindAgentByID(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, toAgentJSON(a, s.now()))
}

// patchAgent moves an agent to a ring by hand ({"ring": NAME} or
// {"ring": null}), or hands its ring back to the ring rules
// ({"ringSource": "rule"}).
func (s *Server) patchAgent(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Ring       json.RawMessage `json:"ring"`
		RingSource string          `json:"ringSource"`
	}
	if err := httpx.DecodeJSON(w, r, maxBody, &body); err != nil {
		return err
	}
	switch {
	case body.Ring == nil && body.RingSource == "":
		return errs.Invalidf("nothing to change: send {\"ring\": NAME}, {\"ring\": null} or {\"ringSource\": \"rule\"}")
	case body.Ring != nil && body.RingSource != "":
		return errs.Invalidf("send either ring (set by hand) or ringSource (back to the ring rules)")
	case body.RingSource != "" && body.RingSource != device.RingSourceRule:
		return errs.Invalidf("ringSource can only be set to %q: set ring to place an agent by hand", device.RingSourceRule)
	}
	var ring string
	if body.Ring != nil && string(body.Ring) != "null" {
		if err := json.Unmarshal(body.Ring, &ring); err != nil {
			return errs.Invalidf("ring must be a ring name or null")
		}
		if err := device.CheckRingName(ring); err != nil {
			return err
		}
	}
	id := r.PathValue("id")
	before, err := s.cfg.Agents.FindAgentByID(r.Context(), id)
	if err != nil {
		return err
	}
	var a *device.Agent
	if body.RingSource != "" {
		a, err = s.cfg.Agents.SetAgentRingByRule(r.Context(), id)
	} else {
		a, err = s.cfg.Agents.SetAgentRing(r.Context(), id, ring)
	}
	if err != nil {
		return err
	}
	setEvent(r, audit.AgentRingChanged{AgentID: id, From: before.Ring, To: a.Ring})
	return httpx.WriteJSON(w, http.StatusOK, toAgentJSON(a, s.now()))
}

func (s *Server) listAgentCommands(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "limit", "cursor", "state", "type")
	if err != nil {
		return err
	}
	limit, err := q.limit()
	if err != nil {
		return err
	}
	state, err := q.oneOf("state", strs(device.CommandStates)...)
	if err != nil {
		return err
	}
	typ, err := q.oneOf("type", strs(device.CommandTypes)...)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if _, err := s.cfg.Agents.FindAgentByID(r.Context(), id); err != nil {
		return err
	}
	f := device.CommandFilter{AgentID: id, Type: device.CommandType(typ), Limit: limit + 1}
	if state != "" {
		f.States = []device.CommandState{device.CommandState(state)}
	}
	fp := fingerprint("agent-commands", id, state, typ)
	var createdMS int64
	var before device.CommandCursor
	if ok, err := decodeCursor(q, fp, &createdMS, &before.ID); err != nil {
		return err
	} else if ok {
		before.CreatedAt = time.UnixMilli(createdMS)
		f.Before = &before
	}
	cmds, err := s.cfg.Commands.FindCommands(r.Context(), f)
	if err != nil {
		return err
	}
	next := ""
	if len(cmds) > limit {
		cmds = cmds[:limit]
		last := cmds[limit-1]
		next = encodeCursor(fp, last.CreatedAt.UnixMilli(), last.ID)
	}
	return httpx.WriteJSON(w, http.StatusOK, newList(toCommandsJSON(cmds), next))
}

// queueOne queues one command of type t for the agent of the path and
// answers 202 with it.
func (s *Server) queueOne(w http.ResponseWriter, r *http.Request, t device.CommandType, params any) error {
	id := r.PathValue("id")
	if _, err := s.cfg.Agents.FindAgentByID(r.Context(), id); err != nil {
		return err
	}
	var raw json.RawMessage
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return err
		}
		if string(b) != "{}" {
			raw = b
		}
	}
	c := device.NewCommand(id, t, raw, actor(r), s.now())
	if _, err := s.cfg.Commands.CreateCommands(r.Context(), []*device.Command{c}, false); err != nil {
		return err
	}
	setEvent(r, audit.CommandsQueued{Type: string(t), Commands: []string{c.ID}})
	return httpx.WriteJSON(w, http.StatusAccepted, toCommandJSON(c))
}

func (s *Server) collectLogs(w http.ResponseWriter, r *http.Request) error {
	if err := decodeOptionalJSON(w, r, &struct{}{}); err != nil {
		return err
	}
	return s.queueOne(w, r, device.CollectLogs, nil)
}

func (s *Server) installUpdates(w http.ResponseWriter, r *http.Request) error {
	var p device.InstallUpdatesParams
	if err := decodeOptionalJSON(w, r, &p); err != nil {
		return err
	}
	if len(p.Updates) > 500 {
		return errs.Invalidf("at most 500 updates per command")
	}
	for _, u := range p.Updates {
		if u == "" || len(u) > 200 {
			return errs.Invalidf("update ids must have 1 to 200 characters")
		}
	}
	return s.queueOne(w, r, device.InstallUpdates, p)
}

func (s *Server) reboot(w http.ResponseWriter, r *http.Request) error {
	var p device.RebootParams
	if err := decodeOptionalJSON(w, r, &p); err != nil {
		return err
	}
	if p.DelaySeconds < 0 || p.DelaySeconds > 86400 {
		return errs.Invalidf("delaySeconds must be from 0 to 86400")
	}
	return s.queueOne(w, r, device.Reboot, p)
}

func (s *Server) removeAgent(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := s.cfg.Agents.FindAgentByID(r.Context(), id); err != nil {
		return err
	}
	c := device.NewCommand(id, device.Remove, nil, actor(r), s.now())
	if err := s.cfg.Agents.RemoveAgent(r.Context(), id, c); err != nil {
		return err
	}
	setEvent(r, audit.AgentRemoved{AgentID: id, CommandID: c.ID})
	return httpx.WriteJSON(w, http.StatusAccepted, toCommandJSON(c))
}

// target selects the agents of a bulk request: a list of ids or a filter.
type target struct {
	AgentIDs []string           `json:"agentIds"`
	Filter   *agentFilterParams `json:"filter"`
}

type skippedJSON struct {
	AgentID string `json:"agentId"`
	Reason  string `json:"reason"`
}

type bulkJSON struct {
	Commands []commandJSON `json:"commands"`
	Skipped  []skippedJSON `json:"skipped"`
	// More is true when the filter matched more than MaxBulk agents: send
	// the request again for the rest.
	More bool `json:"more"`
}

// resolve returns the agents of t (at most MaxBulk), whether a filter
// matched more, and the requested ids that are unknown.
func (s *Server) resolve(r *http.Request, t target, extra func(*device.AgentFilter)) (agents []*device.Agent, more bool, missing []string, err error) {
	switch {
	case len(t.AgentIDs) > 0 && t.Filter != nil, len(t.AgentIDs) == 0 && t.Filter == nil:
		return nil, false, nil, errs.Invalidf("send either agentIds or filter")
	case len(t.AgentIDs) > MaxBulk:
		return nil, false, nil, errs.Invalidf("at most %d agentIds per request", MaxBulk)
	case t.Filter != nil:
		f, err := t.Filter.filter(s.now())
		if err != nil {
			return nil, false, nil, err
		}
		if extra != nil {
			extra(&f)
		}
		f.Limit = MaxBulk + 1
		agents, err := s.cfg.Agents.FindAgents(r.Context(), f)
		if err != nil {
			return nil, false, nil, err
		}
		if len(agents) > MaxBulk {
			return agents[:MaxBulk], true, nil, nil
		}
		return agents, false, nil, nil
	}
	seen := map[string]bool{}
	for _, id := range t.AgentIDs {
		if seen[id] {
			return nil, false, nil, errs.Invalidf("agent %s is listed twice", id)
		}
		seen[id] = true
	}
	agents, err = s.cfg.Agents.FindAgents(r.Context(), device.AgentFilter{IDs: t.AgentIDs})
	if err != nil {
		return nil, false, nil, err
	}
	found := map[string]bool{}
	for _, a := range agents {
		found[a.ID] = true
	}
	for _, id := range t.AgentIDs {
		if !found[id] {
			missing = append(missing, id)
		}
	}
	return agents, false, missing, nil
}

func (s *Server) finishFeatureUpgrades(w http.ResponseWriter, r *http.Request) error {
	var t target
	if err := httpx.DecodeJSON(w, r, maxBody, &t); err != nil {
		return err
	}
	agents, more, missing, err := s.resolve(r, t, func(f *device.AgentFilter) {
		if f.FeatureUpgrade == "" {
			f.FeatureUpgrade = device.FeatureUpgradeReady
		}
	})
	if err != nil {
		return err
	}
	out := bulkJSON{Commands: []commandJSON{}, Skipped: []skippedJSON{}, More: more}
	for _, id := range missing {
		out.Skipped = append(out.Skipped, skippedJSON{id, "agent not found"})
	}
	var cmds []*device.Command
	now := s.now()
	for _, a := range agents {
		if a.FeatureUpgrade.State != device.FeatureUpgradeReady {
			out.Skipped = append(out.Skipped, skippedJSON{a.ID, "no feature upgrade waits to be finished (state " + a.FeatureUpgrade.State + ")"})
			continue
		}
		cmds = append(cmds, device.NewCommand(a.ID, device.FinishFeatureUpgrade, nil, actor(r), now))
	}
	created, err := s.cfg.Commands.CreateCommands(r.Context(), cmds, true)
	if err != nil {
		return err
	}
	queued := map[string]bool{}
	ids := make([]string, 0, len(created))
	for _, c := range created {
		queued[c.ID] = true
		ids = append(ids, c.ID)
		out.Commands = append(out.Commands, toCommandJSON(c))
	}
	for _, c := range cmds {
		if !queued[c.ID] {
			out.Skipped = append(out.Skipped, skippedJSON{c.AgentID, "a finish-feature-upgrade command is already active"})
		}
	}
	setEvent(r, audit.CommandsQueued{Type: string(device.FinishFeatureUpgrade), Commands: ids})
	return httpx.WriteJSON(w, http.StatusAccepted, out)
}

func (s *Server) getCommand(w http.ResponseWriter, r *http.Request) error {
	c, err := s.cfg.Commands.FindCommandByID(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, toCommandJSON(c))
}

func (s *Server) cancelCommand(w http.ResponseWriter, r *http.Request) error {
	c, err := s.cfg.Commands.CancelCommand(r.Context(), r.PathValue("id"), s.now())
	if err != nil {
		return err
	}
	setEvent(r, audit.CommandCanceled{CommandID: c.ID, AgentID: c.AgentID})
	return httpx.WriteJSON(w, http.StatusOK, toCommandJSON(c))
}

func (s *Server) getLogBundle(w http.ResponseWriter, r *http.Request) error {
	b, err := s.cfg.Commands.FindLogBundle(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", b.ContentType)
	h.Set("Content-Length", strconv.FormatInt(b.Size, 10))
	h.Set("Content-Disposition", `attachment; filename="`+b.CommandID+`.logs"`)
	h.Set("Repr-Digest", "sha-256=:"+base64.StdEncoding.EncodeToString(b.SHA256)+":")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(b.Content)
	return err
}

// strs converts a slice of string types to strings.
func strs[T ~string](in []T) []string {
	out := make([]string, len(in))
	for i, v := range in {
		out[i] = string(v)
	}
	return out
}
