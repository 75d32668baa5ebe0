package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/agent"
	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/device"
)

func init() {
	commands["agent"] = command{
		usage: "[install|uninstall] --server URL --enroll-secret SECRET [--state DIR] [--allow ACTION,...] [--ca-file FILE] [--pin-sha256 PIN] [--insecure-http] [--interval DURATION] [--wait DURATION] [--log-files PATH,...] [--log-file FILE]",
		run:   runAgent,
	}
}

// AgentConfig is the typed configuration of `patchline agent`.
type AgentConfig struct {
	Server       string // base URL of the control service
	EnrollSecret string
	StateDir     string
	Allow        string        // comma-separated destructive actions
	Interval     time.Duration // 0: the server's
	Wait         time.Duration // of each long poll; 0: none
	LogFiles     string        // comma-separated; empty: the system's usual logs
	LogLevel     string
	// LogFile, when set, receives the agent's log instead of standard
	// error (the service the agent is installed as has none).
	LogFile string
	// Service says that the system's service manager runs the agent: on
	// Windows it then speaks the service protocol.
	Service bool
	// CAFile holds the PEM certificates of a private CA that signed the
	// server's certificate; empty means the system's roots.
	CAFile string
	// PinSHA256 pins the server's public key (agent.ParsePin).
	PinSHA256 string
	// InsecureHTTP allows a plain http:// server that is not on this
	// machine.
	InsecureHTTP bool

	allow    []device.CommandType
	logFiles []string
	roots    *x509.CertPool
	pin      []byte
}

// defaultStateDir is the installed agent's state directory for root and
// on Windows (agent.DefaultServiceStateDir), else under the user's state
// directory (XDG_STATE_HOME, ~/.local/state).
func defaultStateDir(env *Env) string {
	if os.Geteuid() == 0 || runtime.GOOS == "windows" {
		return agent.DefaultServiceStateDir()
	}
	if d := env.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "patchline-agent")
	}
	if h := env.Getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "state", "patchline-agent")
	}
	return "patchline-agent"
}

// parseAllow parses a comma-separated list of destructive actions; "" and
// "none" allow none.
func parseAllow(s string) ([]device.CommandType, error) {
	var out []device.CommandType
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" || f == "none" {
			continue
		}
		t := device.CommandType(f)
		if !agent.IsDestructive(t) {
			var names []string
			for _, d := range agent.Destructive {
				names = append(names, string(d))
			}
			return nil, fmt.Errorf("--allow %q: the actions that need allowing are %s (collect-logs, apply-policy and remove always run)", f, strings.Join(names, ", "))
		}
		out = append(out, t)
	}
	return out, nil
}

// Validate checks the configuration and fills in derived values.
func (c *AgentConfig) Validate() error {
	if err := agent.CheckServerURL(c.Server, c.InsecureHTTP); err != nil {
		return err
	}
	c.Server = strings.TrimRight(c.Server, "/")
	var err error
	if c.CAFile != "" {
		if c.roots, err = agent.LoadCAFile(c.CAFile); err != nil {
			return fmt.Errorf("--ca-file: %w", err)
		}
	}
	if c.PinSHA256 != "" {
		if c.pin, err = agent.ParsePin(c.PinSHA256); err != nil {
			return fmt.Errorf("--pin-sha256: %w", err)
		}
		if !strings.HasPrefix(c.Server, "https://") {
			return fmt.Errorf("--pin-sha256 pins a certificate: it needs an https:// --server, not %s", c.Server)
		}
	}
	if c.StateDir == "" {
		return errors.New("--state: empty directory")
	}
	if c.allow, err = parseAllow(c.Allow); err != nil {
		return err
	}
	if c.Interval < 0 {
		return fmt.Errorf("--interval %v: must not be negative", c.Interval)
	}
	if err := checkWait(c.Wait); err != nil {
		return err
	}
	if c.LogFile != "" && !filepath.IsAbs(c.LogFile) {
		return fmt.Errorf("--log-file %q: want an absolute path", c.LogFile)
	}
	for _, f := range strings.Split(c.LogFiles, ",") {
		if f = strings.TrimSpace(f); f != "" {
			if !filepath.IsAbs(f) {
				return fmt.Errorf("--log-files %q: want absolute paths", f)
			}
			c.logFiles = append(c.logFiles, f)
		}
	}
	return nil
}

