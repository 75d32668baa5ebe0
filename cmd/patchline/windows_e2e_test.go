package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// processPrngStub is bcryptprimitives.dll's ProcessPrng over RtlGenRandom
// (SystemFunction036 of advapi32). Go's Windows runtime calls ProcessPrng
// for its random numbers; Wine 8 lacks it.
const processPrngStub = `#include <windows.h>
BOOLEAN WINAPI SystemFunction036(PVOID buf, ULONG len);
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!SystemFunction036(data, n)) return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}
`

// winePrefix makes a Wine prefix in which patchline.exe runs: Wine's
// Windows, the ProcessPrng stub in its system32, and the registry of
// internal/agent/testdata/windows11-23h2.reg. It returns the environment
// that selects it and the path of patchline.exe.
func winePrefix(t *testing.T) (env []string, exe string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the Windows agent is tested under Wine on Linux")
	}
	for _, tool := range []string{"wine", "x86_64-w64-mingw32-gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the Windows agent's test needs Debian's wine and gcc-mingw-w64-x86-64 (.ci/run installs them): %s not found", tool)
		}
	}
	dir := t.TempDir()
	exe = filepath.Join(dir, "patchline.exe")
	build := exec.Command("go", "build", "-o", exe, ".")
	build.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build patchline.exe: %v\n%s", err, out)
	}
	prefix := filepath.Join(dir, "prefix")
	env = []string{"WINEPREFIX=" + prefix, "WINEDEBUG=-all", "WINEARCH=win64", "DISPLAY="}
	wine := func(args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "wine", args...)
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("wine %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	wine("wineboot", "--init")
	src := filepath.Join(dir, "bcryptprimitives.c")
	def := filepath.Join(dir, "bcryptprimitives.def")
	if err := os.WriteFile(src, []byte(processPrngStub), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(def, []byte("LIBRARY bcryptprimitives.dll\nEXPORTS\nProcessPrng\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dll := filepath.Join(prefix, "drive_c", "windows", "system32", "bcryptprimitives.dll")
	if out, err := exec.Command("x86_64-w64-mingw32-gcc", "-shared", "-O2", "-o", dll, src, def, "-ladvapi32").CombinedOutput(); err != nil {
		t.Fatalf("build the ProcessPrng stub: %v\n%s", err, out)
	}
	reg, err := filepath.Abs("../../internal/agent/testdata/windows11-23h2.reg")
	if err != nil {
		t.Fatal(err)
	}
	wine("regedit", "/S", winPath(reg))
	return env, exe
}

// winPath is the path of a Linux file as Wine's Z: drive shows it.
func winPath(p string) string { return `Z:` + strings.ReplaceAll(p, "/", `\`) }

// wineReg reads a registry value of the prefix with reg.exe.
func wineReg(t *testing.T, env []string, key, name string) string {
	t.Helper()
	cmd := exec.Command("wine", "reg", "query", key, "/v", name)
	cmd.Env = append(os.Environ(), env...)
	out, _ := cmd.CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == name {
			return strings.Join(f[2:], " ")
		}
	}
	return ""
}

// TestWindowsAgentUnderWine runs the real patchline.exe agent in a Wine
// prefix whose registry holds a Windows 11 23H2 endpoint with two KBs and
// an old Firefox, against serve on Linux.
func TestWindowsAgentUnderWine(t *testing.T) {
	e2e(t)
	t.Parallel()
	env, exe := winePrefix(t)
	data := t.TempDir()
	d := []string{"--data", data}
	key := mustControlCLI(t, append([]string{"keys", "create", "--name", "wine-test"}, d...)...)
	priv := mustControlCLI(t, append([]string{"keys", "create", "--name", "ops", "--privileged", "--expires", "24h"}, d...)...)
	secret := mustControlCLI(t, append([]string{"enroll", "create", "--expires", "1h"}, d...)...)
	srv := startServe(t, data, []string{"PATCHLINE_CONTROL_DB=", "PATCHLINE_CATALOG_DB="})
	c := &controlClient{t: t, base: srv.ControlURL, http: &http.Client{Timeout: 30 * time.Second}}

	agentProc := startCommand(t, env, "wine", exe, "agent", "--server", srv.ControlURL, "--enroll-secret", secret,
		`--state=C:\ProgramData\Patchline`, "--interval", "1s")
	var a fleetAgent
	waitFor(t, "the Windows agent and its inventory", 3*time.Minute, func() bool {
		list := c.agents(key, "")
		if len(list) != 1 || len(list[0].Inventory.Software) == 0 {
			return false
		}
		a = list[0]
		return true
	})
	identity := filepath.Join(strings.TrimPrefix(env[0], "WINEPREFIX="), "drive_c", "ProgramData", "Patchline", "agent.json")
	if _, err := os.Stat(identity); err != nil {
		t.Errorf("the agent's identity is not in its state directory: %v", err)
	}
	if a.OS.Platform != "windows" || a.OS.Name != "Windows 11 Pro" || a.OS.Version != "23H2" || a.OS.Build != "22631.4460" {
		t.Errorf("os = %+v, want Windows 11 Pro 23H2 22631.4460", a.OS)
	}
	sw := map[string]string{}
	for _, s := range a.Inventory.Software {
		sw[s.Ecosystem+"/"+s.Name] = s.Version
	}
	for name, version := range map[string]string{
		"Windows/Windows 11 Version 23H2":             "10.0.22631.4460",
		"Desktop/Mozilla Firefox":                     "115.0",
		"Desktop/7-Zip":                               "23.01",
		"Desktop/Notepad++":                           "8.5.8",
		"Microsoft/Microsoft 365 Apps for enterprise": "16.0.17029.20108",
	} {
		if sw[name] != version {
			t.Errorf("%s: reported %q, want %q (all: %v)", name, sw[name], version, sw)
		}
	}
	for _, s := range a.Inventory.Software {
		if s.Name == "Microsoft 365 Apps for enterprise" && (s.Channel != "Current Channel" || s.Arch != "x64" || s.Publisher != "Microsoft Corporation") {
			t.Errorf("Microsoft 365 Apps: %+v, want the Current Channel, x64, by Microsoft Corporation", s)
		}
	}
	kbs := map[string]bool{}
	for _, u := range a.Inventory.InstalledUpdates {
		kbs[u.ID] = true
	}
	if !kbs["KB5046633"] || !kbs["KB5011048"] {
		t.Errorf("installed updates %v, want KB5046633 and KB5011048", a.Inventory.InstalledUpdates)
	}

	// Exposure: the old Firefox is affected by a CVE of the catalog,
	// fixed in a later release.
	waitFor(t, "the Firefox finding", 2*time.Minute, func() bool {
		for _, v := range c.agentVulns(key, a.ID) {
			for _, f := range v.Findings {
				if v.CVEID == "CVE-2024-9680" && f.Package == "Mozilla Firefox" && f.Installed == "115.0" && f.Fixed == "131.0.2" && f.Status == "affected" {
					return true
				}
			}
		}
		return false
	})

	// Office: KEV-listed CVE-2023-21715 is fixed in the Click-to-Run
	// release of February 2023, which names no build; the Office build
	// is found, and said to be undecidable against it.
	waitFor(t, "the Microsoft 365 Apps finding", time.Minute, func() bool {
		for _, v := range c.agentVulns(key, a.ID) {
			for _, f := range v.Findings {
				if v.CVEID == "CVE-2023-21715" && f.Package == "Microsoft 365 Apps for enterprise" && f.Fixed == "Click-to-Run release of 2023-02" && f.Status == "unknown" {
					return true
				}
			}
		}
		return false
	})

	// A restart is refused by the endpoint's local policy.
	var cmd fleetCommand
	status, body := c.raw("POST", "/api/agents/"+a.ID+"/reboot", priv, "", nil)
	c.expect("reboot", status, body, http.StatusAccepted, &cmd)
	if got := c.waitCommands(key, []string{cmd.ID}, time.Minute)[cmd.ID]; got.State != "failed" || got.Result == nil || got.Result.Message != "not allowed by this endpoint's local policy" {
		t.Errorf("reboot = %+v", got)
	}

	// A Windows Update for Business policy is written to the registry and
	// then complies.
	var pol struct{ ID string }
	status, body = c.raw("POST", "/api/policies", key, "", map[string]any{"name": "ring 1",
		"settings": map[string]any{"windowsUpdate": map[string]any{"deferQualityUpdatesDays": 3, "deferFeatureUpdatesDays": 30}}})
	c.expect("create policy", status, body, http.StatusCreated, &pol)
	var deployed struct{ Commands []fleetCommand }
	status, body = c.raw("POST", "/api/policies/"+pol.ID+"/deploy", priv, "", map[string]any{"agentIds": []string{a.ID}})
	c.expect("deploy policy", status, body, http.StatusAccepted, &deployed)
	if len(deployed.Commands) != 1 {
		t.Fatalf("deploy made %d commands", len(deployed.Commands))
	}
	if got := c.waitCommands(key, []string{deployed.Commands[0].ID}, time.Minute)[deployed.Commands[0].ID]; got.State != "succeeded" || got.Result == nil || !strings.Contains(got.Result.Message, "compliant") || strings.Contains(got.Result.Message, "not compliant") {
		t.Errorf("apply-policy = %+v", got)
	}
	const wuPolicy = `HKLM\SOFTWARE\Policies\Microsoft\Windows\WindowsUpdate`
	if v := wineReg(t, env, wuPolicy, "DeferFeatureUpdatesPeriodInDays"); v != "0x1e" {
		t.Errorf("DeferFeatureUpdatesPeriodInDays = %q, want 0x1e", v)
	}

	// Log collection works with what Wine has.
	status, body = c.raw("POST", "/api/agents/"+a.ID+"/collect-logs", key, "", nil)
	c.expect("collect logs", status, body, http.StatusAccepted, &cmd)
	if got := c.waitCommands(key, []string{cmd.ID}, time.Minute)[cmd.ID]; got.State != "succeeded" {
		t.Errorf("collect-logs = %+v", got)
	}

	t.Run("windows update agent", func(t *testing.T) {
		// The agent says in its log that the Windows Update Agent is not
		// there, and keeps reporting the rest.
		waitFor(t, "the agent's word on the Windows Update Agent", time.Minute, func() bool {
			return strings.Contains(agentProc.Log(), "the Windows Update Agent could not list pending updates")
		})
		// And in its report: the inventory's notes.
		waitFor(t, "the note on the Windows Update Agent in the inventory", time.Minute, func() bool {
			for _, n := range c.agents(key, "")[0].Inventory.Notes {
				if strings.HasPrefix(n, "Windows Update search: ") {
					return true
				}
			}
			return false
		})
		t.Skip("Wine's wuapi.dll does not implement IUpdateSearcher: searching, installing and the update history through the Windows Update Agent run only on Windows (their results are handled by code tested in internal/agent)")
	})

	// Removal: the agent deletes its state and exits.
	status, body = c.raw("DELETE", "/api/agents/"+a.ID, priv, "", nil)
	c.expect("remove", status, body, http.StatusAccepted, &cmd)
	if exited, err := agentProc.Exited(2 * time.Minute); !exited || err != nil {
		t.Fatalf("after its removal the agent exited %v with %v", exited, err)
	}
	if _, err := os.Stat(identity); !os.IsNotExist(err) {
		t.Errorf("the credential survived the removal: %v", err)
	}
}

// TestWindowsServiceUnderWine installs the agent from its MSI (built
// like make msi, with wixl) in a Wine prefix, as an administrator would
// with msiexec: the package's custom action runs `patchline.exe agent
// install`, Wine's service control manager starts the service, and the
// agent enrolls. Removing the package removes the service.
func TestWindowsServiceUnderWine(t *testing.T) {
	e2e(t)
	t.Parallel()
	if _, err := exec.LookPath("wixl"); err != nil {
		t.Skip("the Windows installer's test needs msitools' wixl (.ci/run installs it): not found")
	}
	env, exe := winePrefix(t)
	wxs, err := filepath.Abs("../../packaging/windows/patchline.wxs")
	if err != nil {
		t.Fatal(err)
	}
	msi := filepath.Join(filepath.Dir(exe), "patchline-agent-amd64.msi")
	build := exec.Command("wixl", "-a", "x64", "-D", "Version=0.1.0", "-o", msi, wxs)
	build.Dir = filepath.Dir(exe)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("wixl: %v\n%s", err, out)
	}

	data := t.TempDir()
	d := []string{"--data", data}
	key := mustControlCLI(t, append([]string{"keys", "create", "--name", "wine-service"}, d...)...)
	secret := mustControlCLI(t, append([]string{"enroll", "create", "--expires", "1h"}, d...)...)
	srv := startServe(t, data, []string{"PATCHLINE_CONTROL_DB=", "PATCHLINE_CATALOG_DB="})
	c := &controlClient{t: t, base: srv.ControlURL, http: &http.Client{Timeout: 30 * time.Second}}
	wine := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "wine", args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		wine("msiexec", "/x", winPath(msi), "/qn")
		exec.Command("wineserver", "-k").Run()
	})

	if out, err := wine("msiexec", "/i", winPath(msi), "/qn", "SERVER="+srv.ControlURL, "ENROLLSECRET="+secret); err != nil {
		t.Fatalf("msiexec /i: %v\n%s", err, out)
	}
	prefix := strings.TrimPrefix(env[0], "WINEPREFIX=")
	if _, err := os.Stat(filepath.Join(prefix, "drive_c", "Program Files", "Patchline", "patchline.exe")); err != nil {
		t.Errorf("patchline.exe is not in Program Files: %v", err)
	}
	waitFor(t, "the service's agent", 2*time.Minute, func() bool {
		list := c.agents(key, "")
		return len(list) == 1 && list[0].OS.Build == "22631.4460"
	})
	if out, _ := wine("sc", "query", "patchline-agent"); !strings.Contains(out, "RUNNING") {
		t.Errorf("sc query patchline-agent:\n%s", out)
	}
	// The enrollment secret is in the state directory, not on the
	// service's command line.
	if path := wineReg(t, env, `HKLM\SYSTEM\CurrentControlSet\Services\patchline-agent`, "ImagePath"); strings.Contains(path, "ples_") || !strings.Contains(path, "--service") {
		t.Errorf("the service's command line: %q", path)
	}
	state := filepath.Join(prefix, "drive_c", "ProgramData", "Patchline")
	if b, err := os.ReadFile(filepath.Join(state, "enroll-secret")); err != nil || strings.TrimSpace(string(b)) != secret {
		t.Errorf("enroll-secret: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(state, "agent.log")); err != nil || !strings.Contains(string(b), "agent starting") {
		t.Errorf("agent.log: %v\n%s", err, b)
	}

	if out, err := wine("msiexec", "/x", winPath(msi), "/qn"); err != nil {
		t.Fatalf("msiexec /x: %v\n%s", err, out)
	}
	if out, _ := wine("sc", "query", "patchline-agent"); strings.Contains(out, "RUNNING") {
		t.Errorf("the service runs after the package's removal:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(prefix, "drive_c", "Program Files", "Patchline", "patchline.exe")); !os.IsNotExist(err) {
		t.Errorf("patchline.exe is still in Program Files: %v", err)
	}
}
