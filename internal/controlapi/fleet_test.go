package controlapi

import (
	"net/http"
	"testing"

	"github.com/patchline/patchline/internal/agentproto"
)

func TestInventoryDelta(t *testing.T) {
	e := newEnv(t)
	a := e.enroll("web-01", "linux")
	linux := agentproto.OS{Platform: "linux", Name: "Debian GNU/Linux", Version: "12", Build: "6.1.0-18-amd64"}
	v1 := agentproto.Inventory{
		Software: []agentproto.Software{
			{Name: "openssh-server", Version: "1:9.2p1-2+deb12u2", Ecosystem: "Debian:12", Arch: "amd64", Source: "openssh"},
			{Name: "bash", Version: "5.2.15-2+b2", Ecosystem: "Debian:12", Arch: "amd64"},
		},
		PendingUpdates: []agentproto.Update{{ID: "openssh-server", Title: "openssh-server 1:9.2p1-2+deb12u3"}},
	}
	v2 := v1
	v2.Software = []agentproto.Software{
		{Name: "openssh-server", Version: "1:9.2p1-2+deb12u3", Ecosystem: "Debian:12", Arch: "amd64", Source: "openssh"},
		v1.Software[1],
	}
	v2.PendingUpdates = nil
	checkIn := func(req agentproto.CheckInRequest, status int) {
		t.Helper()
		req.Hostname, req.OS, req.Capability = "web-01", linux, agentproto.CapabilityVersion
		rec := e.do(request{method: "POST", path: agentproto.PathCheckIn, bearer: a.credential, body: req})
		if status != http.StatusOK {
			problem(t, rec, status)
			return
		}
		decode[agentproto.CheckInResponse](t, rec, status)
	}
	inventory := func() agentJSON {
		t.Helper()
		return decode[agentJSON](t, e.do(request{method: "GET", path: "/api/agents/" + a.id, apiKey: e.key}), http.StatusOK)
	}

	// A delta before any full inventory has nothing to apply to.
	d := agentproto.Diff(v1, v2)
	checkIn(agentproto.CheckInRequest{InventoryDelta: &d}, http.StatusConflict)
	checkIn(agentproto.CheckInRequest{Inventory: &v1, InventoryDelta: &d}, http.StatusBadRequest)
	checkIn(agentproto.CheckInRequest{Inventory: &v1}, http.StatusOK)
	if got := inventory(); len(got.Inventory.Software) != 2 || got.Inventory.Software[0].Source != "openssh" || len(got.Inventory.PendingUpdates) != 1 {
		t.Fatalf("inventory after the full report = %+v", got.Inventory)
	}
	checkIn(agentproto.CheckInRequest{InventoryDelta: &d}, http.StatusOK)
	got := inventory()
	for _, sw := range got.Inventory.Software {
		if sw.Name == "openssh-server" && sw.Version != "1:9.2p1-2+deb12u3" {
			t.Errorf("openssh-server after the delta: %s", sw.Version)
		}
	}
	if len(got.Inventory.PendingUpdates) != 0 || got.Inventory.InstalledUpdates == nil {
		t.Errorf("inventory after the delta = %+v", got.Inventory)
	}
	// The same delta again no longer applies: its base is gone.
	checkIn(agentproto.CheckInRequest{InventoryDelta: &d}, http.StatusConflict)
	bad := agentproto.Diff(v2, v1)
	bad.Hash = "0000"
	checkIn(agentproto.CheckInRequest{InventoryDelta: &bad}, http.StatusConflict)
}

func TestRemovedAgentHeader(t *testing.T) {
	e := newEnv(t)
	a := e.enroll("old", "linux")
	rec := e.do(request{method: "DELETE", path: "/api/agents/" + a.id, apiKey: e.privKey})
	rm := decode[commandJSON](t, rec, http.StatusAccepted)
	resp := e.checkIn(a, agentproto.CheckInRequest{})
	if len(resp.Commands) != 1 || resp.Commands[0].ID != rm.ID {
		t.Fatalf("removed agent got %+v", resp.Commands)
	}
	e.report(a, rm.ID, "succeeded", "removed")
	rec = e.do(request{method: "POST", path: agentproto.PathCheckIn, bearer: a.credential,
		body: agentproto.CheckInRequest{Capability: agentproto.CapabilityVersion, Hostname: "old", OS: agentproto.OS{Platform: "linux"}}})
	problem(t, rec, http.StatusUnauthorized)
	if got := rec.Header().Get(agentproto.HeaderAgentState); got != agentproto.AgentStateRemoved {
		t.Errorf("%s = %q after the removal", agentproto.HeaderAgentState, got)
	}
	// An unknown credential gets no such header: the agent enrolls again.
	rec = e.do(request{method: "POST", path: agentproto.PathCheckIn, bearer: "agt_x.plat_nope",
		body: agentproto.CheckInRequest{Capability: agentproto.CapabilityVersion, Hostname: "old", OS: agentproto.OS{Platform: "linux"}}})
	problem(t, rec, http.StatusUnauthorized)
	if got := rec.Header().Get(agentproto.HeaderAgentState); got != "" {
		t.Errorf("%s = %q for an unknown credential", agentproto.HeaderAgentState, got)
	}
}

