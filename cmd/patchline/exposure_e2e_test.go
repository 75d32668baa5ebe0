package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/alert/alerttest"
	catalogsqlite "github.com/patchline/patchline/internal/catalog/sqlite"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/exposure"
	versions "github.com/patchline/patchline/internal/version"
)

// exposureFinding is a finding as the API answers it.
type exposureFinding struct {
	CVEID     string `json:"cveId"`
	Ecosystem string `json:"ecosystem"`
	Product   string `json:"product"`
	Package   string `json:"package"`
	Installed string `json:"installedVersion"`
	Fixed     string `json:"fixedVersion"`
	Status    string `json:"status"`
}

type agentVuln struct {
	CVEID    string            `json:"cveId"`
	IsKEV    bool              `json:"isKev"`
	EPSS     *float64          `json:"epss"`
	CVSS     *float64          `json:"cvss"`
	Status   string            `json:"status"`
	Findings []exposureFinding `json:"findings"`
}

// agentVulns reads every page of an agent's vulnerabilities.
func (c *controlClient) agentVulns(key, id string) []agentVuln {
	var out []agentVuln
	cursor := ""
	for {
		path := "/api/agents/" + id + "/vulnerabilities?limit=7"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		var page struct {
			Results    []agentVuln `json:"results"`
			NextCursor *string     `json:"nextCursor"`
		}
		status, body := c.raw("GET", path, key, "", nil)
		c.expect("agent vulnerabilities", status, body, http.StatusOK, &page)
		out = append(out, page.Results...)
		if page.NextCursor == nil {
			return out
		}
		cursor = *page.NextCursor
	}
}

type fleetVuln struct {
	CVEID          string   `json:"cveId"`
	IsKEV          bool     `json:"isKev"`
	EPSS           *float64 `json:"epss"`
	CVSS           *float64 `json:"cvss"`
	AffectedAgents int      `json:"affectedAgents"`
	Fixes          []struct {
		Product string `json:"product"`
		Version string `json:"fixedVersion"`
	} `json:"fixes"`
}

func (c *controlClient) fleetVulns(key string) []fleetVuln {
	var out []fleetVuln
	cursor := ""
	for {
		path := "/api/vulnerabilities?limit=10"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		var page struct {
			Results    []fleetVuln `json:"results"`
			NextCursor *string     `json:"nextCursor"`
		}
		status, body := c.raw("GET", path, key, "", nil)
		c.expect("fleet vulnerabilities", status, body, http.StatusOK, &page)
		out = append(out, page.Results...)
		if page.NextCursor == nil {
			return out
		}
		cursor = *page.NextCursor
	}
}

// statusSet is "CVE status" per CVE of a list of findings.
func statusSet(findings []exposure.Finding) map[string]string {
	out := map[string]string{}
	for _, f := range findings {
		if out[f.CVEID] != string(exposure.Affected) {
			out[f.CVEID] = string(f.Status)
		}
	}
	return out
}

func toDevice(a fleetAgent) device.Inventory {
	var inv device.Inventory
	for _, s := range a.Inventory.Software {
		inv.Software = append(inv.Software, device.Software{Name: s.Name, Version: s.Version, Ecosystem: s.Ecosystem, Arch: s.Arch, Source: s.Source})
	}
	for _, u := range a.Inventory.InstalledUpdates {
		inv.InstalledUpdates = append(inv.InstalledUpdates, device.Update{ID: u.ID, Title: u.Title})
	}
	return inv
}

