package controltest

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/exposure"
)

func testExposure(t *testing.T, b *Backend) {
	ctx := context.Background()
	f := newFixture(t, b)
	s := f.s
	hasAgents := func() bool {
		t.Helper()
		has, err := s.HasAgents(ctx)
		wantKind(t, err, nil)
		return has
	}
	if hasAgents() {
		t.Error("HasAgents of an empty store: true")
	}
	a1 := f.enroll("web-01", "linux", "")
	a2 := f.enroll("web-02", "linux", "")
	if !hasAgents() {
		t.Error("HasAgents with two agents: false")
	}
	inv := &device.Inventory{Software: []device.Software{{Name: "openssl", Version: "3.0.2", Ecosystem: "Debian:12"}}}
	for _, a := range []*device.Agent{a1, a2} {
		// The second check-in does not change the inventory.
		for i := 0; i < 2; i++ {
			if _, err := s.CheckIn(ctx, a.ID, device.CheckIn{Time: t0.Add(time.Minute), Hostname: a.Hostname, OS: a.OS, Inventory: inv, InventoryHash: "h1"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	pending := func() map[string]exposure.Pending {
		t.Helper()
		list, err := s.PendingExposure(ctx, 100)
		wantKind(t, err, nil)
		out := map[string]exposure.Pending{}
		for _, p := range list {
			out[p.AgentID] = p
		}
		return out
	}
	queue := pending()
	if len(queue) != 2 || len(queue[a1.ID].Inventory.Software) != 1 {
		t.Fatalf("queued after check-ins with an inventory: %+v", queue)
	}

	epss, cvss, low := 0.5, 9.8, 5.0
	wantKind(t, s.PutRisks(ctx, []exposure.Risk{
		{CVEID: "CVE-2024-0001", KEV: true, EPSS: &epss, CVSS: &cvss, Severity: "CRITICAL", Description: "bad"},
		{CVEID: "CVE-2023-0002", CVSS: &low, Severity: "MEDIUM"},
		{CVEID: "not a CVE"},
	}), nil)
	bad := exposure.Finding{CVEID: "CVE-2024-0001", Ecosystem: "Debian:12", Product: "openssl", Package: "openssl", Installed: "3.0.2", Fixed: "3.0.3", Status: exposure.Affected}
	odd := exposure.Finding{CVEID: "CVE-2023-0002", Ecosystem: "Debian:12", Product: "openssl", Package: "openssl", Installed: "3.0.2", Status: exposure.Unknown, Reason: "no version"}
	keys := []string{"Debian:12/openssl"}
	wantKind(t, s.PutExposure(ctx, a1.ID, queue[a1.ID].Token, keys, []exposure.Finding{bad, odd}), nil)
	wantKind(t, s.PutExposure(ctx, a2.ID, queue[a2.ID].Token, keys, []exposure.Finding{bad}), nil)
	// Evaluated again, unchanged: the counts stay.
	wantKind(t, s.PutExposure(ctx, a2.ID, queue[a2.ID].Token, keys, []exposure.Finding{bad}), nil)
	if q := pending(); len(q) != 0 {
		t.Errorf("still queued: %+v", q)
	}

	fleet, err := s.FleetVulnerabilities(ctx, exposure.FleetFilter{})
	wantKind(t, err, nil)
	want := []exposure.FleetVulnerability{{
		Risk:     exposure.Risk{CVEID: "CVE-2024-0001", KEV: true, EPSS: &epss, CVSS: &cvss, Severity: "CRITICAL", Description: "bad"},
		Affected: 2,
		Fixes:    []exposure.Fix{{Ecosystem: "Debian:12", Product: "openssl", Version: "3.0.3"}},
	}}
	if diff := cmp.Diff(want, fleet); diff != "" {
		t.Errorf("FleetVulnerabilities (-want +got):\n%s", diff)
	}
	all, err := s.FleetVulnerabilities(ctx, exposure.FleetFilter{IncludeUnknown: true})
	wantKind(t, err, nil)
	if len(all) != 2 || all[1].CVEID != "CVE-2023-0002" || all[1].Unknown != 1 || all[1].EPSS != nil {
		t.Errorf("FleetVulnerabilities with unknown = %+v", all)
	}
	next, err := s.FleetVulnerabilities(ctx, exposure.FleetFilter{IncludeUnknown: true, After: &exposure.Cursor{KEV: true, EPSS: epss, CVSS: cvss, CVEKey: mustKey(t, "CVE-2024-0001")}})
	wantKind(t, err, nil)
	if len(next) != 1 || next[0].CVEID != "CVE-2023-0002" {
		t.Errorf("the page after the first = %+v", next)
	}
	kev := false
	if list, _ := s.FleetVulnerabilities(ctx, exposure.FleetFilter{KEV: &kev, IncludeUnknown: true}); len(list) != 1 || list[0].KEV {
		t.Errorf("not in KEV = %+v", list)
	}

	mine, err := s.AgentVulnerabilities(ctx, a1.ID)
	wantKind(t, err, nil)
	if len(mine) != 2 || mine[0].CVEID != "CVE-2024-0001" || mine[0].Status != exposure.Affected || mine[1].Findings[0].Reason != "no version" {
		t.Errorf("AgentVulnerabilities = %+v", mine)
	}
	agents, err := s.VulnerabilityAgents(ctx, exposure.AgentFilter{CVEID: "CVE-2024-0001"})
	wantKind(t, err, nil)
	var got []string
	for _, a := range agents {
		got = append(got, a.AgentID)
	}
	wantIDs := []string{a1.ID, a2.ID}
	if wantIDs[0] > wantIDs[1] {
		wantIDs[0], wantIDs[1] = wantIDs[1], wantIDs[0]
	}
	if diff := cmp.Diff(wantIDs, got); diff != "" {
		t.Errorf("VulnerabilityAgents (-want +got):\n%s", diff)
	}
	page, err := s.VulnerabilityAgents(ctx, exposure.AgentFilter{CVEID: "CVE-2024-0001", After: wantIDs[0], Limit: 5})
	wantKind(t, err, nil)
	if len(page) != 1 || page[0].AgentID != wantIDs[1] {
		t.Errorf("the page after %s = %+v", wantIDs[0], page)
	}

	// New scores keep the description stored.
	higher := 0.9
	wantKind(t, s.PutScores(ctx, []exposure.Risk{{CVEID: "CVE-2024-0001", KEV: true, EPSS: &higher, CVSS: &cvss, Severity: "CRITICAL"}}), nil)
	fleet, err = s.FleetVulnerabilities(ctx, exposure.FleetFilter{Limit: 1})
	wantKind(t, err, nil)
	if len(fleet) != 1 || fleet[0].EPSS == nil || *fleet[0].EPSS != higher || fleet[0].Description != "bad" {
		t.Errorf("after PutScores: %+v, want EPSS %v and the description kept", fleet, higher)
	}
	wantKind(t, s.PutScores(ctx, []exposure.Risk{{CVEID: "CVE-2024-0001", KEV: true, EPSS: &epss, CVSS: &cvss, Severity: "CRITICAL"}}), nil)

	// A change of the product's atoms queues its agents; a result of an
	// older evaluation leaves them queued.
	n, err := s.QueueExposure(ctx, append(keys, "Debian:12/none"))
	wantKind(t, err, nil)
	if n != 2 {
		t.Errorf("QueueExposure queued %d agents, want 2", n)
	}
	wantKind(t, s.PutExposure(ctx, a1.ID, "stale", keys, []exposure.Finding{bad, odd}), nil)
	if q := pending(); len(q) != 2 {
		t.Errorf("after a stale result: %+v", q)
	}

	// A removed agent is exposed to nothing.
	wantKind(t, s.RemoveAgent(ctx, a2.ID, device.NewCommand(a2.ID, device.Remove, nil, "x", t0.Add(time.Hour))), nil)
	q := pending()
	if q[a2.ID].Token != "removed" || len(q[a2.ID].Inventory.Software) != 0 {
		t.Errorf("removed agent queued as %+v", q[a2.ID])
	}
	wantKind(t, s.PutExposure(ctx, a2.ID, "removed", nil, nil), nil)
	fleet, _ = s.FleetVulnerabilities(ctx, exposure.FleetFilter{})
	if len(fleet) != 1 || fleet[0].Affected != 1 {
		t.Errorf("after the removal: %+v", fleet)
	}
	_, err = s.AgentVulnerabilities(ctx, a2.ID)
	if err == nil {
		t.Error("vulnerabilities of a removed agent")
	}
	if n, _ := s.QueueExposure(ctx, keys); n != 1 {
		t.Errorf("QueueExposure after the removal queued %d agents, want 1", n)
	}
}

func mustKey(t *testing.T, id string) int64 {
	t.Helper()
	k, ok := cve.Key(id)
	if !ok {
		t.Fatalf("%s is not a CVE id", id)
	}
	return k
}
