package console

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
)

// Page sizes of the console's lists.
const (
	agentsPerPage   = 50
	commandsPerPage = 20
	// maxBulk bounds the agents one bulk action acts on, as on the API.
	maxBulk = 1000
)

// agentFilter is the filter form of the agents list.
type agentFilter struct {
	Status, OS, Ring, Q, FeatureUpgrade string
}

// parseAgentFilter reads and checks the filter fields of a query or form.
func parseAgentFilter(v url.Values, now time.Time) (agentFilter, device.AgentFilter, error) {
	af := agentFilter{Status: v.Get("status"), OS: v.Get("os"), Ring: v.Get("ring"), Q: strings.TrimSpace(v.Get("q")), FeatureUpgrade: v.Get("featureUpgrade")}
	f := device.AgentFilter{Status: device.Status(af.Status), Platform: af.OS, Ring: af.Ring, Text: af.Q, FeatureUpgrade: af.FeatureUpgrade, Now: now}
	switch {
	case af.Status != "" && af.Status != string(device.StatusOnline) && af.Status != string(device.StatusOffline):
		return af, f, errs.Invalidf("The status filter must be online or offline.")
	case af.OS != "" && !device.ValidPlatform(af.OS):
		return af, f, errs.Invalidf("The operating system filter must be one of %s.", strings.Join(device.Platforms, ", "))
	case af.Ring != "" && device.CheckRingName(af.Ring) != nil:
		return af, f, errs.Invalidf("%q is not a ring name.", af.Ring)
	case utf8.RuneCountInString(af.Q) > 200:
		return af, f, errs.Invalidf("The search text must have at most 200 characters.")
	case af.FeatureUpgrade != "" && !device.ValidFeatureUpgradeState(af.FeatureUpgrade):
		return af, f, errs.Invalidf("The feature upgrade filter must be one of %s.", strings.Join(device.FeatureUpgradeStates, ", "))
	}
	return af, f, nil
}

// query returns the filter as query parameters.
func (af agentFilter) query() url.Values {
	v := url.Values{}
	for _, p := range []struct{ k, v string }{{"status", af.Status}, {"os", af.OS}, {"ring", af.Ring}, {"q", af.Q}, {"featureUpgrade", af.FeatureUpgrade}} {
		if p.v != "" {
			v.Set(p.k, p.v)
		}
	}
	return v
}

// Active reports whether any filter is set.
func (af agentFilter) Active() bool { return len(af.query()) > 0 }

