package controltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/admin"
	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/control"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/exposure"
)

// Filled names what Fill wrote, for Compare.
type Filled struct {
	AgentIDs    []string // every agent, the removed one included
	Queued      string   // an agent with queued commands of one time
	SessionHash []byte
	AdminID     string
	PolicyID    string
	RolloutID   string
	LogsCommand string // a collect-logs command with a bundle
}

// Fill writes a little of everything into s: keys, an administrator with a
// session and TOTP, rings with rules, an enrollment secret, agents (one
// removed) with inventories and policy reports, commands in every state,
// a log bundle, a policy in two versions, rollouts, audit entries and
// exposure.
func Fill(t *testing.T, s control.Store) *Filled {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var out Filled
	exp := t0.Add(24 * time.Hour)
	_, plain, _ := apikey.New(apikey.Params{Name: "ci", CreatedBy: "cli:root"}, t0)
	_, priv, _ := apikey.New(apikey.Params{Name: "ops", CreatedBy: "cli:root", Privileged: true, ExpiresAt: &exp}, t0)
	must(s.CreateKey(ctx, plain))
	must(s.CreateKey(ctx, priv))
	_, err := s.RevokeKey(ctx, priv.ID, t0.Add(time.Hour))
	must(err)
	must(s.TouchKey(ctx, plain.ID, t0.Add(time.Minute)))

	a := &admin.Admin{ID: admin.NewID(), Email: "Ops@Example.com", PasswordHash: "$argon2id$x", CreatedAt: t0}
	must(s.CreateFirstAdmin(ctx, a))
	must(s.RecordAdminLogin(ctx, a.ID, t0.Add(time.Minute)))
	out.AdminID = a.ID
	out.SessionHash = admin.HashSessionToken(admin.NewSessionToken())
	must(s.CreateSession(ctx, &admin.Session{IDHash: out.SessionHash, AdminID: a.ID, CreatedAt: t0, LastSeenAt: t0, ExpiresAt: exp, ClientAddress: "192.0.2.1", UserAgent: "test"}))
	must(s.SetTOTP(ctx, &admin.TOTP{AdminID: a.ID, Secret: "JBSWY3DPEHPK3PXP", EnabledAt: t0, LastStep: 7}))

	must(s.CreateRing(ctx, &device.Ring{Name: "pilot", Position: 10, Description: "first", Rule: &device.RingRule{Hostname: "lab-*"}, CreatedAt: t0}))
	must(s.CreateRing(ctx, &device.Ring{Name: "broad", Position: 20, CreatedAt: t0}))
	secret := apikey.HashSecret(apikey.NewSecret(device.EnrollSecretPrefix))
	must(s.CreateEnrollSecret(ctx, &device.EnrollSecret{ID: device.NewID(device.EnrollSecretIDPrefix), SecretHash: secret, CreatedBy: "cli:root", CreatedAt: t0, ExpiresAt: &exp}))
	must(s.CreateEnrollSecret(ctx, &device.EnrollSecret{ID: device.NewID(device.EnrollSecretIDPrefix), SecretHash: apikey.HashSecret("other"), Ring: "broad", CreatedBy: "cli:root", CreatedAt: t0}))

	p := &device.Policy{ID: device.NewID(device.PolicyIDPrefix), Name: "patching", Settings: json.RawMessage(`{"maxPendingUpdates":5}`), CreatedBy: "x", CreatedAt: t0, UpdatedAt: t0}
	must(s.CreatePolicy(ctx, p))
	_, err = s.UpdatePolicy(ctx, p.ID, json.RawMessage(`{"maxPendingUpdates": 3}`), "y", t0.Add(time.Minute))
	must(err)
	out.PolicyID = p.ID

	yes := true
	var agents []*device.Agent
	for i, host := range []string{"lab-01", "web-01", "web-02", "old-01"} {
		ag := &device.Agent{
			ID: device.NewID(device.AgentIDPrefix), Hostname: host,
			OS:   device.OS{Platform: "linux", Name: "Debian", Version: "12", Build: "1"},
			Arch: "amd64", AgentVersion: "0.1", Capability: 1, IPs: []string{fmt.Sprintf("192.0.2.%d", i+10)},
			CredentialHash: apikey.HashSecret(apikey.NewSecret(device.AgentCredentialPrefix)),
			EnrolledAt:     t0, LastSeenAt: t0, EnrollmentID: fmt.Sprintf("enr-%d", i),
		}
		must(s.EnrollAgent(ctx, secret, ag))
		inv := &device.Inventory{Software: []device.Software{{Name: "openssl", Version: "3.0.2", Ecosystem: "Debian:12"}}, PendingUpdates: []device.Update{}}
		_, err := s.CheckIn(ctx, ag.ID, device.CheckIn{Time: t0.Add(time.Minute), Hostname: host, OS: ag.OS, Arch: "amd64", AgentVersion: "0.2", Capability: 2,
			Inventory: inv, InventoryHash: "h1", RebootPending: i%2 == 0,
			AppliedPolicies: []device.AppliedPolicy{{PolicyID: p.ID, Version: 2, Compliant: &yes}}})
		must(err)
		agents = append(agents, ag)
		out.AgentIDs = append(out.AgentIDs, ag.ID)
	}
	_, err = s.SetAgentRing(ctx, agents[2].ID, "broad")
	must(err)
	must(s.RemoveAgent(ctx, agents[3].ID, device.NewCommand(agents[3].ID, device.Remove, nil, "key:"+plain.ID, t0.Add(2*time.Minute))))

	logs := device.NewCommand(agents[1].ID, device.CollectLogs, nil, "key:"+plain.ID, t0.Add(3*time.Minute))
	reboot := device.NewCommand(agents[1].ID, device.Reboot, nil, "key:"+plain.ID, t0.Add(3*time.Minute))
	_, err = s.CreateCommands(ctx, []*device.Command{logs, reboot}, false)
	must(err)
	delivered, err := s.CheckIn(ctx, agents[1].ID, device.CheckIn{Time: t0.Add(4 * time.Minute), Hostname: "web-01", OS: agents[1].OS})
	must(err)
	if len(delivered) != 2 {
		t.Fatalf("delivered %d commands", len(delivered))
	}
	_, err = s.ReportCommand(ctx, agents[1].ID, reboot.ID, device.Report{State: device.Failed, Result: &device.Result{Message: "no"}, Time: t0.Add(5 * time.Minute)})
	must(err)
	must(s.SaveLogBundle(ctx, &device.LogBundle{CommandID: logs.ID, AgentID: agents[1].ID, ContentType: "application/gzip", Size: 3, SHA256: make([]byte, 32), Content: []byte{0, 1, 2}, CreatedAt: t0.Add(5 * time.Minute)}))
	out.LogsCommand = logs.ID
	// Queued commands of one time, ids against their queue order.
	out.Queued = agents[0].ID
	for i := 0; i < 5; i++ {
		c := device.NewCommand(agents[0].ID, device.InstallUpdates, json.RawMessage(`{"updates": ["KB1"]}`), "x", t0.Add(6*time.Minute))
		c.ID = fmt.Sprintf("cmd_z%d", 9-i)
		_, err := s.CreateCommands(ctx, []*device.Command{c}, false)
		must(err)
	}

	ro := &device.Rollout{ID: device.NewID(device.RolloutIDPrefix), Name: "November", Kind: device.InstallUpdates,
		Params: json.RawMessage(`{"updates":["KB2"]}`), Agents: []string{agents[1].ID}, CreatedBy: "x", CreatedAt: t0, UpdatedAt: t0}
	must(s.CreateRollout(ctx, ro))
	_, _, err = s.AdvanceRollout(ctx, ro.ID, device.Advance{CreatedBy: "x", Now: t0.Add(7 * time.Minute)})
	must(err)
	out.RolloutID = ro.ID
	pr := &device.Rollout{ID: device.NewID(device.RolloutIDPrefix), Name: "policy", Kind: device.ApplyPolicy, PolicyID: p.ID, CreatedBy: "x", CreatedAt: t0, UpdatedAt: t0}
	must(s.CreateRollout(ctx, pr))

	for i := 0; i < 5; i++ {
		e := &audit.Entry{Time: t0.Add(time.Duration(i) * time.Second), Actor: "key:" + plain.ID, KeyID: plain.ID, Method: "GET", Path: "/api/agents", Status: 200, ClientAddress: "127.0.0.1"}
		must(e.SetEvent(audit.APIRequest{}))
		must(s.AppendAudit(ctx, e))
	}
	e := &audit.Entry{Time: t0, Actor: "cli:root", ClientAddress: "local"}
	must(e.SetEvent(audit.KeyRevoked{KeyID: priv.ID}))
	must(s.AppendAudit(ctx, e))

	epss, cvss := 0.25, 7.5
	must(s.PutRisks(ctx, []exposure.Risk{{CVEID: "CVE-2024-0001", KEV: true, EPSS: &epss, CVSS: &cvss, Severity: "HIGH", Description: "d"}, {CVEID: "CVE-2023-0002"}}))
	queue, err := s.PendingExposure(ctx, 100)
	must(err)
	for _, q := range queue {
		if q.AgentID == agents[0].ID {
			must(s.PutExposure(ctx, q.AgentID, q.Token, []string{"Debian:12/openssl"}, []exposure.Finding{
				{CVEID: "CVE-2024-0001", Ecosystem: "Debian:12", Product: "openssl", Package: "openssl", Installed: "3.0.2", Fixed: "3.0.3", KB: "", Status: exposure.Affected, EOLFrom: "2028-06-30"},
				{CVEID: "CVE-2023-0002", Ecosystem: "Debian:12", Product: "openssl", Package: "openssl", Installed: "3.0.2", Status: exposure.Unknown, Reason: "r"},
			}))
		}
	}
	return &out
}