// TestExposureEndToEnd runs serve and a simulated fleet and checks that
// every agent is reported exposed to exactly the CVEs that the catalog's
// atoms and the agent's reported inventory imply, then installs the fix of
// one CVE through a rollout ring by ring and checks that the exposure is
// gone once the agents report back.
func TestExposureEndToEnd(t *testing.T) {
	e2e(t)
	t.Parallel()
	const fleet = 40
	const target = "CVE-2024-38063"
	data := t.TempDir()
	d := []string{"--data", data}
	key := mustControlCLI(t, append([]string{"keys", "create", "--name", "exposure"}, d...)...)
	priv := mustControlCLI(t, append([]string{"keys", "create", "--name", "ops", "--privileged", "--expires", "24h"}, d...)...)
	secret := mustControlCLI(t, append([]string{"enroll", "create", "--expires", "1h"}, d...)...)
	srv := startServe(t, data, []string{"PATCHLINE_CONTROL_DB=", "PATCHLINE_CATALOG_DB="})
	c := &controlClient{t: t, base: srv.ControlURL, http: &http.Client{Timeout: 30 * time.Second}}
	startProcess(t, nil, "sim", "--server", srv.ControlURL, "--enroll-secret", secret, "--agents", fmt.Sprint(fleet),
		"--interval", "300ms", "--time-scale", "0.005", "--failure-rate", "0", "--seed", "7")

	var agents []fleetAgent
	waitFor(t, "the fleet with its inventory", time.Minute, func() bool {
		agents = c.agents(key, "")
		if len(agents) != fleet {
			return false
		}
		for _, a := range agents {
			if len(a.Inventory.Software) == 0 {
				return false
			}
		}
		return true
	})

	// The expected exposure, from the catalog serve loaded and the
	// inventories the agents reported.
	ctx := context.Background()
	cat, err := catalogsqlite.Open(ctx, filepath.Join(data, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	idx := exposure.NewIndex()
	if _, err := idx.Refresh(ctx, cat); err != nil {
		t.Fatal(err)
	}
	expected := func(a fleetAgent) map[string]string {
		f, _ := idx.Match(toDevice(a))
		return statusSet(f)
	}
	reported := func(id string) map[string]string {
		out := map[string]string{}
		for _, v := range c.agentVulns(key, id) {
			out[v.CVEID] = v.Status
		}
		return out
	}
	equal := func(a, b map[string]string) bool {
		if len(a) != len(b) {
			return false
		}
		for k, v := range a {
			if b[k] != v {
				return false
			}
		}
		return true
	}
	// Agents report as they like: compare with the inventory read in the
	// same round, until every agent matches.
	waitFor(t, "every agent's exposure to match its inventory", 90*time.Second, func() bool {
		agents = c.agents(key, "")
		for _, a := range agents {
			if !equal(expected(a), reported(a.ID)) {
				return false
			}
		}
		return true
	})

	exposedTo := map[string][]string{}
	var below, above []string
	for _, a := range agents {
		vulns := c.agentVulns(key, a.ID)
		for i, v := range vulns {
			exposedTo[v.CVEID] = append(exposedTo[v.CVEID], a.ID)
			if i > 0 && riskBefore(v, vulns[i-1]) {
				t.Errorf("%s: %s listed after %s, out of risk order", a.Hostname, v.CVEID, vulns[i-1].CVEID)
			}
			for _, f := range v.Findings {
				if f.Status != "affected" {
					continue
				}
				// Independently of the matcher: an affected item is
				// below the fix that is named for it.
				if cmp, err := versions.Compare(f.Ecosystem, f.Installed, f.Fixed); err != nil || cmp >= 0 {
					t.Errorf("%s: %s %s %s reported affected, fixed in %s (%d, %v)", a.Hostname, v.CVEID, f.Package, f.Installed, f.Fixed, cmp, err)
				}
			}
		}
		for _, s := range a.Inventory.Software {
			if strings.HasPrefix(s.Name, "Windows 11 Version 23H2") {
				if c, _ := versions.Compare("Windows", s.Version, "10.0.22631.4037"); c < 0 {
					below = append(below, a.ID)
				} else {
					above = append(above, a.ID)
				}
			}
		}
	}
	sort.Strings(exposedTo[target])
	for _, id := range below {
		if !contains(exposedTo[target], id) {
			t.Errorf("agent %s runs a Windows 11 build below the fix of %s and is not reported exposed", id, target)
		}
	}
	for _, id := range above {
		if contains(exposedTo[target], id) {
			t.Errorf("agent %s runs a Windows 11 build at or above the fix of %s and is reported exposed", id, target)
		}
	}
	if len(exposedTo[target]) == 0 {
		t.Fatalf("no agent of the fleet is exposed to %s", target)
	}
	t.Logf("%d CVEs across the fleet; %s affects %d agents (%d Windows 11 23H2 below its fix, %d above)",
		len(exposedTo), target, len(exposedTo[target]), len(below), len(above))

	// The fleet list counts the same agents, in risk order.
	fl := c.fleetVulns(key)
	var found *fleetVuln
	for i := range fl {
		if fl[i].CVEID == target {
			found = &fl[i]
		}
		if i > 0 && riskBefore(agentVuln{IsKEV: fl[i].IsKEV, EPSS: fl[i].EPSS, CVSS: fl[i].CVSS}, agentVuln{IsKEV: fl[i-1].IsKEV, EPSS: fl[i-1].EPSS, CVSS: fl[i-1].CVSS}) {
			t.Errorf("fleet list: %s after %s, out of risk order", fl[i].CVEID, fl[i-1].CVEID)
		}
	}
	if found == nil || found.AffectedAgents != len(exposedTo[target]) || len(found.Fixes) == 0 {
		t.Fatalf("fleet entry of %s: %+v, want %d agents", target, found, len(exposedTo[target]))
	}

	// KEV compliance: every KEV CVE that affects agents, with CISA's due
	// date from the catalog, the agents it affects, and the same as CSV.
	var rep exposure.KEVReport
	status, body := c.raw("GET", "/api/compliance/kev", key, "", nil)
	c.expect("KEV report", status, body, http.StatusOK, &rep)
	kevAffected := map[string]int{}
	rows := 0
	for _, v := range fl {
		if v.IsKEV && v.AffectedAgents > 0 {
			kevAffected[v.CVEID] = v.AffectedAgents
			rows += v.AffectedAgents
		}
	}
	if len(kevAffected) == 0 {
		t.Fatal("no KEV CVE affects the simulated fleet: the KEV report is not tested")
	}
	if rep.CVEs != len(kevAffected) || len(rep.Findings) != len(kevAffected) {
		t.Errorf("KEV report: %d CVEs (%d findings), the fleet list has %d KEV CVEs with affected agents", rep.CVEs, len(rep.Findings), len(kevAffected))
	}
	for i, f := range rep.Findings {
		rec, err := cat.Record(ctx, f.CVEID)
		if err != nil || rec.KEV == nil {
			t.Fatalf("%s: %v", f.CVEID, err)
		}
		if f.DueDate != rec.KEV.DueDate || f.Affected != kevAffected[f.CVEID] || f.DaysLeft == nil || f.Overdue != (*f.DaysLeft < 0) {
			t.Errorf("KEV finding %+v; the catalog's due date %s, %d affected agents", f, rec.KEV.DueDate, kevAffected[f.CVEID])
		}
		if i > 0 && f.DueDate < rep.Findings[i-1].DueDate {
			t.Errorf("KEV findings out of due date order: %s after %s", f.DueDate, rep.Findings[i-1].DueDate)
		}
	}
	status, body = c.raw("GET", "/api/compliance/kev.csv", key, "", nil)
	if csv := string(body); status != http.StatusOK || strings.Count(csv, "\n") != 1+rows || !strings.HasPrefix(csv, "agentId,hostname,ring,cveId,") {
		t.Errorf("KEV CSV: %d, %d lines, want %d:\n%.300s", status, strings.Count(csv, "\n"), 1+rows, csv)
	}
	if len(rep.ByAgent) == 0 {
		t.Fatal("the KEV report names no agent")
	}
	var one struct {
		Overdue int                   `json:"overdueCves"`
		Results []exposure.KEVFinding `json:"results"`
	}
	status, body = c.raw("GET", "/api/agents/"+rep.ByAgent[0].AgentID+"/compliance/kev", key, "", nil)
	c.expect("an agent's KEV CVEs", status, body, http.StatusOK, &one)
	if len(one.Results) != rep.ByAgent[0].CVEs || one.Overdue != rep.ByAgent[0].Overdue {
		t.Errorf("%s: %d KEV CVEs (%d overdue), the report says %+v", rep.ByAgent[0].Hostname, len(one.Results), one.Overdue, rep.ByAgent[0])
	}
	t.Logf("KEV: %d CVEs (%d overdue) on %d agents (%d with an overdue one)", rep.CVEs, rep.Overdue, rep.Agents, rep.OverdueAgents)

	// An alert rule for KEV CVEs: its webhook gets one signed alert per
	// KEV CVE of the report, naming the agents the report names.
	hook := alerttest.NewReceiver(t)
	var rule struct{ ID, Secret string }
	status, body = c.raw("POST", "/api/alert-rules", priv, "", map[string]any{"name": "KEV on endpoints", "kind": "kev", "webhookUrl": hook.URL})
	c.expect("alert rule", status, body, http.StatusCreated, &rule)
	hook.SetSecret(rule.Secret)
	waitFor(t, "one alert per KEV CVE at the webhook", time.Minute, func() bool { return len(hook.Payloads()) >= len(rep.Findings) })
	time.Sleep(6 * time.Second) // another evaluation: nothing more
	got := map[string]int{}
	for _, p := range hook.Payloads() {
		got[p.CVEID] += len(p.Agents)
		if p.Rule.ID != rule.ID || !p.KEV {
			t.Errorf("alert %+v", p)
		}
	}
	if len(hook.Payloads()) != len(rep.Findings) {
		t.Errorf("the webhook got %d alerts, the report has %d KEV CVEs", len(hook.Payloads()), len(rep.Findings))
	}
	for _, f := range rep.Findings {
		if got[f.CVEID] != f.Affected {
			t.Errorf("%s: alerts named %d agents, the report %d", f.CVEID, got[f.CVEID], f.Affected)
		}
	}

	// Install the fix, ring by ring.
	status, body = c.raw("POST", "/api/rings", key, "", map[string]any{"name": "pilot", "position": 10, "rule": map[string]any{"hostname": "it-*"}})
	c.expect("pilot ring", status, body, http.StatusCreated, nil)
	status, body = c.raw("POST", "/api/rings", key, "", map[string]any{"name": "broad", "position": 20, "rule": map[string]any{}})
	c.expect("broad ring", status, body, http.StatusCreated, nil)
	status, body = c.raw("POST", "/api/vulnerabilities/"+target+"/install-fix", key, "", nil)
	c.expect("install the fix with a plain key", status, body, http.StatusForbidden, nil)
	var ro struct {
		ID     string   `json:"id"`
		Kind   string   `json:"kind"`
		Rings  []string `json:"rings"`
		Agents []string `json:"agents"`
	}
	status, body = c.raw("POST", "/api/vulnerabilities/"+target+"/install-fix", priv, "", nil)
	c.expect("install the fix", status, body, http.StatusCreated, &ro)
	if ro.Kind != "install-updates" || len(ro.Agents) != len(exposedTo[target]) {
		t.Fatalf("fix rollout %+v", ro)
	}
	from := ""
	queued := 0
	for range ro.Rings {
		var adv struct {
			Rollout struct {
				CurrentRing *string `json:"currentRing"`
			} `json:"rollout"`
			Commands []fleetCommand `json:"commands"`
		}
		status, body := c.raw("POST", "/api/rollouts/"+ro.ID+"/advance", priv, "", map[string]any{"fromRing": from})
		c.expect("advance", status, body, http.StatusAccepted, &adv)
		for _, cmd := range adv.Commands {
			if !contains(ro.Agents, cmd.AgentID) {
				t.Errorf("the fix rollout reached agent %s, which %s does not affect", cmd.AgentID, target)
			}
		}
		queued += len(adv.Commands)
		for id, got := range c.waitCommands(key, commandIDs(adv.Commands), time.Minute) {
			if got.State != "succeeded" {
				t.Errorf("install-updates %s = %+v", id, got)
			}
		}
		from = *adv.Rollout.CurrentRing
	}
	if queued != len(ro.Agents) {
		t.Errorf("the rollout queued %d commands for %d affected agents", queued, len(ro.Agents))
	}
	waitFor(t, "the exposure to "+target+" to be gone", time.Minute, func() bool {
		for _, v := range c.fleetVulns(key) {
			if v.CVEID == target {
				return false
			}
		}
		return true
	})
	for _, id := range ro.Agents {
		if _, ok := reported(id)[target]; ok {
			t.Errorf("agent %s is still exposed to %s after the fix", id, target)
		}
	}
}

// riskBefore reports whether a ranks strictly before b in risk order
// (KEV, EPSS, CVSS), ties left out.
func riskBefore(a, b agentVuln) bool {
	f := func(p *float64) float64 {
		if p == nil {
			return -1
		}
		return *p
	}
	if a.IsKEV != b.IsKEV {
		return a.IsKEV
	}
	if f(a.EPSS) != f(b.EPSS) {
		return f(a.EPSS) > f(b.EPSS)
	}
	return f(a.CVSS) > f(b.CVSS)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