func runAgent(ctx context.Context, env *Env, args []string) error {
	sub := ""
	if len(args) > 0 && (args[0] == "install" || args[0] == "uninstall") {
		sub, args = args[0], args[1:]
	}
	if sub == "uninstall" {
		return uninstallAgent(env, args)
	}
	c := AgentConfig{}
	fs := newFlags("agent", env)
	fs.StringVar(&c.Server, "server", "", "URL of the control service, e.g. https://patchline.example.com:8081")
	fs.StringVar(&c.EnrollSecret, "enroll-secret", "", "enrollment secret (ples_…), used when the agent has no credential (default: the state directory's "+agent.EnrollSecretFile+" file)")
	fs.StringVar(&c.StateDir, "state", defaultStateDir(env), "state directory: credential, undelivered results, applied policies (kept 0700/0600)")
	fs.StringVar(&c.Allow, "allow", "", "destructive actions this endpoint runs: install-updates, reboot, finish-feature-upgrade (default none)")
	fs.DurationVar(&c.Interval, "interval", 0, "check-in interval (default: the server's, 60s)")
	fs.DurationVar(&c.Wait, "wait", agentproto.DefaultWaitSeconds*time.Second, "how long each long poll for commands may be held; 0 holds none (commands then wait for the next check-in)")
	fs.StringVar(&c.LogFiles, "log-files", "", "comma-separated log files of a collect-logs bundle (default: the usual system logs)")
	fs.StringVar(&c.CAFile, "ca-file", "", "PEM file of the CA that signed the server's certificate (default: the system's roots)")
	fs.StringVar(&c.PinSHA256, "pin-sha256", "", "pin the server's public key: base64 SHA-256 of its SubjectPublicKeyInfo, as serve logs it (kept in the state and checked on every connection)")
	fs.BoolVar(&c.InsecureHTTP, "insecure-http", false, "allow a plain http:// --server on another machine (credentials cross the network in the clear)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.LogFile, "log-file", "", "write the log to this file (rotated at 8 MiB) instead of standard error")
	fs.BoolVar(&c.Service, "service", false, "run under the system's service manager (set by agent install)")
	if err := parseFlags(fs, env, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errUsage
	}
	if err := c.Validate(); err != nil {
		return err
	}
	if sub == "install" {
		return installAgent(env, fs, &c)
	}
	run := func(ctx context.Context) error { return c.run(ctx, env) }
	if isService, err := agent.RunService(c.Service, run); isService {
		return err
	}
	return run(ctx)
}

// run runs the agent until ctx ends or the endpoint is removed.
func (c *AgentConfig) run(ctx context.Context, env *Env) error {
	if c.EnrollSecret == "" {
		b, err := os.ReadFile(filepath.Join(c.StateDir, agent.EnrollSecretFile))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("read the enrollment secret: %w", err)
		}
		c.EnrollSecret = strings.TrimSpace(string(b))
	}
	st, err := agent.OpenDiskState(c.StateDir)
	if err != nil {
		return err
	}
	logOut := env.Stderr
	if c.LogFile != "" {
		f, err := agent.OpenLogFile(c.LogFile, 8<<20)
		if err != nil {
			return fmt.Errorf("--log-file: %w", err)
		}
		defer f.Close()
		logOut = f
	}
	logger := newLogger(logOut, c.LogLevel)
	a := agent.New(agent.Config{
		Server:       c.Server,
		EnrollSecret: c.EnrollSecret,
		State:        st,
		Endpoint:     agent.NewSystem(agent.SystemConfig{LogFiles: c.logFiles, AgentLog: c.LogFile, Logger: logger}),
		Allow:        c.allow,
		Interval:     c.Interval,
		Wait:         agentWait(c.Wait),
		AgentVersion: version,
		Trust:        agent.NewTrust(c.roots),
		Pin:          c.pin,
		Logger:       logger,
	})
	logger.Info("agent starting", "server", c.Server, "state", c.StateDir, "allow", c.allow, "os", runtime.GOOS, "arch", runtime.GOARCH)
	installed := c.installed()
	err = a.Run(ctx)
	if errors.Is(err, agent.ErrRemoved) {
		fmt.Fprintf(env.Stderr, "patchline agent: %v\n", err)
		if installed {
			// The service goes too, so that it does not start again.
			if err := agent.UninstallService(false); err != nil {
				logger.Warn("removing the agent's service", "err", err)
			}
		}
		return nil
	}
	return err
}

