package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/control/sqlstore"
	"github.com/patchline/patchline/internal/controlapi"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/httpx"
	"github.com/patchline/patchline/internal/wakeup"
)

// fakeEndpoint is an Endpoint whose snapshot the test sets and whose
// commands it records.
type fakeEndpoint struct {
	mu   sync.Mutex
	snap Snapshot
	ran  []device.CommandType
	gate chan struct{} // when set, commands wait for it to close
}

func (f *fakeEndpoint) Snapshot(ctx context.Context) (*Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.snap
	s.Inventory.Software = append([]agentproto.Software(nil), f.snap.Inventory.Software...)
	return &s, nil
}

func (f *fakeEndpoint) Execute(ctx context.Context, cmd Command) Outcome {
	f.mu.Lock()
	f.ran = append(f.ran, cmd.Type)
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if cmd.Type == device.CollectLogs {
		return Outcome{Message: "collected", Bundle: []byte("\x1f\x8bnot really"), BundleType: "application/gzip"}
	}
	return Outcome{Message: string(cmd.Type) + " done"}
}

func (f *fakeEndpoint) setSoftware(sw ...agentproto.Software) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snap.Inventory.Software = sw
}

func (f *fakeEndpoint) executed() []device.CommandType {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]device.CommandType(nil), f.ran...)
}

// testServer is the real control service on a fresh store, behind a
// switch that makes it answer 503 as if it were down, recording the
// check-ins it sees.
type testServer struct {
	t        *testing.T
	store    *sqlstore.Store
	commands device.CommandStore // the store, or what rings its agents
	url      string
	secret   string
	down     atomic.Bool
	refuse   atomic.Bool // check-ins answer 400
	// lose is the number of enrollments still to take and then answer
	// 502, as a proxy does whose wait for the answer ran out.
	lose     atomic.Int32
	mu       sync.Mutex
	checkIns []agentproto.CheckInRequest
}

func newTestServer(t *testing.T) *testServer {
	t.Helper()
	return newTestServerWith(t, nil)
}

