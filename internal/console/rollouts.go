package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
)

const rolloutsPerPage = 50

type ringForm struct {
	Name, Position, Description string
}

type rolloutForm struct {
	Name, Kind, Updates, PolicyID string
	Rings                         []string
}

// Has reports whether the form selects ring name.
func (f rolloutForm) Has(name string) bool {
	for _, r := range f.Rings {
		if r == name {
			return true
		}
	}
	return false
}

type rolloutsData struct {
	Rings       []*device.Ring
	Rollouts    []*device.Rollout
	Policies    []*device.Policy
	RingForm    ringForm
	RolloutForm rolloutForm
	Errors      map[string]string
	Next        string
	First       string
}

func (s *Server) rolloutsPage(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	return s.renderRollouts(w, r, c, http.StatusOK, rolloutsData{RolloutForm: rolloutForm{Kind: string(device.InstallUpdates)}})
}

func (s *Server) renderRollouts(w http.ResponseWriter, r *http.Request, c *reqCtx, status int, d rolloutsData) error {
	var err error
	if d.Rings, err = s.cfg.Rings.FindRings(r.Context()); err != nil {
		return err
	}
	if d.Policies, err = s.cfg.Policies.FindPolicies(r.Context()); err != nil {
		return err
	}
	f := device.RolloutFilter{Limit: rolloutsPerPage + 1}
	if before := r.URL.Query().Get("before"); before != "" {
		if err := decodePageCursor(before, &f.Before); err != nil {
			return err
		}
		d.First = "/rollouts"
	}
	if d.Rollouts, err = s.cfg.Rollouts.FindRollouts(r.Context(), f); err != nil {
		return err
	}
	if len(d.Rollouts) > rolloutsPerPage {
		d.Rollouts = d.Rollouts[:rolloutsPerPage]
		d.Next = "/rollouts?" + url.Values{"before": {encodePageCursor(d.Rollouts[rolloutsPerPage-1].ID)}}.Encode()
	}
	return s.render(w, c, status, "rollouts", page{Title: "Rings and rollouts", Section: "rollouts", Data: d})
}

func (s *Server) createRing(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	f := r.PostForm
	form := ringForm{Name: strings.TrimSpace(f.Get("name")), Position: strings.TrimSpace(f.Get("position")), Description: strings.TrimSpace(f.Get("description"))}
	d := rolloutsData{RingForm: form, RolloutForm: rolloutForm{Kind: string(device.InstallUpdates)}, Errors: map[string]string{}}
	if err := device.CheckRingName(form.Name); err != nil {
		d.Errors["ring_name"] = "A ring name is a lower-case slug of letters, digits and dashes, such as pilot or broad-2."
	}
	pos, err := strconv.Atoi(form.Position)
	if err != nil {
		d.Errors["ring_position"] = "Enter a whole number: rings roll out in increasing position."
	}
	if utf8.RuneCountInString(form.Description) > 500 {
		d.Errors["ring_description"] = "The description must have at most 500 characters."
	}
	if len(d.Errors) > 0 {
		return s.renderRollouts(w, r, c, http.StatusUnprocessableEntity, d)
	}
	ring := &device.Ring{Name: form.Name, Position: pos, Description: form.Description, CreatedAt: c.now.UTC()}
	err = s.cfg.Rings.CreateRing(r.Context(), ring)
	if errors.Is(err, errs.ErrConflict) {
		d.Errors["ring_name"] = "A ring with this name or position exists."
		return s.renderRollouts(w, r, c, http.StatusUnprocessableEntity, d)
	}
	if err != nil {
		return err
	}
	if err := s.record(r, c, http.StatusSeeOther, audit.RingCreated{Name: ring.Name, Position: ring.Position}); err != nil {
		return err
	}
	return s.redirect(w, r, "/rollouts", flash{Text: "Ring " + ring.Name + " created."})
}

