// Package agent is the Patchline endpoint agent: it enrolls with the
// control service, checks in on an interval with jitter, reports the
// endpoint's inventory (whole the first time, then only what changed),
// runs the commands it receives and reports how they went.
//
// The agent is split in two: Agent does the protocol, the state, the
// endpoint's local --allow policy, policy objects and its own removal;
// an Endpoint reports what the machine is and runs the commands that
// change it. System is the real machine; package sim supplies simulated
// ones that share everything else.
//
// Nothing a command produced is lost: its result is written to the State
// before the command starts (provisionally: the agent stopped while it
// ran) and when it ends, and stays there until the server has it. While
// the server cannot be reached the agent backs off exponentially.
//
// This file is long (about 800 lines) because it is the one protocol loop,
// from enrollment through check-ins, the long poll and the worker to the
// reports, whose parts share the Agent's state and are read in order; what
// runs on the machine (System and its platforms), the State, the client
// and the policies are in files of their own.
package agent

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/device"
)

// ErrRemoved is returned by Run when the endpoint was removed by an
// administrator: the agent deleted its state and stopped.
var ErrRemoved = errors.New("the endpoint was removed from Patchline")

// DefaultInterval is the check-in interval until the server names one.
const DefaultInterval = 60 * time.Second

// Config is what an Agent needs.
type Config struct {
	// Server is the base URL of the control service.
	Server string
	// EnrollSecret enrolls the endpoint the first time, and again when the
	// server no longer knows its credential.
	EnrollSecret string
	State        State
	Endpoint     Endpoint
	// Allow lists the destructive command types (Destructive) this
	// endpoint runs; the others fail with agentproto.NotAllowedMessage.
	Allow []device.CommandType
	// Interval overrides the check-in interval the server asks for; zero
	// keeps the server's.
	Interval time.Duration
	// Wait is how long each long poll asks the server to hold it
	// (POST /agent/v1/wait), so that a queued command reaches the agent
	// in about a second rather than at its next check-in. Zero means
	// agentproto.DefaultWaitSeconds; a negative Wait holds no long poll.
	Wait         time.Duration
	AgentVersion string
	// Trust verifies the server's certificate; nil means the system's
	// roots. It is used when HTTP is nil.
	Trust *Trust
	// Pin pins the server's public key (see Trust): it is checked at
	// enrollment, stored with the identity and checked on every
	// connection from then on. Nil keeps the pin stored at enrollment,
	// if there is one.
	Pin []byte
	// HTTP sends the requests; nil means a client of Trust. A given
	// client verifies certificates its own way, so it takes no Pin.
	HTTP   *http.Client
	Logger *slog.Logger
	// Rand draws the jitter; nil means the process-wide source.
	Rand *mrand.Rand
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	switch {
	case c.Server == "":
		return errors.New("agent: no server URL")
	case !validURL(c.Server):
		return fmt.Errorf("agent: server %q is not an http(s) URL", c.Server)
	case c.State == nil || c.Endpoint == nil:
		return errors.New("agent: a state and an endpoint are required")
	case c.Pin != nil && c.HTTP != nil:
		return errors.New("agent: a pin needs the agent's own HTTP client")
	case c.Pin != nil && len(c.Pin) != sha256.Size:
		return errors.New("agent: a pin is a SHA-256 digest of 32 bytes")
	case c.Pin != nil && !strings.HasPrefix(c.Server, "https://"):
		return fmt.Errorf("agent: a pin needs an https:// server, not %s", c.Server)
	}
	for _, t := range c.Allow {
		if !IsDestructive(t) {
			return fmt.Errorf("agent: %q cannot be allowed: the actions that need allowing are %v", t, Destructive)
		}
	}
	return nil
}

// Agent runs one endpoint.
type Agent struct {
	cfg    Config
	log    *slog.Logger
	client *Client
	trust  *Trust // nil when Config.HTTP was given
	pin    []byte // the pin in force
	now    func() time.Time
	run    string // identifies this run in provisional results

	flushMu   sync.Mutex
	interval  time.Duration // the server's
	serverCap int           // the server's capability, 0 until it answered
	removed   chan struct{} // closed once a remove command succeeded
	remove    sync.Once
	// wake carries, from the long poll to Run, the news that commands
	// are queued: Run checks in at once and then closes the channel it
	// received, after which the long poll asks again.
	wake chan chan struct{}
	// lastSnap is the snapshot of the last check-in, which a check-in
	// woken by the long poll sends again rather than take a new one.
	lastSnap *Snapshot
	// enrollmentID is sent with every attempt of one enrollment, so that
	// the server answers an attempt whose first answer was lost with the
	// agent it already enrolled.
	enrollmentID string
}

