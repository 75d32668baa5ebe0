// Package controltest is the test suite of control stores. Every backend
// runs it: the SQLite store always, the PostgreSQL store when
// PATCHLINE_TEST_POSTGRES names a server.
//
//	func TestStore(t *testing.T) { controltest.Run(t, backend) }
//
// The suite's cases are one function each, in this file and in the files
// named for the features they test (exposure, alerts, copy, replicas);
// this file, over 600 lines, holds the cases of the store's core tables.
package controltest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/admin"
	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/control"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
)

// T0 is the time of the suite: the stores that Backend.Open returns must
// take it for the current time (their Now).
var T0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

var t0 = T0

// Backend is what the suite needs of a backend.
type Backend struct {
	// Open opens a store on a new, empty database of its own whose clock
	// reads T0, ends the test when it cannot, and closes the store when the
	// test ends.
	Open func(t *testing.T) control.Store

	// OpenAgain opens another store on the database of s, as another
	// process or another serve replica does, and closes it when the test
	// ends.
	OpenAgain func(t *testing.T, s control.Store) control.Store

	// Exec runs one statement on the database of s past the store; $1, $2
	// … number its parameters.
	Exec func(t *testing.T, s control.Store, query string, args ...any) error

	// DropAuditGuard removes what keeps the audit log of s append-only, so
	// that a test can tamper with it.
	DropAuditGuard func(t *testing.T, s control.Store)
}

func (b *Backend) open(t *testing.T) control.Store {
	t.Helper()
	return b.Open(t)
}

// Run runs every test of the suite, each subtest on a store of its own.
func Run(t *testing.T, b Backend) {
	tests := []struct {
		name string
		fn   func(*testing.T, *Backend)
	}{
		{"Keys", testKeys},
		{"Admins", testAdmins},
		{"Enroll", testEnroll},
		{"EnrollAgain", testEnrollAgain},
		{"FindAgents", testFindAgents},
		{"CheckInAndCommands", testCheckInAndCommands},
		{"CheckInOrder", testCheckInOrder},
		{"RemoveAgent", testRemoveAgent},
		{"Rollouts", testRollouts},
		{"Policies", testPolicies},
		{"AuditLog", testAuditLog},
		{"RingRules", testRingRules},
		{"InventoryBase", testInventoryBase},
		{"PolicyCompliance", testPolicyCompliance},
		{"Sessions", testSessions},
		{"CreateFirstAdmin", testCreateFirstAdmin},
		{"TOTP", testTOTP},
		{"Exposure", testExposure},
		{"ReplicaCheckIns", testReplicaCheckIns},
		{"ReplicaAudit", testReplicaAudit},
		{"Alerts", testAlerts},
		{"ReplicaAlerts", testReplicaAlerts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, &b) })
	}
}

func wantKind(t *testing.T, err, kind error) {
	t.Helper()
	if kind == nil {
		if err != nil {
			t.Fatalf("error = %v, want none", err)
		}
		return
	}
	if !errors.Is(err, kind) {
		t.Fatalf("error = %v, want %v", err, kind)
	}
}

func testKeys(t *testing.T, b *Backend) {
	ctx := context.Background()
	s := b.open(t)
	exp := t0.Add(24 * time.Hour)
	_, plain, _ := apikey.New(apikey.Params{Name: "ci", CreatedBy: "cli:root"}, t0)
	_, priv, _ := apikey.New(apikey.Params{Name: "ops", CreatedBy: "cli:root", Privileged: true, ExpiresAt: &exp}, t0.Add(time.Second))
	for _, k := range []*apikey.Key{plain, priv} {
		wantKind(t, s.CreateKey(ctx, k), nil)
	}
	wantKind(t, s.CreateKey(ctx, plain), errs.ErrConflict)

	got, err := s.FindKeyByID(ctx, priv.ID)
	wantKind(t, err, nil)
	if diff := cmp.Diff(priv, got); diff != "" {
		t.Errorf("FindKeyByID (-want +got):\n%s", diff)
	}
	_, err = s.FindKeyByID(ctx, "plk_0000000000000000")
	wantKind(t, err, errs.ErrNotFound)

	// last_used_at is written at most once per LastUsedResolution.
	wantKind(t, s.TouchKey(ctx, plain.ID, t0.Add(time.Minute)), nil)
	wantKind(t, s.TouchKey(ctx, plain.ID, t0.Add(time.Minute+30*time.Second)), nil)
	got, _ = s.FindKeyByID(ctx, plain.ID)
	if got.LastUsedAt == nil || !got.LastUsedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("LastUsedAt = %v, want %v", got.LastUsedAt, t0.Add(time.Minute))
	}
	wantKind(t, s.TouchKey(ctx, plain.ID, t0.Add(2*time.Minute)), nil)
	got, _ = s.FindKeyByID(ctx, plain.ID)
	if !got.LastUsedAt.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("LastUsedAt = %v after a minute", got.LastUsedAt)
	}

	active := true
	keys, err := s.FindKeys(ctx, apikey.KeyFilter{Active: &active, Now: t0.Add(48 * time.Hour)})
	wantKind(t, err, nil)
	if len(keys) != 1 || keys[0].ID != plain.ID {
		t.Errorf("active keys after the privileged one expired = %v", keys)
	}

	// Privilege needs an expiry within the cap.
	_, err = s.EnablePrivileged(ctx, plain.ID, t0.Add(apikey.MaxPrivilegedLifetime+time.Hour), t0)
	wantKind(t, err, errs.ErrInvalid)
	got, err = s.EnablePrivileged(ctx, plain.ID, t0.Add(time.Hour), t0)
	wantKind(t, err, nil)
	if !got.Privileged || !got.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("EnablePrivileged = %+v", got)
	}
	_, err = s.EnablePrivileged(ctx, plain.ID, t0.Add(time.Hour), t0)
	wantKind(t, err, errs.ErrConflict)

	// Revocation is final: a second revoke conflicts, and the database
	// refuses to clear it.
	k, err := s.RevokeKey(ctx, priv.ID, t0.Add(time.Hour))
	wantKind(t, err, nil)
	if k.State(t0.Add(time.Hour)) != apikey.StateRevoked {
		t.Errorf("state after revoke = %s", k.State(t0))
	}
	_, err = s.RevokeKey(ctx, priv.ID, t0.Add(2*time.Hour))
	wantKind(t, err, errs.ErrConflict)
	_, err = s.RevokeKey(ctx, "plk_0000000000000000", t0)
	wantKind(t, err, errs.ErrNotFound)
	if err := b.Exec(t, s, `UPDATE api_keys SET revoked_at = NULL WHERE id = $1`, priv.ID); err == nil {
		t.Error("the database let a revocation be undone")
	}
	if err := b.Exec(t, s, `UPDATE api_keys SET secret_hash = $1 WHERE id = $2`, make([]byte, 32), plain.ID); err == nil {
		t.Error("the database let a key get a new secret")
	}
	_, err = s.EnablePrivileged(ctx, priv.ID, t0.Add(time.Hour), t0)
	wantKind(t, err, errs.ErrConflict)
}

