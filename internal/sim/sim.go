// Package sim runs a simulated fleet: N endpoints in one process, each a
// real agent (package agent: enrollment, check-ins with jitter and
// backoff, inventory deltas, the result queue, the --allow policy,
// policies, removal) on a simulated machine instead of the real one.
//
// Machines are drawn from realistic profiles (Windows 10 and 11, macOS,
// Ubuntu 22.04, Debian 12) with real builds, KBs and package versions,
// some of them affected by CVEs of the bundled sample catalog, a pending
// update or two, and for some a feature upgrade staged and waiting for the
// restart that finishes it. Commands take plausible times (scaled by
// TimeScale) and fail now and then (FailureRate).
//
// The same Seed gives the same fleet: hostnames, profiles, versions.
package sim

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/patchline/patchline/internal/agent"
	"github.com/patchline/patchline/internal/device"
)

// Config is what a simulated fleet needs.
type Config struct {
	Server       string
	EnrollSecret string
	Agents       int
	// Interval overrides the check-in interval the server asks for; zero
	// keeps the server's.
	Interval time.Duration
	// Ramp is how long the endpoints take to start, spread evenly over
	// it: the first at once, the last after Ramp. Zero means 5 seconds,
	// or the check-in interval when that is shorter. A fleet of thousands
	// that all enroll within seconds queues its enrollments behind each
	// other until they time out and are sent again.
	Ramp time.Duration
	// Wait is agent.Config.Wait of every endpoint: how long each long
	// poll for commands may be held, negative for none.
	Wait time.Duration
	// TimeScale multiplies the durations of commands and restarts: 1 is
	// realistic (minutes for updates), 0.01 is a hundred times faster.
	TimeScale float64
	// FailureRate is the probability that an update or a feature upgrade
	// fails (restarts and log collections fail less often).
	FailureRate float64
	Seed        uint64
	// Allow lists the destructive actions the simulated endpoints run;
	// nil allows all of them.
	Allow        []device.CommandType
	AgentVersion string
	// TLS, when set, is the TLS configuration of the HTTP clients the
	// fleet makes (an https:// Server with its own trust or pin).
	TLS *tls.Config
	// HTTP, when set, sends the requests of every endpoint instead of
	// the clients the fleet makes. It should set no Timeout: a long poll
	// is held for up to Wait, and the agent bounds each request itself.
	HTTP   *http.Client
	Logger *slog.Logger
	// StatsEvery is the interval of the summary log line (a minute when
	// zero).
	StatsEvery time.Duration
}

// Validate checks the configuration and fills in defaults.
func (c *Config) Validate() error {
	switch {
	case c.Server == "":
		return errors.New("sim: no server URL")
	case c.EnrollSecret == "":
		return errors.New("sim: no enrollment secret")
	case c.Agents < 1 || c.Agents > 100000:
		return fmt.Errorf("sim: the number of agents must be from 1 to 100000, got %d", c.Agents)
	case c.TimeScale < 0:
		return errors.New("sim: the time scale must not be negative")
	case c.Ramp < 0:
		return errors.New("sim: the ramp must not be negative")
	case c.FailureRate < 0 || c.FailureRate > 1:
		return errors.New("sim: the failure rate must be from 0 to 1")
	}
	if c.TimeScale == 0 {
		c.TimeScale = 1
	}
	if c.Allow == nil {
		c.Allow = agent.Destructive
	}
	for _, t := range c.Allow {
		if !agent.IsDestructive(t) {
			return fmt.Errorf("sim: %q cannot be allowed: the actions that need allowing are %v", t, agent.Destructive)
		}
	}
	if c.StatsEvery == 0 {
		c.StatsEvery = time.Minute
	}
	return nil
}

// agentsPerTransport is how many endpoints share an HTTP transport when
// the configuration gives no client. A transport looks through all its
// idle connections each time it puts one back: one for the whole fleet,
// where most connections are idle between check-ins, would spend its time
// there.
const agentsPerTransport = 64

// Fleet is a running simulated fleet.
type Fleet struct {
	cfg      Config
	log      *slog.Logger
	agents   []*agent.Agent
	machines []*machine
	removed  atomic.Int64
}

// New builds the fleet of c, which must be valid.
func New(c Config) *Fleet {
	f := &Fleet{cfg: c, log: c.Logger}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	hc := c.HTTP
	for i := 0; i < c.Agents; i++ {
		if c.HTTP == nil && i%agentsPerTransport == 0 {
			n := min(agentsPerTransport, c.Agents-i)
			// Each endpoint may hold a long poll besides its check-ins;
			// the agent bounds every request itself.
			hc = &http.Client{Transport: &http.Transport{
				MaxIdleConns: 2 * n, MaxIdleConnsPerHost: 2 * n, IdleConnTimeout: 90 * time.Second,
				TLSClientConfig: c.TLS,
			}}
		}
		r := rand.New(rand.NewPCG(c.Seed, uint64(i)))
		m := newMachine(r, i+1, c.TimeScale, c.FailureRate, time.Now)
		a := agent.New(agent.Config{
			Server: c.Server, EnrollSecret: c.EnrollSecret, State: agent.NewMemoryState(), Endpoint: m,
			Allow: c.Allow, Interval: c.Interval, Wait: c.Wait, AgentVersion: c.AgentVersion, HTTP: hc,
			Logger: f.log.With("endpoint", m.hostname), Rand: rand.New(rand.NewPCG(c.Seed, uint64(i)+1<<32)),
		})
		f.machines = append(f.machines, m)
		f.agents = append(f.agents, a)
	}
	return f
}

// Hostnames returns the hostnames of the simulated endpoints.
func (f *Fleet) Hostnames() []string {
	out := make([]string, len(f.machines))
	for i, m := range f.machines {
		out[i] = m.hostname
	}
	return out
}

// Run runs every endpoint until ctx is done or all were removed. Endpoints
// start spread over Config.Ramp, as a fleet does.
func (f *Fleet) Run(ctx context.Context) error {
	spread := f.cfg.Ramp
	if spread == 0 {
		spread = 5 * time.Second
		if f.cfg.Interval > 0 && f.cfg.Interval < spread {
			spread = f.cfg.Interval
		}
	}
	var wg sync.WaitGroup
	errc := make(chan error, len(f.agents))
	for i, a := range f.agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !sleepCtx(ctx, time.Duration(float64(spread)*float64(i)/float64(len(f.agents)))) {
				return
			}
			err := a.Run(ctx)
			switch {
			case errors.Is(err, agent.ErrRemoved):
				f.removed.Add(1)
				f.log.Info("simulated endpoint removed", "hostname", f.machines[i].hostname)
			case err != nil:
				errc <- fmt.Errorf("%s: %w", f.machines[i].hostname, err)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTicker(f.cfg.StatsEvery)
	defer t.Stop()
	f.log.Info("simulated fleet started", "agents", len(f.agents), "server", f.cfg.Server)
	for {
		select {
		case <-done:
			close(errc)
			var errs []error
			for err := range errc {
				errs = append(errs, err)
			}
			return errors.Join(errs...)
		case <-t.C:
			enrolled := 0
			for _, a := range f.agents {
				if a.AgentID() != "" {
					enrolled++
				}
			}
			f.log.Info("simulated fleet", "enrolled", enrolled, "removed", f.removed.Load(), "agents", len(f.agents))
		}
	}
}
