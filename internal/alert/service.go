package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/exposure"
)

// Service evaluates the rules against the exposure of the fleet and
// delivers the alerts. Several replicas may run it on one store: the
// store names each agent once per rule and CVE, and leases each delivery
// to one replica.
type Service struct {
	Alerts   Store
	Exposure exposure.Store
	// Catalog gives the KEV due dates of kev-due rules.
	Catalog exposure.RecordReader
	HTTP    *http.Client
	Logger  *slog.Logger
	Now     func() time.Time
	// Every is the period of evaluation and delivery; FullEvery that of
	// an evaluation of every CVE, not only of those whose exposure
	// changed since the last one.
	Every, FullEvery time.Duration

	last     map[string]signature // by CVE, at the last evaluation
	rules    string               // ids of the rules at the last evaluation
	lastFull time.Time
}

// signature is what an evaluation remembers of a CVE of the fleet.
type signature struct {
	affected   int
	kev        bool
	epss, cvss float64
}

func sigOf(v exposure.FleetVulnerability) signature {
	s := signature{affected: v.Affected, kev: v.KEV, epss: -1, cvss: -1}
	if v.EPSS != nil {
		s.epss = *v.EPSS
	}
	if v.CVSS != nil {
		s.cvss = *v.CVSS
	}
	return s
}

// NewService returns a service with the default periods: 5 seconds, and
// a full evaluation every 5 minutes.
func NewService(alerts Store, exp exposure.Store, cat exposure.RecordReader, logger *slog.Logger) *Service {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Service{Alerts: alerts, Exposure: exp, Catalog: cat, Logger: logger, Now: time.Now,
		HTTP: &http.Client{Timeout: 10 * time.Second}, Every: 5 * time.Second, FullEvery: 5 * time.Minute}
}

