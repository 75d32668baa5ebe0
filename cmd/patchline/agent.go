package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/agent"
	"github.com/patchline/patchline/internal/device"
)

func init() {
	commands["agent"] = command{
		usage: "--server URL --enroll-secret SECRET [--state DIR] [--allow ACTION,...] [--interval DURATION] [--log-files PATH,...]",
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

	allow    []device.CommandType
	logFiles []string
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
	u, err := url.Parse(c.Server)
	if c.Server == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--server %q: want the http(s) URL of the control service", c.Server)
	}
	c.Server = strings.TrimRight(c.Server, "/")
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
