package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/sim"
)

func init() {
	commands["sim"] = command{
		usage: "--server URL --enroll-secret SECRET --agents N [--interval DURATION] [--time-scale F] [--failure-rate P] [--seed N] [--allow ACTION,...]",
		run:   runSim,
	}
}

func runSim(ctx context.Context, env *Env, args []string) error {
	var c sim.Config
	var allow, level string
	fs := newFlags("sim", env)
	fs.StringVar(&c.Server, "server", "", "URL of the control service")
	fs.StringVar(&c.EnrollSecret, "enroll-secret", "", "enrollment secret (ples_…)")
	fs.IntVar(&c.Agents, "agents", 10, "number of simulated endpoints")
	fs.DurationVar(&c.Interval, "interval", 0, "check-in interval (default: the server's, 60s)")
	fs.Float64Var(&c.TimeScale, "time-scale", 1, "multiplies the durations of commands and restarts (0.01: a hundred times faster)")
	fs.Float64Var(&c.FailureRate, "failure-rate", 0.05, "probability that an update or a feature upgrade fails")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of the fleet: the same seed gives the same endpoints")
	fs.StringVar(&allow, "allow", "install-updates,reboot,finish-feature-upgrade", "destructive actions the simulated endpoints run")
	fs.StringVar(&level, "log-level", "info", "debug, info, warn or error")
	if err := parseFlags(fs, env, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errUsage
	}
	if !strings.HasPrefix(c.Server, "http://") && !strings.HasPrefix(c.Server, "https://") {
		return fmt.Errorf("--server %q: want the http(s) URL of the control service", c.Server)
	}
	var err error
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
