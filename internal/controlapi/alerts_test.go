package controlapi

import (
	"net/http"
	"strings"
	"testing"
)

func TestAlertRules(t *testing.T) {
	e := newEnv(t)
	problem(t, e.do(request{method: "GET", path: "/api/alert-rules", apiKey: e.key}), http.StatusNotFound)
	e.srv.cfg.Alerts = e.store

	body := map[string]any{"name": "KEV on endpoints", "kind": "kev", "webhookUrl": "https://hooks.example.com/patchline"}
	if d := problem(t, e.do(request{method: "POST", path: "/api/alert-rules", apiKey: e.key, body: body}), http.StatusForbidden); !strings.Contains(d, "not privileged") {
		t.Errorf("a rule created with a key that is not privileged: %q", d)
	}
	rec := e.do(request{method: "POST", path: "/api/alert-rules", apiKey: e.privKey, body: body})
	created := decode[alertRuleJSON](t, rec, http.StatusCreated)
	if !strings.HasPrefix(created.Secret, "plwh_") || created.Kind != "kev" || created.CreatedBy != "key:"+e.privKeyID {
		t.Errorf("created = %+v", created)
	}
	if ev := e.lastAudit(); ev.Action != "alert_rule.created" || !strings.Contains(string(ev.Details), created.ID) {
		t.Errorf("audit = %+v", ev)
	}
	for _, tc := range []struct {
		name string
		body any
	}{
		{"epss above 1", map[string]any{"name": "x", "kind": "epss", "threshold": 2, "webhookUrl": "https://h.example.com"}},
		{"unknown kind", map[string]any{"name": "x", "kind": "moon", "webhookUrl": "https://h.example.com"}},
		{"no webhook", map[string]any{"name": "x", "kind": "kev"}},
		{"unknown field", map[string]any{"name": "x", "kind": "kev", "webhookUrl": "https://h.example.com", "secret": "mine"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problem(t, e.do(request{method: "POST", path: "/api/alert-rules", apiKey: e.privKey, body: tc.body}), http.StatusBadRequest)
		})
	}

	list := decode[listJSON[alertRuleJSON]](t, e.do(request{method: "GET", path: "/api/alert-rules", apiKey: e.key}), http.StatusOK)
	if len(list.Results) != 1 || list.Results[0].Secret != "" || list.Results[0].Description != "a CISA KEV CVE affects agents" {
		t.Errorf("rules = %+v", list.Results)
	}
	one := decode[alertRuleJSON](t, e.do(request{method: "GET", path: "/api/alert-rules/" + created.ID, apiKey: e.key}), http.StatusOK)
	if one.ID != created.ID || one.Secret != "" {
		t.Errorf("rule = %+v", one)
	}
	alerts := decode[listJSON[alertJSON]](t, e.do(request{method: "GET", path: "/api/alerts?limit=10&ruleId=" + created.ID, apiKey: e.key}), http.StatusOK)
	if len(alerts.Results) != 0 || alerts.NextCursor != nil {
		t.Errorf("alerts = %+v", alerts)
	}
	problem(t, e.do(request{method: "GET", path: "/api/alerts?cursor=nonsense", apiKey: e.key}), http.StatusBadRequest)
	problem(t, e.do(request{method: "GET", path: "/api/alerts?ruleId=alr_nope", apiKey: e.key}), http.StatusBadRequest)
	problem(t, e.do(request{method: "GET", path: "/api/alerts/alt_nope", apiKey: e.key}), http.StatusNotFound)

	problem(t, e.do(request{method: "DELETE", path: "/api/alert-rules/" + created.ID, apiKey: e.key}), http.StatusForbidden)
	if rec := e.do(request{method: "DELETE", path: "/api/alert-rules/" + created.ID, apiKey: e.privKey}); rec.Code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", rec.Code, rec.Body)
	}
	problem(t, e.do(request{method: "DELETE", path: "/api/alert-rules/" + created.ID, apiKey: e.privKey}), http.StatusNotFound)
}