func (s *Server) createRollout(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	f := r.PostForm
	form := rolloutForm{Name: strings.TrimSpace(f.Get("name")), Kind: f.Get("kind"), Updates: strings.TrimSpace(f.Get("updates")), PolicyID: f.Get("policyId"), Rings: f["rings"]}
	d := rolloutsData{RolloutForm: form, Errors: map[string]string{}}
	if n := utf8.RuneCountInString(form.Name); n == 0 || n > 100 {
		d.Errors["rollout_name"] = "A rollout needs a name of 1 to 100 characters."
	}
	updates := strings.FieldsFunc(form.Updates, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
	now := c.now.UTC()
	ro := &device.Rollout{ID: device.NewID(device.RolloutIDPrefix), Name: form.Name, Rings: form.Rings, CreatedBy: c.actor(), CreatedAt: now, UpdatedAt: now}
	switch device.CommandType(form.Kind) {
	case device.InstallUpdates:
		if len(updates) > 500 {
			d.Errors["rollout_updates"] = "At most 500 updates per rollout."
		}
		for _, u := range updates {
			if len(u) > 200 {
				d.Errors["rollout_updates"] = "Update ids have at most 200 characters."
			}
		}
		if len(updates) > 0 {
			b, err := json.Marshal(device.InstallUpdatesParams{Updates: updates})
			if err != nil {
				return err
			}
			ro.Params = b
		}
	case device.ApplyPolicy:
		if form.PolicyID == "" {
			d.Errors["rollout_policy"] = "Choose the policy to roll out."
		}
		if len(updates) > 0 {
			d.Errors["rollout_updates"] = "Updates belong to rollouts of updates: leave this empty for a policy."
		}
		ro.PolicyID = form.PolicyID
	default:
		d.Errors["rollout_kind"] = "Choose what to roll out."
	}
	ro.Kind = device.CommandType(form.Kind)
	for _, ring := range form.Rings {
		if device.CheckRingName(ring) != nil {
			d.Errors["rollout_rings"] = "Choose rings from the list."
		}
	}
	if len(d.Errors) == 0 {
		err := s.cfg.Rollouts.CreateRollout(r.Context(), ro)
		if errors.Is(err, errs.ErrInvalid) {
			d.Errors["rollout_rings"] = sentence(errs.Message(err))
		} else if err != nil {
			return err
		}
	}
	if len(d.Errors) > 0 {
		return s.renderRollouts(w, r, c, http.StatusUnprocessableEntity, d)
	}
	if err := s.record(r, c, http.StatusSeeOther, audit.RolloutCreated{RolloutID: ro.ID, Kind: string(ro.Kind), Rings: ro.Rings}); err != nil {
		return err
	}
	return s.redirect(w, r, "/rollouts/"+ro.ID, flash{Text: "Rollout created. Start its first ring when you are ready."})
}

type rolloutData struct {
	Rollout  *device.Rollout
	Progress []progressRow
	States   []device.CommandState
	Commands []*device.Command
	Policy   *device.Policy
	Fresh    bool
}

type progressRow struct {
	Ring   string
	Counts []int // in the order of States
	Active bool  // commands still active
}

// findRollout returns the rollout of the path.
func (s *Server) findRollout(r *http.Request) (*device.Rollout, error) {
	id := r.PathValue("id")
	ro, err := s.cfg.Rollouts.FindRolloutByID(r.Context(), id)
	if errors.Is(err, errs.ErrNotFound) {
		return nil, errs.NotFoundf("There is no rollout %s.", id)
	}
	return ro, err
}

func (s *Server) rolloutPage(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	ro, err := s.findRollout(r)
	if err != nil {
		return err
	}
	progress, err := s.cfg.Rollouts.RolloutProgress(r.Context(), ro.ID)
	if err != nil {
		return err
	}
	d := rolloutData{Rollout: ro, States: device.CommandStates, Fresh: c.fresh()}
	for _, p := range progress {
		row := progressRow{Ring: p.Ring}
		for _, st := range device.CommandStates {
			row.Counts = append(row.Counts, p.States[st])
			if !st.Final() && p.States[st] > 0 {
				row.Active = true
			}
		}
		d.Progress = append(d.Progress, row)
	}
	if d.Commands, err = s.cfg.Commands.FindCommands(r.Context(), device.CommandFilter{RolloutID: ro.ID, Limit: 50}); err != nil {
		return err
	}
	if ro.PolicyID != "" {
		if d.Policy, err = s.cfg.Policies.FindPolicyByID(r.Context(), ro.PolicyID); err != nil && !errors.Is(err, errs.ErrNotFound) {
			return err
		}
	}
	return s.render(w, c, http.StatusOK, "rollout", page{Title: "Rollout " + ro.Name, Section: "rollouts", Data: d})
}

func (s *Server) advanceRollout(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	ro, err := s.findRollout(r)
	if err != nil {
		return err
	}
	back := "/rollouts/" + ro.ID
	ro, cmds, err := s.cfg.Rollouts.AdvanceRollout(r.Context(), ro.ID, device.Advance{FromRing: r.PostForm.Get("fromRing"), CreatedBy: c.actor(), Now: c.now})
	if errors.Is(err, errs.ErrConflict) {
		return s.redirect(w, r, back, flash{Error: true, Text: sentence(errs.Message(err))})
	}
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(cmds))
	for _, cmd := range cmds {
		ids = append(ids, cmd.ID)
	}
	if err := s.record(r, c, http.StatusSeeOther, audit.RolloutAdvanced{RolloutID: ro.ID, Ring: ro.CurrentRing(), Commands: ids}); err != nil {
		return err
	}
	return s.redirect(w, r, back, flash{Text: fmt.Sprintf("Ring %s started: %d command(s) queued.", ro.CurrentRing(), len(cmds))})
}