func testAdmins(t *testing.T, b *Backend) {
	ctx := context.Background()
	s := b.open(t)
	a := &admin.Admin{ID: admin.NewID(), Email: "ops@example.com", PasswordHash: "$argon2id$x", CreatedAt: t0}
	wantKind(t, s.CreateAdmin(ctx, a), nil)
	dup := *a
	dup.ID, dup.Email = admin.NewID(), "OPS@example.com"
	wantKind(t, s.CreateAdmin(ctx, &dup), errs.ErrConflict)
	got, err := s.FindAdminByEmail(ctx, "Ops@Example.com")
	wantKind(t, err, nil)
	if diff := cmp.Diff(a, got); diff != "" {
		t.Errorf("FindAdminByEmail (-want +got):\n%s", diff)
	}
	wantKind(t, s.RecordAdminLogin(ctx, a.ID, t0.Add(time.Hour)), nil)
	wantKind(t, s.RecordAdminLogin(ctx, "adm_nobody", t0), errs.ErrNotFound)
	all, err := s.FindAdmins(ctx)
	wantKind(t, err, nil)
	if len(all) != 1 || !all[0].LastLoginAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("FindAdmins = %+v", all)
	}
}

// fixture holds an enrollment secret and helpers to enroll agents.
type fixture struct {
	t      *testing.T
	s      control.Store
	secret []byte // digest of the enrollment secret
}

func newFixture(t *testing.T, b *Backend) *fixture {
	t.Helper()
	s := b.open(t)
	f := &fixture{t: t, s: s, secret: apikey.HashSecret(apikey.NewSecret(device.EnrollSecretPrefix))}
	wantKind(t, s.CreateEnrollSecret(context.Background(), &device.EnrollSecret{
		ID: device.NewID(device.EnrollSecretIDPrefix), SecretHash: f.secret, CreatedBy: "cli:root", CreatedAt: t0,
	}), nil)
	return f
}

func (f *fixture) enroll(hostname, platform, ring string) *device.Agent {
	f.t.Helper()
	a := &device.Agent{
		ID: device.NewID(device.AgentIDPrefix), Hostname: hostname,
		OS:   device.OS{Platform: platform, Name: platform, Version: "1", Build: "1"},
		Arch: "amd64", AgentVersion: "0.1", Capability: 1, Ring: ring,
		CredentialHash: apikey.HashSecret(apikey.NewSecret(device.AgentCredentialPrefix)),
		EnrolledAt:     t0, LastSeenAt: t0,
	}
	wantKind(f.t, f.s.EnrollAgent(context.Background(), f.secret, a), nil)
	return a
}

func (f *fixture) ring(name string, pos int) {
	f.t.Helper()
	wantKind(f.t, f.s.CreateRing(context.Background(), &device.Ring{Name: name, Position: pos, CreatedAt: t0}), nil)
}

func testEnroll(t *testing.T, b *Backend) {
	ctx := context.Background()
	f := newFixture(t, b)
	s := f.s
	f.ring("pilot", 10)

	expired := t0.Add(-time.Minute)
	secrets := map[string]*device.EnrollSecret{
		"revoked": {ID: device.NewID(device.EnrollSecretIDPrefix), SecretHash: apikey.HashSecret("r"), CreatedBy: "t", CreatedAt: t0},
		"expired": {ID: device.NewID(device.EnrollSecretIDPrefix), SecretHash: apikey.HashSecret("e"), CreatedBy: "t", CreatedAt: t0, ExpiresAt: &expired},
		"pilot":   {ID: device.NewID(device.EnrollSecretIDPrefix), SecretHash: apikey.HashSecret("p"), CreatedBy: "t", CreatedAt: t0, Ring: "pilot"},
	}
	for _, e := range secrets {
		wantKind(t, s.CreateEnrollSecret(ctx, e), nil)
	}
	wantKind(t, s.CreateEnrollSecret(ctx, &device.EnrollSecret{ID: "enr_x", SecretHash: apikey.HashSecret("x"), CreatedBy: "t", CreatedAt: t0, Ring: "nope"}), errs.ErrInvalid)
	_, err := s.RevokeEnrollSecret(ctx, secrets["revoked"].ID, t0)
	wantKind(t, err, nil)
	_, err = s.RevokeEnrollSecret(ctx, secrets["revoked"].ID, t0)
	wantKind(t, err, errs.ErrConflict)

	tests := []struct {
		name     string
		secret   []byte
		want     error
		wantRing string
	}{
		{"good", f.secret, nil, ""},
		{"ring of the secret", apikey.HashSecret("p"), nil, "pilot"},
		{"unknown", apikey.HashSecret("u"), errs.ErrUnauthorized, ""},
		{"revoked", apikey.HashSecret("r"), errs.ErrUnauthorized, ""},
		{"expired", apikey.HashSecret("e"), errs.ErrUnauthorized, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &device.Agent{ID: device.NewID(device.AgentIDPrefix), Hostname: "h", OS: device.OS{Platform: "linux"},
				CredentialHash: apikey.HashSecret("c"), EnrolledAt: t0, LastSeenAt: t0}
			wantKind(t, s.EnrollAgent(ctx, tt.secret, a), tt.want)
			if tt.want != nil {
				return
			}
			got, err := s.FindAgentByID(ctx, a.ID)
			wantKind(t, err, nil)
			if got.Ring != tt.wantRing || got.EnrollSecretID == "" {
				t.Errorf("enrolled agent ring = %q, secret = %q", got.Ring, got.EnrollSecretID)
			}
		})
	}
	list, err := s.FindEnrollSecrets(ctx)
	wantKind(t, err, nil)
	for _, e := range list {
		if e.ID == secrets["pilot"].ID && (e.Uses != 1 || e.LastUsedAt == nil) {
			t.Errorf("pilot secret uses = %d, last used %v", e.Uses, e.LastUsedAt)
		}
	}
}

