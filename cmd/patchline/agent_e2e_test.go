package main

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// readOSRelease reads /etc/os-release the simple way, for the test to
// compare against.
func readOSRelease(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		t.Skipf("no /etc/os-release: %v", err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if ok {
			out[k] = strings.Trim(v, `"'`)
		}
	}
	return out
}

// readDpkg returns the installed packages of dpkg's status file: name
// and architecture to version.
func readDpkg(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("/var/lib/dpkg/status")
	if err != nil {
		t.Skipf("no dpkg database: %v", err)
	}
	defer f.Close()
	out := map[string]string{}
	var name, arch, ver, status string
	flush := func() {
		if name != "" && strings.HasSuffix(status, " installed") {
			out[name+":"+arch] = ver
		}
		name, arch, ver, status = "", "", "", ""
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			flush()
		case strings.HasPrefix(line, "Package: "):
			name = strings.TrimPrefix(line, "Package: ")
		case strings.HasPrefix(line, "Architecture: "):
			arch = strings.TrimPrefix(line, "Architecture: ")
		case strings.HasPrefix(line, "Version: "):
			ver = strings.TrimPrefix(line, "Version: ")
		case strings.HasPrefix(line, "Status: "):
			status = strings.TrimPrefix(line, "Status: ")
		}
	}
	flush()
	return out
}

