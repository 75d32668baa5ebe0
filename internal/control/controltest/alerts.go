package controltest

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/alert"
	"github.com/patchline/patchline/internal/control"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/exposure"
)

// buildAlert is the build function of AddAlerts in these tests: the
// payload names the agents.
func buildAlert(now time.Time) func(c alert.Candidate, agents []alert.Agent) (*alert.Alert, error) {
	return func(c alert.Candidate, agents []alert.Agent) (*alert.Alert, error) {
		body, err := json.Marshal(alert.Payload{Event: "alert", CVEID: c.CVE.CVEID, Agents: agents})
		if err != nil {
			return nil, err
		}
		next := now
		return &alert.Alert{ID: "alt_" + c.Rule.ID + "_" + c.CVE.CVEID + "_" + agents[0].ID, RuleID: c.Rule.ID, CVEID: c.CVE.CVEID,
			Body: body, CreatedAt: now, State: alert.Pending, NextAttempt: &next}, nil
	}
}

func namedAgents(t *testing.T, a *alert.Alert) []string {
	t.Helper()
	var p alert.Payload
	if err := json.Unmarshal(a.Body, &p); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ag := range p.Agents {
		out = append(out, ag.ID)
	}
	return out
}

func testAlerts(t *testing.T, b *Backend) {
	ctx := context.Background()
	s := b.open(t)
	kev := alert.NewRule("KEV on endpoints", alert.KEV, 0, "https://hooks.example.com/patchline", "admin:ops@example.com", t0)
	epss := alert.NewRule("EPSS over 0.5", alert.EPSS, 0.5, "https://hooks.example.com/epss", "admin:ops@example.com", t0.Add(time.Second))
	for _, r := range []*alert.Rule{kev, epss} {
		wantKind(t, s.CreateAlertRule(ctx, r), nil)
	}
	wantKind(t, s.CreateAlertRule(ctx, kev), errs.ErrConflict)
	rules, err := s.FindAlertRules(ctx)
	wantKind(t, err, nil)
	if len(rules) != 2 || rules[0].ID != epss.ID || !cmp.Equal(*rules[1], *kev) {
		t.Fatalf("rules = %+v", rules)
	}
	_, err = s.FindAlertRuleByID(ctx, "alr_nope")
	wantKind(t, err, errs.ErrNotFound)

	// A CVE on two agents alerts once per rule; a third agent later is
	// named in an alert of its own; the same candidates again add nothing.
	v := exposure.FleetVulnerability{Risk: exposure.Risk{CVEID: "CVE-2024-9680", KEV: true}}
	pc1, pc2, pc3 := alert.Agent{ID: "agt_1", Hostname: "pc-1"}, alert.Agent{ID: "agt_2", Hostname: "pc-2"}, alert.Agent{ID: "agt_3", Hostname: "pc-3"}
	first, err := s.AddAlerts(ctx, []alert.Candidate{{Rule: kev, CVE: v, Agents: []alert.Agent{pc1, pc2}}, {Rule: epss, CVE: v, Agents: []alert.Agent{pc1}}}, buildAlert(t0))
	wantKind(t, err, nil)
	if len(first) != 2 || !cmp.Equal(namedAgents(t, first[0]), []string{"agt_1", "agt_2"}) || !cmp.Equal(namedAgents(t, first[1]), []string{"agt_1"}) {
		t.Fatalf("first alerts = %+v", first)
	}
	later, err := s.AddAlerts(ctx, []alert.Candidate{{Rule: kev, CVE: v, Agents: []alert.Agent{pc1, pc2, pc3}}, {Rule: epss, CVE: v, Agents: []alert.Agent{pc1}}}, buildAlert(t0.Add(time.Minute)))
	wantKind(t, err, nil)
	if len(later) != 1 || !cmp.Equal(namedAgents(t, later[0]), []string{"agt_3"}) {
		t.Fatalf("later alerts = %+v", later)
	}
	list, err := s.FindAlerts(ctx, alert.Filter{})
	wantKind(t, err, nil)
	if len(list) != 3 || list[0].ID != later[0].ID {
		t.Fatalf("alerts = %+v", list)
	}
	page, err := s.FindAlerts(ctx, alert.Filter{RuleID: kev.ID, Before: &alert.Cursor{CreatedAt: list[0].CreatedAt, ID: list[0].ID}, Limit: 5})
	wantKind(t, err, nil)
	if len(page) != 1 || page[0].RuleID != kev.ID || page[0].CreatedAt != t0 {
		t.Fatalf("the kev rule's alerts after the newest = %+v", page)
	}

	// Deliveries: due alerts are leased, attempts recorded.
	due, err := s.TakeDueAlerts(ctx, t0.Add(2*time.Minute), time.Minute, 10)
	wantKind(t, err, nil)
	if len(due) != 3 {
		t.Fatalf("%d due alerts, want 3", len(due))
	}
	again, err := s.TakeDueAlerts(ctx, t0.Add(2*time.Minute), time.Minute, 10)
	wantKind(t, err, nil)
	if len(again) != 0 {
		t.Fatalf("leased alerts taken again: %+v", again)
	}
	retry := t0.Add(10 * time.Minute)
	wantKind(t, s.RecordDelivery(ctx, due[0].ID, alert.Delivery{Attempt: 1, At: t0.Add(2 * time.Minute), Status: 503, Error: "the webhook answered 503 Service Unavailable"}, alert.Pending, &retry), nil)
	wantKind(t, s.RecordDelivery(ctx, due[0].ID, alert.Delivery{Attempt: 2, At: retry, Status: 204}, alert.Delivered, nil), nil)
	got, err := s.FindAlertByID(ctx, due[0].ID)
	wantKind(t, err, nil)
	if got.State != alert.Delivered || got.Attempts != 2 || got.NextAttempt != nil || got.DeliveredAt == nil || !got.DeliveredAt.Equal(retry) ||
		len(got.Deliveries) != 2 || got.Deliveries[0].Status != 503 || got.Deliveries[1].Status != 204 {
		t.Errorf("delivered alert = %+v", got)
	}
	_, err = s.FindAlertByID(ctx, "alt_nope")
	wantKind(t, err, errs.ErrNotFound)

	// A deleted rule forgets what it alerted of; its alerts stay.
	wantKind(t, s.DeleteAlertRule(ctx, kev.ID), nil)
	wantKind(t, s.DeleteAlertRule(ctx, kev.ID), errs.ErrNotFound)
	if list, _ := s.FindAlerts(ctx, alert.Filter{}); len(list) != 3 {
		t.Errorf("%d alerts after the rule was deleted, want 3", len(list))
	}
}