// testEnrollAgain: an enrollment sent again with its enrollment id, its
// first answer lost, answers the same agent with the new credential, until
// that agent checks in.
func testEnrollAgain(t *testing.T, b *Backend) {
	ctx := context.Background()
	f := newFixture(t, b)
	s := f.s
	attempt := func(enrollmentID, hostname, credential string) (*device.Agent, error) {
		a := &device.Agent{ID: device.NewID(device.AgentIDPrefix), Hostname: hostname, OS: device.OS{Platform: "linux"},
			CredentialHash: apikey.HashSecret(credential), EnrollmentID: enrollmentID, EnrolledAt: t0, LastSeenAt: t0}
		return a, s.EnrollAgent(ctx, f.secret, a)
	}
	credentialOf := func(id string) []byte {
		t.Helper()
		c, err := s.FindAgentCredential(ctx, id)
		wantKind(t, err, nil)
		return c.Hash
	}
	first, err := attempt("ENROLLMENT0000000001", "web-01", "c1")
	wantKind(t, err, nil)
	again, err := attempt("ENROLLMENT0000000001", "web-01", "c2")
	wantKind(t, err, nil)
	if again.ID != first.ID || again.Ring != first.Ring || again.EnrollSecretID != first.EnrollSecretID {
		t.Errorf("sent again: agent %s (ring %q), want %s (ring %q)", again.ID, again.Ring, first.ID, first.Ring)
	}
	if !bytes.Equal(credentialOf(first.ID), apikey.HashSecret("c2")) {
		t.Error("sent again: the agent keeps the first credential")
	}
	_, err = attempt("ENROLLMENT0000000001", "web-02", "c3")
	wantKind(t, err, errs.ErrConflict)

	other, err := attempt("ENROLLMENT0000000002", "web-01", "c4")
	wantKind(t, err, nil)
	none, err := attempt("", "web-01", "c5")
	wantKind(t, err, nil)
	if other.ID == first.ID || none.ID == first.ID || none.ID == other.ID {
		t.Errorf("three enrollments made agents %s, %s, %s", first.ID, other.ID, none.ID)
	}
	agents, err := s.FindAgents(ctx, device.AgentFilter{})
	wantKind(t, err, nil)
	if len(agents) != 3 {
		t.Errorf("%d agents, want 3", len(agents))
	}
	secrets, err := s.FindEnrollSecrets(ctx)
	wantKind(t, err, nil)
	if len(secrets) != 1 || secrets[0].Uses != 3 {
		t.Errorf("enrollment secrets = %+v, want one used 3 times", secrets)
	}

	// Once the agent has checked in, its enrollment id is spent.
	_, err = s.CheckIn(ctx, first.ID, device.CheckIn{Time: t0.Add(time.Minute), Hostname: "web-01", OS: first.OS})
	wantKind(t, err, nil)
	_, err = attempt("ENROLLMENT0000000001", "web-01", "c6")
	wantKind(t, err, errs.ErrConflict)
	if !bytes.Equal(credentialOf(first.ID), apikey.HashSecret("c2")) {
		t.Error("a spent enrollment id changed the credential")
	}
}

func testFindAgents(t *testing.T, b *Backend) {
	ctx := context.Background()
	f := newFixture(t, b)
	f.ring("pilot", 1)
	var all []string
	var agents []*device.Agent
	for i := 0; i < 23; i++ {
		platform := device.Platforms[i%3]
		ring := ""
		if i%4 == 0 {
			ring = "pilot"
		}
		// Hostnames repeat, so the id breaks ties in the order.
		a := f.enroll(fmt.Sprintf("host-%02d", i%11), platform, ring)
		all = append(all, a.ID)
		agents = append(agents, a)
	}
	// Half the fleet last checked in an hour ago.
	for i, a := range agents {
		if i%2 == 1 {
			_, err := f.s.CheckIn(ctx, a.ID, device.CheckIn{Time: t0.Add(-time.Hour), Hostname: a.Hostname, OS: a.OS,
				Arch: a.Arch, AgentVersion: a.AgentVersion, Capability: a.Capability})
			wantKind(t, err, nil)
		}
	}

	walk := func(filter device.AgentFilter, page int) []*device.Agent {
		t.Helper()
		var out []*device.Agent
		filter.Limit = page
		for {
			got, err := f.s.FindAgents(ctx, filter)
			wantKind(t, err, nil)
			out = append(out, got...)
			if len(got) < page {
				return out
			}
			last := got[len(got)-1]
			filter.After = &device.AgentCursor{Hostname: last.Hostname, ID: last.ID}
		}
	}
	everyone := walk(device.AgentFilter{}, 100)
	if len(everyone) != len(all) {
		t.Fatalf("FindAgents = %d agents, want %d", len(everyone), len(all))
	}
	for i := 1; i < len(everyone); i++ {
		a, b := everyone[i-1], everyone[i]
		if a.Hostname > b.Hostname || a.Hostname == b.Hostname && a.ID >= b.ID {
			t.Fatalf("not in (hostname, id) order at %d: %s/%s then %s/%s", i, a.Hostname, a.ID, b.Hostname, b.ID)
		}
	}
	for _, page := range []int{1, 4, 7, 23, 24} {
		got := walk(device.AgentFilter{}, page)
		if diff := cmp.Diff(ids(everyone), ids(got)); diff != "" {
			t.Errorf("pages of %d (-want +got):\n%s", page, diff)
		}
	}

	count := func(filter device.AgentFilter, keep func(*device.Agent) bool) {
		t.Helper()
		var want []string
		for _, a := range everyone {
			if keep(a) {
				want = append(want, a.ID)
			}
		}
		got := walk(filter, 5)
		if diff := cmp.Diff(want, ids(got)); diff != "" {
			t.Errorf("filter %+v (-want +got):\n%s", filter, diff)
		}
	}
	count(device.AgentFilter{Platform: "macos"}, func(a *device.Agent) bool { return a.OS.Platform == "macos" })
	count(device.AgentFilter{Ring: "pilot"}, func(a *device.Agent) bool { return a.Ring == "pilot" })
	count(device.AgentFilter{Text: "HOST-0"}, func(a *device.Agent) bool { return a.Hostname < "host-10" })
	count(device.AgentFilter{Text: "%"}, func(a *device.Agent) bool { return false })
	count(device.AgentFilter{Status: device.StatusOnline}, func(a *device.Agent) bool { return a.Status(t0) == device.StatusOnline })
	count(device.AgentFilter{Status: device.StatusOffline, Platform: "linux"}, func(a *device.Agent) bool {
		return a.Status(t0) == device.StatusOffline && a.OS.Platform == "linux"
	})
	count(device.AgentFilter{IDs: all[:3]}, func(a *device.Agent) bool { return a.ID == all[0] || a.ID == all[1] || a.ID == all[2] })
}