// TestAgentEndToEnd runs the real agent on this machine against serve,
// with no destructive action allowed: it reports the machine's real
// inventory and refuses a reboot.
func TestAgentEndToEnd(t *testing.T) {
	e2e(t)
	if runtime.GOOS != "linux" {
		t.Skip("the agent reads a Linux system")
	}
	osr := readOSRelease(t)
	dpkg := readDpkg(t)
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	// Whether the package manager knows of upgrades, asked beside the
	// agent (it takes a while).
	aptUpgrades := make(chan bool, 1)
	go func() {
		out, err := exec.Command("apt-get", "-s", "-o", "Debug::NoLocking=1", "upgrade").Output()
		aptUpgrades <- err == nil && strings.Contains(string(out), "\nInst ")
	}()

	data := t.TempDir()
	d := []string{"--data", data}
	key := mustControlCLI(t, append([]string{"keys", "create", "--name", "agent-test"}, d...)...)
	priv := mustControlCLI(t, append([]string{"keys", "create", "--name", "ops", "--privileged", "--expires", "24h"}, d...)...)
	secret := mustControlCLI(t, append([]string{"enroll", "create", "--expires", "1h"}, d...)...)
	srv := startServe(t, data, []string{"PATCHLINE_CONTROL_DB=", "PATCHLINE_CATALOG_DB="})
	c := &controlClient{t: t, base: srv.ControlURL, http: &http.Client{Timeout: 30 * time.Second}}

	state := filepath.Join(t.TempDir(), "agent-state")
	// --allow is empty on the command line and in the environment: no
	// destructive action may run on this machine.
	env := []string{"PATCHLINE_ALLOW="}
	args := []string{"agent", "--server", srv.ControlURL, "--enroll-secret", secret, "--state", state, "--allow=", "--interval", "500ms"}
	agentProc := startProcess(t, env, args...)

	var a fleetAgent
	waitFor(t, "the agent and its inventory", 2*time.Minute, func() bool {
		list := c.agents(key, "")
		if len(list) != 1 || len(list[0].Inventory.Software) == 0 {
			return false
		}
		a = list[0]
		return true
	})
	if a.Hostname != hostname {
		t.Errorf("hostname %q, want %q", a.Hostname, hostname)
	}
	if a.OS.Platform != "linux" || a.OS.Name != osr["NAME"] || a.OS.Version != osr["VERSION_ID"] || a.OS.Build != strings.TrimSpace(string(kernel)) {
		t.Errorf("os = %+v; os-release NAME %q VERSION_ID %q, kernel %q", a.OS, osr["NAME"], osr["VERSION_ID"], kernel)
	}
	ecosystem := ""
	if osr["ID"] == "debian" {
		major, _, _ := strings.Cut(osr["VERSION_ID"], ".")
		ecosystem = "Debian:" + major
	}
	reported := map[string]string{}
	for _, sw := range a.Inventory.Software {
		reported[sw.Name+":"+sw.Arch] = sw.Version
		if ecosystem != "" && sw.Ecosystem != ecosystem {
			t.Errorf("%s: ecosystem %q, want %q", sw.Name, sw.Ecosystem, ecosystem)
		}
	}
	missing := 0
	for pkg, ver := range dpkg {
		if reported[pkg] != ver {
			missing++
			if missing <= 5 {
				t.Errorf("dpkg has %s %s; the agent reports %q", pkg, ver, reported[pkg])
			}
		}
	}
	if len(reported) != len(dpkg) {
		t.Errorf("the agent reports %d packages, dpkg has %d", len(reported), len(dpkg))
	}
	if <-aptUpgrades {
		// The agent asks the package manager beside its check-ins and
		// reports what it says with a later one.
		waitFor(t, "the pending updates apt-get lists", 2*time.Minute, func() bool {
			a = c.agents(key, "")[0]
			return len(a.Inventory.PendingUpdates) > 0
		})
	}
	t.Logf("%s: %s %s (%s), %d packages, %d pending updates", a.Hostname, a.OS.Name, a.OS.Version, a.OS.Build, len(reported), len(a.Inventory.PendingUpdates))

	// The credential is the owner's only.
	for path, mode := range map[string]os.FileMode{state: 0o700, filepath.Join(state, "agent.json"): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), mode)
		}
	}

	// Destructive actions are refused by the endpoint's local policy.
	for _, action := range []string{"reboot", "install-updates"} {
		var cmd fleetCommand
		status, body := c.raw("POST", "/api/agents/"+a.ID+"/"+action, priv, "", nil)
		c.expect(action, status, body, http.StatusAccepted, &cmd)
		got := c.waitCommands(key, []string{cmd.ID}, 30*time.Second)[cmd.ID]
		if got.State != "failed" || got.Result == nil || got.Result.Message != "not allowed by this endpoint's local policy" {
			t.Errorf("%s = %+v", action, got)
		}
	}
	if exited, err := agentProc.Exited(0); exited {
		t.Fatalf("the agent exited: %v", err)
	}

	// Restarted, the agent keeps its enrollment.
	agentProc.Stop()
	agentProc = startProcess(t, env, args...)
	var cmd fleetCommand
	status, body := c.raw("POST", "/api/agents/"+a.ID+"/collect-logs", key, "", nil)
	c.expect("collect logs", status, body, http.StatusAccepted, &cmd)
	if got := c.waitCommands(key, []string{cmd.ID}, time.Minute)[cmd.ID]; got.State != "succeeded" {
		t.Errorf("collect-logs after a restart = %+v", got)
	}
	if n := len(c.agents(key, "")); n != 1 {
		t.Errorf("%d agents after a restart of the agent", n)
	}

	// Removal: the agent unenrolls, deletes its state and exits.
	status, body = c.raw("DELETE", "/api/agents/"+a.ID, priv, "", nil)
	c.expect("remove", status, body, http.StatusAccepted, &cmd)
	exited, err := agentProc.Exited(time.Minute)
	if !exited || err != nil {
		t.Fatalf("after its removal the agent exited %v with %v", exited, err)
	}
	if got := c.waitCommands(key, []string{cmd.ID}, 10*time.Second)[cmd.ID]; got.State != "succeeded" {
		t.Errorf("remove = %+v", got)
	}
	if _, err := os.Stat(filepath.Join(state, "agent.json")); !os.IsNotExist(err) {
		t.Errorf("the credential survived the removal: %v", err)
	}
	if !strings.Contains(agentProc.Log(), "removed") {
		t.Errorf("the agent did not say it was removed:\n%s", lastLines(agentProc.Log(), 10))
	}
	// Started again, it does not enroll by itself.
	r := runCLI(t, "", env, args...)
	if r.Code != 0 || !strings.Contains(r.Stderr, "removed") || len(c.agents(key, "")) != 0 {
		t.Errorf("agent started after its removal: exit %d\n%s", r.Code, r.Stderr)
	}
}