// testReplicaAlerts: two stores on one database evaluating the same
// candidates at once name each agent once between them.
func testReplicaAlerts(t *testing.T, b *Backend) {
	if b.OpenAgain == nil {
		t.Skip("the backend has no second store on one database")
	}
	ctx := context.Background()
	s1 := b.open(t)
	s2 := b.OpenAgain(t, s1)
	r := alert.NewRule("KEV", alert.KEV, 0, "https://hooks.example.com/x", "admin:ops@example.com", t0)
	wantKind(t, s1.CreateAlertRule(ctx, r), nil)
	var agents []alert.Agent
	for _, id := range []string{"agt_a", "agt_b", "agt_c", "agt_d", "agt_e"} {
		agents = append(agents, alert.Agent{ID: id, Hostname: id})
	}
	var cands []alert.Candidate
	for _, id := range []string{"CVE-2024-0001", "CVE-2024-0002", "CVE-2024-0003"} {
		cands = append(cands, alert.Candidate{Rule: r, CVE: exposure.FleetVulnerability{Risk: exposure.Risk{CVEID: id, KEV: true}}, Agents: agents})
	}
	named := map[string]int{} // CVE/agent → times named
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, s := range []control.Store{s1, s2, s1, s2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := s.AddAlerts(ctx, cands, func(c alert.Candidate, ag []alert.Agent) (*alert.Alert, error) {
				a, err := buildAlert(t0)(c, ag)
				if a != nil {
					a.ID += "_" + string(rune('0'+i))
				}
				return a, err
			})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, a := range got {
				for _, id := range namedAgents(t, a) {
					named[a.CVEID+"/"+id]++
				}
			}
		}()
	}
	wg.Wait()
	if len(named) != 15 {
		t.Errorf("%d CVE/agent pairs named, want 15: %v", len(named), named)
	}
	for k, n := range named {
		if n != 1 {
			t.Errorf("%s named %d times", k, n)
		}
	}
}