func ids(agents []*device.Agent) []string {
	var out []string
	for _, a := range agents {
		out = append(out, a.ID)
	}
	return out
}

func testCheckInAndCommands(t *testing.T, b *Backend) {
	ctx := context.Background()
	f := newFixture(t, b)
	s := f.s
	a := f.enroll("web-01", "linux", "")
	other := f.enroll("web-02", "linux", "")

	inv := &device.Inventory{Software: []device.Software{{Name: "openssl", Version: "3.0.2", Ecosystem: "Debian:12"}}, PendingUpdates: []device.Update{}}
	checkIn := func(at time.Time, inv *device.Inventory) []*device.Command {
		t.Helper()
		cmds, err := s.CheckIn(ctx, a.ID, device.CheckIn{Time: at, Hostname: "web-01", OS: a.OS, Inventory: inv,
			FeatureUpgrade: device.FeatureUpgrade{State: device.FeatureUpgradeReady, Target: "13"}})
		wantKind(t, err, nil)
		return cmds
	}
	if cmds := checkIn(t0.Add(time.Minute), inv); len(cmds) != 0 {
		t.Fatalf("first check-in delivered %d commands", len(cmds))
	}
	checkIn(t0.Add(2*time.Minute), nil) // inventory unchanged
	got, err := s.FindAgentByID(ctx, a.ID)
	wantKind(t, err, nil)
	if diff := cmp.Diff(*inv, got.Inventory); diff != "" {
		t.Errorf("inventory (-want +got):\n%s", diff)
	}
	if !got.LastSeenAt.Equal(t0.Add(2*time.Minute)) || got.FeatureUpgrade.State != device.FeatureUpgradeReady {
		t.Errorf("agent after check-in = %+v", got)
	}

	reboot := device.NewCommand(a.ID, device.Reboot, nil, "key:plk_x", t0.Add(3*time.Minute))
	logs := device.NewCommand(a.ID, device.CollectLogs, nil, "key:plk_x", t0.Add(3*time.Minute+time.Second))
	created, err := s.CreateCommands(ctx, []*device.Command{reboot, logs}, false)
	wantKind(t, err, nil)
	if len(created) != 2 {
		t.Fatalf("created %d commands", len(created))
	}
	_, err = s.CreateCommands(ctx, []*device.Command{device.NewCommand("agt_nobody", device.Reboot, nil, "x", t0)}, false)
	wantKind(t, err, errs.ErrNotFound)
	// skipActive leaves out a second active command of the same type.
	created, err = s.CreateCommands(ctx, []*device.Command{device.NewCommand(a.ID, device.Reboot, nil, "x", t0.Add(3*time.Minute))}, true)
	wantKind(t, err, nil)
	if len(created) != 0 {
		t.Errorf("skipActive queued a second reboot")
	}

	// Reports before delivery conflict; delivery happens once.
	_, err = s.ReportCommand(ctx, a.ID, reboot.ID, device.Report{State: device.Running, Time: t0.Add(4 * time.Minute)})
	wantKind(t, err, errs.ErrConflict)
	cmds := checkIn(t0.Add(4*time.Minute), nil)
	if diff := cmp.Diff([]string{reboot.ID, logs.ID}, cmdIDs(cmds)); diff != "" {
		t.Errorf("delivered (-want +got):\n%s", diff)
	}
	if cmds := checkIn(t0.Add(5*time.Minute), nil); len(cmds) != 0 {
		t.Errorf("commands delivered twice")
	}

	_, err = s.ReportCommand(ctx, other.ID, reboot.ID, device.Report{State: device.Running, Time: t0})
	wantKind(t, err, errs.ErrNotFound)
	c, err := s.ReportCommand(ctx, a.ID, reboot.ID, device.Report{State: device.Running, Time: t0.Add(5 * time.Minute)})
	wantKind(t, err, nil)
	if c.State != device.Running {
		t.Errorf("state = %s", c.State)
	}
	_, err = s.CancelCommand(ctx, reboot.ID, t0)
	wantKind(t, err, errs.ErrConflict)
	c, err = s.ReportCommand(ctx, a.ID, reboot.ID, device.Report{State: device.Failed, Result: &device.Result{Message: "not allowed by this endpoint's local policy"}, Time: t0.Add(6 * time.Minute)})
	wantKind(t, err, nil)
	if c.State != device.Failed || c.Result.Message == "" {
		t.Errorf("failed command = %+v", c)
	}
	_, err = s.ReportCommand(ctx, a.ID, reboot.ID, device.Report{State: device.Succeeded, Time: t0.Add(7 * time.Minute)})
	wantKind(t, err, errs.ErrConflict)

	// Log bundles: one per collect-logs command of the agent.
	bundle := &device.LogBundle{CommandID: logs.ID, AgentID: a.ID, ContentType: "application/gzip", Size: 3, SHA256: make([]byte, 32), Content: []byte("abc"), CreatedAt: t0}
	wantKind(t, s.SaveLogBundle(ctx, &device.LogBundle{CommandID: logs.ID, AgentID: other.ID, ContentType: "x", Content: []byte("x"), SHA256: []byte{}}), errs.ErrNotFound)
	wantKind(t, s.SaveLogBundle(ctx, &device.LogBundle{CommandID: reboot.ID, AgentID: a.ID, ContentType: "x", Content: []byte("x"), SHA256: []byte{}}), errs.ErrNotFound)
	wantKind(t, s.SaveLogBundle(ctx, bundle), nil)
	wantKind(t, s.SaveLogBundle(ctx, bundle), errs.ErrConflict)
	gotBundle, err := s.FindLogBundle(ctx, logs.ID)
	wantKind(t, err, nil)
	if diff := cmp.Diff(bundle, gotBundle); diff != "" {
		t.Errorf("FindLogBundle (-want +got):\n%s", diff)
	}
	_, err = s.FindLogBundle(ctx, reboot.ID)
	wantKind(t, err, errs.ErrNotFound)

	// Expiry: the delivered collect-logs command is past its TTL a day
	// later; a fresh queued one is not, and can be canceled.
	fresh := device.NewCommand(a.ID, device.InstallUpdates, json.RawMessage(`{"updates":["KB1"]}`), "x", t0.Add(24*time.Hour))
	_, err = s.CreateCommands(ctx, []*device.Command{fresh}, false)
	wantKind(t, err, nil)
	n, err := s.ExpireCommands(ctx, t0.Add(25*time.Hour))
	wantKind(t, err, nil)
	if n != 1 {
		t.Errorf("expired %d commands, want 1", n)
	}
	c, _ = s.FindCommandByID(ctx, logs.ID)
	if c.State != device.Expired || c.Result == nil {
		t.Errorf("collect-logs after its TTL = %+v", c)
	}
	c, err = s.CancelCommand(ctx, fresh.ID, t0.Add(25*time.Hour))
	wantKind(t, err, nil)
	if c.State != device.Canceled || string(c.Params) != `{"updates":["KB1"]}` {
		t.Errorf("canceled = %+v", c)
	}

	page, err := s.FindCommands(ctx, device.CommandFilter{AgentID: a.ID, Limit: 2})
	wantKind(t, err, nil)
	rest, err := s.FindCommands(ctx, device.CommandFilter{AgentID: a.ID, Before: &device.CommandCursor{CreatedAt: page[1].CreatedAt, ID: page[1].ID}})
	wantKind(t, err, nil)
	if diff := cmp.Diff([]string{fresh.ID, logs.ID, reboot.ID}, cmdIDs(append(page, rest...))); diff != "" {
		t.Errorf("FindCommands newest first (-want +got):\n%s", diff)
	}
}

