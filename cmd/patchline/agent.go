package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/agent"
	"github.com/patchline/patchline/internal/device"
)

func init() {
	commands["agent"] = command{
		usage: "--server URL --enroll-secret SECRET [--state DIR] [--allow ACTION,...] [--ca-file FILE] [--pin-sha256 PIN] [--insecure-http] [--interval DURATION] [--log-files PATH,...]",
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
	LogFiles     string        // comma-separated; empty: agent.DefaultLogFiles
	LogLevel     string
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

// defaultStateDir is /var/lib/patchline-agent for root, else under the
// user's state directory (XDG_STATE_HOME, ~/.local/state).
func defaultStateDir(env *Env) string {
	if os.Geteuid() == 0 {
		return "/var/lib/patchline-agent"
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
	c := AgentConfig{}
	fs := newFlags("agent", env)
	fs.StringVar(&c.Server, "server", "", "URL of the control service, e.g. https://patchline.example.com:8081")
	fs.StringVar(&c.EnrollSecret, "enroll-secret", "", "enrollment secret (ples_…), used when the agent has no credential")
	fs.StringVar(&c.StateDir, "state", defaultStateDir(env), "state directory: credential, undelivered results, applied policies (kept 0700/0600)")
	fs.StringVar(&c.Allow, "allow", "", "destructive actions this endpoint runs: install-updates, reboot, finish-feature-upgrade (default none)")
	fs.DurationVar(&c.Interval, "interval", 0, "check-in interval (default: the server's, 60s)")
	fs.StringVar(&c.LogFiles, "log-files", "", "comma-separated log files of a collect-logs bundle (default: the usual system logs)")
	fs.StringVar(&c.CAFile, "ca-file", "", "PEM file of the CA that signed the server's certificate (default: the system's roots)")
	fs.StringVar(&c.PinSHA256, "pin-sha256", "", "pin the server's public key: base64 SHA-256 of its SubjectPublicKeyInfo, as serve logs it (kept in the state and checked on every connection)")
	fs.BoolVar(&c.InsecureHTTP, "insecure-http", false, "allow a plain http:// --server on another machine (credentials cross the network in the clear)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	if err := parseFlags(fs, env, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errUsage
	}
	if err := c.Validate(); err != nil {
		return err
	}
	st, err := agent.OpenDiskState(c.StateDir)
	if err != nil {
		return err
	}
	logger := newLogger(env.Stderr, c.LogLevel)
	a := agent.New(agent.Config{
		Server:       c.Server,
		EnrollSecret: c.EnrollSecret,
		State:        st,
		Endpoint:     &agent.System{LogFiles: c.logFiles, Logger: logger},
		Allow:        c.allow,
		Interval:     c.Interval,
		AgentVersion: version,
		Trust:        agent.NewTrust(c.roots),
		Pin:          c.pin,
		Logger:       logger,
	})
	logger.Info("agent starting", "server", c.Server, "state", c.StateDir, "allow", c.allow)
	err = a.Run(ctx)
	if errors.Is(err, agent.ErrRemoved) {
		fmt.Fprintf(env.Stderr, "patchline agent: %v\n", err)
		return nil
	}
	return err
}
