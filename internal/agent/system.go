package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/device"
)

// DefaultLogFiles are the log files a collect-logs bundle holds unless
// the agent is told otherwise; those missing are skipped.
var DefaultLogFiles = []string{
	"/var/log/syslog", "/var/log/messages", "/var/log/kern.log",
	"/var/log/dpkg.log", "/var/log/apt/history.log", "/var/log/apt/term.log",
	"/var/log/dnf.log", "/var/log/yum.log", "/var/log/apk.log",
}

// Bounds of a log bundle: the tail of each file, and of all together, so
// that the compressed bundle stays far below agentproto.MaxLogBundleBytes.
const (
	MaxLogFileBytes   = 8 << 20
	MaxLogBundleInput = 24 << 20
)

// Runner runs a program with extra environment variables and returns its
// standard output and error together. A program that ran and failed
// returns an *exec.ExitError.
type Runner func(ctx context.Context, env []string, name string, args ...string) ([]byte, error)

// ExecRunner runs programs with os/exec.
func ExecRunner(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	return cmd.CombinedOutput()
}

// System is the Linux machine the agent runs on. It reads its inventory
// from the system itself (os-release, the kernel, the network
// interfaces, the dpkg, rpm and apk databases) and asks the package
// manager, without root, which updates are pending.
type System struct {
	// Root is prepended to every file the system is read from; "" reads
	// the running system.
	Root string
	// LogFiles are the files of a collect-logs bundle (DefaultLogFiles
	// when nil).
	LogFiles []string
	// AgentLog is the agent's own log file, added to log bundles.
	AgentLog string
	// Run runs programs (package managers, systemctl); nil means
	// ExecRunner.
	Run Runner
	// LookPath finds programs; nil means exec.LookPath.
	LookPath func(string) (string, error)
	// UpdatesEvery bounds how often the package manager is asked for
	// pending updates while the package database does not change (an
	// hour when zero).
	UpdatesEvery time.Duration
	Logger       *slog.Logger

	mu         sync.Mutex
	updates    []agentproto.Update
	upAt       time.Time
	upStamp    string // modification times of the package databases when updates were read
	refreshing bool
}

var _ Endpoint = (*System)(nil)

func (s *System) path(p string) string { return filepath.Join(s.Root, p) }

func (s *System) run(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
	if s.Run != nil {
		return s.Run(ctx, env, name, args...)
	}
	return ExecRunner(ctx, env, name, args...)
}

func (s *System) has(program string) bool {
	look := s.LookPath
	if look == nil {
		look = exec.LookPath
	}
	_, err := look(program)
	return err == nil
}

func (s *System) log() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// osRelease reads os-release(5).
func (s *System) osRelease() map[string]string {
	for _, p := range []string{"/etc/os-release", "/usr/lib/os-release"} {
		f, err := os.Open(s.path(p))
		if err != nil {
			continue
		}
		defer f.Close()
		return ParseOSRelease(f)
	}
	return map[string]string{}
}

// Snapshot implements Endpoint.
func (s *System) Snapshot(ctx context.Context) (*Snapshot, error) {
	hostname, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("hostname: %w", err)
	}
	osr := s.osRelease()
	snap := &Snapshot{
		Hostname:       hostname,
		OS:             agentproto.OS{Platform: device.PlatformLinux, Name: osr["NAME"], Version: osr["VERSION_ID"], Build: s.kernel()},
		Arch:           runtime.GOARCH,
		IPs:            addresses(),
		FeatureUpgrade: agentproto.FeatureUpgrade{State: device.FeatureUpgradeNone},
	}
	if snap.OS.Name == "" {
		snap.OS.Name = "Linux"
	}
	if snap.OS.Version == "" {
		snap.OS.Version = osr["VERSION_CODENAME"]
	}
	eco := Ecosystem(osr)
	snap.Inventory.Software, err = s.packages(ctx, eco)
	if err != nil {
		return nil, err
	}
	snap.Inventory.PendingUpdates = s.pendingUpdates()
	for _, p := range []string{"/run/reboot-required", "/var/run/reboot-required"} {
		if _, err := os.Stat(s.path(p)); err == nil {
			snap.RebootPending = true
		}
	}
	return snap, nil
}

func (s *System) kernel() string {
	b, err := os.ReadFile(s.path("/proc/sys/kernel/osrelease"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// addresses returns the addresses of the network interfaces, loopback and
// link-local ones left out.
func addresses() []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return []string{}
	}
	out := []string{}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() || ipn.IP.IsLinkLocalMulticast() {
			continue
		}
		out = append(out, ipn.IP.String())
		if len(out) == agentproto.MaxIPs {
			break // the server takes no more
		}
	}
	return out
}