func cmdIDs(cmds []*device.Command) []string {
	var out []string
	for _, c := range cmds {
		out = append(out, c.ID)
	}
	return out
}

func testRemoveAgent(t *testing.T, b *Backend) {
	ctx := context.Background()
	f := newFixture(t, b)
	s := f.s
	a := f.enroll("old-laptop", "windows", "")
	pending := device.NewCommand(a.ID, device.InstallUpdates, nil, "x", t0)
	_, err := s.CreateCommands(ctx, []*device.Command{pending}, false)
	wantKind(t, err, nil)

	rm := device.NewCommand(a.ID, device.Remove, nil, "key:plk_x", t0.Add(time.Minute))
	wantKind(t, s.RemoveAgent(ctx, a.ID, rm), nil)
	wantKind(t, s.RemoveAgent(ctx, a.ID, device.NewCommand(a.ID, device.Remove, nil, "x", t0)), errs.ErrNotFound)
	_, err = s.FindAgentByID(ctx, a.ID)
	wantKind(t, err, errs.ErrNotFound)
	if list, _ := s.FindAgents(ctx, device.AgentFilter{}); len(list) != 0 {
		t.Errorf("a removed agent is listed")
	}
	c, _ := s.FindCommandByID(ctx, pending.ID)
	if c.State != device.Canceled {
		t.Errorf("pending command of a removed agent is %s", c.State)
	}
	_, err = s.CreateCommands(ctx, []*device.Command{device.NewCommand(a.ID, device.Reboot, nil, "x", t0)}, false)
	wantKind(t, err, errs.ErrNotFound)

	// The agent still hears about its removal, then no more.
	cred, err := s.FindAgentCredential(ctx, a.ID)
	wantKind(t, err, nil)
	if cred.RemovedAt == nil {
		t.Error("credential of a removed agent has no RemovedAt")
	}
	cmds, err := s.CheckIn(ctx, a.ID, device.CheckIn{Time: t0.Add(2 * time.Minute), Hostname: "old-laptop"})
	wantKind(t, err, nil)
	if diff := cmp.Diff([]string{rm.ID}, cmdIDs(cmds)); diff != "" {
		t.Errorf("removed agent got (-want +got):\n%s", diff)
	}
	_, err = s.ReportCommand(ctx, a.ID, rm.ID, device.Report{State: device.Succeeded, Result: &device.Result{Message: "uninstalled"}, Time: t0.Add(3 * time.Minute)})
	wantKind(t, err, nil)
	_, err = s.CheckIn(ctx, a.ID, device.CheckIn{Time: t0.Add(4 * time.Minute), Hostname: "old-laptop"})
	wantKind(t, err, errs.ErrUnauthorized)
}

