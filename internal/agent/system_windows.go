package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/device"
)

// WindowsSystem is the Windows machine the agent runs on. Its inventory
// comes from the registry (ReadWindowsInventory), the Windows Update
// Agent (pending updates, a staged feature upgrade, the update history)
// and WMI (Win32_QuickFixEngineering); it installs updates and finishes
// feature upgrades through the Windows Update Agent, restarts through
// InitiateSystemShutdownEx, applies Windows Update for Business policy to
// the registry, and exports event logs through EvtExportLog.
//
// What is unavailable (no Windows Update service, no network, no WMI) is
// logged and said in the snapshot's notes; the rest is still reported.
type WindowsSystem struct {
	// AgentLog is the agent's own log file, put in log bundles.
	AgentLog string
	// LogFiles replaces the default files of a log bundle when set.
	LogFiles []string
	// UpdatesEvery bounds how often the Windows Update Agent is searched
	// (an hour when zero).
	UpdatesEvery time.Duration
	Logger       *slog.Logger

	reg SystemRegistry

	mu         sync.Mutex
	searchAt   time.Time
	refreshing bool
	pending    []agentproto.Update
	feature    agentproto.FeatureUpgrade
	installed  []agentproto.Update // from the history and WMI
	notes      map[string]string   // what could not be read, by source
}

var (
	_ Endpoint      = (*WindowsSystem)(nil)
	_ PolicyChecker = (*WindowsSystem)(nil)
	_ PolicyApplier = (*WindowsSystem)(nil)
)

// NewSystem returns the endpoint of the machine the agent runs on.
func NewSystem(cfg SystemConfig) Endpoint {
	return &WindowsSystem{AgentLog: cfg.AgentLog, LogFiles: cfg.LogFiles, Logger: cfg.Logger}
}

func (s *WindowsSystem) log() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// Snapshot implements Endpoint.
func (s *WindowsSystem) Snapshot(ctx context.Context) (*Snapshot, error) {
	inv, err := ReadWindowsInventory(s.reg)
	if err != nil {
		return nil, err
	}
	arch := inv.Arch
	if arch == "" {
		arch = runtime.GOARCH
	}
	snap := &Snapshot{
		Hostname:       hostnameOr("unknown"),
		OS:             inv.OS,
		Arch:           arch,
		IPs:            addresses(),
		RebootPending:  inv.RebootPending,
		FeatureUpgrade: agentproto.FeatureUpgrade{State: device.FeatureUpgradeNone},
	}
	snap.Inventory.Software = inv.Software
	s.mu.Lock()
	defer s.mu.Unlock()
	every := s.UpdatesEvery
	if every == 0 {
		every = time.Hour
	}
	if (s.searchAt.IsZero() || time.Since(s.searchAt) >= every) && !s.refreshing {
		s.refreshing = true
		go s.refresh()
	}
	snap.Inventory.PendingUpdates = append([]agentproto.Update{}, s.pending...)
	for source, err := range s.notes {
		snap.Inventory.Notes = append(snap.Inventory.Notes, source+": "+err)
	}
	sort.Strings(snap.Inventory.Notes)
	snap.Inventory.InstalledUpdates = mergeUpdates(inv.Updates, s.installed)
	if s.feature.State != "" {
		snap.FeatureUpgrade = s.feature
	}
	return snap, nil
}

// refresh asks the Windows Update Agent and WMI again, in the background:
// a search can take minutes, and what it finds goes out with a later
// check-in.
func (s *WindowsSystem) refresh() {
	notes := map[string]string{}
	list, serr := wuaSearch()
	if serr != nil {
		notes["Windows Update search"] = serr.Error()
		s.log().Warn("the Windows Update Agent could not list pending updates: they are left out", "err", serr)
	}
	var installed []agentproto.Update
	hist, herr := wuaHistory(500)
	if herr != nil {
		notes["Windows Update history"] = herr.Error()
		s.log().Warn("the Windows Update history could not be read", "err", herr)
	}
	installed = append(installed, WUAInstalled(hist)...)
	qfe, qerr := quickFixes()
	if qerr != nil {
		notes["Win32_QuickFixEngineering"] = qerr.Error()
		s.log().Warn("WMI could not list installed updates", "err", qerr)
	}
	installed = mergeUpdates(installed, qfe)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshing = false
	s.searchAt = time.Now()
	s.notes = notes
	if serr == nil {
		s.pending, s.feature = WUAPending(list)
	}
	s.installed = installed
}