// newTestServerWith is newTestServer whose control service holds long
// polls on hub, rung by its command store, when hub is not nil.
func newTestServerWith(t *testing.T, hub *wakeup.Hub) *testServer {
	t.Helper()
	ctx := context.Background()
	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "control.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ts := &testServer{t: t, store: store, secret: apikey.NewSecret(device.EnrollSecretPrefix)}
	if err := store.CreateEnrollSecret(ctx, &device.EnrollSecret{
		ID: device.NewID(device.EnrollSecretIDPrefix), SecretHash: apikey.HashSecret(ts.secret), CreatedBy: "test", CreatedAt: time.Now(),
	}); err != nil {
		t.Fatal(err)
	}
	cfg := controlapi.Config{
		Agents: store, Commands: store, Rings: store, Rollouts: store, Policies: store,
		Keys: store, Audit: store, EnrollSecrets: store,
	}
	ts.commands = store
	if hub != nil {
		ringing := wakeup.Store{Store: store, Bell: hub}
		cfg.Commands, cfg.Wakeup, ts.commands = ringing, hub, ringing
	}
	api := controlapi.New(cfg)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ts.down.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == agentproto.PathEnroll && ts.lose.Add(-1) >= 0 {
			api.ServeHTTP(httptest.NewRecorder(), r)
			http.Error(w, "the control service did not answer in time", http.StatusBadGateway)
			return
		}
		if r.URL.Path == agentproto.PathCheckIn {
			body, _ := io.ReadAll(r.Body)
			var req agentproto.CheckInRequest
			json.Unmarshal(body, &req)
			ts.mu.Lock()
			ts.checkIns = append(ts.checkIns, req)
			ts.mu.Unlock()
			if ts.refuse.Load() {
				httpx.WriteProblem(w, http.StatusBadRequest, "the inventory does not validate")
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ts.url = srv.URL
	return ts
}

// eventually polls cond until it holds or 10 seconds pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (ts *testServer) agent(id string) *device.Agent {
	ts.t.Helper()
	a, err := ts.store.FindAgentByID(context.Background(), id)
	if err != nil {
		ts.t.Fatal(err)
	}
	return a
}

func (ts *testServer) queue(agentID string, t device.CommandType, params any) string {
	ts.t.Helper()
	var raw json.RawMessage
	if params != nil {
		raw, _ = json.Marshal(params)
	}
	c := device.NewCommand(agentID, t, raw, "test", time.Now())
	if _, err := ts.commands.CreateCommands(context.Background(), []*device.Command{c}, false); err != nil {
		ts.t.Fatal(err)
	}
	return c.ID
}

func (ts *testServer) command(id string) *device.Command {
	ts.t.Helper()
	c, err := ts.store.FindCommandByID(context.Background(), id)
	if err != nil {
		ts.t.Fatal(err)
	}
	return c
}

func (ts *testServer) waitCommand(id string) *device.Command {
	ts.t.Helper()
	var c *device.Command
	eventually(ts.t, "command "+id+" to end", func() bool {
		c = ts.command(id)
		return c.State.Final()
	})
	return c
}

func deb(name, version string) agentproto.Software {
	return agentproto.Software{Name: name, Version: version, Ecosystem: "Debian:12", Arch: "amd64"}
}

func startAgent(t *testing.T, ts *testServer, st State, ep Endpoint, allow ...device.CommandType) (*Agent, chan error, context.CancelFunc) {
	t.Helper()
	a, done, cancel := runAgent(t, Config{Server: ts.url, EnrollSecret: ts.secret, State: st, Endpoint: ep, Allow: allow,
		Interval: 50 * time.Millisecond, AgentVersion: "test"})
	eventually(t, "enrollment", func() bool { return a.AgentID() != "" })
	return a, done, cancel
}

// runAgent runs the agent of c until the test ends, or cancel.
func runAgent(t *testing.T, c Config) (*Agent, chan error, context.CancelFunc) {
	t.Helper()
	a := New(c)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the agent did not stop")
		}
	})
	return a, done, cancel
}

