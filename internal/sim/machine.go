package sim

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/patchline/patchline/internal/agent"
	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/device"
)

// update is a pending update and what installing it changes.
type update struct {
	agentproto.Update
	packages map[string]string // package → version after the update
	version  string            // OS version after the update (macOS)
	build    string            // OS build after the update
	kb       bool              // recorded among the installed updates
	reboot   bool              // needs a restart to complete
}

// upgrade is where a feature upgrade lands.
type upgrade struct {
	os      agentproto.OS
	product string // the OS as a software item of the catalog
	kb      string // the cumulative update it comes with (Windows)
	kbTitle string
}

// machine is a simulated endpoint. Commands take time (scaled), fail now
// and then, and change what the machine reports.
type machine struct {
	mu    sync.Mutex
	rnd   *rand.Rand
	scale float64
	failP float64
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) bool

	hostname      string
	subnet        int
	addr          string
	os            agentproto.OS
	product       string // "Windows 11 Version 23H2", "macOS": the OS as the catalog names it
	software      []agentproto.Software
	installed     []agentproto.Update
	pending       []*update
	feature       agentproto.FeatureUpgrade
	upgrade       *upgrade
	stagedAt      time.Time // when staging ends, for a staging feature upgrade
	rebootPending bool
	downUntil     time.Time

	// inv is the inventory Snapshot reports, built again after a command
	// changed what it holds (nil until then). Snapshots share its lists,
	// which are never changed.
	inv *agentproto.Inventory
}

var (
	_ agent.Endpoint      = (*machine)(nil)
	_ agent.PolicyChecker = (*machine)(nil)
)

