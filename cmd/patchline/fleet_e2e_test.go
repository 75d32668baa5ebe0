package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// process is a running patchline subcommand other than serve (an agent,
// a simulated fleet), stopped at the end of the test.
type process struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error
}

func (p *process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// Log returns what the process wrote so far.
func (p *process) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// startProcess runs the binary with args, its output collected.
func startProcess(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	return startCommand(t, env, binary, args...)
}

// startCommand runs a program with args, its output collected, and stops
// it when the test ends.
func startCommand(t *testing.T, env []string, program string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(program, args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("%s %s:\n%s", filepath.Base(program), args[0], lastLines(p.Log(), 40))
		}
	})
	return p
}

// Stop interrupts the process and waits for it.
func (p *process) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// Exited waits up to d for the process to end on its own and returns its
// exit error.
func (p *process) Exited(d time.Duration) (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	case <-time.After(d):
		return false, nil
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitFor polls cond every 100 ms until it holds, failing the test after
// timeout.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fleetAgent is the part of an agent the fleet tests read.
type fleetAgent struct {
	ID       string `json:"id"`
	Hostname string `json:"hostname"`
	OS       struct {
		Platform, Name, Version, Build string
	} `json:"os"`
	Status     string  `json:"status"`
	Ring       *string `json:"ring"`
	RingSource string  `json:"ringSource"`
	Inventory  struct {
		Software []struct {
			Name, Version, Ecosystem, Arch, Source, Publisher, Channel string
		} `json:"software"`
		PendingUpdates   []struct{ ID, Title string } `json:"pendingUpdates"`
		InstalledUpdates []struct{ ID, Title string } `json:"installedUpdates"`
		Notes            []string                     `json:"notes"`
	} `json:"inventory"`
	FeatureUpgrade  struct{ State, Target string } `json:"featureUpgrade"`
	AppliedPolicies []struct {
		PolicyID  string `json:"policyId"`
		Version   int    `json:"version"`
		Compliant *bool  `json:"compliant"`
		Message   string `json:"message"`
	} `json:"appliedPolicies"`
	RebootPending bool `json:"rebootPending"`
}

type fleetCommand struct {
	ID, AgentID, Type, State string
	Result                   *struct {
		Message string `json:"message"`
	} `json:"result"`
}

// agents lists every agent, page by page.
func (c *controlClient) agents(key string, filter string) []fleetAgent {
	c.t.Helper()
	var all []fleetAgent
	cursor := ""
	for {
		path := "/api/agents?limit=100" + filter
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		var page struct {
			Results    []fleetAgent `json:"results"`
			NextCursor *string      `json:"nextCursor"`
		}
		status, body := c.raw("GET", path, key, "", nil)
		c.expect("list agents", status, body, http.StatusOK, &page)
		all = append(all, page.Results...)
		if page.NextCursor == nil {
			return all
		}
		cursor = *page.NextCursor
	}
}

// waitCommands waits until every command is over and returns them.
func (c *controlClient) waitCommands(key string, ids []string, timeout time.Duration) map[string]fleetCommand {
	c.t.Helper()
	out := map[string]fleetCommand{}
	waitFor(c.t, fmt.Sprintf("%d commands to end", len(ids)), timeout, func() bool {
		for _, id := range ids {
			if cmd, ok := out[id]; ok && cmd.State != "queued" && cmd.State != "delivered" && cmd.State != "running" {
				continue
			}
			var cmd fleetCommand
			status, body := c.raw("GET", "/api/commands/"+id, key, "", nil)
			c.expect("command", status, body, http.StatusOK, &cmd)
			out[id] = cmd
			if cmd.State == "queued" || cmd.State == "delivered" || cmd.State == "running" {
				return false
			}
		}
		return true
	})
	return out
}

func commandIDs(cmds []fleetCommand) []string {
	var ids []string
	for _, c := range cmds {
		ids = append(ids, c.ID)
	}
	return ids
}

// TestFleetEndToEnd runs serve and a simulated fleet of 50 endpoints and
// drives the control API over them: inventory, log bundles, a privileged
// reboot, removal, feature upgrades in bulk, a rollout ring by ring and a
// policy with its compliance.
func TestFleetEndToEnd(t *testing.T) {
	e2e(t)
	const fleet = 50
	data := t.TempDir()
	d := []string{"--data", data}
	key := mustControlCLI(t, append([]string{"keys", "create", "--name", "fleet"}, d...)...)
	priv := mustControlCLI(t, append([]string{"keys", "create", "--name", "ops", "--privileged", "--expires", "24h"}, d...)...)
	secret := mustControlCLI(t, append([]string{"enroll", "create", "--expires", "1h"}, d...)...)
	srv := startServe(t, data, []string{"PATCHLINE_CONTROL_DB=", "PATCHLINE_CATALOG_DB="})
	c := &controlClient{t: t, base: srv.ControlURL, http: &http.Client{Timeout: 30 * time.Second}}
	startProcess(t, nil, "sim", "--server", srv.ControlURL, "--enroll-secret", secret, "--agents", fmt.Sprint(fleet),
		"--interval", "300ms", "--time-scale", "0.005", "--failure-rate", "0", "--seed", "42")

	// All 50 appear, each with its inventory.
	var agents []fleetAgent
	waitFor(t, "50 agents with their inventory", time.Minute, func() bool {
		agents = c.agents(key, "")
		if len(agents) != fleet {
			return false
		}
		for _, a := range agents {
			if len(a.Inventory.Software) == 0 || a.Status != "online" {
				return false
			}
		}
		return true
	})
	platforms := map[string]int{}
	byID := map[string]fleetAgent{}
	for _, a := range agents {
		platforms[a.OS.Platform]++
		byID[a.ID] = a
		for _, sw := range a.Inventory.Software {
			if sw.Name == "" || sw.Version == "" || sw.Ecosystem == "" {
				t.Errorf("%s reports software %+v", a.Hostname, sw)
			}
		}
		if a.OS.Platform == "windows" && len(a.Inventory.InstalledUpdates) == 0 {
			t.Errorf("windows endpoint %s reports no installed KB", a.Hostname)
		}
	}
	if len(platforms) != 3 {
		t.Errorf("platforms of the fleet: %v", platforms)
	}
	t.Logf("fleet: %v", platforms)
	pick := func(platform string) fleetAgent {
		for _, a := range agents {
			if a.OS.Platform == platform {
				return a
			}
		}
		t.Fatalf("no %s endpoint in the fleet", platform)
		return fleetAgent{}
	}

	// A log bundle, downloaded: a valid tar.gz.
	logsAgent := pick("linux")
	var cmd fleetCommand
	status, body := c.raw("POST", "/api/agents/"+logsAgent.ID+"/collect-logs", key, "", nil)
	c.expect("collect logs", status, body, http.StatusAccepted, &cmd)
	if got := c.waitCommands(key, []string{cmd.ID}, 30*time.Second)[cmd.ID]; got.State != "succeeded" {
		t.Fatalf("collect-logs = %+v", got)
	}
	resp, err := http.Get(srv.ControlURL + "/api/commands/" + cmd.ID + "/log-bundle")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("log bundle without a key: %d", resp.StatusCode)
	}
	status, bundle := c.raw("GET", "/api/commands/"+cmd.ID+"/log-bundle", key, "", nil)
	if status != http.StatusOK {
		t.Fatalf("download the bundle: %d %s", status, bundle)
	}
	zr, err := gzip.NewReader(bytes.NewReader(bundle))
	if err != nil {
		t.Fatalf("the bundle is not gzip: %v", err)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the bundle is not a valid tar: %v", err)
		}
		names = append(names, h.Name)
		if _, err := io.Copy(io.Discard, tr); err != nil {
			t.Fatal(err)
		}
	}
	if len(names) < 2 || names[len(names)-1] != "manifest.txt" {
		t.Errorf("bundle holds %v", names)
	}

	// A privileged reboot reaches the agent, which reports back.
	rebootAgent := pick("windows")
	status, body = c.raw("POST", "/api/agents/"+rebootAgent.ID+"/reboot", key, "", nil)
	c.expect("reboot with a plain key", status, body, http.StatusForbidden, nil)
	status, body = c.raw("POST", "/api/agents/"+rebootAgent.ID+"/reboot", priv, "", map[string]int{"delaySeconds": 0})
	c.expect("reboot", status, body, http.StatusAccepted, &cmd)
	if got := c.waitCommands(key, []string{cmd.ID}, 30*time.Second)[cmd.ID]; got.State != "succeeded" || got.Result == nil || !strings.Contains(got.Result.Message, "restarted") {
		t.Errorf("reboot = %+v", got)
	}

	// Remove unenrolls the endpoint.
	removed := pick("macos")
	status, body = c.raw("DELETE", "/api/agents/"+removed.ID, priv, "", nil)
	c.expect("remove", status, body, http.StatusAccepted, &cmd)
	if got := c.waitCommands(key, []string{cmd.ID}, 30*time.Second)[cmd.ID]; got.State != "succeeded" {
		t.Errorf("remove = %+v", got)
	}
	status, body = c.raw("GET", "/api/agents/"+removed.ID, key, "", nil)
	c.expect("removed agent", status, body, http.StatusNotFound, nil)
	const live = fleet - 1
	if n := len(c.agents(key, "")); n != live {
		t.Errorf("%d agents after the removal, want %d", n, live)
	}

	// Feature upgrades: finish every staged one in bulk.
	waitFor(t, "staging feature upgrades to be ready", time.Minute, func() bool {
		return len(c.agents(key, "&featureUpgrade=staging")) == 0
	})
	ready := c.agents(key, "&featureUpgrade=ready")
	if len(ready) == 0 {
		t.Fatal("no endpoint has a feature upgrade staged")
	}
	var bulk struct {
		Commands []fleetCommand `json:"commands"`
		Skipped  []struct{ AgentID, Reason string }
		More     bool `json:"more"`
	}
	status, body = c.raw("POST", "/api/feature-upgrades/finish", priv, "", map[string]any{"filter": map[string]any{}})
	c.expect("finish feature upgrades", status, body, http.StatusAccepted, &bulk)
	if len(bulk.Commands) != len(ready) || len(bulk.Skipped) != 0 || bulk.More {
		t.Errorf("finish: %d commands, %d skipped, more %v; %d endpoints were ready", len(bulk.Commands), len(bulk.Skipped), bulk.More, len(ready))
	}
	for id, got := range c.waitCommands(key, commandIDs(bulk.Commands), time.Minute) {
		if got.State != "succeeded" {
			t.Errorf("finish-feature-upgrade %s = %+v", id, got)
		}
	}
	waitFor(t, "every upgrade to be reported finished", 30*time.Second, func() bool {
		return len(c.agents(key, "&featureUpgrade=ready"))+len(c.agents(key, "&featureUpgrade=finishing")) == 0
	})
	for _, before := range ready {
		var after fleetAgent
		status, body = c.raw("GET", "/api/agents/"+before.ID, key, "", nil)
		c.expect("agent after its upgrade", status, body, http.StatusOK, &after)
		if after.FeatureUpgrade.State != "none" || after.OS.Version == before.OS.Version {
			t.Errorf("%s after its feature upgrade to %s: %+v %+v", before.Hostname, before.FeatureUpgrade.Target, after.OS, after.FeatureUpgrade)
		}
	}
	t.Logf("%d feature upgrades finished in bulk", len(ready))

	// A policy, deployed: compliance per agent and per policy. Endpoints
	// with pending updates do not comply with maxPendingUpdates 0.
	var pol struct {
		ID         string `json:"id"`
		Version    int    `json:"version"`
		Compliance struct {
			Compliant, Noncompliant, Unknown, Outdated, Pending int
		} `json:"compliance"`
	}
	status, body = c.raw("POST", "/api/policies", key, "", map[string]any{"name": "patch hygiene", "settings": map[string]any{"maxPendingUpdates": 0, "lockAfterMinutes": 5}})
	c.expect("create policy", status, body, http.StatusCreated, &pol)
	var dep struct {
		Commands []fleetCommand `json:"commands"`
	}
	status, body = c.raw("POST", "/api/policies/"+pol.ID+"/deploy", priv, "", map[string]any{"filter": map[string]any{}})
	c.expect("deploy policy", status, body, http.StatusAccepted, &dep)
	if len(dep.Commands) != live {
		t.Errorf("deploy queued %d commands, want %d", len(dep.Commands), live)
	}
	for id, got := range c.waitCommands(key, commandIDs(dep.Commands), time.Minute) {
		if got.State != "succeeded" {
			t.Errorf("apply-policy %s = %+v", id, got)
		}
	}
	type policyAgent struct {
		AgentID   string `json:"agentId"`
		Version   int    `json:"version"`
		State     string `json:"state"`
		Compliant *bool  `json:"compliant"`
	}
	compliance := func() map[string]policyAgent {
		out := map[string]policyAgent{}
		cursor := ""
		for {
			path := "/api/policies/" + pol.ID + "/agents?limit=20"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			var page struct {
				Results    []policyAgent `json:"results"`
				NextCursor *string       `json:"nextCursor"`
			}
			status, body := c.raw("GET", path, key, "", nil)
			c.expect("policy agents", status, body, http.StatusOK, &page)
			for _, pa := range page.Results {
				out[pa.AgentID] = pa
			}
			if page.NextCursor == nil {
				return out
			}
			cursor = *page.NextCursor
		}
	}
	var per map[string]policyAgent
	waitFor(t, "every agent to report the policy", 30*time.Second, func() bool {
		per = compliance()
		return len(per) == live
	})
	noncompliant := 0
	for _, a := range c.agents(key, "") {
		pa, ok := per[a.ID]
		if !ok || pa.Compliant == nil {
			t.Errorf("%s: compliance %+v", a.Hostname, pa)
			continue
		}
		if want := len(a.Inventory.PendingUpdates) == 0; *pa.Compliant != want {
			// Reports cross: the agent may have changed since.
			t.Logf("%s: compliant %v with %d pending updates", a.Hostname, *pa.Compliant, len(a.Inventory.PendingUpdates))
		}
		if !*pa.Compliant {
			noncompliant++
		}
		if len(a.AppliedPolicies) != 1 || a.AppliedPolicies[0].PolicyID != pol.ID || a.AppliedPolicies[0].Compliant == nil {
			t.Errorf("%s applied policies: %+v", a.Hostname, a.AppliedPolicies)
		}
	}
	status, body = c.raw("GET", "/api/policies/"+pol.ID, key, "", nil)
	c.expect("policy", status, body, http.StatusOK, &pol)
	if got := pol.Compliance.Compliant + pol.Compliance.Noncompliant; got != live || pol.Compliance.Noncompliant != noncompliant || pol.Compliance.Pending != 0 {
		t.Errorf("policy compliance %+v, %d agents listed noncompliant", pol.Compliance, noncompliant)
	}
	if noncompliant == 0 {
		t.Error("no endpoint has a pending update: the policy shows no noncompliance")
	}

	// Rings by rule, and a rollout ring by ring.
	status, body = c.raw("POST", "/api/rings", key, "", map[string]any{"name": "pilot", "position": 10, "rule": map[string]any{"hostname": "it-*"}})
	c.expect("pilot ring", status, body, http.StatusCreated, nil)
	status, body = c.raw("POST", "/api/rings", key, "", map[string]any{"name": "broad", "position": 20, "rule": map[string]any{}})
	c.expect("broad ring", status, body, http.StatusCreated, nil)
	pilot, broad := c.agents(key, "&ring=pilot"), c.agents(key, "&ring=broad")
	if len(pilot) == 0 || len(pilot)+len(broad) != live {
		t.Fatalf("rings: %d pilot, %d broad of %d", len(pilot), len(broad), live)
	}
	for _, a := range pilot {
		if !strings.HasPrefix(a.Hostname, "it-") || a.RingSource != "rule" {
			t.Errorf("%s in pilot (%s)", a.Hostname, a.RingSource)
		}
	}
	type rollout struct {
		ID          string  `json:"id"`
		State       string  `json:"state"`
		CurrentRing *string `json:"currentRing"`
		Progress    []struct {
			Ring   string         `json:"ring"`
			States map[string]int `json:"states"`
		} `json:"progress"`
	}
	var ro rollout
	status, body = c.raw("POST", "/api/rollouts", key, "", map[string]any{"name": "December updates", "kind": "install-updates"})
	c.expect("create rollout", status, body, http.StatusCreated, &ro)
	advance := func(from string) []fleetCommand {
		t.Helper()
		var adv struct {
			Rollout  rollout        `json:"rollout"`
			Commands []fleetCommand `json:"commands"`
		}
		status, body := c.raw("POST", "/api/rollouts/"+ro.ID+"/advance", priv, "", map[string]any{"fromRing": from})
		c.expect("advance from "+from, status, body, http.StatusAccepted, &adv)
		return adv.Commands
	}
	first := advance("")
	if len(first) != len(pilot) {
		t.Errorf("the first advance queued %d commands for %d pilot agents", len(first), len(pilot))
	}
	// An advance that names another ring than the current one is stale:
	// it never moves the rollout, so no ring is skipped.
	status, body = c.raw("POST", "/api/rollouts/"+ro.ID+"/advance", priv, "", map[string]any{"fromRing": "broad"})
	c.expect("stale advance", status, body, http.StatusConflict, nil)
	c.waitCommands(key, commandIDs(first), time.Minute)
	status, body = c.raw("GET", "/api/rollouts/"+ro.ID, key, "", nil)
	c.expect("rollout", status, body, http.StatusOK, &ro)
	if ro.State != "in-progress" || len(ro.Progress) != 1 || ro.Progress[0].States["succeeded"] != len(pilot) {
		t.Errorf("rollout after the pilot ring: %+v", ro)
	}
	second := advance("pilot")
	if len(second) != len(broad) {
		t.Errorf("the second advance queued %d commands for %d broad agents", len(second), len(broad))
	}
	c.waitCommands(key, commandIDs(second), time.Minute)
	status, body = c.raw("GET", "/api/rollouts/"+ro.ID, key, "", nil)
	c.expect("rollout", status, body, http.StatusOK, &ro)
	if ro.State != "completed" || len(ro.Progress) != 2 || ro.Progress[0].Ring != "pilot" || ro.Progress[1].Ring != "broad" ||
		ro.Progress[1].States["succeeded"] != len(broad) || ro.Progress[1].States["failed"] != 0 {
		t.Errorf("rollout at its end: %+v", ro)
	}
	status, body = c.raw("POST", "/api/rollouts/"+ro.ID+"/advance", priv, "", map[string]any{"fromRing": "broad"})
	c.expect("advance past the last ring", status, body, http.StatusConflict, nil)

	// With every update installed, every endpoint now complies.
	waitFor(t, "the fleet to comply after the rollout", 30*time.Second, func() bool {
		status, body := c.raw("GET", "/api/policies/"+pol.ID, key, "", nil)
		c.expect("policy", status, body, http.StatusOK, &pol)
		return pol.Compliance.Compliant == live
	})

	// Nothing is left waiting for an agent.
	for _, a := range c.agents(key, "") {
		var list struct {
			Results []fleetCommand `json:"results"`
		}
		status, body := c.raw("GET", "/api/agents/"+a.ID+"/commands?state=queued", key, "", nil)
		c.expect("queued commands", status, body, http.StatusOK, &list)
		if len(list.Results) != 0 {
			t.Errorf("%s has queued commands left: %+v", a.Hostname, list.Results)
		}
	}
}