func TestRingRulesAPI(t *testing.T) {
	e := newEnv(t)
	lab := e.enroll("lab-01", "linux")
	win := e.enroll("fin-07", "windows")
	rec := e.do(request{method: "POST", path: "/api/rings", apiKey: e.key, body: map[string]any{"name": "pilot", "position": 10, "rule": map[string]any{"hostname": "lab-*"}}})
	if r := decode[ringJSON](t, rec, http.StatusCreated); r.Rule == nil || r.Rule.Hostname != "lab-*" {
		t.Errorf("created ring = %+v", r)
	}
	rec = e.do(request{method: "POST", path: "/api/rings", apiKey: e.key, body: map[string]any{"name": "broad", "position": 20, "rule": map[string]any{}}})
	decode[ringJSON](t, rec, http.StatusCreated)
	rec = e.do(request{method: "POST", path: "/api/rings", apiKey: e.key, body: map[string]any{"name": "bad", "position": 30, "rule": map[string]any{"os": []string{"beos"}}}})
	problem(t, rec, http.StatusBadRequest)
	rec = e.do(request{method: "POST", path: "/api/rings", apiKey: e.key, body: map[string]any{"name": "bad", "position": 30, "rule": map[string]any{"hostname": "[a-"}}})
	problem(t, rec, http.StatusBadRequest)

	ringOf := func(a agent) agentJSON {
		t.Helper()
		return decode[agentJSON](t, e.do(request{method: "GET", path: "/api/agents/" + a.id, apiKey: e.key}), http.StatusOK)
	}
	if got := ringOf(lab); got.Ring == nil || *got.Ring != "pilot" || got.RingSource != "rule" {
		t.Errorf("lab-01: ring %v source %s", got.Ring, got.RingSource)
	}
	if got := ringOf(win); got.Ring == nil || *got.Ring != "broad" {
		t.Errorf("fin-07: ring %v", got.Ring)
	}

	// Change a rule: agents move at once.
	rec = e.do(request{method: "PATCH", path: "/api/rings/pilot", apiKey: e.key, body: map[string]any{"rule": map[string]any{"os": []string{"windows"}}, "description": "Windows first"}})
	if r := decode[ringJSON](t, rec, http.StatusOK); r.Description != "Windows first" || r.Rule == nil || len(r.Rule.OS) != 1 {
		t.Errorf("patched ring = %+v", r)
	}
	if got := ringOf(win); *got.Ring != "pilot" {
		t.Errorf("fin-07 after the rule change: %v", *got.Ring)
	}
	rec = e.do(request{method: "PATCH", path: "/api/rings/pilot", apiKey: e.key, body: map[string]any{"position": 20}})
	problem(t, rec, http.StatusConflict)
	rec = e.do(request{method: "PATCH", path: "/api/rings/pilot", apiKey: e.key, body: map[string]any{"rule": map[string]any{"colour": "red"}}})
	problem(t, rec, http.StatusBadRequest)
	rec = e.do(request{method: "PATCH", path: "/api/rings/nope", apiKey: e.key, body: map[string]any{"rule": nil}})
	problem(t, rec, http.StatusNotFound)
	rec = e.do(request{method: "GET", path: "/api/rings/pilot", apiKey: e.key})
	decode[ringJSON](t, rec, http.StatusOK)

	// By hand, then back to the rules.
	rec = e.do(request{method: "PATCH", path: "/api/agents/" + win.id, apiKey: e.key, body: map[string]any{"ring": "broad"}})
	if got := decode[agentJSON](t, rec, http.StatusOK); *got.Ring != "broad" || got.RingSource != "manual" {
		t.Errorf("by hand: %v %s", *got.Ring, got.RingSource)
	}
	rec = e.do(request{method: "PATCH", path: "/api/agents/" + win.id, apiKey: e.key, body: map[string]any{"ringSource": "rule"}})
	if got := decode[agentJSON](t, rec, http.StatusOK); *got.Ring != "pilot" || got.RingSource != "rule" {
		t.Errorf("back to the rules: %v %s", *got.Ring, got.RingSource)
	}
	if entry := e.lastAudit(); entry.Action != "agent.ring_changed" {
		t.Errorf("audit of the ring change = %+v", entry)
	}
	for _, body := range []map[string]any{{"ringSource": "manual"}, {"ring": "broad", "ringSource": "rule"}, {}} {
		rec = e.do(request{method: "PATCH", path: "/api/agents/" + win.id, apiKey: e.key, body: body})
		problem(t, rec, http.StatusBadRequest)
	}
}

