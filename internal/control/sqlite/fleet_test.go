package sqlite

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
)

func TestRingRules(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.s
	lab := f.enroll("lab-01", "linux", "")
	win := f.enroll("fin-win-07", "windows", "")
	pinned := f.enroll("lab-02", "linux", "")
	if _, err := s.SetAgentRing(ctx, pinned.ID, ""); err != nil {
		t.Fatal(err)
	}
	ring := func(id string) (string, string) {
		t.Helper()
		a, err := s.FindAgentByID(ctx, id)
		wantKind(t, err, nil)
		return a.Ring, a.RingSource
	}
	if r, src := ring(lab.ID); r != "" || src != device.RingSourceRule {
		t.Errorf("before any rule: ring %q, source %q", r, src)
	}

	// A new rule applies at once to the agents that follow the rules,
	// never to one placed by hand.
	wantKind(t, s.CreateRing(ctx, &device.Ring{Name: "pilot", Position: 10, Rule: &device.RingRule{Hostname: "LAB-*"}, CreatedAt: t0}), nil)
	wantKind(t, s.CreateRing(ctx, &device.Ring{Name: "broad", Position: 20, Rule: &device.RingRule{}, CreatedAt: t0}), nil)
	wantKind(t, s.CreateRing(ctx, &device.Ring{Name: "manual", Position: 30, CreatedAt: t0}), nil)
	tests := []struct {
		id, ring, source string
	}{
		{lab.ID, "pilot", device.RingSourceRule},
		{win.ID, "broad", device.RingSourceRule},
		{pinned.ID, "", device.RingSourceManual},
	}
	for _, tt := range tests {
		if r, src := ring(tt.id); r != tt.ring || src != tt.source {
			t.Errorf("agent %s: ring %q (%s), want %q (%s)", tt.id, r, src, tt.ring, tt.source)
		}
	}
	rings, err := s.FindRings(ctx)
	wantKind(t, err, nil)
	if rings[0].Rule == nil || rings[0].Rule.Hostname != "LAB-*" || rings[2].Rule != nil {
		t.Errorf("rules read back: %+v %+v", rings[0].Rule, rings[2].Rule)
	}

	// Enrollment and check-ins follow the rules.
	newcomer := f.enroll("lab-03", "macos", "")
	if r, _ := ring(newcomer.ID); r != "pilot" {
		t.Errorf("enrolled lab-03 in %q", r)
	}
	if _, err := s.CheckIn(ctx, newcomer.ID, device.CheckIn{Time: t0.Add(time.Minute), Hostname: "studio-03", OS: newcomer.OS}); err != nil {
		t.Fatal(err)
	}
	if r, _ := ring(newcomer.ID); r != "broad" {
		t.Errorf("after a rename, lab-03 is in %q", r)
	}

	// Changing a rule moves agents; so does handing one back to the rules.
	pilot, err := s.FindRingByName(ctx, "pilot")
	wantKind(t, err, nil)
	pilot.Rule = &device.RingRule{OS: []string{"windows"}}
	wantKind(t, s.UpdateRing(ctx, pilot), nil)
	if r, _ := ring(win.ID); r != "pilot" {
		t.Errorf("after the rule change, the windows agent is in %q", r)
	}
	if r, _ := ring(lab.ID); r != "broad" {
		t.Errorf("after the rule change, lab-01 is in %q", r)
	}
	pilot.Position = 20
	wantKind(t, s.UpdateRing(ctx, pilot), errs.ErrConflict)
	wantKind(t, s.UpdateRing(ctx, &device.Ring{Name: "nope", Position: 99}), errs.ErrNotFound)
	a, err := s.SetAgentRingByRule(ctx, pinned.ID)
	wantKind(t, err, nil)
	if a.Ring != "broad" || a.RingSource != device.RingSourceRule {
		t.Errorf("back to the rules: %q %q", a.Ring, a.RingSource)
	}
	if _, err := s.SetAgentRing(ctx, lab.ID, "manual"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CheckIn(ctx, lab.ID, device.CheckIn{Time: t0.Add(time.Minute), Hostname: "lab-01", OS: lab.OS}); err != nil {
		t.Fatal(err)
	}
	if r, src := ring(lab.ID); r != "manual" || src != device.RingSourceManual {
		t.Errorf("a ring set by hand changed at check-in: %q %q", r, src)
	}
	_, err = s.SetAgentRingByRule(ctx, "agt_nope")
	wantKind(t, err, errs.ErrNotFound)
}

func TestInventoryBase(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.s
	a := f.enroll("web-01", "linux", "")
	v1 := &device.Inventory{Software: []device.Software{{Name: "bash", Version: "5.2", Ecosystem: "Debian:12", Arch: "amd64", Source: "bash"}}, PendingUpdates: []device.Update{}}
	v2 := &device.Inventory{Software: []device.Software{{Name: "bash", Version: "5.3", Ecosystem: "Debian:12", Arch: "amd64", Source: "bash"}}, PendingUpdates: []device.Update{}}
	checkIn := func(inv *device.Inventory, hash, base string) error {
		_, err := s.CheckIn(ctx, a.ID, device.CheckIn{Time: t0.Add(time.Minute), Hostname: "web-01", OS: a.OS,
			Inventory: inv, InventoryHash: hash, InventoryBase: base})
		return err
	}
	wantKind(t, checkIn(v1, "h1", ""), nil)
	wantKind(t, checkIn(nil, "", ""), nil)
	wantKind(t, checkIn(v2, "h2", "h0"), errs.ErrConflict)
	got, _ := s.FindAgentByID(ctx, a.ID)
	if got.InventoryHash != "h1" || got.Inventory.Software[0].Version != "5.2" {
		t.Errorf("a refused delta changed the inventory: %s %+v", got.InventoryHash, got.Inventory)
	}
	wantKind(t, checkIn(v2, "h2", "h1"), nil)
	got, _ = s.FindAgentByID(ctx, a.ID)
	if diff := cmp.Diff(*v2, got.Inventory); diff != "" || got.InventoryHash != "h2" {
		t.Errorf("inventory after the delta, hash %s (-want +got):\n%s", got.InventoryHash, diff)
	}
}

func TestPolicyCompliance(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.s
	p := &device.Policy{ID: device.NewID(device.PolicyIDPrefix), Name: "patching", Settings: json.RawMessage(`{"maxPendingUpdates":5}`), CreatedBy: "x", CreatedAt: t0, UpdatedAt: t0}
	wantKind(t, s.CreatePolicy(ctx, p), nil)
	other := &device.Policy{ID: device.NewID(device.PolicyIDPrefix), Name: "other", Settings: json.RawMessage(`{}`), CreatedBy: "x", CreatedAt: t0, UpdatedAt: t0}
	wantKind(t, s.CreatePolicy(ctx, other), nil)
	if _, err := s.UpdatePolicy(ctx, p.ID, json.RawMessage(`{"maxPendingUpdates":3}`), "x", t0); err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	reports := []struct {
		host    string
		applied []device.AppliedPolicy
	}{
		{"a-compliant", []device.AppliedPolicy{{PolicyID: p.ID, Version: 2, Compliant: &yes}, {PolicyID: other.ID, Version: 1}}},
		{"b-noncompliant", []device.AppliedPolicy{{PolicyID: p.ID, Version: 2, Compliant: &no, Message: "7 pending updates, at most 3 allowed"}}},
		{"c-unknown", []device.AppliedPolicy{{PolicyID: p.ID, Version: 2}}},
		{"d-outdated", []device.AppliedPolicy{{PolicyID: p.ID, Version: 1, Compliant: &yes}}},
		{"e-none", nil},
		{"f-removed", []device.AppliedPolicy{{PolicyID: p.ID, Version: 2, Compliant: &yes}}},
	}
	var agents []*device.Agent
	for _, r := range reports {
		a := f.enroll(r.host, "linux", "")
		agents = append(agents, a)
		// Twice: the second, unchanged report keeps the rows as they are.
		for i := 0; i < 2; i++ {
			if _, err := s.CheckIn(ctx, a.ID, device.CheckIn{Time: t0.Add(time.Minute), Hostname: r.host, OS: a.OS, AppliedPolicies: r.applied}); err != nil {
				t.Fatal(err)
			}
		}
	}
	wantKind(t, s.RemoveAgent(ctx, agents[5].ID, device.NewCommand(agents[5].ID, device.Remove, nil, "x", t0)), nil)
	params, _ := json.Marshal(device.ApplyPolicyParams{PolicyID: p.ID, Version: 2})
	for _, a := range agents[3:5] {
		if _, err := s.CreateCommands(ctx, []*device.Command{device.NewCommand(a.ID, device.ApplyPolicy, params, "x", t0)}, false); err != nil {
			t.Fatal(err)
		}
	}

	got, err := s.PolicyCompliance(ctx, []string{p.ID, other.ID, "pol_nope"})
	wantKind(t, err, nil)
	want := map[string]*device.Compliance{
		p.ID:     {Compliant: 1, Noncompliant: 1, Unknown: 1, Outdated: 1, Pending: 2},
		other.ID: {Unknown: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PolicyCompliance (-want +got):\n%s", diff)
	}

	list, err := s.FindPolicyAgents(ctx, device.PolicyAgentFilter{PolicyID: p.ID})
	wantKind(t, err, nil)
	var states []string
	for _, pa := range list {
		states = append(states, pa.Hostname+":"+pa.State)
	}
	if diff := cmp.Diff([]string{"a-compliant:compliant", "b-noncompliant:noncompliant", "c-unknown:unknown", "d-outdated:outdated"}, states); diff != "" {
		t.Errorf("FindPolicyAgents (-want +got):\n%s", diff)
	}
	if list[1].Message == "" || list[1].Compliant == nil || *list[1].Compliant {
		t.Errorf("noncompliant agent = %+v", list[1])
	}
	page, err := s.FindPolicyAgents(ctx, device.PolicyAgentFilter{PolicyID: p.ID, State: device.ComplianceOutdated})
	wantKind(t, err, nil)
	if len(page) != 1 || page[0].Hostname != "d-outdated" || page[0].Version != 1 {
		t.Errorf("outdated agents = %+v", page)
	}
	page, err = s.FindPolicyAgents(ctx, device.PolicyAgentFilter{PolicyID: p.ID, Limit: 2, After: &device.AgentCursor{Hostname: list[1].Hostname, ID: list[1].AgentID}})
	wantKind(t, err, nil)
	if len(page) != 2 || page[0].Hostname != "c-unknown" {
		t.Errorf("second page = %+v", page)
	}

	// A new report replaces the old one.
	if _, err := s.CheckIn(ctx, agents[1].ID, device.CheckIn{Time: t0.Add(2 * time.Minute), Hostname: "b-noncompliant", OS: agents[1].OS,
		AppliedPolicies: []device.AppliedPolicy{{PolicyID: p.ID, Version: 2, Compliant: &yes}}}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.PolicyCompliance(ctx, []string{p.ID})
	if got[p.ID].Compliant != 2 || got[p.ID].Noncompliant != 0 {
		t.Errorf("after a new report: %+v", got[p.ID])
	}
	_, err = s.FindPolicyAgents(ctx, device.PolicyAgentFilter{PolicyID: "pol_nope"})
	wantKind(t, err, errs.ErrNotFound)
	_, err = s.FindPolicyAgents(ctx, device.PolicyAgentFilter{PolicyID: p.ID, State: "bogus"})
	wantKind(t, err, errs.ErrInvalid)
}