// New returns an agent for c, which must be valid.
func New(c Config) *Agent {
	a := &Agent{cfg: c, log: c.Logger, now: c.Now, interval: DefaultInterval, removed: make(chan struct{}), wake: make(chan chan struct{})}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.now == nil {
		a.now = time.Now
	}
	b := make([]byte, 8)
	rand.Read(b)
	a.run = hex.EncodeToString(b)
	a.client = &Client{BaseURL: c.Server, HTTP: c.HTTP, UserAgent: "patchline-agent/" + c.AgentVersion}
	if c.HTTP == nil {
		a.trust = c.Trust
		if a.trust == nil {
			a.trust = NewTrust(nil)
		}
		if hc, err := a.trust.Client(c.Server); err == nil {
			a.client.HTTP = hc
		}
		a.setPin(c.Pin)
	}
	return a
}

func validURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// setPin puts pin in force for the connections that follow.
func (a *Agent) setPin(pin []byte) {
	a.pin = pin
	if a.trust != nil {
		a.trust.SetPin(pin)
	}
}

// usePin reconciles the pin of the configuration with the one stored with
// the identity: a pin given in the configuration replaces the stored one
// (and is stored), otherwise the stored one is in force.
func (a *Agent) usePin(id *Identity) error {
	if a.trust == nil {
		return nil
	}
	if a.cfg.Pin != nil {
		if want := FormatPin(a.cfg.Pin); id.PinSHA256 != want {
			if id.PinSHA256 != "" {
				a.log.Warn("replacing the pin stored at enrollment", "stored", id.PinSHA256, "pin", want)
			}
			id.PinSHA256 = want
			if err := a.cfg.State.SaveIdentity(id); err != nil {
				return stateErr(err)
			}
		}
		a.setPin(a.cfg.Pin)
		return nil
	}
	if id.PinSHA256 == "" {
		a.setPin(nil)
		return nil
	}
	pin, err := ParsePin(id.PinSHA256)
	if err != nil {
		return stateErr(fmt.Errorf("the pin stored with the identity: %w", err))
	}
	a.setPin(pin)
	return nil
}

// AgentID returns the id of the enrolled agent, "" before enrollment.
func (a *Agent) AgentID() string {
	id, _ := a.cfg.State.Identity()
	if id == nil {
		return ""
	}
	return id.AgentID
}

func (a *Agent) checkInterval() time.Duration {
	if a.cfg.Interval > 0 {
		return a.cfg.Interval
	}
	return a.interval
}

func (a *Agent) backoff() *Backoff {
	base := min(a.checkInterval(), 5*time.Second)
	return &Backoff{Base: base, Max: max(5*time.Minute, a.checkInterval()), Rand: a.cfg.Rand}
}

// sleep waits d or until ctx is done; it reports whether it waited the
// whole time.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Run enrolls when needed and checks in until ctx is done or the endpoint
// is removed (ErrRemoved). Errors of the server or the network are logged
// and retried; Run returns other errors only when the state cannot be
// read or written.
func (a *Agent) Run(ctx context.Context) error {
	if t, err := a.cfg.State.Removed(); err != nil {
		return err
	} else if t != nil {
		return fmt.Errorf("%w at %s; delete the removal mark in the state directory to enroll it again", ErrRemoved, t.Format(time.RFC3339))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan Command, 256)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.worker(ctx, work)
	}()
	defer wg.Wait()
	defer cancel()

	bo := a.backoff()
	var woke chan struct{} // the long poll's news that commands wait
	waiting := false
	for {
		if err := a.ensureEnrolled(ctx, bo); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if !waiting && a.cfg.Wait >= 0 {
			waiting = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				a.waitLoop(ctx)
			}()
		}
		err := a.cycle(ctx, work, woke != nil)
		if woke != nil {
			close(woke)
			woke = nil
		}
		select {
		case <-a.removed:
			return a.finishRemoval(ctx)
		default:
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case IsRemoved(err):
			a.log.Warn("the server says this endpoint was removed")
			return a.finishRemoval(ctx)
		case StatusOf(err) == http.StatusUnauthorized:
			a.log.Warn("the server no longer knows this agent's credential: enrolling again", "err", err)
			if err := a.cfg.State.Reset(); err != nil {
				return err
			}
			continue
		case errors.Is(err, errState):
			return err
		case err != nil && Transient(err):
			d := bo.Next()
			level := slog.LevelWarn
			if certErr := (*CertificateError)(nil); errors.As(err, &certErr) {
				level = slog.LevelError
			}
			a.log.Log(ctx, level, "check-in failed, backing off", "err", err, "retry_in", d.Round(time.Millisecond), "failures", bo.Failures())
			if !sleep(ctx, d) {
				return nil
			}
			continue
		case err != nil:
			a.log.Error("check-in refused", "err", err)
		}
		bo.Reset()
		// After a refused check-in the long poll would answer at once
		// that the commands still wait, and the check-in be refused
		// again: the next one waits for the interval.
		wake := a.wake
		if err != nil {
			wake = nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-a.removed:
			return a.finishRemoval(ctx)
		case woke = <-wake:
		case <-time.After(Jitter(a.checkInterval(), a.cfg.Rand)):
		}
	}
}