func TestPolicyComplianceAPI(t *testing.T) {
	e := newEnv(t)
	rec := e.do(request{method: "POST", path: "/api/policies", apiKey: e.key, body: map[string]any{"name": "patching", "settings": map[string]any{"maxPendingUpdates": 3}}})
	pol := decode[policyJSON](t, rec, http.StatusCreated)
	yes, no := true, false
	reports := map[string]*bool{"a-ok": &yes, "b-bad": &no, "c-unknown": nil}
	for host, compliant := range reports {
		a := e.enroll(host, "linux")
		e.checkIn(a, agentproto.CheckInRequest{Hostname: host, OS: agentproto.OS{Platform: "linux", Name: "Debian GNU/Linux", Version: "12"},
			AppliedPolicies: []agentproto.AppliedPolicy{{PolicyID: pol.ID, Version: 1, Compliant: compliant, Message: "checked"}}})
	}
	rec = e.do(request{method: "GET", path: "/api/policies/" + pol.ID, apiKey: e.key})
	got := decode[policyJSON](t, rec, http.StatusOK)
	if want := (complianceJSON{Compliant: 1, Noncompliant: 1, Unknown: 1}); got.Compliance != want {
		t.Errorf("compliance = %+v, want %+v", got.Compliance, want)
	}
	rec = e.do(request{method: "GET", path: "/api/policies", apiKey: e.key})
	if list := decode[listJSON[policyJSON]](t, rec, http.StatusOK); len(list.Results) != 1 || list.Results[0].Compliance.Compliant != 1 {
		t.Errorf("policies = %+v", list)
	}

	var seen []string
	cursor := ""
	for {
		path := "/api/policies/" + pol.ID + "/agents?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		page := decode[listJSON[policyAgentJSON]](t, e.do(request{method: "GET", path: path, apiKey: e.key}), http.StatusOK)
		for _, pa := range page.Results {
			seen = append(seen, pa.Hostname+":"+pa.State)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	if len(seen) != 3 || seen[0] != "a-ok:compliant" || seen[1] != "b-bad:noncompliant" || seen[2] != "c-unknown:unknown" {
		t.Errorf("policy agents = %v", seen)
	}
	rec = e.do(request{method: "GET", path: "/api/policies/" + pol.ID + "/agents?state=noncompliant", apiKey: e.key})
	if page := decode[listJSON[policyAgentJSON]](t, rec, http.StatusOK); len(page.Results) != 1 || page.Results[0].Compliant == nil || *page.Results[0].Compliant {
		t.Errorf("noncompliant agents = %+v", page)
	}
	rec = e.do(request{method: "GET", path: "/api/policies/" + pol.ID + "/agents?state=sideways", apiKey: e.key})
	problem(t, rec, http.StatusBadRequest)
	rec = e.do(request{method: "GET", path: "/api/policies/pol_unknown/agents", apiKey: e.key})
	problem(t, rec, http.StatusNotFound)

	// Per agent, the same report.
	rec = e.do(request{method: "GET", path: "/api/agents?q=b-bad", apiKey: e.key})
	agents := decode[listJSON[agentJSON]](t, rec, http.StatusOK)
	if len(agents.Results) != 1 || len(agents.Results[0].AppliedPolicies) != 1 || agents.Results[0].AppliedPolicies[0].Compliant == nil || *agents.Results[0].AppliedPolicies[0].Compliant {
		t.Errorf("agent b-bad = %+v", agents.Results)
	}
}
