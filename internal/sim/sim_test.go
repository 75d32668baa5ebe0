package sim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/agent"
	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/control/sqlstore"
	"github.com/patchline/patchline/internal/controlapi"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/wakeup"
)

func newServer(t *testing.T) (*sqlstore.Store, string, string) {
	t.Helper()
	ctx := context.Background()
	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "control.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	secret := apikey.NewSecret(device.EnrollSecretPrefix)
	if err := store.CreateEnrollSecret(ctx, &device.EnrollSecret{
		ID: device.NewID(device.EnrollSecretIDPrefix), SecretHash: apikey.HashSecret(secret), CreatedBy: "test", CreatedAt: time.Now(),
	}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(controlapi.New(controlapi.Config{
		Agents: store, Commands: store, Rings: store, Rollouts: store, Policies: store,
		Keys: store, Audit: store, EnrollSecrets: store,
	}))
	t.Cleanup(srv.Close)
	return store, srv.URL, secret
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func TestProfilesAreDeterministicAndVaried(t *testing.T) {
	build := func(seed uint64) []*machine {
		var ms []*machine
		for i := 0; i < 200; i++ {
			ms = append(ms, newMachine(rand.New(rand.NewPCG(seed, uint64(i))), i+1, 1, 0, time.Now))
		}
		return ms
	}
	a, b := build(7), build(7)
	platforms := map[string]int{}
	ready := 0
	for i := range a {
		if a[i].hostname != b[i].hostname || a[i].os != b[i].os || len(a[i].software) != len(b[i].software) {
			t.Fatalf("machine %d differs between two fleets of the same seed", i)
		}
		platforms[a[i].os.Platform]++
		if a[i].feature.State == device.FeatureUpgradeReady {
			ready++
		}
		snap, err := a[i].Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Inventory.Software) == 0 || snap.Hostname == "" || snap.OS.Build == "" {
			t.Errorf("machine %d reports %+v", i, snap)
		}
		for _, sw := range snap.Inventory.Software {
			if sw.Name == "" || sw.Version == "" || sw.Ecosystem == "" {
				t.Errorf("machine %d: software %+v", i, sw)
			}
		}
	}
	for _, p := range device.Platforms {
		if platforms[p] < 20 {
			t.Errorf("%d %s machines of 200", platforms[p], p)
		}
	}
	if ready < 10 {
		t.Errorf("%d machines with a staged feature upgrade of 200", ready)
	}
}

func TestWindowsMachine(t *testing.T) {
	ctx := context.Background()
	var m *machine
	for i := 0; m == nil; i++ {
		c := newMachine(rand.New(rand.NewPCG(1, uint64(i))), i, 0, 0, time.Now)
		if c.os.Platform == device.PlatformWindows && c.os.Version == "23H2" && c.feature.State == device.FeatureUpgradeReady && len(c.pending) > 0 {
			m = c
		}
	}
	m.sleep = func(context.Context, time.Duration) bool { return true }
	snap, _ := m.Snapshot(ctx)
	osItem := snap.Inventory.Software[len(snap.Inventory.Software)-1]
	if osItem.Name != "Windows 11 Version 23H2" || osItem.Ecosystem != "Windows" || osItem.Version != "10.0."+m.os.Build {
		t.Errorf("the OS as software: %+v", osItem)
	}
	if len(snap.Inventory.InstalledUpdates) == 0 || !strings.HasPrefix(snap.Inventory.InstalledUpdates[0].ID, "KB") {
		t.Errorf("installed updates: %+v", snap.Inventory.InstalledUpdates)
	}

	out := m.Execute(ctx, agent.Command{Type: device.InstallUpdates})
	if out.Failed {
		t.Fatalf("install-updates = %+v", out)
	}
	after, _ := m.Snapshot(ctx)
	if after.OS.Build != win11CUs[len(win11CUs)-1].build || !after.RebootPending || len(after.Inventory.PendingUpdates) != 0 {
		t.Errorf("after install-updates: build %s, reboot pending %v, pending %v", after.OS.Build, after.RebootPending, after.Inventory.PendingUpdates)
	}
	if out := m.Execute(ctx, agent.Command{Type: device.FinishFeatureUpgrade}); out.Failed {
		t.Fatalf("finish-feature-upgrade = %+v", out)
	}
	after, _ = m.Snapshot(ctx)
	if after.OS.Version != "24H2" || after.FeatureUpgrade.State != device.FeatureUpgradeNone || after.RebootPending {
		t.Errorf("after the feature upgrade: %+v %+v", after.OS, after.FeatureUpgrade)
	}
	if out := m.Execute(ctx, agent.Command{Type: device.FinishFeatureUpgrade}); !out.Failed {
		t.Error("a second finish succeeded")
	}

	// With failures certain, commands fail with the platform's errors.
	m.failP = 1
	m.pending = append(m.pending, &update{Update: agentUpdate("KB9")})
	if out := m.Execute(ctx, agent.Command{Type: device.InstallUpdates}); !out.Failed || !strings.Contains(out.Message, "0x800f0922") {
		t.Errorf("failing install = %+v", out)
	}
}

func TestPolicyCheck(t *testing.T) {
	m := newMachine(rand.New(rand.NewPCG(1, 1)), 1, 0, 0, time.Now)
	snap, _ := m.Snapshot(context.Background())
	compliant, msg := m.CheckPolicy(json.RawMessage(`{"lockAfterMinutes":5}`), snap)
	if compliant == nil || !*compliant || msg != "enforced: lockAfterMinutes" {
		t.Errorf("screen lock policy: %v %q", compliant, msg)
	}
	compliant, _ = m.CheckPolicy(json.RawMessage(`{"maxPendingUpdates":-1}`), snap)
	if compliant == nil || *compliant {
		t.Errorf("an impossible bound complies: %v", compliant)
	}
}

func TestFleetAgainstServer(t *testing.T) {
	store, url, secret := newServer(t)
	cfg := Config{Server: url, EnrollSecret: secret, Agents: 12, Interval: 50 * time.Millisecond, TimeScale: 0.002, Seed: 3, AgentVersion: "sim"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	f := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	var agents []*device.Agent
	eventually(t, "12 agents with their inventory", func() bool {
		agents, _ = store.FindAgents(ctx, device.AgentFilter{})
		if len(agents) != 12 {
			return false
		}
		for _, a := range agents {
			if len(a.Inventory.Software) == 0 {
				return false
			}
		}
		return true
	})
	var hosts []string
	for _, a := range agents {
		hosts = append(hosts, a.Hostname)
	}
	want := f.Hostnames()
	slices.Sort(want)
	if diff := cmp.Diff(want, hosts); diff != "" {
		t.Errorf("hostnames (-fleet +server):\n%s", diff)
	}

	// Every command type, on every agent.
	var ids []string
	for _, a := range agents {
		for _, typ := range []device.CommandType{device.CollectLogs, device.InstallUpdates, device.Reboot} {
			c := device.NewCommand(a.ID, typ, nil, "test", time.Now())
			if _, err := store.CreateCommands(ctx, []*device.Command{c}, false); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, c.ID)
		}
	}
	eventually(t, "every command to succeed", func() bool {
		for _, id := range ids {
			if c, _ := store.FindCommandByID(ctx, id); c.State != device.Succeeded {
				return false
			}
		}
		return true
	})
	eventually(t, "inventories without pending updates", func() bool {
		agents, _ = store.FindAgents(ctx, device.AgentFilter{})
		for _, a := range agents {
			if len(a.Inventory.PendingUpdates) != 0 || a.RebootPending {
				return false
			}
		}
		return true
	})
}

func agentUpdate(id string) agentproto.Update { return agentproto.Update{ID: id, Title: id} }

// TestApplicationsAsTheAgentReportsThem checks that a simulated endpoint
// reports its desktop applications in the shape the real agent does:
// every one is a fixed point of agent.Application, the normaliser both
// go through, and the Windows ones come from Programs and Features names
// ("Mozilla Firefox (x64 en-US)" is reported as "Mozilla Firefox").
func TestApplicationsAsTheAgentReportsThem(t *testing.T) {
	names := map[string]bool{}
	for i := 0; i < 300; i++ {
		m := newMachine(rand.New(rand.NewPCG(7, uint64(i))), i, 0, 0, time.Now)
		snap, err := m.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, sw := range snap.Inventory.Software {
			if sw.Ecosystem != "Desktop" && sw.Ecosystem != "Microsoft" {
				continue
			}
			names[sw.Name] = true
			got := agent.Application(sw.Name, sw.Version, sw.Publisher)
			got.Arch, got.Channel = sw.Arch, sw.Channel // from the Click-to-Run configuration
			if got != sw {
				t.Errorf("%+v is reported by the agent as %+v", sw, got)
			}
		}
	}
	for _, want := range []string{"Mozilla Firefox", "7-Zip", "WinRAR", "PuTTY", "Notepad++", "Microsoft 365 Apps for enterprise", "Firefox"} {
		if !names[want] {
			t.Errorf("no simulated endpoint reports %q (names: %v)", want, names)
		}
	}
}

// TestRampSpreadsTheStarts checks that the endpoints of a fleet start
// spread over Config.Ramp: the last enrolls about Ramp×(n-1)/n after the
// first, not over the default 5 seconds.
func TestRampSpreadsTheStarts(t *testing.T) {
	if err := (&Config{Server: "http://x", EnrollSecret: "s", Agents: 1, Ramp: -time.Second}).Validate(); err == nil {
		t.Error("Validate accepted a negative ramp")
	}
	store, url, secret := newServer(t)
	const ramp = 800 * time.Millisecond
	cfg := Config{Server: url, EnrollSecret: secret, Agents: 4, Interval: time.Hour, Wait: -1, Ramp: ramp, Seed: 5, AgentVersion: "sim"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(cfg).Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	var agents []*device.Agent
	eventually(t, "4 agents", func() bool {
		agents, _ = store.FindAgents(ctx, device.AgentFilter{})
		return len(agents) == 4
	})
	first, last := agents[0].EnrolledAt, agents[0].EnrolledAt
	for _, a := range agents {
		if a.EnrolledAt.Before(first) {
			first = a.EnrolledAt
		}
		if a.EnrolledAt.After(last) {
			last = a.EnrolledAt
		}
	}
	if spread, lo, hi := last.Sub(first), ramp*3/4-200*time.Millisecond, ramp+time.Second; spread < lo || spread > hi {
		t.Errorf("the enrollments spread over %s, want %s to %s", spread, lo, hi)
	}
}

// TestFleetOverTLSTakesCommandsThroughTheLongPoll runs a fleet against an
// https:// server with the fleet's own clients: the endpoints enroll over
// TLS, hold their long polls, and a command reaches its endpoint through
// the long poll although the endpoints check in once an hour.
func TestFleetOverTLSTakesCommandsThroughTheLongPoll(t *testing.T) {
	ctx := context.Background()
	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "control.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	secret := apikey.NewSecret(device.EnrollSecretPrefix)
	if err := store.CreateEnrollSecret(ctx, &device.EnrollSecret{
		ID: device.NewID(device.EnrollSecretIDPrefix), SecretHash: apikey.HashSecret(secret), CreatedBy: "test", CreatedAt: time.Now(),
	}); err != nil {
		t.Fatal(err)
	}
	hub := wakeup.NewHub(0)
	ringing := wakeup.Store{Store: store, Bell: hub}
	srv := httptest.NewUnstartedServer(controlapi.New(controlapi.Config{
		Agents: ringing, Commands: ringing, Rings: ringing, Rollouts: ringing, Policies: ringing,
		Keys: ringing, Audit: ringing, EnrollSecrets: ringing, Wakeup: hub,
	}))
	srv.StartTLS()
	t.Cleanup(func() { hub.Close(); srv.Close() })
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())

	cfg := Config{Server: srv.URL, EnrollSecret: secret, Agents: 3, Interval: time.Hour, Wait: 30 * time.Second,
		TimeScale: 0.002, Seed: 7, AgentVersion: "sim", TLS: &tls.Config{RootCAs: roots}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- New(cfg).Run(runCtx) }()
	defer func() {
		cancel()
		<-done
	}()
	eventually(t, "3 long polls held over TLS", func() bool { return hub.Held() == 3 })
	agents, err := store.FindAgents(ctx, device.AgentFilter{})
	if err != nil || len(agents) != 3 {
		t.Fatalf("FindAgents = %d agents, %v; want 3", len(agents), err)
	}
	c := device.NewCommand(agents[1].ID, device.CollectLogs, nil, "test", time.Now())
	if _, err := ringing.CreateCommands(ctx, []*device.Command{c}, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the command to start", func() bool {
		got, _ := store.FindCommandByID(ctx, c.ID)
		return got != nil && (got.State == device.Running || got.State == device.Succeeded || got.State == device.Failed)
	})
}
