package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/device"
)

// MacSystem is the macOS machine the agent runs on. It learns what the
// machine is from Apple's own tools, run through Run so that it is tested
// anywhere on their captured output: sw_vers for the version and build,
// system_profiler for the applications, softwareupdate for the pending
// updates, and the Homebrew Cellar on disk for the packages Homebrew
// installed. It installs updates with softwareupdate, restarts with
// shutdown and bundles the unified log with `log show`.
type MacSystem struct {
	// Root is prepended to every file read (the Homebrew Cellars, the
	// log files); "" reads the running system.
	Root string
	// AgentLog is the agent's own log file, put in log bundles.
	AgentLog string
	// LogFiles replaces the default files of a log bundle when set.
	LogFiles []string
	// Run runs programs; nil means ExecRunner.
	Run Runner
	// AppsEvery and UpdatesEvery bound how often system_profiler and
	// softwareupdate, both slow, run again (10 minutes and an hour when
	// zero).
	AppsEvery, UpdatesEvery time.Duration
	Logger                  *slog.Logger

	mu         sync.Mutex
	apps       []agentproto.Software
	appsAt     time.Time
	updates    []agentproto.Update
	updatesAt  time.Time
	refreshing bool
	notes      map[string]string
}

var _ Endpoint = (*MacSystem)(nil)

// macLogFiles are the files of a log bundle on macOS.
var macLogFiles = []string{"/var/log/install.log", "/var/log/system.log"}

// homebrewCellars are where Homebrew keeps what it installed: Apple
// silicon, then Intel.
var homebrewCellars = []string{"/opt/homebrew/Cellar", "/usr/local/Cellar"}

func (s *MacSystem) runner() Runner {
	if s.Run != nil {
		return s.Run
	}
	return ExecRunner
}

func (s *MacSystem) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return s.runner()(ctx, nil, name, args...)
}

