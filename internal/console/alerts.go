package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/patchline/patchline/internal/alert"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/errs"
)

// alertsPageSize is the number of alerts on the alerts page.
const alertsPageSize = 50

type alertsData struct {
	Rules  []*alert.Rule
	Alerts []alertRow
	Kinds  []alert.Kind
	Form   alertRuleForm
	Errors map[string]string
	// Created is the rule just created, whose secret is shown this once.
	Created *alert.Rule
}

type alertRuleForm struct {
	Name, Kind, Threshold, WebhookURL string
}

// alertRow is an alert as the page lists it: the alert and its payload.
type alertRow struct {
	*alert.Alert
	Payload alert.Payload
}

func (s *Server) alertStore() (alert.Store, error) {
	if s.cfg.Alerts == nil {
		return nil, errs.NotFoundf("Alerts are not available on this server.")
	}
	return s.cfg.Alerts, nil
}

// alertsPage is Settings › Alerts: the rules, a form for a new one, and
// the latest alerts with where their delivery stands.
func (s *Server) alertsPage(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	return s.renderAlerts(w, r, c, http.StatusOK, alertsData{Form: alertRuleForm{Kind: string(alert.KEV)}})
}

func (s *Server) renderAlerts(w http.ResponseWriter, r *http.Request, c *reqCtx, status int, d alertsData) error {
	st, err := s.alertStore()
	if err != nil {
		return err
	}
	if d.Rules, err = st.FindAlertRules(r.Context()); err != nil {
		return err
	}
	list, err := st.FindAlerts(r.Context(), alert.Filter{Limit: alertsPageSize})
	if err != nil {
		return err
	}
	for _, a := range list {
		d.Alerts = append(d.Alerts, toAlertRow(a))
	}
	d.Kinds = alert.Kinds
	return s.render(w, c, status, "alerts", page{Title: "Alerts", Section: "alerts", Data: d})
}

func toAlertRow(a *alert.Alert) alertRow {
	row := alertRow{Alert: a}
	json.Unmarshal(a.Body, &row.Payload) // written by alert.Service
	return row
}

// createAlertRule creates a rule from the form. It needs a fresh
// re-authentication: a rule sends what it finds about the fleet to an
// address outside Patchline.
func (s *Server) createAlertRule(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	st, err := s.alertStore()
	if err != nil {
		return err
	}
	f := r.PostForm
	form := alertRuleForm{Name: f.Get("name"), Kind: f.Get("kind"), Threshold: strings.TrimSpace(f.Get("threshold")), WebhookURL: strings.TrimSpace(f.Get("webhookUrl"))}
	threshold := 0.0
	if form.Threshold != "" {
		if threshold, err = strconv.ParseFloat(form.Threshold, 64); err != nil {
			return s.renderAlerts(w, r, c, http.StatusUnprocessableEntity, alertsData{Form: form, Errors: map[string]string{"threshold": "Enter a number."}})
		}
	}
	rule := alert.NewRule(form.Name, alert.Kind(form.Kind), threshold, form.WebhookURL, c.sess.AdminEmail, c.now)
	if err := rule.Validate(); errors.Is(err, errs.ErrInvalid) {
		field := "name"
		switch msg := errs.Message(err); {
		case strings.Contains(msg, "threshold"), strings.Contains(msg, "days"):
			field = "threshold"
		case strings.Contains(msg, "webhookUrl"):
			field = "webhookUrl"
		case strings.Contains(msg, "kind"):
			field = "kind"
		}
		return s.renderAlerts(w, r, c, http.StatusUnprocessableEntity, alertsData{Form: form, Errors: map[string]string{field: sentence(errs.Message(err))}})
	} else if err != nil {
		return err
	}
	if err := st.CreateAlertRule(r.Context(), rule); err != nil {
		return err
	}
	if err := s.record(r, c, http.StatusOK, audit.AlertRuleCreated{RuleID: rule.ID, Name: rule.Name, Kind: string(rule.Kind), Threshold: rule.Threshold, WebhookURL: rule.WebhookURL}); err != nil {
		return err
	}
	return s.renderAlerts(w, r, c, http.StatusOK, alertsData{Form: alertRuleForm{Kind: string(alert.KEV)}, Created: rule})
}

// deleteAlertRule deletes a rule; its alerts stay in the list.
func (s *Server) deleteAlertRule(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	st, err := s.alertStore()
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	rule, err := st.FindAlertRuleByID(r.Context(), id)
	if err != nil {
		return err
	}
	if err := st.DeleteAlertRule(r.Context(), id); err != nil {
		return err
	}
	if err := s.record(r, c, http.StatusSeeOther, audit.AlertRuleDeleted{RuleID: id}); err != nil {
		return err
	}
	return s.redirect(w, r, "/settings/alerts", flash{Text: "Deleted the alert rule “" + rule.Name + "”."})
}

type alertData struct {
	alertRow
	Rule *alert.Rule // nil once deleted
}

// alertPage shows one alert: what it names and every delivery attempt.
func (s *Server) alertPage(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	st, err := s.alertStore()
	if err != nil {
		return err
	}
	a, err := st.FindAlertByID(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	d := alertData{alertRow: toAlertRow(a)}
	if rule, err := st.FindAlertRuleByID(r.Context(), a.RuleID); err == nil {
		d.Rule = rule
	} else if !errors.Is(err, errs.ErrNotFound) {
		return err
	}
	return s.render(w, c, http.StatusOK, "alert", page{Title: "Alert " + a.ID, Section: "alerts", Data: d})
}