// installed reports whether this agent runs from the state directory of
// an installed service.
func (c *AgentConfig) installed() bool {
	_, err := os.Stat(filepath.Join(c.StateDir, agent.EnrollSecretFile))
	return err == nil
}

// installAgent installs the agent as a service of the operating system:
// the enrollment secret goes into the state directory, readable only by
// the system, and every other flag given onto the service's command line.
func installAgent(env *Env, set *flag.FlagSet, c *AgentConfig) error {
	if c.EnrollSecret == "" {
		return errors.New("install: --enroll-secret is required")
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	if exe, err = filepath.Abs(exe); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	if err := agent.SecureStateDir(c.StateDir); err != nil {
		return fmt.Errorf("install: state directory %s: %w", c.StateDir, err)
	}
	if err := os.WriteFile(filepath.Join(c.StateDir, agent.EnrollSecretFile), []byte(c.EnrollSecret+"\n"), 0o600); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	logFile := c.LogFile
	if logFile == "" {
		logFile = filepath.Join(c.StateDir, "agent.log")
	}
	spec := agent.ServiceSpec{Executable: exe, StateDir: c.StateDir, Args: []string{"agent", "--service", "--state", c.StateDir, "--log-file", logFile}}
	set.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "enroll-secret", "state", "log-file", "service":
		default:
			spec.Args = append(spec.Args, "--"+f.Name+"="+f.Value.String())
		}
	})
	if err := agent.InstallService(spec); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	fmt.Fprintf(env.Stdout, "installed and started the Patchline agent service %s (state in %s, log in %s)\n", agent.ServiceName, c.StateDir, logFile)
	return nil
}

// uninstallAgent stops and removes the agent's service and its state.
func uninstallAgent(env *Env, args []string) error {
	fs := newFlags("agent uninstall", env)
	state := fs.String("state", defaultStateDir(env), "state directory of the installed agent, deleted with it")
	keep := fs.Bool("keep-state", false, "keep the state directory (the agent's identity and undelivered results)")
	if err := parseFlags(fs, env, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errUsage
	}
	if err := agent.UninstallService(true); err != nil {
		return fmt.Errorf("uninstall: %w", err)
	}
	if !*keep {
		if err := os.RemoveAll(*state); err != nil {
			return fmt.Errorf("uninstall: delete %s: %w", *state, err)
		}
	}
	fmt.Fprintf(env.Stdout, "removed the Patchline agent service %s\n", agent.ServiceName)
	return nil
}

// checkWait checks the --wait of agent and sim.
func checkWait(d time.Duration) error {
	if d != 0 && (d < time.Second || d > agentproto.MaxWaitSeconds*time.Second) {
		return fmt.Errorf("--wait %v: want 0 (no long poll) or from 1s to %ds", d, agentproto.MaxWaitSeconds)
	}
	return nil
}

// agentWait is agent.Config.Wait for a --wait: 0 holds no long poll.
func agentWait(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