func (s *MacSystem) log() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// Snapshot implements Endpoint. The first snapshot waits for
// system_profiler; later ones report what it said last and ask it again
// in the background when that is older than AppsEvery.
func (s *MacSystem) Snapshot(ctx context.Context) (*Snapshot, error) {
	out, err := s.run(ctx, "sw_vers")
	if err != nil {
		return nil, fmt.Errorf("sw_vers: %w", err)
	}
	name, version, build := ParseSwVers(out)
	if version == "" {
		return nil, fmt.Errorf("sw_vers named no ProductVersion: %q", tail(out, 200))
	}
	if name == "" || strings.HasPrefix(name, "Mac OS X") {
		name = "macOS"
	}
	snap := &Snapshot{
		Hostname:       hostnameOr("unknown"),
		OS:             agentproto.OS{Platform: device.PlatformMacOS, Name: name, Version: version, Build: build},
		Arch:           runtime.GOARCH,
		IPs:            addresses(),
		FeatureUpgrade: agentproto.FeatureUpgrade{State: device.FeatureUpgradeNone},
	}
	s.mu.Lock()
	first := s.appsAt.IsZero()
	s.mu.Unlock()
	if first {
		// The applications are most of what is reported: the first
		// check-in waits for them, not for softwareupdate, which asks
		// Apple's servers.
		s.refresh(ctx, true, false)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	doApps := time.Since(s.appsAt) >= cmpOr(s.AppsEvery, 10*time.Minute)
	doUpdates := s.updatesAt.IsZero() || time.Since(s.updatesAt) >= cmpOr(s.UpdatesEvery, time.Hour)
	if !s.refreshing && (doApps || doUpdates) {
		s.refreshing = true
		go func() {
			rctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			s.refresh(rctx, doApps, doUpdates)
			s.mu.Lock()
			s.refreshing = false
			s.mu.Unlock()
		}()
	}
	// The OS as the catalog names Apple's products.
	snap.Inventory.Software = append([]agentproto.Software{{Name: "macOS", Version: version, Ecosystem: "Apple", Arch: catalogArch(runtime.GOARCH)}}, s.apps...)
	snap.Inventory.Software = append(snap.Inventory.Software, s.homebrew()...)
	snap.Inventory.PendingUpdates = append([]agentproto.Update{}, s.updates...)
	for source, err := range s.notes {
		snap.Inventory.Notes = append(snap.Inventory.Notes, source+": "+err)
	}
	sort.Strings(snap.Inventory.Notes)
	return snap, nil
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// refresh asks system_profiler for the applications and softwareupdate
// for the pending updates, as asked. What fails keeps the last answer and
// is noted.
func (s *MacSystem) refresh(ctx context.Context, doApps, doUpdates bool) {
	var apps []agentproto.Software
	var appsErr, updErr error
	if doApps {
		actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		out, err := s.run(actx, "system_profiler", "SPApplicationsDataType", "-json")
		cancel()
		if err == nil {
			apps, err = ParseSystemProfilerApps(out)
		}
		appsErr = err
	}
	var updates []agentproto.Update
	if doUpdates {
		uctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		out, err := s.run(uctx, "softwareupdate", "--list")
		cancel()
		// softwareupdate exits non-zero when it finds nothing on some
		// releases: what it printed decides.
		updates = ParseSoftwareUpdateList(out)
		if err != nil && len(updates) == 0 && !bytes.Contains(out, []byte("No new software available")) {
			updErr = err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.notes == nil {
		s.notes = map[string]string{}
	}
	now := time.Now()
	if doApps {
		s.appsAt = now
		if appsErr != nil {
			s.notes["system_profiler"] = appsErr.Error()
			s.log().Warn("system_profiler could not list the applications", "err", appsErr)
		} else {
			delete(s.notes, "system_profiler")
			s.apps = apps
		}
	}
	if doUpdates {
		s.updatesAt = now
		if updErr != nil {
			s.notes["softwareupdate"] = updErr.Error()
			s.log().Warn("softwareupdate could not list pending updates", "err", updErr)
		} else {
			delete(s.notes, "softwareupdate")
			s.updates = updates
		}
	}
}

// ParseSwVers parses the output of sw_vers: ProductName, ProductVersion
// and BuildVersion.
func ParseSwVers(out []byte) (name, version, build string) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "ProductName":
			name = v
		case "ProductVersion":
			version = v
		case "BuildVersion":
			build = v
		}
	}
	return name, version, build
}

// profilerApp is an item of system_profiler's SPApplicationsDataType.
type profilerApp struct {
	Name         string `json:"_name"`
	Version      string `json:"version"`
	ObtainedFrom string `json:"obtained_from"`
	Path         string `json:"path"`
}

// appBuild matches a build number after a version: "5.9.1 (3506)".
var appBuild = regexp.MustCompile(`\s+\([^()]*\)$`)

// ParseSystemProfilerApps parses `system_profiler SPApplicationsDataType
// -json`: every application with a version, Apple's own (obtained from
// Apple: Safari, Xcode) in the Apple ecosystem as the catalog names
// Apple's products, the others through Application. An application found
// in several places is reported once a version.
func ParseSystemProfilerApps(out []byte) ([]agentproto.Software, error) {
	var doc struct {
		Apps []profilerApp `json:"SPApplicationsDataType"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("system_profiler output: %w", err)
	}
	seen := map[agentproto.Software]bool{}
	apps := []agentproto.Software{}
	for _, a := range doc.Apps {
		version := strings.TrimSpace(appBuild.ReplaceAllString(strings.TrimSpace(a.Version), ""))
		if version == "" || strings.TrimSpace(a.Name) == "" {
			continue
		}
		sw := Application(a.Name, version, "")
		if a.ObtainedFrom == "apple" {
			sw.Ecosystem = "Apple"
		}
		if !seen[sw] {
			seen[sw] = true
			apps = append(apps, sw)
		}
	}
	return apps, nil
}

var (
	// suLabel matches the label line of an update: "* Label: macOS
	// Sonoma 14.6.1-23G93" (macOS 10.15 and later) or "   * macOS 10.14.1
	// Update" (before); "-" marks one that is not recommended.
	suLabel = regexp.MustCompile(`^\s*[*-]\s+(?:Label:\s*)?(.+?)\s*$`)
	// suTitle matches the description line of macOS 10.15 and later:
	// "Title: …, Version: …, Size: …, Recommended: YES, Action: restart,".
	suTitle = regexp.MustCompile(`^\s*Title:\s*(.*?),\s*Version:\s*([^,]*),`)
	// suOldTitle matches the description line before 10.15: "macOS
	// 10.14.1 Update (10.14.1), 199140K [recommended] [restart]".
	suOldTitle = regexp.MustCompile(`^\s+(.*?),?\s+\(([^()]*)\),`)
)

// ParseSoftwareUpdateList parses `softwareupdate --list`: an update per
// label, with its title and whether it needs a restart (or a shut down).
func ParseSoftwareUpdateList(out []byte) []agentproto.Update {
	updates := []agentproto.Update{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	listing := false
	var cur *agentproto.Update
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "Software Update found the following") {
			listing = true
			continue
		}
		if !listing {
			continue
		}
		if m := suLabel.FindStringSubmatch(line); m != nil && !strings.HasPrefix(strings.TrimSpace(line), "Title:") {
			updates = append(updates, agentproto.Update{ID: m[1], Title: m[1]})
			cur = &updates[len(updates)-1]
			continue
		}
		if cur == nil {
			continue
		}
		lower := strings.ToLower(line)
		switch m, old := suTitle.FindStringSubmatch(line), suOldTitle.FindStringSubmatch(line); {
		case m != nil:
			cur.Title = strings.TrimSpace(m[1])
			if v := strings.TrimSpace(m[2]); v != "" && !strings.Contains(cur.Title, v) {
				cur.Title += " " + v
			}
			cur.RebootRequired = strings.Contains(lower, "action: restart") || strings.Contains(lower, "action: shut down")
		case old != nil:
			cur.Title = strings.TrimSpace(old[1])
			if v := strings.TrimSpace(old[2]); v != "" && !strings.Contains(cur.Title, v) {
				cur.Title += " " + v
			}
			cur.RebootRequired = strings.Contains(lower, "[restart]") || strings.Contains(lower, "[shut down]")
		}
		cur = nil
	}
	return updates
}

// homebrew lists the packages of the Homebrew Cellars: a directory per
// package, one per installed version.
func (s *MacSystem) homebrew() []agentproto.Software {
	var out []agentproto.Software
	for _, cellar := range homebrewCellars {
		pkgs, err := os.ReadDir(filepath.Join(s.Root, cellar))
		if err != nil {
			continue
		}
		for _, p := range pkgs {
			if !p.IsDir() {
				continue
			}
			versions, err := os.ReadDir(filepath.Join(s.Root, cellar, p.Name()))
			if err != nil {
				continue
			}
			for _, v := range versions {
				if v.IsDir() && !strings.HasPrefix(v.Name(), ".") {
					out = append(out, agentproto.Software{Name: p.Name(), Version: v.Name(), Ecosystem: "Homebrew"})
				}
			}
		}
	}
	return out
}

// softwareUpdateLabel is what a label must look like to reach
// softwareupdate's command line: never an option.
var softwareUpdateLabel = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9 ._()+,-]{0,199}$`)

// Execute implements Endpoint.
func (s *MacSystem) Execute(ctx context.Context, cmd Command) Outcome {
	switch cmd.Type {
	case device.CollectLogs:
		b := newLogBundle()
		b.addCommand(ctx, s.runner(), "unified-log.txt", "log", "show", "--last", "4h", "--style", "syslog")
		files := s.LogFiles
		if files == nil {
			files = macLogFiles
		}
		for _, f := range files {
			b.addFile(filepath.Join(s.Root, f), f)
		}
		if s.AgentLog != "" {
			b.addFile(s.AgentLog, s.AgentLog)
		}
		return b.outcome()
	case device.InstallUpdates:
		var p device.InstallUpdatesParams
		if len(cmd.Params) > 0 {
			if err := json.Unmarshal(cmd.Params, &p); err != nil {
				return Failf("the parameters do not parse: %v", err)
			}
		}
		args := []string{"--install", "--all"}
		if len(p.Updates) > 0 {
			args = []string{"--install"}
			for _, label := range p.Updates {
				if !softwareUpdateLabel.MatchString(label) {
					return Failf("%q is not a softwareupdate label", label)
				}
				args = append(args, label)
			}
		}
		ictx, cancel := context.WithTimeout(ctx, 2*time.Hour)
		defer cancel()
		out, err := s.run(ictx, "softwareupdate", args...)
		s.mu.Lock()
		s.updatesAt = time.Time{} // look again
		s.mu.Unlock()
		data := map[string]any{"output": string(tail(out, 16<<10))}
		if err != nil {
			return Outcome{Failed: true, ExitCode: exitCode(err), Message: fmt.Sprintf("softwareupdate %s: %v", strings.Join(args, " "), err), Data: data}
		}
		zero := 0
		msg := "installed " + strings.Join(p.Updates, ", ")
		if len(p.Updates) == 0 {
			msg = "installed all pending updates"
		}
		if bytes.Contains(bytes.ToLower(out), []byte("restart")) {
			msg += "; a restart is required to finish"
		}
		return Outcome{ExitCode: &zero, Message: msg, Data: data}
	case device.Reboot:
		var p device.RebootParams
		if len(cmd.Params) > 0 {
			if err := json.Unmarshal(cmd.Params, &p); err != nil {
				return Failf("the parameters do not parse: %v", err)
			}
		}
		when := "now"
		if p.DelaySeconds > 0 {
			when = fmt.Sprintf("+%d", (p.DelaySeconds+59)/60)
		}
		out, err := s.run(ctx, "shutdown", "-r", when, "Patchline: your administrator restarts this computer")
		if err != nil {
			return Outcome{Failed: true, ExitCode: exitCode(err), Message: fmt.Sprintf("shutdown -r %s: %v: %s", when, err, tail(out, 1000))}
		}
		zero := 0
		return Outcome{ExitCode: &zero, Message: "restart requested (shutdown -r " + when + ")"}
	case device.FinishFeatureUpgrade:
		return Failf("no feature upgrade is staged on this endpoint: a new macOS release installs with install-updates and its label")
	}
	return Failf("this endpoint cannot run %q", cmd.Type)
}