// Run evaluates and delivers every s.Every until ctx is done.
func (s *Service) Run(ctx context.Context) {
	t := time.NewTicker(s.Every)
	defer t.Stop()
	for {
		if _, err := s.Evaluate(ctx); err != nil && ctx.Err() == nil {
			s.Logger.Warn("alerts: evaluate", "err", err)
		}
		if _, err := s.Deliver(ctx); err != nil && ctx.Err() == nil {
			s.Logger.Warn("alerts: deliver", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Evaluate matches the rules against the CVEs that affect the fleet and
// stores an alert for each CVE that meets a rule on agents the rule has
// not named for it before. Between full evaluations it looks only at the
// CVEs whose affected count or scores changed. It returns the new alerts.
func (s *Service) Evaluate(ctx context.Context) ([]*Alert, error) {
	rules, err := s.Alerts.FindAlertRules(ctx)
	if err != nil || len(rules) == 0 {
		s.last = nil
		return nil, err
	}
	now := s.Now()
	ids := ""
	for _, r := range rules {
		ids += r.ID + ","
	}
	full := s.last == nil || ids != s.rules || now.Sub(s.lastFull) >= s.FullEvery
	vulns, err := s.Exposure.FleetVulnerabilities(ctx, exposure.FleetFilter{})
	if err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	next := make(map[string]signature, len(vulns))
	var candidates []Candidate
	agents := map[string][]Agent{} // by CVE, read once per evaluation
	dues := map[string]string{}    // KEV due dates by CVE, likewise
	dueOf := func(v exposure.FleetVulnerability) string {
		if !v.KEV || s.Catalog == nil {
			return ""
		}
		due, ok := dues[v.CVEID]
		if !ok {
			if rec, err := s.Catalog.Record(ctx, v.CVEID); err == nil && rec.KEV != nil {
				due = rec.KEV.DueDate
			}
			dues[v.CVEID] = due
		}
		return due
	}
	for _, v := range vulns {
		sig := sigOf(v)
		next[v.CVEID] = sig
		if old, ok := s.last[v.CVEID]; !full && ok && old == sig {
			continue
		}
		for _, r := range rules {
			if !meets(r, v, dueOf, now) {
				continue
			}
			list, read := agents[v.CVEID]
			if !read {
				found, err := s.Exposure.VulnerabilityAgents(ctx, exposure.AgentFilter{CVEID: v.CVEID, Status: exposure.Affected})
				if err != nil {
					return nil, fmt.Errorf("alerts: agents of %s: %w", v.CVEID, err)
				}
				for _, a := range found {
					list = append(list, Agent{ID: a.AgentID, Hostname: a.Hostname})
				}
				agents[v.CVEID] = list
			}
			if len(list) > 0 {
				candidates = append(candidates, Candidate{Rule: r, CVE: v, Due: dueOf(v), Agents: list})
			}
		}
	}
	created, err := s.Alerts.AddAlerts(ctx, candidates, func(c Candidate, named []Agent) (*Alert, error) {
		return newAlert(c, named, now)
	})
	if err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	s.last, s.rules = next, ids
	if full {
		s.lastFull = now
	}
	for _, a := range created {
		s.Logger.Info("alert", "alert", a.ID, "rule", a.RuleID, "cve", a.CVEID)
	}
	return created, nil
}

// meets reports whether CVE v meets rule r; dueOf gives the KEV due date
// of a CVE ("" when none).
func meets(r *Rule, v exposure.FleetVulnerability, dueOf func(exposure.FleetVulnerability) string, now time.Time) bool {
	switch r.Kind {
	case KEV:
		return v.KEV
	case EPSS:
		return v.EPSS != nil && *v.EPSS >= r.Threshold
	case CVSS:
		return v.CVSS != nil && *v.CVSS >= r.Threshold
	case KEVDue:
		due, err := time.Parse(time.DateOnly, dueOf(v))
		return err == nil && !due.After(now.UTC().AddDate(0, 0, int(r.Threshold)))
	}
	return false
}

// newAlert returns the alert of a candidate naming agents.
func newAlert(c Candidate, agents []Agent, now time.Time) (*Alert, error) {
	a := &Alert{ID: device.NewID(AlertIDPrefix), RuleID: c.Rule.ID, CVEID: c.CVE.CVEID, CreatedAt: now, State: Pending}
	next := now
	a.NextAttempt = &next
	fixes := c.CVE.Fixes
	if fixes == nil {
		fixes = []Fix{}
	}
	p := Payload{Event: "alert", AlertID: a.ID, CVEID: c.CVE.CVEID, KEV: c.CVE.KEV, DueDate: c.Due, EPSS: c.CVE.EPSS, CVSS: c.CVE.CVSS,
		Severity: c.CVE.Severity, Agents: agents, Fixes: fixes, CreatedAt: now.UTC(),
		Rule: RuleRef{ID: c.Rule.ID, Name: c.Rule.Name, Kind: c.Rule.Kind, Description: c.Rule.Describe()}}
	body, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	a.Body = body
	return a, nil
}

// Deliver sends the alerts that are due, each to its rule's webhook, and
// returns how many the webhooks accepted.
func (s *Service) Deliver(ctx context.Context) (int, error) {
	delivered := 0
	for {
		due, err := s.Alerts.TakeDueAlerts(ctx, s.Now(), 2*time.Minute, 20)
		if err != nil || len(due) == 0 {
			return delivered, err
		}
		for _, a := range due {
			ok, err := s.deliver(ctx, a)
			if err != nil {
				return delivered, err
			}
			if ok {
				delivered++
			}
		}
	}
}

// deliver sends one alert and records the attempt.
func (s *Service) deliver(ctx context.Context, a *Alert) (bool, error) {
	r, err := s.Alerts.FindAlertRuleByID(ctx, a.RuleID)
	now := s.Now()
	d := Delivery{Attempt: a.Attempts + 1, At: now}
	if err != nil {
		// The rule was deleted: its pending alerts go nowhere.
		d.Error = "the rule was deleted"
		return false, s.Alerts.RecordDelivery(ctx, a.ID, d, Failed, nil)
	}
	d.Status, d.Error = s.post(ctx, r, a, now)
	state, next := Delivered, (*time.Time)(nil)
	switch {
	case d.Status >= 200 && d.Status < 300:
	case d.Attempt >= MaxAttempts:
		state = Failed
	default:
		state = Pending
		t := now.Add(Backoff(d.Attempt))
		next = &t
	}
	if state != Delivered {
		s.Logger.Warn("alerts: webhook refused the alert", "alert", a.ID, "rule", r.ID, "attempt", d.Attempt, "status", d.Status, "err", d.Error, "state", state)
	}
	return state == Delivered, s.Alerts.RecordDelivery(ctx, a.ID, d, state, next)
}

// post sends the alert's body to the rule's webhook, signed, and returns
// the status of the answer, or why there was none.
func (s *Service) post(ctx context.Context, r *Rule, a *Alert, now time.Time) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.WebhookURL, bytes.NewReader(a.Body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Patchline-Webhook/1")
	req.Header.Set(HeaderAlertID, a.ID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(HeaderSignature, Sign(r.Secret, now, a.Body))
	resp, err := s.HTTP.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, "the webhook answered " + resp.Status
	}
	return resp.StatusCode, ""
}
