package agent

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/device"
)

// fakeRunner records the programs a System runs instead of running them.
type fakeRunner struct {
	mu    sync.Mutex
	calls []string
	out   map[string][]byte // by program
	err   map[string]error
}

func (f *fakeRunner) run(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, strings.Join(append([]string{name}, args...), " "))
	return f.out[name], f.err[name]
}

func writeFile(t *testing.T, root, name string, data []byte) {
	t.Helper()
	p := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fakeSystem is a System on a directory that looks like a Debian 12
// machine, whose programs are fakes: nothing on the real machine runs.
func fakeSystem(t *testing.T) (*System, *fakeRunner) {
	t.Helper()
	root := t.TempDir()
	for name, src := range map[string]string{"etc/os-release": "testdata/os-release-debian", "var/lib/dpkg/status": "testdata/dpkg-status"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, root, name, b)
	}
	writeFile(t, root, "proc/sys/kernel/osrelease", []byte("6.1.0-18-amd64\n"))
	writeFile(t, root, "var/log/syslog", bytes.Repeat([]byte("Nov 21 05:00:00 vm systemd[1]: Started session.\n"), 100))
	writeFile(t, root, "run/reboot-required", nil)
	fr := &fakeRunner{out: map[string][]byte{}, err: map[string]error{}}
	s := &System{Root: root, LogFiles: []string{"/var/log/syslog", "/var/log/missing.log"}, Run: fr.run,
		LookPath: func(p string) (string, error) {
			if p == "apt-get" || p == "systemctl" {
				return "/usr/bin/" + p, nil
			}
			return "", errors.New("not found")
		}}
	return s, fr
}

func TestSystemSnapshot(t *testing.T) {
	s, _ := fakeSystem(t)
	snap, err := s.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if snap.Hostname != host || snap.OS.Platform != "linux" || snap.OS.Name != "Debian GNU/Linux" || snap.OS.Version != "12" || snap.OS.Build != "6.1.0-18-amd64" {
		t.Errorf("identity = %s %+v", snap.Hostname, snap.OS)
	}
	if len(snap.Inventory.Software) != 7 || snap.Inventory.Software[0].Ecosystem != "Debian:12" {
		t.Errorf("software = %+v", snap.Inventory.Software)
	}
	if !snap.RebootPending || snap.FeatureUpgrade.State != "none" {
		t.Errorf("reboot pending %v, feature upgrade %+v", snap.RebootPending, snap.FeatureUpgrade)
	}
}

func TestSystemCommands(t *testing.T) {
	ctx := context.Background()
	s, fr := fakeSystem(t)

	out := s.Execute(ctx, Command{ID: "cmd_1", Type: device.Reboot})
	if out.Failed || !strings.Contains(out.Message, "systemctl reboot") {
		t.Errorf("reboot = %+v", out)
	}
	params, _ := json.Marshal(device.RebootParams{DelaySeconds: 90})
	s.Execute(ctx, Command{ID: "cmd_2", Type: device.Reboot, Params: params})
	fr.err["systemctl"] = errors.New("exit status 1")
	if out := s.Execute(ctx, Command{ID: "cmd_3", Type: device.Reboot}); !out.Failed {
		t.Errorf("a failed systemctl reboot succeeded: %+v", out)
	}

	params, _ = json.Marshal(device.InstallUpdatesParams{Updates: []string{"openssh-server", "libssl3"}})
	if out := s.Execute(ctx, Command{ID: "cmd_4", Type: device.InstallUpdates, Params: params}); out.Failed {
		t.Errorf("install-updates = %+v", out)
	}
	params, _ = json.Marshal(device.InstallUpdatesParams{Updates: []string{"--allow-unauthenticated"}})
	if out := s.Execute(ctx, Command{ID: "cmd_5", Type: device.InstallUpdates, Params: params}); !out.Failed {
		t.Errorf("an option passed for a package name: %+v", out)
	}
	want := []string{
		"systemctl reboot",
		"shutdown -r +2 Patchline: your administrator restarts this computer",
		"systemctl reboot",
		"apt-get -q update",
		"apt-get -y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold install --only-upgrade openssh-server libssl3",
	}
	if diff := cmp.Diff(want, fr.calls); diff != "" {
		t.Errorf("programs run (-want +got):\n%s", diff)
	}
	if out := s.Execute(ctx, Command{ID: "cmd_6", Type: device.FinishFeatureUpgrade}); !out.Failed {
		t.Errorf("finish-feature-upgrade on Linux = %+v", out)
	}
}

