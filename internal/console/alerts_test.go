package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/patchline/patchline/internal/alert"
	"github.com/patchline/patchline/internal/exposure"
)

func TestAlertsPages(t *testing.T) {
	e := newEnv(t)
	e.mustAdmin()
	b := e.browser()
	b.signIn()
	wantStatus(t, "alerts without a store", b.get("/settings/alerts"), http.StatusNotFound)
	e.reconfigure(func(c *Config) { c.Alerts = e.store })
	b = e.browser()
	b.signIn()

	r := b.get("/settings/alerts")
	wantStatus(t, "alerts", r, http.StatusOK)
	if !strings.Contains(r.Body, "No alert rule yet.") || !strings.Contains(r.Body, `aria-current="page">Settings › Alerts`) {
		t.Errorf("alerts page:\n%s", r.Body)
	}
	// A rule asks for the password first; a bad threshold is named.
	r = b.post("/settings/alerts", url.Values{"name": {"KEV on endpoints"}, "kind": {"kev"}, "webhookUrl": {"https://hooks.example.com/p"}})
	if !strings.Contains(r.Body, "reauth_password") {
		t.Fatalf("creating a rule without a fresh sign-in:\n%s", r.Body)
	}
	r = b.post("/settings/alerts", url.Values{"name": {"EPSS"}, "kind": {"epss"}, "threshold": {"7"}, "webhookUrl": {"https://hooks.example.com/p"}, "reauth_password": {testPassword}})
	wantStatus(t, "a bad threshold", r, http.StatusUnprocessableEntity)
	if !strings.Contains(r.Body, "at most 1") || !strings.Contains(r.Body, `id="rule-threshold-err"`) || !strings.Contains(r.Body, `class="field-error"`) {
		t.Errorf("a bad threshold:\n%s", r.Body)
	}
	r = b.post("/settings/alerts", url.Values{"name": {"KEV on endpoints"}, "kind": {"kev"}, "webhookUrl": {"https://hooks.example.com/p"}, "reauth_password": {testPassword}})
	wantStatus(t, "create a rule", r, http.StatusOK)
	rules, err := e.store.FindAlertRules(context.Background())
	if err != nil || len(rules) != 1 {
		t.Fatalf("rules: %v %v", rules, err)
	}
	if !strings.Contains(r.Body, rules[0].Secret) || !strings.Contains(r.Body, "shown only this once") || !strings.Contains(r.Body, "a CISA KEV CVE affects agents") {
		t.Errorf("the created rule's page:\n%s", r.Body)
	}
	if ev := e.lastAudit("alert_rule.created"); ev.Actor != "admin:"+testEmail || !strings.Contains(string(ev.Details), rules[0].ID) {
		t.Errorf("audit = %+v", ev)
	}
	if strings.Contains(b.get("/settings/alerts").Body, rules[0].Secret) {
		t.Error("the secret is shown again")
	}

	// An alert of the rule, as the service stores it, with a failed
	// delivery.
	payload := alert.Payload{Event: "alert", Rule: alert.RuleRef{ID: rules[0].ID, Name: rules[0].Name, Kind: alert.KEV, Description: rules[0].Describe()},
		CVEID: "CVE-2023-38831", KEV: true, DueDate: "2023-09-14", Agents: []alert.Agent{{ID: "agt_1", Hostname: "<pc-1>"}},
		Fixes: []alert.Fix{{Ecosystem: "Desktop", Product: "rarlab:winrar", Version: "6.23"}}}
	created, err := e.store.AddAlerts(context.Background(), []alert.Candidate{{Rule: rules[0], CVE: exposure.FleetVulnerability{Risk: exposure.Risk{CVEID: "CVE-2023-38831", KEV: true}}, Agents: payload.Agents}},
		func(c alert.Candidate, agents []alert.Agent) (*alert.Alert, error) {
			body, _ := json.Marshal(payload)
			now := e.clock.Now()
			return &alert.Alert{ID: "alt_test", RuleID: c.Rule.ID, CVEID: c.CVE.CVEID, Body: body, CreatedAt: now, State: alert.Pending, NextAttempt: &now}, nil
		})
	if err != nil || len(created) != 1 {
		t.Fatalf("add alert: %v %v", created, err)
	}
	next := e.clock.Now().Add(alert.Backoff(1))
	if err := e.store.RecordDelivery(context.Background(), "alt_test", alert.Delivery{Attempt: 1, At: e.clock.Now(), Status: 502, Error: "the webhook answered 502 Bad Gateway"}, alert.Pending, &next); err != nil {
		t.Fatal(err)
	}
	r = b.get("/settings/alerts")
	for _, want := range []string{`href="/alerts/alt_test"`, "CVE-2023-38831", "rarlab:winrar 6.23", "pending</span> 1 attempt"} {
		if !strings.Contains(r.Body, want) {
			t.Errorf("alerts page lacks %q:\n%s", want, r.Body)
		}
	}
	r = b.get("/alerts/alt_test")
	wantStatus(t, "alert", r, http.StatusOK)
	for _, want := range []string{"&lt;pc-1&gt;", "due 2023-09-14", "502", "the webhook answered 502 Bad Gateway"} {
		if !strings.Contains(r.Body, want) {
			t.Errorf("alert page lacks %q:\n%s", want, r.Body)
		}
	}
	wantStatus(t, "an unknown alert", b.get("/alerts/alt_nope"), http.StatusNotFound)

	wantRedirect(t, "delete", b.post("/settings/alerts/"+rules[0].ID+"/delete", url.Values{"reauth_password": {testPassword}}), "/settings/alerts")
	if rules, _ := e.store.FindAlertRules(context.Background()); len(rules) != 0 {
		t.Errorf("rules after the delete: %v", rules)
	}
	if !strings.Contains(b.get("/alerts/alt_test").Body, "— deleted") {
		t.Error("the alert of a deleted rule does not say so")
	}
}
