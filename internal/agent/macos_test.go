package agent

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/device"
)

func mustReadFile(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestParseSwVers(t *testing.T) {
	name, version, build := ParseSwVers(mustReadFile(t, "sw_vers-10.11.6.txt"))
	if name != "Mac OS X" || version != "10.11.6" || build != "15G31" {
		t.Errorf("ParseSwVers = %q, %q, %q", name, version, build)
	}
}

func TestParseSystemProfilerApps(t *testing.T) {
	apps, err := ParseSystemProfilerApps(mustReadFile(t, "system_profiler-applications.json"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]agentproto.Software{}
	for _, a := range apps {
		if _, dup := got[a.Name+" "+a.Version]; dup {
			t.Errorf("%s %s reported twice", a.Name, a.Version)
		}
		got[a.Name+" "+a.Version] = a
	}
	for _, want := range []agentproto.Software{
		{Name: "Safari", Version: "15.4", Ecosystem: "Apple"},
		{Name: "Finder", Version: "12.3", Ecosystem: "Apple"},
		{Name: "Google Chrome", Version: "99.0.4844.83", Ecosystem: "Desktop"},
		{Name: "zoom.us", Version: "5.9.1", Ecosystem: "Desktop"}, // "5.9.1 (3506)"
		{Name: "Microsoft Word", Version: "16.59", Ecosystem: "Microsoft"},
		{Name: "Microsoft Edge", Version: "99.0.1150.39", Ecosystem: "Desktop"},
		{Name: "GoLand", Version: "2021.3.4", Ecosystem: "Desktop"}, // in three places
		{Name: "VLC", Version: "3.0.16", Ecosystem: "Desktop"},
	} {
		if a := got[want.Name+" "+want.Version]; a != want {
			t.Errorf("%s: %+v, want %+v", want.Name, a, want)
		}
	}
	for _, a := range apps {
		if a.Name == "Multipass" {
			t.Errorf("an application without a version is reported: %+v", a)
		}
	}
	if len(apps) != 16 {
		t.Errorf("%d applications, want 16 of the 19 items (one without a version, GoLand three times)", len(apps))
	}
	if _, err := ParseSystemProfilerApps([]byte("system_profiler: not found")); err == nil {
		t.Error("garbage parses")
	}
}

func TestParseSoftwareUpdateList(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []agentproto.Update
	}{
		{"softwareupdate-list-catalina.txt", []agentproto.Update{
			{ID: "Command Line Tools beta 5 for Xcode-11.0", Title: "Command Line Tools beta 5 for Xcode 11.0"},
			{ID: "macOS Catalina Developer Beta-6", Title: "macOS Catalina Public Beta 5", RebootRequired: true},
			{ID: "BridgeOSUpdateCustomer", Title: "BridgeOSUpdateCustomer 10.15.0.1.1.1560926689", RebootRequired: true},
			{ID: "iCal-1.0.2", Title: "iCal 1.0.2"},
		}},
		{"softwareupdate-list-mojave.txt", []agentproto.Update{
			{ID: "Command Line Tools (macOS Mojave version 10.14) for Xcode-10.3", Title: "Command Line Tools (macOS Mojave version 10.14) for Xcode 10.3"},
			{ID: "macOS 10.14.1 Update", Title: "macOS 10.14.1 Update", RebootRequired: true},
			{ID: "BridgeOSUpdateCustomer", Title: "BridgeOSUpdateCustomer 10.14.4.1.1.1555388607", RebootRequired: true},
			{ID: "iCal-1.0.2", Title: "iCal 1.0.2"},
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ParseSoftwareUpdateList(mustReadFile(t, tc.file))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for _, out := range []string{"", "Software Update Tool\n\nFinding available software\nNo new software available.\n", "could not connect\n"} {
		if got := ParseSoftwareUpdateList([]byte(out)); len(got) != 0 {
			t.Errorf("%q: %+v, want none", out, got)
		}
	}
}

func FuzzParseSoftwareUpdateList(f *testing.F) {
	f.Add(mustReadFile(f, "softwareupdate-list-catalina.txt"))
	f.Add(mustReadFile(f, "softwareupdate-list-mojave.txt"))
	f.Fuzz(func(t *testing.T, out []byte) {
		for _, u := range ParseSoftwareUpdateList(out) {
			if u.ID == "" {
				t.Errorf("an update without a label: %+v", u)
			}
		}
	})
}

// fakeMac answers the macOS tools with captured outputs and records the
// commands it ran.
type fakeMac struct {
	mu   sync.Mutex
	ran  []string
	outs map[string][]byte
	errs map[string]error
}

func (f *fakeMac) run(_ context.Context, _ []string, name string, args ...string) ([]byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ran = append(f.ran, line)
	return f.outs[name], f.errs[name]
}

func (f *fakeMac) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string{}, f.ran...)
}

func newFakeMac(t *testing.T) (*MacSystem, *fakeMac) {
	f := &fakeMac{outs: map[string][]byte{
		"sw_vers":         []byte("ProductName:\t\tmacOS\nProductVersion:\t\t12.3\nBuildVersion:\t\t21E230\n"),
		"system_profiler": mustReadFile(t, "system_profiler-applications.json"),
		"softwareupdate":  mustReadFile(t, "softwareupdate-list-catalina.txt"),
	}, errs: map[string]error{}}
	root := t.TempDir()
	for _, dir := range []string{"opt/homebrew/Cellar/openssl@3/3.0.2", "opt/homebrew/Cellar/git/2.35.1", "opt/homebrew/Cellar/git/2.36.0", "usr/local/Cellar/wget/1.21.3"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return &MacSystem{Root: root, Run: f.run}, f
}

func TestMacSnapshot(t *testing.T) {
	m, f := newFakeMac(t)
	snap, err := m.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := (agentproto.OS{Platform: device.PlatformMacOS, Name: "macOS", Version: "12.3", Build: "21E230"}); snap.OS != want {
		t.Errorf("os %+v, want %+v", snap.OS, want)
	}
	have := map[string]string{}
	for _, sw := range snap.Inventory.Software {
		have[sw.Ecosystem+"/"+sw.Name+"/"+sw.Version] = sw.Arch
	}
	for _, want := range []string{"Apple/macOS/12.3", "Apple/Safari/15.4", "Desktop/Google Chrome/99.0.4844.83",
		"Homebrew/git/2.35.1", "Homebrew/git/2.36.0", "Homebrew/openssl@3/3.0.2", "Homebrew/wget/1.21.3"} {
		if _, ok := have[want]; !ok {
			t.Errorf("%s is not reported (have %v)", want, have)
		}
	}
	// softwareupdate runs in the background: its updates come with a
	// later snapshot.
	waitUntil(t, func() bool {
		s, _ := m.Snapshot(context.Background())
		return len(s.Inventory.PendingUpdates) == 4
	})

	// A failing softwareupdate keeps the last list and is noted.
	f.mu.Lock()
	f.outs["softwareupdate"], f.errs["softwareupdate"] = []byte("Can't connect to the Apple Software Update server.\n"), errors.New("exit status 1")
	f.mu.Unlock()
	m.mu.Lock()
	m.updatesAt = m.updatesAt.AddDate(0, 0, -1)
	m.mu.Unlock()
	m.Snapshot(context.Background())
	waitUntil(t, func() bool {
		s, _ := m.Snapshot(context.Background())
		return len(s.Inventory.Notes) == 1 && strings.HasPrefix(s.Inventory.Notes[0], "softwareupdate: exit status 1") && len(s.Inventory.PendingUpdates) == 4
	})
}

func TestMacExecute(t *testing.T) {
	m, f := newFakeMac(t)
	params := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	for _, tc := range []struct {
		name   string
		cmd    Command
		ran    string
		failed bool
	}{
		{"all updates", Command{Type: device.InstallUpdates}, "softwareupdate --install --all", false},
		{"named update", Command{Type: device.InstallUpdates, Params: params(device.InstallUpdatesParams{Updates: []string{"macOS Catalina Developer Beta-6"}})}, "softwareupdate --install macOS Catalina Developer Beta-6", false},
		{"an option is no label", Command{Type: device.InstallUpdates, Params: params(device.InstallUpdatesParams{Updates: []string{"--all"}})}, "", true},
		{"reboot now", Command{Type: device.Reboot}, "shutdown -r now Patchline: your administrator restarts this computer", false},
		{"reboot later", Command{Type: device.Reboot, Params: params(device.RebootParams{DelaySeconds: 90})}, "shutdown -r +2 Patchline: your administrator restarts this computer", false},
		{"nothing staged", Command{Type: device.FinishFeatureUpgrade}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.commands())
			out := m.Execute(context.Background(), tc.cmd)
			if out.Failed != tc.failed {
				t.Errorf("failed %v, want %v: %s", out.Failed, tc.failed, out.Message)
			}
			ran := f.commands()[before:]
			switch {
			case tc.ran == "" && len(ran) != 0:
				t.Errorf("ran %q, want nothing", ran)
			case tc.ran != "" && (len(ran) != 1 || ran[0] != tc.ran):
				t.Errorf("ran %q, want %q", ran, tc.ran)
			}
		})
	}
	f.outs["log"] = []byte("2024-11-24 10:00:00.000000+0000  localhost kernel[0]: boot\n")
	out := m.Execute(context.Background(), Command{Type: device.CollectLogs})
	if out.Failed || !strings.Contains(out.Message, "collected 1 log sources") {
		t.Errorf("collect-logs: %+v", out)
	}
}

func TestLaunchdPlist(t *testing.T) {
	spec := ServiceSpec{Executable: "/usr/local/bin/patchline", StateDir: "/Library/Application Support/Patchline",
		Args: []string{"agent", "--service", "--server=https://p.example.com:8081", "--allow=install-updates,reboot"}}
	var doc struct {
		Dict struct {
			Items []struct {
				XMLName xml.Name
				Text    string   `xml:",chardata"`
				Strings []string `xml:"string"`
			} `xml:",any"`
		} `xml:"dict"`
	}
	if err := xml.Unmarshal(LaunchdPlist(spec), &doc); err != nil {
		t.Fatal(err)
	}
	var label string
	var args []string
	items := doc.Dict.Items
	for i := 0; i+1 < len(items); i++ {
		if items[i].XMLName.Local != "key" {
			continue
		}
		switch items[i].Text {
		case "Label":
			label = items[i+1].Text
		case "ProgramArguments":
			args = items[i+1].Strings
		}
	}
	if label != LaunchdLabel {
		t.Errorf("Label %q", label)
	}
	if diff := cmp.Diff(append([]string{spec.Executable}, spec.Args...), args); diff != "" {
		t.Errorf("ProgramArguments (-want +got):\n%s", diff)
	}
}

// waitUntil polls cond for up to ten seconds.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("timed out")
}

func TestSystemdUnit(t *testing.T) {
	unit := string(SystemdUnit(ServiceSpec{Executable: "/usr/local/bin/patchline",
		Args: []string{"agent", "--service", "--state", "/var/lib/patchline-agent", "--log-file", "/var/lib/patchline agent/agent.log", "--allow=install-updates"}}))
	want := `ExecStart=/usr/local/bin/patchline agent --service --state /var/lib/patchline-agent --log-file "/var/lib/patchline agent/agent.log" --allow=install-updates` + "\n"
	if !strings.Contains(unit, want) {
		t.Errorf("unit:\n%s\nwant the line\n%s", unit, want)
	}
	if !strings.Contains(unit, "Restart=on-failure") {
		t.Errorf("unit does not restart on failure:\n%s", unit)
	}
}