// packages reads every package database present.
func (s *System) packages(ctx context.Context, eco string) ([]agentproto.Software, error) {
	var all []agentproto.Software
	if f, err := os.Open(s.path("/var/lib/dpkg/status")); err == nil {
		pkgs, err := ParseDpkgStatus(f, eco)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read dpkg status: %w", err)
		}
		all = append(all, pkgs...)
	}
	if f, err := os.Open(s.path("/lib/apk/db/installed")); err == nil {
		pkgs, err := ParseAPKInstalled(f, eco)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read apk database: %w", err)
		}
		all = append(all, pkgs...)
	}
	if s.Root == "" && s.has("rpm") {
		if _, err := os.Stat("/var/lib/rpm"); err == nil {
			qctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			out, err := s.run(qctx, nil, "rpm", "-qa", "--queryformat", RPMQueryFormat)
			cancel()
			if err != nil {
				s.log().Warn("rpm -qa failed: RPM packages left out", "err", err)
			} else {
				all = append(all, ParseRPMQuery(out, eco)...)
			}
		}
	}
	if all == nil {
		all = []agentproto.Software{}
	}
	return all, nil
}

// dbStamp identifies the state of the package databases by their
// modification times.
func (s *System) dbStamp() string {
	var b strings.Builder
	for _, p := range []string{"/var/lib/dpkg/status", "/var/lib/apt/lists", "/lib/apk/db/installed", "/var/lib/rpm", "/var/cache/dnf"} {
		if fi, err := os.Stat(s.path(p)); err == nil {
			fmt.Fprintf(&b, "%s=%d;", p, fi.ModTime().UnixNano())
		}
	}
	return b.String()
}

// pendingUpdates returns the updates the package manager last said are
// available, and starts asking it again in the background when that was
// longer than UpdatesEvery ago or the package databases changed since:
// a slow package manager never holds up a check-in, and what it finds
// goes out with a later one.
func (s *System) pendingUpdates() []agentproto.Update {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Root != "" {
		return []agentproto.Update{}
	}
	every := s.UpdatesEvery
	if every == 0 {
		every = time.Hour
	}
	stamp := s.dbStamp()
	if (s.upAt.IsZero() || time.Since(s.upAt) >= every || stamp != s.upStamp) && !s.refreshing {
		s.refreshing = true
		go s.refreshUpdates(stamp)
	}
	if s.updates == nil {
		return []agentproto.Update{}
	}
	return s.updates
}