func TestSystemCollectLogs(t *testing.T) {
	s, _ := fakeSystem(t)
	out := s.Execute(context.Background(), Command{ID: "cmd_1", Type: device.CollectLogs})
	if out.Failed || out.BundleType != "application/gzip" {
		t.Fatalf("collect-logs = %+v", out)
	}
	zr, err := gzip.NewReader(bytes.NewReader(out.Bundle))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = string(b)
	}
	if !strings.Contains(files["var/log/syslog"], "Started session") {
		t.Errorf("syslog in the bundle: %q", files["var/log/syslog"])
	}
	if m := files["manifest.txt"]; !strings.Contains(m, "/var/log/missing.log\tskipped: not present") || !strings.Contains(m, "/var/log/syslog\t") {
		t.Errorf("manifest:\n%s", m)
	}
}

func TestReadTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.log")
	os.WriteFile(p, []byte("0123456789"), 0o600)
	data, _, note := readTail(p, 4)
	if string(data) != "6789" || note == "" {
		t.Errorf("readTail = %q %q", data, note)
	}
	if data, _, _ := readTail(t.TempDir(), 4); data != nil {
		t.Error("a directory was read as a log file")
	}
}

func TestDiskState(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	st, err := OpenDiskState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SaveIdentity(&Identity{Server: "http://x", AgentID: "agt_1", Credential: "agt_1.plat_secret"}); err != nil {
		t.Fatal(err)
	}
	r := &PendingResult{CommandID: "cmd_1", Final: true, Bundle: []byte("bundle"), BundleType: "application/gzip"}
	if err := st.PutResult(r); err != nil {
		t.Fatal(err)
	}
	if err := st.PutResult(&PendingResult{CommandID: "../escape"}); err == nil {
		t.Error("a command id named a path outside the state")
	}
	for _, name := range []string{"agent.json", "results/cmd_1.json", "results/cmd_1.bundle"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", name, fi.Mode().Perm())
		}
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("state directory mode %v", fi.Mode().Perm())
	}
	// Another process (a restarted agent) sees the same state.
	again, err := OpenDiskState(dir)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := again.Identity()
	rs, _ := again.Results()
	if id == nil || id.Credential != "agt_1.plat_secret" || len(rs) != 1 || string(rs[0].Bundle) != "bundle" {
		t.Errorf("reopened state: %+v %+v", id, rs)
	}
	rs[0].BundleUploaded, rs[0].Bundle = true, nil
	again.PutResult(rs[0])
	if _, err := os.Stat(filepath.Join(dir, "results/cmd_1.bundle")); !os.IsNotExist(err) {
		t.Error("an uploaded bundle stays on disk")
	}
	if err := again.DeleteResult("cmd_1"); err != nil {
		t.Fatal(err)
	}
	if err := again.Remove(t0()); err != nil {
		t.Fatal(err)
	}
	if id, _ := again.Identity(); id != nil {
		t.Error("identity kept after Remove")
	}
	if at, _ := again.Removed(); at == nil {
		t.Error("no removal mark")
	}
}

func t0() time.Time { return time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC) }

func TestSystemPendingUpdates(t *testing.T) {
	apt, err := os.ReadFile("testdata/apt-simulate.txt")
	if err != nil {
		t.Fatal(err)
	}
	fr := &fakeRunner{out: map[string][]byte{"apt-get": apt}, err: map[string]error{}}
	s := &System{Run: fr.run, LookPath: func(p string) (string, error) {
		if p == "apt-get" {
			return "/usr/bin/apt-get", nil
		}
		return "", errors.New("not found")
	}}
	// The first look starts the package manager and waits for nothing.
	if got := s.pendingUpdates(); len(got) != 0 {
		t.Errorf("before the package manager answered: %v", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(s.pendingUpdates()) != 5 {
		if time.Now().After(deadline) {
			t.Fatalf("pending updates: %v", s.pendingUpdates())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Within UpdatesEvery, the package manager is not asked again.
	s.pendingUpdates()
	fr.mu.Lock()
	defer fr.mu.Unlock()
	if diff := cmp.Diff([]string{"apt-get -s -q -o Debug::NoLocking=1 upgrade"}, fr.calls); diff != "" {
		t.Errorf("programs run (-want +got):\n%s", diff)
	}
}