// encodePageCursor and decodePageCursor carry the position of the last
// row of a page in the console's URLs.
func encodePageCursor(keys ...any) string {
	b, _ := json.Marshal(keys)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodePageCursor(s string, dst ...any) error {
	bad := errs.Invalidf("The page link is not valid: start again from the first page.")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return bad
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || len(raw) != len(dst) {
		return bad
	}
	for i := range raw {
		if err := json.Unmarshal(raw[i], dst[i]); err != nil {
			return bad
		}
	}
	return nil
}

type agentRow struct {
	*device.Agent
	Status device.Status
}

type agentsData struct {
	Filter          agentFilter
	Agents          []agentRow
	Rings           []*device.Ring
	Platforms       []string
	FeatureUpgrades []string
	Next, First     string
}

func (s *Server) agentsPage(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	q := r.URL.Query()
	af, f, err := parseAgentFilter(q, c.now)
	if err != nil {
		return err
	}
	if after := q.Get("after"); after != "" {
		var cur device.AgentCursor
		if err := decodePageCursor(after, &cur.Hostname, &cur.ID); err != nil {
			return err
		}
		f.After = &cur
	}
	f.Limit = agentsPerPage + 1
	agents, err := s.cfg.Agents.FindAgents(r.Context(), f)
	if err != nil {
		return err
	}
	rings, err := s.cfg.Rings.FindRings(r.Context())
	if err != nil {
		return err
	}
	d := agentsData{Filter: af, Rings: rings, Platforms: device.Platforms, FeatureUpgrades: device.FeatureUpgradeStates}
	if len(agents) > agentsPerPage {
		agents = agents[:agentsPerPage]
		last := agents[len(agents)-1]
		v := af.query()
		v.Set("after", encodePageCursor(last.Hostname, last.ID))
		d.Next = "/agents?" + v.Encode()
	}
	if f.After != nil {
		d.First = "/agents"
		if v := af.query(); len(v) > 0 {
			d.First += "?" + v.Encode()
		}
	}
	for _, a := range agents {
		d.Agents = append(d.Agents, agentRow{Agent: a, Status: a.Status(c.now)})
	}
	return s.render(w, c, http.StatusOK, "agents", page{Title: "Agents", Section: "agents", Data: d})
}

type appliedPolicyRow struct {
	ID, Name         string
	Version, Current int
}

type agentData struct {
	Agent         *device.Agent
	Status        device.Status
	Rings         []*device.Ring
	Commands      []*device.Command
	CommandState  string
	CommandStates []device.CommandState
	CommandsNext  string
	Policies      []appliedPolicyRow
	RebootDelays  []choice
	Fresh         bool
}

// findAgent returns the agent of the path.
func (s *Server) findAgent(r *http.Request) (*device.Agent, error) {
	id := r.PathValue("id")
	a, err := s.cfg.Agents.FindAgentByID(r.Context(), id)
	if errors.Is(err, errs.ErrNotFound) {
		return nil, errs.NotFoundf("There is no agent %s: it was never enrolled, or it was removed.", id)
	}
	return a, err
}

var rebootDelays = []choice{{"0", "Now"}, {"300", "In 5 minutes"}, {"900", "In 15 minutes"}, {"3600", "In an hour"}}

func (s *Server) agentPage(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	a, err := s.findAgent(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	d := agentData{Agent: a, Status: a.Status(c.now), CommandStates: device.CommandStates, RebootDelays: rebootDelays, Fresh: c.fresh()}
	f := device.CommandFilter{AgentID: a.ID, Limit: commandsPerPage + 1}
	if st := q.Get("state"); st != "" {
		ok := false
		for _, v := range device.CommandStates {
			ok = ok || string(v) == st
		}
		if !ok {
			return errs.Invalidf("%q is not a command state.", st)
		}
		d.CommandState = st
		f.States = []device.CommandState{device.CommandState(st)}
	}
	if before := q.Get("before"); before != "" {
		var createdMS int64
		var cur device.CommandCursor
		if err := decodePageCursor(before, &createdMS, &cur.ID); err != nil {
			return err
		}
		cur.CreatedAt = time.UnixMilli(createdMS)
		f.Before = &cur
	}
	if d.Commands, err = s.cfg.Commands.FindCommands(r.Context(), f); err != nil {
		return err
	}
	if len(d.Commands) > commandsPerPage {
		d.Commands = d.Commands[:commandsPerPage]
		last := d.Commands[len(d.Commands)-1]
		v := url.Values{"before": {encodePageCursor(last.CreatedAt.UnixMilli(), last.ID)}}
		if d.CommandState != "" {
			v.Set("state", d.CommandState)
		}
		d.CommandsNext = "/agents/" + a.ID + "?" + v.Encode() + "#commands"
	}
	if d.Rings, err = s.cfg.Rings.FindRings(r.Context()); err != nil {
		return err
	}
	if len(a.AppliedPolicies) > 0 {
		policies, err := s.cfg.Policies.FindPolicies(r.Context())
		if err != nil {
			return err
		}
		byID := map[string]*device.Policy{}
		for _, p := range policies {
			byID[p.ID] = p
		}
		for _, ap := range a.AppliedPolicies {
			row := appliedPolicyRow{ID: ap.PolicyID, Name: ap.PolicyID, Version: ap.Version}
			if p := byID[ap.PolicyID]; p != nil {
				row.Name, row.Current = p.Name, p.Version
			}
			d.Policies = append(d.Policies, row)
		}
	}
	return s.render(w, c, http.StatusOK, "agent", page{Title: "Agent " + a.Hostname, Section: "agents", Data: d})
}

// queue queues one command for an agent, as the API does, and records
// it.
func (s *Server) queue(r *http.Request, c *reqCtx, agentID string, t device.CommandType, params any, skipActive bool) (*device.Command, error) {
	var raw json.RawMessage
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return nil, err
		}
		if string(b) != "{}" {
			raw = b
		}
	}
	cmd := device.NewCommand(agentID, t, raw, c.actor(), c.now)
	created, err := s.cfg.Commands.CreateCommands(r.Context(), []*device.Command{cmd}, skipActive)
	if err != nil {
		return nil, err
	}
	if len(created) == 0 {
		return nil, nil
	}
	if err := s.record(r, c, http.StatusSeeOther, audit.CommandsQueued{Type: string(t), Commands: []string{cmd.ID}}); err != nil {
		return nil, err
	}
	return cmd, nil
}