// refreshUpdates asks the package manager, without root, which updates are
// available. A package manager that is missing or fails leaves the list as
// it was.
func (s *System) refreshUpdates(stamp string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := []string{"LC_ALL=C"}
	ups := []agentproto.Update{}
	var err error
	switch {
	case s.has("apt-get"):
		var out []byte
		out, err = s.run(ctx, env, "apt-get", "-s", "-q", "-o", "Debug::NoLocking=1", "upgrade")
		ups = append(ups, ParseAptSimulate(out)...)
	case s.has("dnf"), s.has("yum"):
		tool := "dnf"
		if !s.has("dnf") {
			tool = "yum"
		}
		var out []byte
		out, err = s.run(ctx, env, tool, "-q", "-C", "check-update")
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 100 { // 100: updates are available
			err = nil
		}
		ups = append(ups, ParseDNFCheckUpdate(out)...)
	case s.has("apk"):
		var out []byte
		out, err = s.run(ctx, env, "apk", "version", "-l", "<")
		ups = append(ups, ParseAPKVersion(out)...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshing = false
	s.upAt, s.upStamp = time.Now(), stamp
	if err != nil {
		s.log().Warn("the package manager could not list pending updates", "err", err)
		return
	}
	s.updates = ups
}

// Execute implements Endpoint.
func (s *System) Execute(ctx context.Context, cmd Command) Outcome {
	switch cmd.Type {
	case device.CollectLogs:
		return s.collectLogs(ctx)
	case device.InstallUpdates:
		return s.installUpdates(ctx, cmd.Params)
	case device.Reboot:
		return s.reboot(ctx, cmd.Params)
	case device.FinishFeatureUpgrade:
		return Failf("no feature upgrade is staged on this endpoint: a Linux distribution moves to a new release through its package manager")
	}
	return Failf("this endpoint cannot run %q", cmd.Type)
}

// packageName is what an update id must look like to reach a package
// manager's command line: a package name, never an option.
var packageName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9+._:@-]{0,199}$`)

func (s *System) installUpdates(ctx context.Context, params json.RawMessage) Outcome {
	var p device.InstallUpdatesParams
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			return Failf("the parameters do not parse: %v", err)
		}
	}
	for _, id := range p.Updates {
		if !packageName.MatchString(id) {
			return Failf("%q is not a package name", id)
		}
	}
	ictx, cancel := context.WithTimeout(ctx, 2*time.Hour)
	defer cancel()
	env := []string{"LC_ALL=C", "DEBIAN_FRONTEND=noninteractive"}
	var steps [][]string
	switch {
	case s.has("apt-get"):
		opts := []string{"-y", "-q", "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"}
		steps = append(steps, []string{"apt-get", "-q", "update"})
		if len(p.Updates) == 0 {
			steps = append(steps, append(append([]string{"apt-get"}, opts...), "upgrade"))
		} else {
			steps = append(steps, append(append(append([]string{"apt-get"}, opts...), "install", "--only-upgrade"), p.Updates...))
		}
	case s.has("dnf"), s.has("yum"):
		tool := "dnf"
		if !s.has("dnf") {
			tool = "yum"
		}
		steps = append(steps, append([]string{tool, "-y", "upgrade"}, p.Updates...))
	case s.has("apk"):
		steps = append(steps, []string{"apk", "update"})
		if len(p.Updates) == 0 {
			steps = append(steps, []string{"apk", "upgrade"})
		} else {
			steps = append(steps, append([]string{"apk", "add", "--upgrade"}, p.Updates...))
		}
	default:
		return Failf("no supported package manager (apt-get, dnf, yum, apk) on this endpoint")
	}
	var log bytes.Buffer
	for _, step := range steps {
		fmt.Fprintf(&log, "$ %s\n", strings.Join(step, " "))
		out, err := s.run(ictx, env, step[0], step[1:]...)
		log.Write(out)
		if err != nil {
			code := exitCode(err)
			return Outcome{Failed: true, ExitCode: code, Message: fmt.Sprintf("%s: %v", strings.Join(step, " "), err),
				Data: map[string]any{"output": string(tail(log.Bytes(), 16<<10))}}
		}
	}
	s.mu.Lock()
	s.upAt = time.Time{} // look again
	s.mu.Unlock()
	zero := 0
	what := "all pending updates"
	if len(p.Updates) > 0 {
		what = strings.Join(p.Updates, ", ")
	}
	return Outcome{ExitCode: &zero, Message: "installed " + what, Data: map[string]any{"output": string(tail(log.Bytes(), 16<<10))}}
}

func (s *System) reboot(ctx context.Context, params json.RawMessage) Outcome {
	var p device.RebootParams
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			return Failf("the parameters do not parse: %v", err)
		}
	}
	args := []string{"systemctl", "reboot"}
	if p.DelaySeconds > 0 {
		minutes := (p.DelaySeconds + 59) / 60
		args = []string{"shutdown", "-r", fmt.Sprintf("+%d", minutes), "Patchline: your administrator restarts this computer"}
	}
	out, err := s.run(ctx, nil, args[0], args[1:]...)
	if err != nil {
		return Outcome{Failed: true, ExitCode: exitCode(err), Message: fmt.Sprintf("%s: %v: %s", strings.Join(args[:2], " "), err, tail(out, 1000))}
	}
	zero := 0
	return Outcome{ExitCode: &zero, Message: "restart requested (" + strings.Join(args[:min(3, len(args))], " ") + ")"}
}

// collectLogs builds a gzip-compressed tar of the tails of the log files,
// the recent journal when journalctl is there, and a manifest.
func (s *System) collectLogs(ctx context.Context) Outcome {
	files := s.LogFiles
	if files == nil {
		files = DefaultLogFiles
	}
	b := newLogBundle()
	for _, p := range files {
		b.addFile(s.path(p), p)
	}
	if s.Root == "" && s.has("journalctl") {
		b.addCommand(ctx, s.run, "journal.txt", "journalctl", "--no-pager", "-q", "-n", "5000", "-o", "short-iso")
	}
	if s.AgentLog != "" {
		b.addFile(s.AgentLog, s.AgentLog)
	}
	return b.outcome()
}

func exitCode(err error) *int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		c := ee.ExitCode()
		return &c
	}
	return nil
}

func hostnameOr(def string) string {
	if h, err := os.Hostname(); err == nil {
		return h
	}
	return def
}
