package main

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/agent"
	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/sim"
)

func init() {
	commands["sim"] = command{
		usage: "--server URL --enroll-secret SECRET --agents N [--interval DURATION] [--ramp DURATION] [--wait DURATION] [--time-scale F] [--failure-rate P] [--seed N] [--allow ACTION,...] [--ca-file FILE] [--pin-sha256 PIN] [--insecure-http]",
		run:   runSim,
	}
}

func runSim(ctx context.Context, env *Env, args []string) error {
	var c sim.Config
	var allow, level, caFile, pinFlag string
	var insecureHTTP bool
	fs := newFlags("sim", env)
	fs.StringVar(&c.Server, "server", "", "URL of the control service")
	fs.StringVar(&c.EnrollSecret, "enroll-secret", "", "enrollment secret (ples_…)")
	fs.IntVar(&c.Agents, "agents", 10, "number of simulated endpoints")
	fs.DurationVar(&c.Interval, "interval", 0, "check-in interval (default: the server's, 60s)")
	fs.DurationVar(&c.Ramp, "ramp", 0, "spread the endpoints' starts over this (default 5s, or the interval when shorter)")
	fs.DurationVar(&c.Wait, "wait", agentproto.DefaultWaitSeconds*time.Second, "how long each endpoint's long poll for commands may be held; 0 holds none")
	fs.Float64Var(&c.TimeScale, "time-scale", 1, "multiplies the durations of commands and restarts (0.01: a hundred times faster)")
	fs.Float64Var(&c.FailureRate, "failure-rate", 0.05, "probability that an update or a feature upgrade fails")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of the fleet: the same seed gives the same endpoints")
	fs.StringVar(&allow, "allow", "install-updates,reboot,finish-feature-upgrade", "destructive actions the simulated endpoints run")
	fs.StringVar(&caFile, "ca-file", "", "PEM file of the CA that signed the server's certificate (default: the system's roots)")
	fs.StringVar(&pinFlag, "pin-sha256", "", "pin the server's public key: base64 SHA-256 of its SubjectPublicKeyInfo")
	fs.BoolVar(&insecureHTTP, "insecure-http", false, "allow a plain http:// --server on another machine")
	fs.StringVar(&level, "log-level", "info", "debug, info, warn or error")
	if err := parseFlags(fs, env, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errUsage
	}
	if err := checkWait(c.Wait); err != nil {
		return err
	}
	c.Wait = agentWait(c.Wait)
	if err := agent.CheckServerURL(c.Server, insecureHTTP); err != nil {
		return err
	}
	var roots *x509.CertPool
	var err error
	if caFile != "" {
		if roots, err = agent.LoadCAFile(caFile); err != nil {
			return fmt.Errorf("--ca-file: %w", err)
		}
	}
	trust := agent.NewTrust(roots)
	if pinFlag != "" {
		pin, err := agent.ParsePin(pinFlag)
		if err != nil {
			return fmt.Errorf("--pin-sha256: %w", err)
		}
		trust.SetPin(pin)
	}
	if strings.HasPrefix(c.Server, "https://") {
		// The fleet's clients check the certificate as the real agent
		// does. They set no timeout of their own: a long poll is held
		// for up to --wait, and the agent bounds each request itself.
		u, _ := url.Parse(c.Server)
		c.TLS = trust.TLSConfig(u.Hostname())
	} else if pinFlag != "" {
		return fmt.Errorf("--pin-sha256 pins a certificate: it needs an https:// --server, not %s", c.Server)
	}
	if c.Allow, err = parseAllow(allow); err != nil {
		return err
	}
	if c.Allow == nil {
		c.Allow = []device.CommandType{}
	}
	c.AgentVersion = version + "-sim"
	c.Logger = newLogger(env.Stderr, level)
	c.StatsEvery = 30 * time.Second
	if err := c.Validate(); err != nil {
		return err
	}
	return sim.New(c).Run(ctx)
}