// TestEnrollmentSentAgain: the answers of the first enrollments are lost;
// the agent sends the same enrollment again and the server answers the
// agent it enrolled, so that one endpoint is one agent.
func TestEnrollmentSentAgain(t *testing.T) {
	ts := newTestServer(t)
	ts.lose.Store(2)
	ep := &fakeEndpoint{snap: Snapshot{Hostname: "web-01", OS: agentproto.OS{Platform: "linux", Name: "Debian GNU/Linux", Version: "12"}, Arch: "amd64"}}
	ep.setSoftware(deb("bash", "5.2.15-2+b2"))
	a, _, _ := startAgent(t, ts, NewMemoryState(), ep)
	id := a.AgentID()
	eventually(t, "the inventory", func() bool { return len(ts.agent(id).Inventory.Software) == 1 })
	agents, err := ts.store.FindAgents(context.Background(), device.AgentFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(agents) != 1 || agents[0].ID != id {
		t.Errorf("after three attempts of one enrollment the server has %d agents, want 1 (%s)", len(agents), id)
	}
}

func TestAgentAgainstServer(t *testing.T) {
	ts := newTestServer(t)
	ep := &fakeEndpoint{snap: Snapshot{Hostname: "web-01", OS: agentproto.OS{Platform: "linux", Name: "Debian GNU/Linux", Version: "12", Build: "6.1.0-18-amd64"},
		Arch: "amd64", IPs: []string{"10.0.0.7"}, FeatureUpgrade: agentproto.FeatureUpgrade{State: "none"}}}
	ep.setSoftware(deb("bash", "5.2.15-2+b2"), deb("openssh-server", "1:9.2p1-2+deb12u2"))
	st, err := OpenDiskState(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, _, _ := startAgent(t, ts, st, ep, device.InstallUpdates)
	id := a.AgentID()
	eventually(t, "the inventory", func() bool { return len(ts.agent(id).Inventory.Software) == 2 })

	// A change travels as a delta.
	ep.setSoftware(deb("bash", "5.2.15-2+b2"), deb("openssh-server", "1:9.2p1-2+deb12u3"), deb("curl", "7.88.1-10+deb12u5"))
	eventually(t, "the changed inventory", func() bool { return len(ts.agent(id).Inventory.Software) == 3 })
	ts.mu.Lock()
	full, deltas := 0, 0
	for _, c := range ts.checkIns {
		switch {
		case c.Inventory != nil:
			full++
		case c.InventoryDelta != nil:
			deltas++
			if len(c.InventoryDelta.Added) != 2 || len(c.InventoryDelta.Removed) != 1 {
				t.Errorf("delta = %+v", c.InventoryDelta)
			}
		}
	}
	ts.mu.Unlock()
	if full != 1 || deltas != 1 {
		t.Errorf("%d full inventories and %d deltas, want 1 and 1", full, deltas)
	}

	// A destructive action outside --allow is refused; one inside runs.
	reboot := ts.waitCommand(ts.queue(id, device.Reboot, nil))
	if reboot.State != device.Failed || reboot.Result.Message != agentproto.NotAllowedMessage {
		t.Errorf("reboot without --allow = %s %+v", reboot.State, reboot.Result)
	}
	install := ts.waitCommand(ts.queue(id, device.InstallUpdates, device.InstallUpdatesParams{Updates: []string{"openssh-server"}}))
	if install.State != device.Succeeded {
		t.Errorf("install-updates = %s %+v", install.State, install.Result)
	}
	logs := ts.waitCommand(ts.queue(id, device.CollectLogs, nil))
	if logs.State != device.Succeeded {
		t.Errorf("collect-logs = %s %+v", logs.State, logs.Result)
	}
	if b, err := ts.store.FindLogBundle(context.Background(), logs.ID); err != nil || !bytes.HasPrefix(b.Content, []byte("\x1f\x8b")) {
		t.Errorf("log bundle = %v, %v", b, err)
	}
	if got := ep.executed(); len(got) != 2 || got[0] != device.InstallUpdates || got[1] != device.CollectLogs {
		t.Errorf("the endpoint ran %v", got)
	}

	// A policy: applied, checked, reported.
	pol := &device.Policy{ID: device.NewID(device.PolicyIDPrefix), Name: "p", Settings: json.RawMessage(`{"forbiddenPackages":["curl"],"lockAfterMinutes":5}`), CreatedBy: "t", CreatedAt: time.Now(), UpdatedAt: time.Now()}
	if err := ts.store.CreatePolicy(context.Background(), pol); err != nil {
		t.Fatal(err)
	}
	apply := ts.waitCommand(ts.queue(id, device.ApplyPolicy, device.ApplyPolicyParams{PolicyID: pol.ID, Version: 1, Settings: pol.Settings}))
	if apply.State != device.Succeeded || !strings.Contains(apply.Result.Message, "not compliant: curl is installed; not checked on this endpoint: lockAfterMinutes") {
		t.Errorf("apply-policy = %s %+v", apply.State, apply.Result)
	}
	eventually(t, "the compliance report", func() bool {
		ap := ts.agent(id).AppliedPolicies
		return len(ap) == 1 && ap[0].Compliant != nil && !*ap[0].Compliant
	})
	ep.setSoftware(deb("bash", "5.2.15-2+b2"))
	eventually(t, "compliance after curl is gone", func() bool {
		ap := ts.agent(id).AppliedPolicies
		return len(ap) == 1 && ap[0].Compliant != nil && *ap[0].Compliant
	})

	// While the server is down, results wait on disk.
	ts.down.Store(true)
	time.Sleep(150 * time.Millisecond)
	ts.down.Store(false)
	gate := make(chan struct{})
	ep.mu.Lock()
	ep.gate = gate
	ep.mu.Unlock()
	cmd := ts.queue(id, device.InstallUpdates, nil)
	eventually(t, "the start", func() bool { return ts.command(cmd).State == device.Running })
	ts.down.Store(true)
	close(gate)
	eventually(t, "the result on disk", func() bool {
		rs, _ := st.Results()
		return len(rs) == 1 && rs[0].Final
	})
	ts.down.Store(false)
	if c := ts.waitCommand(cmd); c.State != device.Succeeded {
		t.Errorf("install-updates delivered after the outage = %s", c.State)
	}
	eventually(t, "an empty queue", func() bool { rs, _ := st.Results(); return len(rs) == 0 })
}

func TestAgentRemoveAndReenroll(t *testing.T) {
	ts := newTestServer(t)
	ep := &fakeEndpoint{snap: Snapshot{Hostname: "laptop", OS: agentproto.OS{Platform: "linux", Name: "Ubuntu", Version: "22.04"}}}
	st := NewMemoryState()

	// An identity the server never issued: the agent enrolls afresh.
	st.SaveIdentity(&Identity{Server: "", AgentID: "agt_gone", Credential: "agt_gone.plat_x"})
	a, done, _ := startAgent(t, ts, st, ep)
	eventually(t, "a new enrollment", func() bool { return a.AgentID() != "agt_gone" })
	first := a.AgentID()
	st.SaveIdentity(&Identity{Server: ts.url, AgentID: "agt_aaaaaaaaaaaaaaaaaaaaaaaa", Credential: "agt_aaaaaaaaaaaaaaaaaaaaaaaa." + apikey.NewSecret(device.AgentCredentialPrefix)})
	eventually(t, "a new enrollment", func() bool {
		id := a.AgentID()
		return id != "" && id != "agt_aaaaaaaaaaaaaaaaaaaaaaaa" && id != first
	})
	id := a.AgentID()

	rm := device.NewCommand(id, device.Remove, nil, "test", time.Now())
	if err := ts.store.RemoveAgent(context.Background(), id, rm); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrRemoved) {
			t.Errorf("Run = %v, want ErrRemoved", err)
		}
		done <- err
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not stop after its removal")
	}
	if c := ts.command(rm.ID); c.State != device.Succeeded {
		t.Errorf("remove command = %s", c.State)
	}
	if removed, _ := st.Removed(); removed == nil {
		t.Error("no removal mark")
	}
	if id, _ := st.Identity(); id != nil {
		t.Error("the identity survived the removal")
	}
	// A removed endpoint does not enroll again by itself.
	err := New(Config{Server: ts.url, EnrollSecret: ts.secret, State: st, Endpoint: ep}).Run(context.Background())
	if !errors.Is(err, ErrRemoved) {
		t.Errorf("Run after the removal = %v", err)
	}
}

func TestBackoff(t *testing.T) {
	b := &Backoff{Base: time.Second, Max: 30 * time.Second}
	var prevMax time.Duration
	for i := 0; i < 10; i++ {
		want := min(time.Second<<i, 30*time.Second)
		d := b.Next()
		if d < want/2 || d > want {
			t.Errorf("retry %d: %v, want within [%v, %v]", i, d, want/2, want)
		}
		prevMax = want
	}
	if prevMax != 30*time.Second {
		t.Errorf("the wait does not reach Max")
	}
	b.Reset()
	if d := b.Next(); d > time.Second {
		t.Errorf("after Reset: %v", d)
	}
	for i := 0; i < 100; i++ {
		if d := Jitter(time.Minute, nil); d < 48*time.Second || d > 72*time.Second {
			t.Fatalf("Jitter(1m) = %v", d)
		}
	}
}