func testRollouts(t *testing.T, b *Backend) {
	ctx := context.Background()
	f := newFixture(t, b)
	s := f.s
	f.ring("broad", 20)
	f.ring("pilot", 10)
	f.ring("canary", 5)
	wantKind(t, s.CreateRing(ctx, &device.Ring{Name: "pilot", Position: 99, CreatedAt: t0}), errs.ErrConflict)
	wantKind(t, s.CreateRing(ctx, &device.Ring{Name: "other", Position: 10, CreatedAt: t0}), errs.ErrConflict)
	rings, err := s.FindRings(ctx)
	wantKind(t, err, nil)
	if diff := cmp.Diff([]string{"canary", "pilot", "broad"}, ringNames(rings)); diff != "" {
		t.Errorf("rings (-want +got):\n%s", diff)
	}

	pilot := []*device.Agent{f.enroll("p1", "windows", "pilot"), f.enroll("p2", "windows", "pilot")}
	broad := []*device.Agent{f.enroll("b1", "windows", "broad"), f.enroll("b2", "macos", "broad"), f.enroll("b3", "linux", "broad")}
	f.enroll("none", "linux", "")

	ro := &device.Rollout{ID: device.NewID(device.RolloutIDPrefix), Name: "November", Kind: device.InstallUpdates,
		Rings: []string{"broad", "pilot"}, CreatedBy: "key:plk_x", CreatedAt: t0, UpdatedAt: t0}
	wantKind(t, s.CreateRollout(ctx, ro), nil)
	if diff := cmp.Diff([]string{"pilot", "broad"}, ro.Rings); diff != "" {
		t.Errorf("rollout rings are not in ring order (-want +got):\n%s", diff)
	}
	bad := *ro
	bad.ID, bad.Rings = device.NewID(device.RolloutIDPrefix), []string{"pilot", "nope"}
	wantKind(t, s.CreateRollout(ctx, &bad), errs.ErrInvalid)

	_, _, err = s.AdvanceRollout(ctx, ro.ID, device.Advance{FromRing: "pilot", Now: t0})
	wantKind(t, err, errs.ErrConflict)
	r, cmds, err := s.AdvanceRollout(ctx, ro.ID, device.Advance{CreatedBy: "key:plk_p", Now: t0.Add(time.Minute)})
	wantKind(t, err, nil)
	if r.CurrentRing() != "pilot" || r.State != device.RolloutInProgress || len(cmds) != len(pilot) {
		t.Fatalf("after the first advance: ring %q, state %s, %d commands", r.CurrentRing(), r.State, len(cmds))
	}
	for _, c := range cmds {
		if c.Type != device.InstallUpdates || c.RolloutID != ro.ID || c.RolloutRing != "pilot" || c.CreatedBy != "key:plk_p" {
			t.Errorf("rollout command = %+v", c)
		}
	}
	// The next ring waits for the current one.
	_, _, err = s.AdvanceRollout(ctx, ro.ID, device.Advance{Now: t0.Add(2 * time.Minute)})
	wantKind(t, err, errs.ErrConflict)
	for _, a := range pilot {
		delivered, err := s.CheckIn(ctx, a.ID, device.CheckIn{Time: t0.Add(3 * time.Minute), Hostname: a.Hostname, OS: a.OS})
		wantKind(t, err, nil)
		for _, c := range delivered {
			_, err := s.ReportCommand(ctx, a.ID, c.ID, device.Report{State: device.Succeeded, Time: t0.Add(4 * time.Minute)})
			wantKind(t, err, nil)
		}
	}
	progress, err := s.RolloutProgress(ctx, ro.ID)
	wantKind(t, err, nil)
	if len(progress) != 1 || progress[0].Ring != "pilot" || progress[0].States[device.Succeeded] != 2 {
		t.Errorf("progress = %+v", progress)
	}
	_, _, err = s.AdvanceRollout(ctx, ro.ID, device.Advance{FromRing: "canary", Now: t0})
	wantKind(t, err, errs.ErrConflict)
	r, cmds, err = s.AdvanceRollout(ctx, ro.ID, device.Advance{FromRing: "pilot", Now: t0.Add(5 * time.Minute)})
	wantKind(t, err, nil)
	if r.CurrentRing() != "broad" || r.State != device.RolloutInProgress || len(cmds) != len(broad) {
		t.Errorf("after the second advance: ring %q, state %s, %d commands", r.CurrentRing(), r.State, len(cmds))
	}
	_, _, err = s.AdvanceRollout(ctx, ro.ID, device.Advance{Now: t0.Add(6 * time.Minute)})
	wantKind(t, err, errs.ErrConflict)
	// The rollout completes as the last ring's commands end: one
	// succeeds, one is canceled, one expires.
	delivered, err := s.CheckIn(ctx, broad[0].ID, device.CheckIn{Time: t0.Add(7 * time.Minute), Hostname: "b1", OS: broad[0].OS})
	wantKind(t, err, nil)
	_, err = s.ReportCommand(ctx, broad[0].ID, delivered[0].ID, device.Report{State: device.Succeeded, Time: t0.Add(8 * time.Minute)})
	wantKind(t, err, nil)
	_, err = s.CancelCommand(ctx, cmdFor(cmds, broad[1].ID), t0.Add(9*time.Minute))
	wantKind(t, err, nil)
	if r, _ := s.FindRolloutByID(ctx, ro.ID); r.State != device.RolloutInProgress {
		t.Errorf("rollout with a command left is %s", r.State)
	}
	if _, err := s.ExpireCommands(ctx, t0.Add(30*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.FindRolloutByID(ctx, ro.ID); r.State != device.RolloutCompleted {
		t.Errorf("rollout with every command over is %s", r.State)
	}
	_, _, err = s.AdvanceRollout(ctx, ro.ID, device.Advance{Now: t0.Add(31 * 24 * time.Hour)})
	wantKind(t, err, errs.ErrConflict)
	_, _, err = s.AdvanceRollout(ctx, "rol_nope", device.Advance{Now: t0})
	wantKind(t, err, errs.ErrNotFound)

	// A policy rollout carries the version current at its creation.
	p := &device.Policy{ID: device.NewID(device.PolicyIDPrefix), Name: "screen lock", Settings: json.RawMessage(`{"lockAfterMinutes":5}`), CreatedBy: "x", CreatedAt: t0, UpdatedAt: t0}
	wantKind(t, s.CreatePolicy(ctx, p), nil)
	pr := &device.Rollout{ID: device.NewID(device.RolloutIDPrefix), Name: "lock", Kind: device.ApplyPolicy, PolicyID: p.ID, CreatedBy: "x", CreatedAt: t0, UpdatedAt: t0}
	wantKind(t, s.CreateRollout(ctx, pr), nil)
	if _, err := s.UpdatePolicy(ctx, p.ID, json.RawMessage(`{"lockAfterMinutes":1}`), "x", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"canary", "pilot", "broad"}, pr.Rings); diff != "" {
		t.Errorf("default rings (-want +got):\n%s", diff)
	}
	r, cmds, err = s.AdvanceRollout(ctx, pr.ID, device.Advance{Now: t0.Add(2 * time.Hour)})
	wantKind(t, err, nil)
	if r.CurrentRing() != "canary" || len(cmds) != 0 || r.PolicyVersion != 1 {
		t.Errorf("empty canary ring: ring %q, %d commands, version %d", r.CurrentRing(), len(cmds), r.PolicyVersion)
	}
	_, cmds, err = s.AdvanceRollout(ctx, pr.ID, device.Advance{Now: t0.Add(3 * time.Hour)})
	wantKind(t, err, nil)
	var params device.ApplyPolicyParams
	if err := json.Unmarshal(cmds[0].Params, &params); err != nil || params.Version != 1 || string(params.Settings) != `{"lockAfterMinutes":5}` {
		t.Errorf("apply-policy params = %s", cmds[0].Params)
	}
	list, err := s.FindRollouts(ctx, device.RolloutFilter{State: device.RolloutCompleted})
	wantKind(t, err, nil)
	if len(list) != 1 || list[0].ID != ro.ID {
		t.Errorf("completed rollouts = %v", list)
	}
}

func cmdFor(cmds []*device.Command, agentID string) string {
	for _, c := range cmds {
		if c.AgentID == agentID {
			return c.ID
		}
	}
	return ""
}

func ringNames(rings []*device.Ring) []string {
	var out []string
	for _, r := range rings {
		out = append(out, r.Name)
	}
	return out
}

func testPolicies(t *testing.T, b *Backend) {
	ctx := context.Background()
	s := b.open(t)
	p := &device.Policy{ID: device.NewID(device.PolicyIDPrefix), Name: "firewall", Settings: json.RawMessage(`{"enabled":true}`), CreatedBy: "a", CreatedAt: t0, UpdatedAt: t0}
	wantKind(t, s.CreatePolicy(ctx, p), nil)
	dup := *p
	dup.ID = device.NewID(device.PolicyIDPrefix)
	wantKind(t, s.CreatePolicy(ctx, &dup), errs.ErrConflict)
	up, err := s.UpdatePolicy(ctx, p.ID, json.RawMessage(`{"enabled":false}`), "b", t0.Add(time.Hour))
	wantKind(t, err, nil)
	want := &device.Policy{ID: p.ID, Name: "firewall", Version: 2, Settings: json.RawMessage(`{"enabled":false}`), CreatedBy: "b", CreatedAt: t0, UpdatedAt: t0.Add(time.Hour)}
	if diff := cmp.Diff(want, up); diff != "" {
		t.Errorf("UpdatePolicy (-want +got):\n%s", diff)
	}
	got, err := s.FindPolicyByID(ctx, p.ID)
	wantKind(t, err, nil)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FindPolicyByID (-want +got):\n%s", diff)
	}
	_, err = s.UpdatePolicy(ctx, "pol_nope", json.RawMessage(`{}`), "b", t0)
	wantKind(t, err, errs.ErrNotFound)
}