// waitLoop holds the long poll until ctx is done: when the server says
// that commands are queued it hands Run the news and waits until Run has
// checked in. A server that does not know the long poll (404) ends it;
// failures back off like check-ins, up to a minute.
func (a *Agent) waitLoop(ctx context.Context) {
	d := a.cfg.Wait
	if d == 0 {
		d = agentproto.DefaultWaitSeconds * time.Second
	}
	bo := &Backoff{Base: time.Second, Max: time.Minute, Rand: a.cfg.Rand}
	for {
		commands, err := a.client.Wait(ctx, d)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			bo.Reset()
			if !commands {
				continue
			}
			done := make(chan struct{})
			select {
			case a.wake <- done:
			case <-ctx.Done():
				return
			}
			select {
			case <-done:
			case <-ctx.Done():
				return
			}
		case StatusOf(err) == http.StatusNotFound:
			a.log.Info("the server holds no long polls: commands arrive at check-ins", "err", err)
			return
		default:
			retry := bo.Next()
			a.log.Debug("long poll failed, backing off", "err", err, "retry_in", retry.Round(time.Millisecond))
			if !sleep(ctx, retry) {
				return
			}
		}
	}
}

// errState marks errors of the State, which end Run.
var errState = errors.New("agent state")

func stateErr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", errState, err)
}

// ensureEnrolled loads the identity, enrolling (with backoff) when there
// is none or it belongs to another server.
func (a *Agent) ensureEnrolled(ctx context.Context, bo *Backoff) error {
	for {
		id, err := a.cfg.State.Identity()
		if err != nil {
			return err
		}
		if id != nil && id.Server == a.cfg.Server {
			if err := a.usePin(id); err != nil {
				return err
			}
			if a.client.Credential() != id.Credential {
				a.client.SetCredential(id.Credential)
			}
			return nil
		}
		if id != nil {
			a.log.Warn("the state belongs to another server: enrolling with this one", "state_server", id.Server, "server", a.cfg.Server)
			if err := a.cfg.State.Reset(); err != nil {
				return err
			}
			// Its pin was that server's.
			a.setPin(a.cfg.Pin)
		}
		err = a.enroll(ctx)
		if err == nil {
			bo.Reset()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, errState) {
			return err
		}
		d := bo.Next()
		var certErr *CertificateError
		if errors.As(err, &certErr) {
			a.log.Error("enrollment refused: the server's certificate", "err", err, "retry_in", d.Round(time.Millisecond))
		} else {
			a.log.Warn("enrollment failed", "err", err, "retry_in", d.Round(time.Millisecond))
		}
		if !sleep(ctx, d) {
			return ctx.Err()
		}
	}
}

