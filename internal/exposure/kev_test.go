package exposure

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
)

// kevStore is a Store that answers the KEV report's three questions.
type kevStore struct {
	Store
	fleet  []FleetVulnerability
	agents map[string][]CVEAgent           // by CVE
	byID   map[string][]AgentVulnerability // by agent
}

func (s *kevStore) FleetVulnerabilities(_ context.Context, f FleetFilter) ([]FleetVulnerability, error) {
	var out []FleetVulnerability
	for _, v := range s.fleet {
		if f.KEV == nil || v.KEV == *f.KEV {
			out = append(out, v)
		}
	}
	return out, nil
}

func (s *kevStore) VulnerabilityAgents(_ context.Context, f AgentFilter) ([]CVEAgent, error) {
	return s.agents[f.CVEID], nil
}

func (s *kevStore) AgentVulnerabilities(_ context.Context, id string) ([]AgentVulnerability, error) {
	v, ok := s.byID[id]
	if !ok {
		return nil, errs.NotFoundf("no agent %s", id)
	}
	return v, nil
}

type recordMap map[string]*cve.Record

func (m recordMap) Record(_ context.Context, id string) (*cve.Record, error) {
	if r, ok := m[id]; ok {
		return r, nil
	}
	return nil, errs.NotFoundf("no %s", id)
}

// The KEV entries are those of CISA's catalog.
var kevRecords = recordMap{
	"CVE-2024-9680": {CVEID: "CVE-2024-9680", KEV: &cve.KEV{DateAdded: "2024-10-15", DueDate: "2024-11-05",
		KnownRansomwareCampaignUse: "Unknown", VulnerabilityName: "Mozilla Firefox Use-After-Free Vulnerability",
		RequiredAction: "Apply mitigations per vendor instructions or discontinue use of the product if mitigations are unavailable."}},
	"CVE-2023-21715": {CVEID: "CVE-2023-21715", KEV: &cve.KEV{DateAdded: "2023-02-14", DueDate: "2023-03-07",
		KnownRansomwareCampaignUse: "Unknown", VulnerabilityName: "Microsoft Office Publisher Security Feature Bypass Vulnerability"}},
	"CVE-2021-44228": {CVEID: "CVE-2021-44228", KEV: &cve.KEV{DateAdded: "2021-12-10", DueDate: "2021-12-24",
		KnownRansomwareCampaignUse: "Known", VulnerabilityName: "Apache Log4j2 Remote Code Execution Vulnerability"}},
	// Listed when the exposure was evaluated, no longer in the catalog's
	// KEV since.
	"CVE-2024-0001": {CVEID: "CVE-2024-0001"},
}

func kevFleet() *kevStore {
	firefox := Fix{Ecosystem: "Desktop", Product: "Mozilla Firefox", Version: "131.0.2"}
	pc1 := CVEAgent{AgentID: "agt_1", Hostname: "pc-1", Ring: "pilot"}
	pc2 := CVEAgent{AgentID: "agt_2", Hostname: "pc-2", Ring: "broad"}
	return &kevStore{
		fleet: []FleetVulnerability{
			{Risk: Risk{CVEID: "CVE-2024-9680", KEV: true}, Affected: 2, Fixes: []Fix{firefox}},
			{Risk: Risk{CVEID: "CVE-2023-21715", KEV: true}, Affected: 1},
			{Risk: Risk{CVEID: "CVE-2024-0001", KEV: true}, Affected: 1},
			{Risk: Risk{CVEID: "CVE-2021-44228", KEV: true}, Unknown: 1}, // no affected agent
			{Risk: Risk{CVEID: "CVE-2024-38063"}, Affected: 2},
		},
		agents: map[string][]CVEAgent{
			"CVE-2024-9680":  {pc1, pc2},
			"CVE-2023-21715": {pc2},
			"CVE-2024-0001":  {pc1},
		},
		byID: map[string][]AgentVulnerability{
			"agt_2": {
				{Risk: Risk{CVEID: "CVE-2023-21715", KEV: true}, Status: Affected, Findings: []Finding{{Status: Affected, Ecosystem: "Microsoft", Product: "Microsoft 365 Apps for enterprise", Fixed: "Click-to-Run release of 2023-02"}}},
				{Risk: Risk{CVEID: "CVE-2024-9680", KEV: true}, Status: Affected, Findings: []Finding{{Status: Affected, Ecosystem: "Desktop", Product: "Mozilla Firefox", Fixed: "131.0.2"}}},
				{Risk: Risk{CVEID: "CVE-2021-44228", KEV: true}, Status: Unknown},
				{Risk: Risk{CVEID: "CVE-2024-38063"}, Status: Affected},
			},
		},
	}
}