func testAuditLog(t *testing.T, b *Backend) {
	ctx := context.Background()
	s := b.open(t)
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := &audit.Entry{Time: t0, Actor: "key:plk_a", KeyID: fmt.Sprintf("plk_%d", i%4), Method: "GET", Path: "/api/agents", Status: 200, ClientAddress: "127.0.0.1"}
			e.SetEvent(audit.APIRequest{})
			if err := s.AppendAudit(ctx, e); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	// Another process, or another replica, appends through its own
	// connection.
	other := b.OpenAgain(t, s)
	e := &audit.Entry{Time: t0, Actor: "cli:root", ClientAddress: "local"}
	e.SetEvent(audit.KeyRevoked{KeyID: "plk_1"})
	wantKind(t, other.AppendAudit(ctx, e), nil)
	if e.ID != 41 {
		t.Errorf("entry appended by another connection has id %d", e.ID)
	}

	res, err := audit.Verify(ctx, s)
	wantKind(t, err, nil)
	if res.Broken != nil || res.Entries != 41 {
		t.Fatalf("Verify = %+v", res)
	}
	entries, err := s.FindAuditEntries(ctx, audit.Filter{KeyID: "plk_1", Limit: 5})
	wantKind(t, err, nil)
	if len(entries) != 5 || entries[0].ID < entries[4].ID {
		t.Errorf("FindAuditEntries = %d entries, not newest first", len(entries))
	}
	more, err := s.FindAuditEntries(ctx, audit.Filter{KeyID: "plk_1", Before: entries[4].ID})
	wantKind(t, err, nil)
	if len(more) != 5 {
		t.Errorf("second page = %d entries, want 5", len(more))
	}
	revoked, err := s.FindAuditEntries(ctx, audit.Filter{Action: "key.revoked"})
	wantKind(t, err, nil)
	if len(revoked) != 1 || string(revoked[0].Details) != `{"keyId":"plk_1"}` {
		t.Errorf("key.revoked entries = %+v", revoked)
	}

	if err := b.Exec(t, s, `UPDATE audit_log SET status = 500 WHERE id = 3`); err == nil {
		t.Error("the database let an audit entry change")
	}
	if err := b.Exec(t, s, `DELETE FROM audit_log WHERE id = 3`); err == nil {
		t.Error("the database let an audit entry go")
	}
	// Past the triggers, the chain still tells.
	b.DropAuditGuard(t, s)
	if err := b.Exec(t, s, `UPDATE audit_log SET status = 500 WHERE id = 3`); err != nil {
		t.Fatal(err)
	}
	res, err = audit.Verify(ctx, s)
	wantKind(t, err, nil)
	if res.Broken == nil || res.Broken.ID != 3 || res.Entries != 2 {
		t.Errorf("Verify after tampering = %+v", res)
	}
}