func (s *Server) setAgentRing(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	a, err := s.findAgent(r)
	if err != nil {
		return err
	}
	back := "/agents/" + a.ID
	ring := r.PostForm.Get("ring")
	if ring != "" && device.CheckRingName(ring) != nil {
		return s.redirect(w, r, back, flash{Error: true, Text: "Choose a ring from the list."})
	}
	if ring == a.Ring {
		return s.redirect(w, r, back, flash{Text: "The agent is in that ring already."})
	}
	updated, err := s.cfg.Agents.SetAgentRing(r.Context(), a.ID, ring)
	if errors.Is(err, errs.ErrInvalid) {
		return s.redirect(w, r, back, flash{Error: true, Text: sentence(errs.Message(err))})
	}
	if err != nil {
		return err
	}
	if err := s.record(r, c, http.StatusSeeOther, audit.AgentRingChanged{AgentID: a.ID, From: a.Ring, To: updated.Ring}); err != nil {
		return err
	}
	msg := "Moved " + a.Hostname + " out of its ring."
	if updated.Ring != "" {
		msg = "Moved " + a.Hostname + " to ring " + updated.Ring + "."
	}
	return s.redirect(w, r, back, flash{Text: msg})
}

func (s *Server) collectLogs(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	a, err := s.findAgent(r)
	if err != nil {
		return err
	}
	cmd, err := s.queue(r, c, a.ID, device.CollectLogs, nil, false)
	if err != nil {
		return err
	}
	return s.redirect(w, r, "/agents/"+a.ID+"#commands", flash{Text: "Log collection queued (" + cmd.ID + "). Once the agent has uploaded the bundle, download it from the commands below."})
}

func (s *Server) installUpdates(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	a, err := s.findAgent(r)
	if err != nil {
		return err
	}
	back := "/agents/" + a.ID
	updates := r.PostForm["update"]
	switch {
	case len(updates) == 0:
		return s.redirect(w, r, back, flash{Error: true, Text: "Select at least one update to install."})
	case len(updates) > 500:
		return s.redirect(w, r, back, flash{Error: true, Text: "Select at most 500 updates at once."})
	}
	for _, u := range updates {
		if u == "" || len(u) > 200 {
			return s.redirect(w, r, back, flash{Error: true, Text: "Update ids have 1 to 200 characters."})
		}
	}
	cmd, err := s.queue(r, c, a.ID, device.InstallUpdates, device.InstallUpdatesParams{Updates: updates}, false)
	if err != nil {
		return err
	}
	return s.redirect(w, r, back+"#commands", flash{Text: fmt.Sprintf("Installation of %d update(s) queued (%s).", len(updates), cmd.ID)})
}

func (s *Server) reboot(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	a, err := s.findAgent(r)
	if err != nil {
		return err
	}
	back := "/agents/" + a.ID
	delay, err := strconv.Atoi(r.PostForm.Get("delay"))
	if err != nil || delay < 0 || delay > 86400 {
		return s.redirect(w, r, back, flash{Error: true, Text: "Choose when to reboot from the list."})
	}
	cmd, err := s.queue(r, c, a.ID, device.Reboot, device.RebootParams{DelaySeconds: delay}, false)
	if err != nil {
		return err
	}
	return s.redirect(w, r, back+"#commands", flash{Text: "Reboot queued (" + cmd.ID + ")."})
}

func (s *Server) finishFeatureUpgrade(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	a, err := s.findAgent(r)
	if err != nil {
		return err
	}
	back := "/agents/" + a.ID
	if a.FeatureUpgrade.State != device.FeatureUpgradeReady {
		return s.redirect(w, r, back, flash{Error: true, Text: "No feature upgrade waits to be finished on this agent (state " + a.FeatureUpgrade.State + ")."})
	}
	cmd, err := s.queue(r, c, a.ID, device.FinishFeatureUpgrade, nil, true)
	if err != nil {
		return err
	}
	if cmd == nil {
		return s.redirect(w, r, back+"#commands", flash{Error: true, Text: "A finish-feature-upgrade command is already active for this agent."})
	}
	return s.redirect(w, r, back+"#commands", flash{Text: "Finishing the feature upgrade to " + a.FeatureUpgrade.Target + " (" + cmd.ID + ")."})
}