type policyForm struct {
	Name, Settings string
}

type policiesData struct {
	Policies []*device.Policy
	Form     policyForm
	Errors   map[string]string
}

func (s *Server) policiesPage(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	return s.renderPolicies(w, r, c, http.StatusOK, policiesData{Form: policyForm{Settings: "{\n  \n}"}})
}

func (s *Server) renderPolicies(w http.ResponseWriter, r *http.Request, c *reqCtx, status int, d policiesData) error {
	var err error
	if d.Policies, err = s.cfg.Policies.FindPolicies(r.Context()); err != nil {
		return err
	}
	return s.render(w, c, status, "policies", page{Title: "Policy objects", Section: "policies", Data: d})
}

// compactSettings checks the settings of a policy with device.CheckPolicy
// and compacts their JSON.
func compactSettings(name, settings string) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(settings)); err != nil {
		return nil, errs.Invalidf("The settings are not valid JSON: %v.", err)
	}
	b := json.RawMessage(buf.Bytes())
	if err := device.CheckPolicy(name, b); err != nil {
		return nil, err
	}
	return b, nil
}

// placeholderName stands in for a policy name that has its own error, so
// that the settings are checked on their own.
const placeholderName = "policy"

func (s *Server) createPolicy(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	form := policyForm{Name: strings.TrimSpace(r.PostForm.Get("name")), Settings: r.PostForm.Get("settings")}
	d := policiesData{Form: form, Errors: map[string]string{}}
	if err := device.CheckPolicy(form.Name, json.RawMessage(`{}`)); err != nil {
		d.Errors["name"] = sentence(errs.Message(err))
	}
	settings, err := compactSettings(placeholderName, form.Settings)
	if err != nil {
		d.Errors["settings"] = sentence(errs.Message(err))
	}
	if len(d.Errors) > 0 {
		return s.renderPolicies(w, r, c, http.StatusUnprocessableEntity, d)
	}
	now := c.now.UTC()
	p := &device.Policy{ID: device.NewID(device.PolicyIDPrefix), Name: form.Name, Settings: settings, CreatedBy: c.actor(), CreatedAt: now, UpdatedAt: now}
	err = s.cfg.Policies.CreatePolicy(r.Context(), p)
	if errors.Is(err, errs.ErrConflict) {
		d.Errors["name"] = "A policy with this name exists."
		return s.renderPolicies(w, r, c, http.StatusUnprocessableEntity, d)
	}
	if err != nil {
		return err
	}
	if err := s.record(r, c, http.StatusSeeOther, audit.PolicyCreated{PolicyID: p.ID, Name: p.Name}); err != nil {
		return err
	}
	return s.redirect(w, r, "/policies/"+p.ID, flash{Text: "Policy " + p.Name + " created (version 1). Deploy it, or roll it out ring by ring."})
}

type policyData struct {
	Policy   *device.Policy
	Settings string
	Rings    []*device.Ring
	Error    string
	Fresh    bool
}