// Compare fails t unless got reads as want does through every store
// method, after Fill wrote want and a copy made got. It checks in on both
// at the end, and compares what they deliver.
func Compare(t *testing.T, want, got control.Store, f *Filled) {
	t.Helper()
	ctx := context.Background()
	same := func(what string, fn func(s control.Store) (any, error)) {
		t.Helper()
		w, err := fn(want)
		if err != nil {
			t.Fatalf("%s of the source: %v", what, err)
		}
		g, err := fn(got)
		if err != nil {
			t.Fatalf("%s of the copy: %v", what, err)
		}
		if diff := cmp.Diff(w, g); diff != "" {
			t.Errorf("%s (-source +copy):\n%s", what, diff)
		}
	}
	same("keys", func(s control.Store) (any, error) { return s.FindKeys(ctx, apikey.KeyFilter{}) })
	same("admins", func(s control.Store) (any, error) { return s.FindAdmins(ctx) })
	same("admin by email", func(s control.Store) (any, error) { return s.FindAdminByEmail(ctx, "ops@example.com") })
	same("session", func(s control.Store) (any, error) { return s.FindSession(ctx, f.SessionHash) })
	same("totp", func(s control.Store) (any, error) { return s.FindTOTP(ctx, f.AdminID) })
	same("rings", func(s control.Store) (any, error) { return s.FindRings(ctx) })
	same("enrollment secrets", func(s control.Store) (any, error) { return s.FindEnrollSecrets(ctx) })
	same("agents", func(s control.Store) (any, error) { return s.FindAgents(ctx, device.AgentFilter{}) })
	for _, id := range f.AgentIDs {
		same("credential of "+id, func(s control.Store) (any, error) { return s.FindAgentCredential(ctx, id) })
		same("vulnerabilities of "+id, func(s control.Store) (any, error) {
			v, err := s.AgentVulnerabilities(ctx, id)
			if errors.Is(err, errs.ErrNotFound) {
				return "not found", nil
			}
			return v, err
		})
	}
	same("commands", func(s control.Store) (any, error) { return s.FindCommands(ctx, device.CommandFilter{}) })
	same("log bundle", func(s control.Store) (any, error) { return s.FindLogBundle(ctx, f.LogsCommand) })
	same("policies", func(s control.Store) (any, error) { return s.FindPolicies(ctx) })
	same("compliance", func(s control.Store) (any, error) { return s.PolicyCompliance(ctx, []string{f.PolicyID}) })
	same("policy agents", func(s control.Store) (any, error) {
		return s.FindPolicyAgents(ctx, device.PolicyAgentFilter{PolicyID: f.PolicyID})
	})
	same("rollouts", func(s control.Store) (any, error) { return s.FindRollouts(ctx, device.RolloutFilter{}) })
	same("rollout progress", func(s control.Store) (any, error) { return s.RolloutProgress(ctx, f.RolloutID) })
	same("audit log", func(s control.Store) (any, error) { return s.FindAuditEntries(ctx, audit.Filter{}) })
	same("exposure queue", func(s control.Store) (any, error) { return s.PendingExposure(ctx, 100) })
	same("fleet", func(s control.Store) (any, error) {
		return s.FleetVulnerabilities(ctx, exposure.FleetFilter{IncludeUnknown: true})
	})
	same("agents of a CVE", func(s control.Store) (any, error) {
		return s.VulnerabilityAgents(ctx, exposure.AgentFilter{CVEID: "CVE-2024-0001"})
	})
	res, err := audit.Verify(ctx, got)
	if err != nil || res.Broken != nil || res.Entries == 0 {
		t.Errorf("Verify of the copy = %+v, %v", res, err)
	}
	same("check-in", func(s control.Store) (any, error) {
		return s.CheckIn(ctx, f.Queued, device.CheckIn{Time: t0.Add(time.Hour), Hostname: "lab-01", OS: device.OS{Platform: "linux", Name: "Debian", Version: "12", Build: "1"}})
	})
	// The copy goes on appending to the chain.
	e := &audit.Entry{Time: t0.Add(time.Hour), Actor: "cli:root", ClientAddress: "local"}
	if err := e.SetEvent(audit.APIRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := got.AppendAudit(ctx, e); err != nil {
		t.Fatal(err)
	}
	if res, err := audit.Verify(ctx, got); err != nil || res.Broken != nil || res.Entries != int(e.ID) {
		t.Errorf("Verify of the copy after an append = %+v, %v", res, err)
	}
}