// Notes returns what the last look could not read, by source.
func (s *WindowsSystem) Notes() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for k, v := range s.notes {
		out[k] = v
	}
	return out
}

// Execute implements Endpoint.
func (s *WindowsSystem) Execute(ctx context.Context, cmd Command) Outcome {
	switch cmd.Type {
	case device.CollectLogs:
		return s.collectLogs(ctx)
	case device.InstallUpdates:
		var p device.InstallUpdatesParams
		if len(cmd.Params) > 0 {
			if err := json.Unmarshal(cmd.Params, &p); err != nil {
				return Failf("the parameters do not parse: %v", err)
			}
		}
		out := wuaInstall(p.Updates, false)
		s.mu.Lock()
		s.searchAt = time.Time{} // look again
		s.mu.Unlock()
		return out
	case device.Reboot:
		var p device.RebootParams
		if len(cmd.Params) > 0 {
			if err := json.Unmarshal(cmd.Params, &p); err != nil {
				return Failf("the parameters do not parse: %v", err)
			}
		}
		return restart(p.DelaySeconds, "Your administrator restarts this computer with Patchline.")
	case device.FinishFeatureUpgrade:
		out := wuaInstall(nil, true)
		if out.Failed {
			return out
		}
		r := restart(60, "Your administrator finishes the Windows feature upgrade: this computer restarts in a minute.")
		if r.Failed {
			return Failf("%s; but the restart that finishes it failed: %s", out.Message, r.Message)
		}
		out.Message += "; restarting in 60 seconds to finish"
		return out
	}
	return Failf("this endpoint cannot run %q", cmd.Type)
}

// restart asks Windows to restart after delay seconds, showing message to
// the signed-in users until then.
func restart(delay int, message string) Outcome {
	if err := enablePrivilege("SeShutdownPrivilege"); err != nil {
		return Failf("restart: %v", err)
	}
	msg, err := windows.UTF16PtrFromString(message)
	if err != nil {
		return Failf("restart: %v", err)
	}
	// Planned, operating system, security fix.
	const reason = 0x80000000 | 0x00020000 | 0x00000012
	if err := windows.InitiateSystemShutdownEx(nil, msg, uint32(max(delay, 0)), false, true, reason); err != nil {
		return Failf("restart: InitiateSystemShutdownEx: %v", err)
	}
	zero := 0
	return Outcome{ExitCode: &zero, Message: fmt.Sprintf("restart requested in %d seconds", max(delay, 0))}
}

// enablePrivilege enables a privilege of the process's token.
func enablePrivilege(name string) error {
	var token windows.Token
	if err := windows.OpenProcessToken(windows.CurrentProcess(), windows.TOKEN_ADJUST_PRIVILEGES|windows.TOKEN_QUERY, &token); err != nil {
		return fmt.Errorf("open the process token: %w", err)
	}
	defer token.Close()
	var luid windows.LUID
	if err := windows.LookupPrivilegeValue(nil, windows.StringToUTF16Ptr(name), &luid); err != nil {
		return fmt.Errorf("look up %s: %w", name, err)
	}
	tp := windows.Tokenprivileges{PrivilegeCount: 1}
	tp.Privileges[0] = windows.LUIDAndAttributes{Luid: luid, Attributes: windows.SE_PRIVILEGE_ENABLED}
	if err := windows.AdjustTokenPrivileges(token, false, &tp, 0, nil, nil); err != nil {
		return fmt.Errorf("enable %s: %w", name, err)
	}
	return nil
}