// finishFeatureUpgrades finishes the feature upgrades of the agents of
// the list's filter that are ready, at most maxBulk at once.
func (s *Server) finishFeatureUpgrades(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	af, f, err := parseAgentFilter(r.PostForm, c.now)
	if err != nil {
		return err
	}
	back := "/agents"
	if v := af.query(); len(v) > 0 {
		back += "?" + v.Encode()
	}
	f.FeatureUpgrade = device.FeatureUpgradeReady
	f.Limit = maxBulk + 1
	agents, err := s.cfg.Agents.FindAgents(r.Context(), f)
	if err != nil {
		return err
	}
	more := len(agents) > maxBulk
	if more {
		agents = agents[:maxBulk]
	}
	if len(agents) == 0 {
		return s.redirect(w, r, back, flash{Error: true, Text: "No agent of this list has a feature upgrade ready to finish."})
	}
	cmds := make([]*device.Command, 0, len(agents))
	for _, a := range agents {
		cmds = append(cmds, device.NewCommand(a.ID, device.FinishFeatureUpgrade, nil, c.actor(), c.now))
	}
	created, err := s.cfg.Commands.CreateCommands(r.Context(), cmds, true)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(created))
	for _, cmd := range created {
		ids = append(ids, cmd.ID)
	}
	if err := s.record(r, c, http.StatusSeeOther, audit.CommandsQueued{Type: string(device.FinishFeatureUpgrade), Commands: ids}); err != nil {
		return err
	}
	msg := fmt.Sprintf("Queued %d finish-feature-upgrade command(s); %d agent(s) had one active already.", len(created), len(cmds)-len(created))
	if more {
		msg += fmt.Sprintf(" More than %d agents matched: do it again for the rest.", maxBulk)
	}
	return s.redirect(w, r, back, flash{Text: msg})
}

func (s *Server) removeAgentPage(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	a, err := s.findAgent(r)
	if err != nil {
		return err
	}
	return s.render(w, c, http.StatusOK, "agent-remove", page{Title: "Remove agent " + a.Hostname, Section: "agents", Data: a})
}

func (s *Server) removeAgent(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	a, err := s.findAgent(r)
	if err != nil {
		return err
	}
	cmd := device.NewCommand(a.ID, device.Remove, nil, c.actor(), c.now)
	if err := s.cfg.Agents.RemoveAgent(r.Context(), a.ID, cmd); err != nil {
		return err
	}
	if err := s.record(r, c, http.StatusSeeOther, audit.AgentRemoved{AgentID: a.ID, CommandID: cmd.ID}); err != nil {
		return err
	}
	return s.redirect(w, r, "/agents", flash{Text: "Removed " + a.Hostname + ". Its agent uninstalls itself at its next check-in (" + cmd.ID + ")."})
}

func (s *Server) cancelCommand(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	cmd, err := s.cfg.Commands.CancelCommand(r.Context(), r.PathValue("id"), c.now)
	switch {
	case errors.Is(err, errs.ErrNotFound):
		return errs.NotFoundf("There is no command %s.", r.PathValue("id"))
	case errors.Is(err, errs.ErrConflict):
		back := "/agents"
		if found, ferr := s.cfg.Commands.FindCommandByID(r.Context(), r.PathValue("id")); ferr == nil {
			back = "/agents/" + found.AgentID + "#commands"
		}
		return s.redirect(w, r, back, flash{Error: true, Text: sentence(errs.Message(err))})
	case err != nil:
		return err
	}
	if err := s.record(r, c, http.StatusSeeOther, audit.CommandCanceled{CommandID: cmd.ID, AgentID: cmd.AgentID}); err != nil {
		return err
	}
	return s.redirect(w, r, "/agents/"+cmd.AgentID+"#commands", flash{Text: "Command " + cmd.ID + " canceled."})
}

// logBundle downloads the log bundle of a collect-logs command.
// Downloads are recorded: a bundle holds an endpoint's logs.
func (s *Server) logBundle(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	b, err := s.cfg.Commands.FindLogBundle(r.Context(), r.PathValue("id"))
	if errors.Is(err, errs.ErrNotFound) {
		return errs.NotFoundf("Command %s has no log bundle (yet).", r.PathValue("id"))
	}
	if err != nil {
		return err
	}
	if err := s.record(r, c, http.StatusOK, audit.LogBundleDownloaded{CommandID: b.CommandID, AgentID: b.AgentID}); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", b.ContentType)
	h.Set("Content-Length", strconv.FormatInt(b.Size, 10))
	h.Set("Content-Disposition", `attachment; filename="`+b.CommandID+`.logs"`)
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(b.Content)
	return err
}