// newMachine builds the i-th machine of a fleet from r.
func newMachine(r *rand.Rand, i int, scale, failP float64, now func() time.Time) *machine {
	m := &machine{rnd: r, scale: scale, failP: failP, now: now, sleep: sleepCtx}
	p := pickProfile(r)
	p.build(m, r, i)
	m.addr = ip(r, m.subnet)
	if m.feature.State == device.FeatureUpgradeStaging {
		m.stagedAt = now().Add(m.duration(300, 1800))
	}
	if m.feature.State == "" {
		m.feature.State = device.FeatureUpgradeNone
	}
	return m
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// duration returns a plausible duration between lo and hi seconds,
// scaled. The caller holds mu or owns m.
func (m *machine) duration(lo, hi float64) time.Duration {
	s := lo + m.rnd.Float64()*(hi-lo)
	return time.Duration(s * m.scale * float64(time.Second))
}

// fails draws whether an attempt fails, with probability factor × the
// failure rate.
func (m *machine) fails(factor float64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rnd.Float64() < m.failP*factor
}

func (m *machine) arch() string {
	if m.os.Platform == device.PlatformMacOS {
		return "arm64"
	}
	return "amd64"
}

// Snapshot implements agent.Endpoint.
func (m *machine) Snapshot(ctx context.Context) (*agent.Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if now.Before(m.downUntil) {
		return nil, agent.ErrUnavailable
	}
	if m.feature.State == device.FeatureUpgradeStaging && !now.Before(m.stagedAt) {
		m.feature.State = device.FeatureUpgradeReady
	}
	s := &agent.Snapshot{
		Hostname: m.hostname, OS: m.os, Arch: m.arch(), IPs: []string{m.addr},
		FeatureUpgrade: m.feature, RebootPending: m.rebootPending,
	}
	if m.inv == nil {
		m.inv = m.inventory()
	}
	s.Inventory = *m.inv
	return s, nil
}

// inventory builds the inventory of the machine. The caller holds mu.
func (m *machine) inventory() *agentproto.Inventory {
	sw := slices.Clone(m.software)
	switch m.os.Platform {
	case device.PlatformWindows:
		// The OS as the catalog's Windows atoms name it: product and
		// full build, matched against fixed builds; installed KBs beside.
		sw = append(sw, agentproto.Software{Name: m.product, Version: "10.0." + m.os.Build, Ecosystem: "Windows", Arch: "x64"})
	case device.PlatformMacOS:
		sw = append(sw, agentproto.Software{Name: m.product, Version: m.os.Version, Ecosystem: "Apple", Arch: "arm64"})
	}
	inv := &agentproto.Inventory{Software: sw, PendingUpdates: []agentproto.Update{}, InstalledUpdates: slices.Clone(m.installed)}
	for _, u := range m.pending {
		inv.PendingUpdates = append(inv.PendingUpdates, u.Update)
	}
	return inv
}

// Execute implements agent.Endpoint.
func (m *machine) Execute(ctx context.Context, cmd agent.Command) agent.Outcome {
	switch cmd.Type {
	case device.CollectLogs:
		return m.collectLogs(ctx)
	case device.InstallUpdates:
		return m.installUpdates(ctx, cmd.Params)
	case device.Reboot:
		return m.reboot(ctx)
	case device.FinishFeatureUpgrade:
		return m.finishFeatureUpgrade(ctx)
	}
	return agent.Failf("this endpoint cannot run %q", cmd.Type)
}

func (m *machine) wait(ctx context.Context, lo, hi float64) bool {
	m.mu.Lock()
	d := m.duration(lo, hi)
	m.mu.Unlock()
	return m.sleep(ctx, d)
}

// down takes the machine off the network for a restart of lo to hi
// seconds (scaled) and returns how long it took.
func (m *machine) down(ctx context.Context, lo, hi float64) (time.Duration, bool) {
	m.mu.Lock()
	d := m.duration(lo, hi)
	m.downUntil = m.now().Add(d)
	m.mu.Unlock()
	return d, m.sleep(ctx, d)
}

func (m *machine) installUpdates(ctx context.Context, params json.RawMessage) agent.Outcome {
	var p device.InstallUpdatesParams
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			return agent.Failf("the parameters do not parse: %v", err)
		}
	}
	m.mu.Lock()
	var todo []*update
	for _, u := range m.pending {
		if len(p.Updates) == 0 || slices.Contains(p.Updates, u.ID) {
			todo = append(todo, u)
		}
	}
	platform := m.os.Platform
	m.mu.Unlock()
	if len(todo) == 0 {
		zero := 0
		return agent.Outcome{Message: "no pending update to install", ExitCode: &zero}
	}
	lo, hi := 20.0, 90.0
	if platform == device.PlatformWindows {
		lo, hi = 60, 300
	}
	if !m.wait(ctx, lo, hi) {
		return agent.Failf("canceled")
	}
	if m.fails(1) {
		switch platform {
		case device.PlatformWindows:
			code := 0x800f0922
			return agent.Outcome{Failed: true, ExitCode: &code, Message: fmt.Sprintf("%s failed to install: 0x800f0922 (CBS_E_INSTALLERS_FAILED)", todo[0].ID)}
		case device.PlatformMacOS:
			code := 1
			return agent.Outcome{Failed: true, ExitCode: &code, Message: "softwareupdate: the update could not be verified (the download was interrupted)"}
		}
		code := 100
		return agent.Outcome{Failed: true, ExitCode: &code, Message: "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 2314 (unattended-upgr)"}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inv = nil
	var ids []string
	for _, u := range todo {
		ids = append(ids, u.ID)
		for name, v := range u.packages {
			for i := range m.software {
				if m.software[i].Name == name {
					m.software[i].Version = v
				}
			}
		}
		if u.build != "" {
			m.os.Build = u.build
		}
		if u.version != "" {
			m.os.Version = u.version
		}
		if u.kb {
			m.installed = slices.DeleteFunc(m.installed, func(x agentproto.Update) bool { return strings.Contains(x.Title, "Cumulative Update") })
			m.installed = append(m.installed, u.Update)
		}
		m.rebootPending = m.rebootPending || u.reboot
		m.pending = slices.DeleteFunc(m.pending, func(x *update) bool { return x == u })
	}
	zero := 0
	msg := "installed " + strings.Join(ids, ", ")
	if m.rebootPending {
		msg += "; a restart completes the installation"
	}
	return agent.Outcome{Message: msg, ExitCode: &zero, Data: map[string]any{"installed": ids, "rebootRequired": m.rebootPending}}
}

func (m *machine) reboot(ctx context.Context) agent.Outcome {
	if m.fails(0.3) {
		return agent.Failf("the restart was blocked: an application refused to close (shutdown inhibited)")
	}
	d, ok := m.down(ctx, 30, 90)
	if !ok {
		return agent.Failf("canceled")
	}
	m.mu.Lock()
	m.rebootPending = false
	m.mu.Unlock()
	zero := 0
	return agent.Outcome{Message: fmt.Sprintf("restarted; back after %s", d.Round(time.Millisecond)), ExitCode: &zero}
}