// ApplyPolicy implements PolicyApplier: it writes the Windows Update for
// Business settings to the registry.
func (s *WindowsSystem) ApplyPolicy(ctx context.Context, settings json.RawMessage) error {
	p, err := ParseWindowsUpdatePolicy(settings)
	if err != nil || p == nil {
		return err
	}
	return p.Apply(s.reg)
}

// CheckPolicy implements PolicyChecker.
func (s *WindowsSystem) CheckPolicy(settings json.RawMessage, snap *Snapshot) (*bool, string) {
	return CheckWindowsPolicy(s.reg, settings, snap)
}

// windowsLogs are the files of a log bundle on Windows, under the Windows
// directory.
var windowsLogs = []string{
	`Logs\CBS\CBS.log`,
	`SoftwareDistribution\ReportingEvents.log`,
	`WindowsUpdate.log`,
}

// collectLogs bundles the System, Application and Setup event logs of the
// last day, the Windows Update logs (the ETL traces that
// Get-WindowsUpdateLog decodes, ReportingEvents.log) and the agent's log.
func (s *WindowsSystem) collectLogs(ctx context.Context) Outcome {
	b := newLogBundle()
	tmp, err := os.MkdirTemp("", "patchline-logs-")
	if err != nil {
		return Failf("collect logs: %v", err)
	}
	defer os.RemoveAll(tmp)
	for _, channel := range []string{"System", "Application", "Setup"} {
		path := filepath.Join(tmp, channel+".evtx")
		if err := exportEventLog(channel, "*[System[TimeCreated[timediff(@SystemTime) <= 86400000]]]", path); err != nil {
			b.skip("event log "+channel, err.Error())
			continue
		}
		b.addWhole(path, `EventLogs\`+channel+".evtx")
	}
	windir := os.Getenv("SystemRoot")
	if windir == "" {
		windir = `C:\Windows`
	}
	files := s.LogFiles
	if files == nil {
		for _, f := range windowsLogs {
			files = append(files, filepath.Join(windir, f))
		}
		etl, _ := filepath.Glob(filepath.Join(windir, `Logs\WindowsUpdate\*.etl`))
		sort.Sort(sort.Reverse(sort.StringSlice(etl)))
		files = append(files, etl[:min(len(etl), 8)]...)
	}
	for _, f := range files {
		b.addFile(f, f)
	}
	if s.AgentLog != "" {
		b.addFile(s.AgentLog, s.AgentLog)
	}
	return b.outcome()
}

var procEvtExportLog = windows.NewLazySystemDLL("wevtapi.dll").NewProc("EvtExportLog")

// exportEventLog exports the events of a channel that query selects to an
// .evtx file.
func exportEventLog(channel, query, path string) error {
	if err := procEvtExportLog.Find(); err != nil {
		return fmt.Errorf("EvtExportLog is not available: %w", err)
	}
	ch, err := windows.UTF16PtrFromString(channel)
	if err != nil {
		return err
	}
	q, err := windows.UTF16PtrFromString(query)
	if err != nil {
		return err
	}
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return err
	}
	const evtExportLogChannelPath = 1
	r, _, e := procEvtExportLog.Call(0, uintptr(unsafe.Pointer(ch)), uintptr(unsafe.Pointer(q)), uintptr(unsafe.Pointer(p)), evtExportLogChannelPath)
	if r == 0 {
		return fmt.Errorf("EvtExportLog %s: %w", channel, e)
	}
	return nil
}

// addWhole adds the file at path whole, or skips it when it does not fit:
// a file whose tail means nothing (an event log export).
func (b *logBundle) addWhole(path, source string) {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		b.skip(source, err.Error())
	case fi.Size() > min(int64(MaxLogFileBytes), b.budget):
		b.skip(source, fmt.Sprintf("%d bytes: larger than the bundle has room for", fi.Size()))
	default:
		b.addFile(path, source)
	}
}