// findPolicy returns the policy of the path.
func (s *Server) findPolicy(r *http.Request) (*device.Policy, error) {
	id := r.PathValue("id")
	p, err := s.cfg.Policies.FindPolicyByID(r.Context(), id)
	if errors.Is(err, errs.ErrNotFound) {
		return nil, errs.NotFoundf("There is no policy %s.", id)
	}
	return p, err
}

func (s *Server) policyPage(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	p, err := s.findPolicy(r)
	if err != nil {
		return err
	}
	return s.renderPolicy(w, r, c, http.StatusOK, p, prettyJSON(p.Settings), "")
}

func (s *Server) renderPolicy(w http.ResponseWriter, r *http.Request, c *reqCtx, status int, p *device.Policy, settings, errMsg string) error {
	rings, err := s.cfg.Rings.FindRings(r.Context())
	if err != nil {
		return err
	}
	d := policyData{Policy: p, Settings: settings, Rings: rings, Error: errMsg, Fresh: c.fresh()}
	return s.render(w, c, status, "policy", page{Title: "Policy " + p.Name, Section: "policies", Data: d})
}

func (s *Server) updatePolicy(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	p, err := s.findPolicy(r)
	if err != nil {
		return err
	}
	form := r.PostForm.Get("settings")
	settings, err := compactSettings(p.Name, form)
	if err != nil {
		return s.renderPolicy(w, r, c, http.StatusUnprocessableEntity, p, form, sentence(errs.Message(err)))
	}
	p, err = s.cfg.Policies.UpdatePolicy(r.Context(), p.ID, settings, c.actor(), c.now)
	if err != nil {
		return err
	}
	if err := s.record(r, c, http.StatusSeeOther, audit.PolicyUpdated{PolicyID: p.ID, Version: p.Version}); err != nil {
		return err
	}
	return s.redirect(w, r, "/policies/"+p.ID, flash{Text: fmt.Sprintf("Saved as version %d. Deploy it to bring agents up to date.", p.Version)})
}

// deployPolicy queues apply-policy with the current version for the
// agents of a ring, or for every agent, at most maxBulk at once as on the
// API; rollouts deliver to larger fleets ring by ring.
func (s *Server) deployPolicy(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	p, err := s.findPolicy(r)
	if err != nil {
		return err
	}
	back := "/policies/" + p.ID
	f := device.AgentFilter{Limit: maxBulk + 1, Now: c.now}
	target := r.PostForm.Get("target")
	switch {
	case target == "all":
	case strings.HasPrefix(target, "ring:") && device.CheckRingName(strings.TrimPrefix(target, "ring:")) == nil:
		f.Ring = strings.TrimPrefix(target, "ring:")
	default:
		return s.redirect(w, r, back, flash{Error: true, Text: "Choose the agents to deploy to."})
	}
	agents, err := s.cfg.Agents.FindAgents(r.Context(), f)
	if err != nil {
		return err
	}
	more := len(agents) > maxBulk
	if more {
		agents = agents[:maxBulk]
	}
	if len(agents) == 0 {
		return s.redirect(w, r, back, flash{Error: true, Text: "No agent matches: nothing deployed."})
	}
	params, err := json.Marshal(device.ApplyPolicyParams{PolicyID: p.ID, Version: p.Version, Settings: p.Settings})
	if err != nil {
		return err
	}
	cmds := make([]*device.Command, 0, len(agents))
	for _, a := range agents {
		cmds = append(cmds, device.NewCommand(a.ID, device.ApplyPolicy, params, c.actor(), c.now))
	}
	created, err := s.cfg.Commands.CreateCommands(r.Context(), cmds, false)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(created))
	for _, cmd := range created {
		ids = append(ids, cmd.ID)
	}
	if err := s.record(r, c, http.StatusSeeOther, audit.PolicyDeployed{PolicyID: p.ID, Version: p.Version, Commands: ids}); err != nil {
		return err
	}
	msg := fmt.Sprintf("Version %d deployed: apply-policy queued for %d agent(s).", p.Version, len(created))
	if more {
		msg += fmt.Sprintf(" More than %d agents matched; use a rollout for the rest.", maxBulk)
	}
	return s.redirect(w, r, back, flash{Text: msg})
}