func testRingRules(t *testing.T, b *Backend) {
	ctx := context.Background()
	f := newFixture(t, b)
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
	// A check-in that keeps the hostname but changes what a rule looks
	// at moves the agent too.
	if _, err := s.CheckIn(ctx, newcomer.ID, device.CheckIn{Time: t0.Add(2 * time.Minute), Hostname: "studio-03", OS: device.OS{Platform: "windows"}}); err != nil {
		t.Fatal(err)
	}
	if r, _ := ring(newcomer.ID); r != "pilot" {
		t.Errorf("after moving to windows, studio-03 is in %q", r)
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

func testInventoryBase(t *testing.T, b *Backend) {
	ctx := context.Background()
	f := newFixture(t, b)
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

func testPolicyCompliance(t *testing.T, b *Backend) {
	ctx := context.Background()
	f := newFixture(t, b)
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

func mustCreateAdmin(t *testing.T, s control.Store, email string) *admin.Admin {
	t.Helper()
	a := &admin.Admin{ID: admin.NewID(), Email: email, PasswordHash: "$argon2id$x", CreatedAt: t0}
	if err := s.CreateAdmin(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	return a
}

func testSessions(t *testing.T, b *Backend) {
	s := b.open(t)
	ctx := context.Background()
	a := mustCreateAdmin(t, s, "ops@example.com")

	token := admin.NewSessionToken()
	if !admin.ValidSessionToken(token) || admin.ValidSessionToken(token+"x") || admin.ValidSessionToken("") {
		t.Fatalf("ValidSessionToken is wrong about %q", token)
	}
	sess := &admin.Session{
		IDHash: admin.HashSessionToken(token), AdminID: a.ID,
		CreatedAt: t0, LastSeenAt: t0, ExpiresAt: t0.Add(12 * time.Hour),
		ClientAddress: "192.0.2.1", UserAgent: "test",
	}
	wantKind(t, s.CreateSession(ctx, sess), nil)

	got, err := s.FindSession(ctx, admin.HashSessionToken(token))
	wantKind(t, err, nil)
	want := *sess
	want.AdminEmail = a.Email
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("FindSession (-want +got):\n%s", diff)
	}
	_, err = s.FindSession(ctx, admin.HashSessionToken(admin.NewSessionToken()))
	wantKind(t, err, errs.ErrNotFound)

	// Activity moves forward only; re-authentication is recorded.
	wantKind(t, s.TouchSession(ctx, sess.IDHash, t0.Add(10*time.Minute)), nil)
	wantKind(t, s.TouchSession(ctx, sess.IDHash, t0.Add(5*time.Minute)), nil)
	wantKind(t, s.RecordReauth(ctx, sess.IDHash, t0.Add(11*time.Minute)), nil)
	wantKind(t, s.RecordReauth(ctx, []byte("nope"), t0), errs.ErrNotFound)
	got, _ = s.FindSession(ctx, sess.IDHash)
	if !got.LastSeenAt.Equal(t0.Add(11*time.Minute)) || got.ReauthAt == nil || !got.ReauthAt.Equal(t0.Add(11*time.Minute)) {
		t.Errorf("after touch and re-authentication: last seen %v, reauth %v", got.LastSeenAt, got.ReauthAt)
	}

	// Expiry: idle and absolute.
	idle := &admin.Session{IDHash: admin.HashSessionToken(admin.NewSessionToken()), AdminID: a.ID, CreatedAt: t0, LastSeenAt: t0, ExpiresAt: t0.Add(12 * time.Hour)}
	old := &admin.Session{IDHash: admin.HashSessionToken(admin.NewSessionToken()), AdminID: a.ID, CreatedAt: t0, LastSeenAt: t0.Add(time.Hour), ExpiresAt: t0.Add(time.Hour)}
	wantKind(t, s.CreateSession(ctx, idle), nil)
	wantKind(t, s.CreateSession(ctx, old), nil)
	n, err := s.DeleteExpiredSessions(ctx, t0.Add(time.Hour), t0.Add(time.Minute))
	wantKind(t, err, nil)
	if n != 2 {
		t.Errorf("DeleteExpiredSessions deleted %d, want 2", n)
	}
	if _, err := s.FindSession(ctx, sess.IDHash); err != nil {
		t.Errorf("the active session went too: %v", err)
	}

	wantKind(t, s.DeleteSession(ctx, sess.IDHash), nil)
	wantKind(t, s.DeleteSession(ctx, sess.IDHash), nil)
	_, err = s.FindSession(ctx, sess.IDHash)
	wantKind(t, err, errs.ErrNotFound)

	// A session needs an administrator.
	err = s.CreateSession(ctx, &admin.Session{IDHash: admin.HashSessionToken(token), AdminID: "adm_nobody", CreatedAt: t0, LastSeenAt: t0, ExpiresAt: t0})
	if err == nil {
		t.Error("a session of an unknown administrator was stored")
	}
}

func testCreateFirstAdmin(t *testing.T, b *Backend) {
	s := b.open(t)
	ctx := context.Background()
	first := &admin.Admin{ID: admin.NewID(), Email: "first@example.com", PasswordHash: "$argon2id$x", CreatedAt: t0}
	wantKind(t, s.CreateFirstAdmin(ctx, first), nil)
	second := &admin.Admin{ID: admin.NewID(), Email: "second@example.com", PasswordHash: "$argon2id$x", CreatedAt: t0}
	wantKind(t, s.CreateFirstAdmin(ctx, second), errs.ErrConflict)
	admins, err := s.FindAdmins(ctx)
	wantKind(t, err, nil)
	if len(admins) != 1 || admins[0].Email != first.Email {
		t.Errorf("admins = %v", admins)
	}
}

func testTOTP(t *testing.T, b *Backend) {
	s := b.open(t)
	ctx := context.Background()
	a := mustCreateAdmin(t, s, "ops@example.com")

	_, err := s.FindTOTP(ctx, a.ID)
	wantKind(t, err, errs.ErrNotFound)
	wantKind(t, s.UseTOTPStep(ctx, a.ID, 10), errs.ErrNotFound)
	wantKind(t, s.SetTOTP(ctx, &admin.TOTP{AdminID: "adm_nobody", Secret: "X", EnabledAt: t0}), errs.ErrNotFound)

	enr := &admin.TOTP{AdminID: a.ID, Secret: "JBSWY3DPEHPK3PXP", EnabledAt: t0, LastStep: 100}
	wantKind(t, s.SetTOTP(ctx, enr), nil)
	got, err := s.FindTOTP(ctx, a.ID)
	wantKind(t, err, nil)
	if diff := cmp.Diff(enr, got); diff != "" {
		t.Errorf("FindTOTP (-want +got):\n%s", diff)
	}

	// A step is good once, and never an older one.
	wantKind(t, s.UseTOTPStep(ctx, a.ID, 101), nil)
	wantKind(t, s.UseTOTPStep(ctx, a.ID, 101), errs.ErrConflict)
	wantKind(t, s.UseTOTPStep(ctx, a.ID, 99), errs.ErrConflict)
	wantKind(t, s.UseTOTPStep(ctx, a.ID, 102), nil)

	// Enrolling again replaces the secret.
	wantKind(t, s.SetTOTP(ctx, &admin.TOTP{AdminID: a.ID, Secret: "KRSXG5CTMVRXEZLU", EnabledAt: t0.Add(time.Hour)}), nil)
	got, _ = s.FindTOTP(ctx, a.ID)
	if got.Secret != "KRSXG5CTMVRXEZLU" || got.LastStep != 0 {
		t.Errorf("after a new enrollment: %+v", got)
	}

	wantKind(t, s.DeleteTOTP(ctx, a.ID), nil)
	wantKind(t, s.DeleteTOTP(ctx, a.ID), nil)
	_, err = s.FindTOTP(ctx, a.ID)
	wantKind(t, err, errs.ErrNotFound)
}