func (m *machine) finishFeatureUpgrade(ctx context.Context) agent.Outcome {
	m.mu.Lock()
	st, target, up := m.feature.State, m.feature.Target, m.upgrade
	if st == device.FeatureUpgradeReady {
		m.feature.State = device.FeatureUpgradeFinishing
	}
	m.mu.Unlock()
	if st != device.FeatureUpgradeReady || up == nil {
		return agent.Failf("no feature upgrade waits to be finished (state %s)", st)
	}
	if _, ok := m.down(ctx, 120, 600); !ok {
		return agent.Failf("canceled")
	}
	if m.fails(1) {
		m.mu.Lock()
		m.feature.State = device.FeatureUpgradeFailed
		platform := m.os.Platform
		m.mu.Unlock()
		if platform == device.PlatformWindows {
			code := 0xC1900101
			return agent.Outcome{Failed: true, ExitCode: &code, Message: "0xC1900101 - 0x40017: the installation failed in the SECOND_BOOT phase; rolled back to the previous version"}
		}
		return agent.Failf("the upgrade to %s could not be completed; the previous version was restored", target)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inv = nil
	from := m.os.Name + " " + m.os.Version
	m.os, m.product = up.os, up.product
	if up.kb != "" {
		m.installed = slices.DeleteFunc(m.installed, func(x agentproto.Update) bool { return strings.Contains(x.Title, "Cumulative Update") })
		m.installed = append(m.installed, agentproto.Update{ID: up.kb, Title: up.kbTitle})
	}
	// The new release carries its own updates.
	m.pending = slices.DeleteFunc(m.pending, func(u *update) bool { return u.build != "" || u.version != "" })
	m.feature = agentproto.FeatureUpgrade{State: device.FeatureUpgradeNone}
	m.rebootPending = false
	zero := 0
	return agent.Outcome{Message: fmt.Sprintf("feature upgrade finished: %s → %s %s (%s)", from, m.os.Name, m.os.Version, m.os.Build), ExitCode: &zero}
}

// logFiles names the logs a machine of each platform bundles.
var logFiles = map[string][]string{
	device.PlatformWindows: {"Windows/Logs/CBS/CBS.log", "Windows/Logs/WindowsUpdate/WindowsUpdate.log", "ProgramData/Patchline/agent.log"},
	device.PlatformMacOS:   {"var/log/system.log", "var/log/install.log", "Library/Logs/Patchline/agent.log"},
	device.PlatformLinux:   {"var/log/syslog", "var/log/dpkg.log", "var/log/apt/history.log"},
}

func (m *machine) collectLogs(ctx context.Context) agent.Outcome {
	if !m.wait(ctx, 3, 10) {
		return agent.Failf("canceled")
	}
	if m.fails(0.2) {
		return agent.Failf("collecting logs: access to %s was denied", logFiles[m.os.Platform][0])
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	now := m.now().UTC()
	names := logFiles[m.os.Platform]
	for _, name := range names {
		var b strings.Builder
		for i := 0; i < 50+m.rnd.IntN(200); i++ {
			t := now.Add(-time.Duration(m.rnd.IntN(86400)) * time.Second)
			fmt.Fprintf(&b, "%s %s patchline-agent[%d]: check-in ok, %d packages, %d pending updates\n",
				t.Format(time.RFC3339), m.hostname, 1000+m.rnd.IntN(9000), len(m.software), len(m.pending))
		}
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(b.Len()), ModTime: now, Typeflag: tar.TypeReg})
		tw.Write([]byte(b.String()))
	}
	manifest := fmt.Sprintf("Patchline log bundle\ncollected %s on %s (simulated)\n\n%s\n", now.Format(time.RFC3339), m.hostname, strings.Join(names, "\n"))
	tw.WriteHeader(&tar.Header{Name: "manifest.txt", Mode: 0o600, Size: int64(len(manifest)), ModTime: now, Typeflag: tar.TypeReg})
	tw.Write([]byte(manifest))
	tw.Close()
	gz.Close()
	return agent.Outcome{Message: fmt.Sprintf("collected %d log files, %d bytes compressed", len(names), buf.Len()),
		Bundle: buf.Bytes(), BundleType: "application/gzip", Data: map[string]any{"files": names}}
}

// CheckPolicy implements agent.PolicyChecker: the settings every agent
// knows are checked against the machine; the others (screen lock,
// firewall, …) a simulated machine applies, and so complies with.
func (m *machine) CheckPolicy(settings json.RawMessage, snap *agent.Snapshot) (*bool, string) {
	compliant, findings, unchecked := agent.CheckPolicy(settings, snap)
	if compliant == nil && len(unchecked) > 0 {
		yes := true
		compliant = &yes
	}
	msg := strings.Join(findings, "; ")
	if len(unchecked) > 0 {
		if msg != "" {
			msg += "; "
		}
		msg += "enforced: " + strings.Join(unchecked, ", ")
	}
	return compliant, msg
}
