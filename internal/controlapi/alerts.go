package controlapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/patchline/patchline/internal/alert"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/httpx"
)

// alertRuleJSON is a rule as the API shows it; the secret only in the
// answer that created it.
type alertRuleJSON struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	Kind        string  `json:"kind"`
	Threshold   float64 `json:"threshold"`
	Description string  `json:"description"`
	WebhookURL  string  `json:"webhookUrl"`
	Secret      string  `json:"secret,omitempty"`
	CreatedBy   string  `json:"createdBy"`
	CreatedAt   string  `json:"createdAt"`
}

func toAlertRuleJSON(r *alert.Rule) alertRuleJSON {
	return alertRuleJSON{ID: r.ID, Name: r.Name, Kind: string(r.Kind), Threshold: r.Threshold, Description: r.Describe(),
		WebhookURL: r.WebhookURL, CreatedBy: r.CreatedBy, CreatedAt: formatTime(r.CreatedAt)}
}

// alertJSON is an alert with the payload its webhook receives.
type alertJSON struct {
	ID            string          `json:"id"`
	RuleID        string          `json:"ruleId"`
	CVEID         string          `json:"cveId"`
	State         string          `json:"state"`
	Attempts      int             `json:"attempts"`
	CreatedAt     string          `json:"createdAt"`
	NextAttemptAt *string         `json:"nextAttemptAt"`
	DeliveredAt   *string         `json:"deliveredAt"`
	Payload       json.RawMessage `json:"payload"`
	Deliveries    []deliveryJSON  `json:"deliveries,omitempty"`
}

type deliveryJSON struct {
	Attempt int    `json:"attempt"`
	At      string `json:"at"`
	Status  int    `json:"status"`
	Error   string `json:"error,omitempty"`
}

func toAlertJSON(a *alert.Alert) alertJSON {
	out := alertJSON{ID: a.ID, RuleID: a.RuleID, CVEID: a.CVEID, State: string(a.State), Attempts: a.Attempts,
		CreatedAt: formatTime(a.CreatedAt), NextAttemptAt: formatTimePtr(a.NextAttempt), DeliveredAt: formatTimePtr(a.DeliveredAt),
		Payload: json.RawMessage(a.Body)}
	for _, d := range a.Deliveries {
		out.Deliveries = append(out.Deliveries, deliveryJSON{Attempt: d.Attempt, At: formatTime(d.At), Status: d.Status, Error: d.Error})
	}
	return out
}

func (s *Server) alertStore() (alert.Store, error) {
	if s.cfg.Alerts == nil {
		return nil, errs.NotFoundf("alerts are not available on this server")
	}
	return s.cfg.Alerts, nil
}

func (s *Server) listAlertRules(w http.ResponseWriter, r *http.Request) error {
	st, err := s.alertStore()
	if err != nil {
		return err
	}
	if _, err := parseQuery(r); err != nil {
		return err
	}
	rules, err := st.FindAlertRules(r.Context())
	if err != nil {
		return err
	}
	out := make([]alertRuleJSON, 0, len(rules))
	for _, rl := range rules {
		out = append(out, toAlertRuleJSON(rl))
	}
	return httpx.WriteJSON(w, http.StatusOK, newList(out, ""))
}

func (s *Server) createAlertRule(w http.ResponseWriter, r *http.Request) error {
	st, err := s.alertStore()
	if err != nil {
		return err
	}
	var body struct {
		Name       string  `json:"name"`
		Kind       string  `json:"kind"`
		Threshold  float64 `json:"threshold"`
		WebhookURL string  `json:"webhookUrl"`
	}
	if err := httpx.DecodeJSON(w, r, maxBody, &body); err != nil {
		return err
	}
	rl := alert.NewRule(body.Name, alert.Kind(body.Kind), body.Threshold, body.WebhookURL, actor(r), s.now().UTC())
	if err := rl.Validate(); err != nil {
		return err
	}
	if err := st.CreateAlertRule(r.Context(), rl); err != nil {
		return err
	}
	setEvent(r, audit.AlertRuleCreated{RuleID: rl.ID, Name: rl.Name, Kind: string(rl.Kind), Threshold: rl.Threshold, WebhookURL: rl.WebhookURL})
	out := toAlertRuleJSON(rl)
	out.Secret = rl.Secret
	return httpx.WriteJSON(w, http.StatusCreated, out)
}

func (s *Server) getAlertRule(w http.ResponseWriter, r *http.Request) error {
	st, err := s.alertStore()
	if err != nil {
		return err
	}
	rl, err := st.FindAlertRuleByID(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, toAlertRuleJSON(rl))
}

func (s *Server) deleteAlertRule(w http.ResponseWriter, r *http.Request) error {
	st, err := s.alertStore()
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if err := st.DeleteAlertRule(r.Context(), id); err != nil {
		return err
	}
	setEvent(r, audit.AlertRuleDeleted{RuleID: id})
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listAlerts(w http.ResponseWriter, r *http.Request) error {
	st, err := s.alertStore()
	if err != nil {
		return err
	}
	q, err := parseQuery(r, "limit", "cursor", "ruleId")
	if err != nil {
		return err
	}
	limit, err := q.limit()
	if err != nil {
		return err
	}
	f := alert.Filter{RuleID: q.get("ruleId"), Limit: limit + 1}
	if f.RuleID != "" && !alert.ValidRuleID(f.RuleID) {
		return errs.Invalidf("ruleId %q is not an alert rule id", f.RuleID)
	}
	fp := fingerprint("alerts", f.RuleID)
	var at int64
	var id string
	if ok, err := decodeCursor(q, fp, &at, &id); err != nil {
		return err
	} else if ok {
		f.Before = &alert.Cursor{CreatedAt: time.UnixMilli(at).UTC(), ID: id}
	}
	list, err := st.FindAlerts(r.Context(), f)
	if err != nil {
		return err
	}
	next := ""
	if len(list) > limit {
		list = list[:limit]
		last := list[limit-1]
		next = encodeCursor(fp, last.CreatedAt.UnixMilli(), last.ID)
	}
	out := make([]alertJSON, 0, len(list))
	for _, a := range list {
		out = append(out, toAlertJSON(a))
	}
	return httpx.WriteJSON(w, http.StatusOK, newList(out, next))
}

func (s *Server) getAlert(w http.ResponseWriter, r *http.Request) error {
	st, err := s.alertStore()
	if err != nil {
		return err
	}
	a, err := st.FindAlertByID(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, toAlertJSON(a))
}