func TestBuildKEVReport(t *testing.T) {
	now := time.Date(2024, 11, 1, 22, 30, 0, 0, time.FixedZone("UTC-5", -5*3600)) // 2024-11-02 in UTC
	r, err := BuildKEVReport(context.Background(), kevFleet(), kevRecords, now)
	if err != nil {
		t.Fatal(err)
	}
	three, minus606 := 3, -606
	want := &KEVReport{
		AsOf: "2024-11-02", CVEs: 2, Overdue: 1, Agents: 2, OverdueAgents: 1,
		Findings: []KEVFinding{
			{CVEID: "CVE-2023-21715", Name: "Microsoft Office Publisher Security Feature Bypass Vulnerability", DateAdded: "2023-02-14", DueDate: "2023-03-07",
				DaysLeft: &minus606, Overdue: true, Affected: 1, Fixes: []Fix{}, Agents: []KEVAgentRef{{"agt_2", "pc-2", "broad"}}},
			{CVEID: "CVE-2024-9680", Name: "Mozilla Firefox Use-After-Free Vulnerability", DateAdded: "2024-10-15", DueDate: "2024-11-05",
				RequiredAction: "Apply mitigations per vendor instructions or discontinue use of the product if mitigations are unavailable.",
				DaysLeft:       &three, Affected: 2, Fixes: []Fix{{Ecosystem: "Desktop", Product: "Mozilla Firefox", Version: "131.0.2"}},
				Agents: []KEVAgentRef{{"agt_1", "pc-1", "pilot"}, {"agt_2", "pc-2", "broad"}}},
		},
		ByAgent: []KEVAgent{
			{AgentID: "agt_2", Hostname: "pc-2", Ring: "broad", CVEs: 2, Overdue: 1, EarliestDue: "2023-03-07"},
			{AgentID: "agt_1", Hostname: "pc-1", Ring: "pilot", CVEs: 1, EarliestDue: "2024-11-05"},
		},
	}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}

func TestAgentKEV(t *testing.T) {
	now := time.Date(2024, 11, 6, 0, 0, 0, 0, time.UTC)
	got, err := AgentKEV(context.Background(), kevFleet(), kevRecords, "agt_2", now)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range got {
		ids = append(ids, f.CVEID)
		if !f.Overdue || *f.DaysLeft >= 0 {
			t.Errorf("%s on 2024-11-06: overdue %v, %d days left", f.CVEID, f.Overdue, *f.DaysLeft)
		}
	}
	if diff := cmp.Diff([]string{"CVE-2023-21715", "CVE-2024-9680"}, ids); diff != "" {
		t.Errorf("KEV CVEs of agt_2 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Fix{{Ecosystem: "Desktop", Product: "Mozilla Firefox", Version: "131.0.2"}}, got[1].Fixes); diff != "" {
		t.Errorf("fixes (-want +got):\n%s", diff)
	}
	if _, err := AgentKEV(context.Background(), kevFleet(), kevRecords, "agt_nobody", now); !errorsIsNotFound(err) {
		t.Errorf("an unknown agent: %v", err)
	}
}

func errorsIsNotFound(err error) bool { return errs.StatusOf(err) == 404 }