func (a *Agent) enroll(ctx context.Context) error {
	if a.cfg.EnrollSecret == "" {
		return stateErr(errors.New("the agent is not enrolled and has no enrollment secret"))
	}
	snap, err := a.cfg.Endpoint.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("enroll: %w", err)
	}
	if a.enrollmentID == "" {
		a.enrollmentID = rand.Text()
	}
	resp, err := a.client.Enroll(ctx, &agentproto.EnrollRequest{
		EnrollSecret: a.cfg.EnrollSecret, Capability: agentproto.CapabilityVersion,
		Hostname: snap.Hostname, OS: snap.OS, Arch: snap.Arch, AgentVersion: a.cfg.AgentVersion,
		EnrollmentID: a.enrollmentID,
	})
	if err != nil {
		return err
	}
	a.enrollmentID = ""
	if resp.CheckInIntervalSeconds > 0 {
		a.interval = time.Duration(resp.CheckInIntervalSeconds) * time.Second
	}
	a.serverCap = resp.Capability
	id := &Identity{Server: a.cfg.Server, AgentID: resp.AgentID, Credential: resp.Credential, EnrolledAt: a.now().UTC()}
	if a.pin != nil && a.trust != nil {
		id.PinSHA256 = FormatPin(a.pin)
	}
	if err := a.cfg.State.SaveIdentity(id); err != nil {
		return stateErr(err)
	}
	a.log.Info("enrolled", "agent_id", resp.AgentID, "hostname", snap.Hostname)
	return nil
}

// cycle delivers pending results, checks in and hands the commands it
// gets to the worker. A check-in woken by the long poll sends the last
// snapshot again, if there is one, so that the commands start without
// waiting for an inventory.
func (a *Agent) cycle(ctx context.Context, work chan<- Command, woken bool) error {
	if err := a.flush(ctx); err != nil {
		return err
	}
	snap := a.lastSnap
	if !woken || snap == nil {
		var err error
		snap, err = a.cfg.Endpoint.Snapshot(ctx)
		if errors.Is(err, ErrUnavailable) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		a.lastSnap = snap
	}
	resp, err := a.checkIn(ctx, snap)
	if err != nil {
		return err
	}
	if resp.CheckInIntervalSeconds > 0 {
		a.interval = time.Duration(resp.CheckInIntervalSeconds) * time.Second
	}
	a.serverCap = resp.Capability
	for _, c := range resp.Commands {
		cmd := Command{ID: c.ID, Type: device.CommandType(c.Type), Params: c.Params}
		// Until it ends, the command's result says that it was cut short.
		if err := a.cfg.State.PutResult(&PendingResult{
			CommandID: c.ID, Run: a.run, Created: a.now().UTC(),
			Report: agentproto.Report{State: agentproto.StateFailed, Result: &agentproto.Result{Message: "interrupted: the agent stopped before the command finished"}},
		}); err != nil {
			return stateErr(err)
		}
		select {
		case work <- cmd:
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// checkIn sends one check-in: the whole inventory when the server holds
// none the agent knows of, else what changed: as a delta to a server that
// takes them (one that is not known to, until it answered, gets the whole
// inventory). A delta the server refuses is followed at once by the whole
// inventory.
func (a *Agent) checkIn(ctx context.Context, snap *Snapshot) (*agentproto.CheckInResponse, error) {
	reported, err := a.cfg.State.Reported()
	if err != nil {
		return nil, stateErr(err)
	}
	req := &agentproto.CheckInRequest{
		Capability: agentproto.CapabilityVersion, Hostname: snap.Hostname, OS: snap.OS, Arch: snap.Arch,
		AgentVersion: a.cfg.AgentVersion, IPs: snap.IPs, FeatureUpgrade: snap.FeatureUpgrade,
		AppliedPolicies: a.appliedPolicies(snap), RebootPending: snap.RebootPending,
	}
	if req.IPs == nil {
		req.IPs = []string{}
	}
	inv := agentproto.Canonical(snap.Inventory)
	switch {
	case reported == nil:
		req.Inventory = &inv
	case agentproto.Equal(*reported, inv):
		// Unchanged, as at most check-ins: there is nothing to send, and
		// no delta to work out.
	default:
		d := agentproto.Diff(*reported, inv)
		switch {
		case d.Empty():
		case a.serverCap >= agentproto.DeltaCapability:
			req.InventoryDelta = &d
		default:
			req.Inventory = &inv
		}
	}
	resp, err := a.client.CheckIn(ctx, req)
	if req.InventoryDelta != nil && StatusOf(err) == http.StatusConflict {
		a.log.Info("the server does not hold the inventory the delta is based on: sending it whole", "err", err)
		req.InventoryDelta, req.Inventory = nil, &inv
		resp, err = a.client.CheckIn(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	if req.Inventory != nil || req.InventoryDelta != nil {
		if err := a.cfg.State.SaveReported(&inv); err != nil {
			return nil, stateErr(err)
		}
	}
	return resp, nil
}
