// Package device is the domain of device management: agents (endpoints),
// the commands sent to them, deployment rings and rollouts, policy objects
// and enrollment secrets, with one store interface per aggregate.
//
// Stores report errors of the kinds of package errs; the interfaces say
// which.
package device

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/errs"
)

// NewID returns a new random identifier: prefix and 24 lower-case base32
// characters (120 bits).
func NewID(prefix string) string {
	b := make([]byte, 15)
	rand.Read(b) // never fails (crypto/rand)
	return prefix + strings.ToLower(base32.StdEncoding.EncodeToString(b))
}

// Identifier prefixes.
const (
	AgentIDPrefix        = "agt_"
	CommandIDPrefix      = "cmd_"
	RolloutIDPrefix      = "rol_"
	PolicyIDPrefix       = "pol_"
	EnrollSecretIDPrefix = "enr_"
)

// Prefixes of the secret tokens of the agent protocol (see apikey.NewSecret
// for the format): enrollment secrets and per-agent credentials.
const (
	EnrollSecretPrefix    = "ples_"
	AgentCredentialPrefix = "plat_"
)

// OfflineAfter is how long after its last check-in an agent counts as
// offline: a few missed check-ins at the default interval.
const OfflineAfter = 5 * time.Minute

// CheckInInterval is the interval the server asks agents to check in at.
const CheckInInterval = 60 * time.Second

// Status is whether an agent checks in.
type Status string

// The statuses of an agent.
const (
	StatusOnline  Status = "online"
	StatusOffline Status = "offline"
)

// Platforms of agents.
const (
	PlatformWindows = "windows"
	PlatformMacOS   = "macos"
	PlatformLinux   = "linux"
)

// Platforms lists the platforms agents run on.
var Platforms = []string{PlatformWindows, PlatformMacOS, PlatformLinux}

// OS is the operating system of an agent.
type OS struct {
	Platform string `json:"platform"` // one of Platforms
	Name     string `json:"name"`     // "Windows 11 Pro", "macOS", "Ubuntu"
	Version  string `json:"version"`  // "23H2", "14.4.1", "22.04"
	Build    string `json:"build"`    // "22631.3447", "23E224", kernel release
}

// Software is one installed package or application.
type Software struct {
	Name      string `json:"name"`
	Version   string `json:"version"`
	Ecosystem string `json:"ecosystem"` // as in the CVE catalog: "Windows", "Debian:12", "Desktop", …
	Arch      string `json:"arch,omitempty"`
	Source    string `json:"source,omitempty"` // source package, as distribution trackers name it
	Publisher string `json:"publisher,omitempty"`
	Channel   string `json:"channel,omitempty"` // update channel: Microsoft 365 Apps' "Current Channel", …
}

// Update is an update an agent reports as available and not installed.
type Update struct {
	ID       string `json:"id"` // "KB5036893", a package name, …
	Title    string `json:"title"`
	Severity string `json:"severity,omitempty"` // critical, important, moderate, low
	// RebootRequired is set on a pending update that needs a restart to
	// install.
	RebootRequired bool `json:"rebootRequired,omitempty"`
}

// Inventory is what is installed on an agent and what is pending.
type Inventory struct {
	Software       []Software `json:"software"`
	PendingUpdates []Update   `json:"pendingUpdates"`
	// InstalledUpdates are updates known by an id rather than a package
	// version: the KBs of a Windows endpoint.
	InstalledUpdates []Update `json:"installedUpdates,omitempty"`
	// Notes say what the agent could not read (a Windows Update Agent
	// that is not there, softwareupdate failing), one line a source.
	Notes []string `json:"notes,omitempty"`
}

// Feature-upgrade states an agent reports.
const (
	FeatureUpgradeNone      = "none"      // nothing staged
	FeatureUpgradeStaging   = "staging"   // downloading or preparing
	FeatureUpgradeReady     = "ready"     // staged, waits for the restart that finishes it
	FeatureUpgradeFinishing = "finishing" // finishing
	FeatureUpgradeFailed    = "failed"
)

// FeatureUpgradeStates lists the feature-upgrade states.
var FeatureUpgradeStates = []string{FeatureUpgradeNone, FeatureUpgradeStaging, FeatureUpgradeReady, FeatureUpgradeFinishing, FeatureUpgradeFailed}

// FeatureUpgrade is the state of an OS feature upgrade (a new Windows
// release, a macOS major version) on an agent.
type FeatureUpgrade struct {
	State  string `json:"state"`  // one of FeatureUpgradeStates
	Target string `json:"target"` // the release being installed, "" for none
}

// AppliedPolicy is a version of a policy object an agent has applied, and
// whether the endpoint complied with it when the agent last checked.
type AppliedPolicy struct {
	PolicyID  string `json:"policyId"`
	Version   int    `json:"version"`
	Compliant *bool  `json:"compliant"`         // nil when the agent could check none of the settings
	Message   string `json:"message,omitempty"` // what does not comply, or what could not be checked
}

// How an agent got its deployment ring.
const (
	// RingSourceManual is a ring set by hand or by the enrollment secret:
	// it stays until changed by hand.
	RingSourceManual = "manual"
	// RingSourceRule is a ring that the ring rules choose, again at every
	// check-in and whenever a rule changes.
	RingSourceRule = "rule"
)

// Agent is an enrolled endpoint.
type Agent struct {
	ID             string
	Hostname       string
	OS             OS
	Arch           string // amd64, arm64
	AgentVersion   string
	Capability     int // agentproto.CapabilityVersion the agent speaks
	IPs            []string
	Ring           string // deployment ring, "" for none
	RingSource     string // RingSourceManual or RingSourceRule
	EnrollSecretID string
	// EnrollmentID is the agent's own id of its enrollment request, given
	// to the store on enrollment only: a request sent again with it finds
	// the agent it created.
	EnrollmentID    string
	EnrolledAt      time.Time
	LastSeenAt      time.Time
	Inventory       Inventory
	InventoryHash   string // agentproto.InventoryHash of Inventory as the agent reported it, "" before the first report
	FeatureUpgrade  FeatureUpgrade
	AppliedPolicies []AppliedPolicy
	RebootPending   bool
	CredentialHash  []byte     // apikey.HashSecret of the agent's credential
	RemovedAt       *time.Time // set when removed; the agent is then gone from lists
}

// Status returns whether a is online at now.
func (a *Agent) Status(now time.Time) Status {
	if now.Sub(a.LastSeenAt) < OfflineAfter {
		return StatusOnline
	}
	return StatusOffline
}

// AgentCursor is the position of an agent in list order: by hostname, then
// id.
type AgentCursor struct {
	Hostname string
	ID       string
}

// AgentFilter selects agents. Zero values mean "no filter".
type AgentFilter struct {
	IDs            []string
	Status         Status // with Now
	Platform       string
	Ring           string
	Text           string // case-insensitive substring of hostname or id
	FeatureUpgrade string // feature-upgrade state
	Now            time.Time
	After          *AgentCursor // resume after this agent
	Limit          int          // 0 means no limit
}

// CheckIn is what an agent reports when it checks in.
type CheckIn struct {
	Time         time.Time
	Hostname     string
	OS           OS
	Arch         string
	AgentVersion string
	Capability   int
	IPs          []string
	Inventory    *Inventory // nil when unchanged since the last check-in
	// InventoryHash is stored with Inventory: the hash the agent will
	// base its next delta on.
	InventoryHash string
	// InventoryBase, when set, makes Inventory conditional: it replaces
	// the stored one only if the stored hash is InventoryBase (the base
	// of the delta it was built from).
	InventoryBase   string
	FeatureUpgrade  FeatureUpgrade
	AppliedPolicies []AppliedPolicy
	RebootPending   bool
	MaxCommands     int // deliver at most this many commands
}

// AgentCredential is what authenticating an agent needs.
type AgentCredential struct {
	AgentID   string
	Hash      []byte
	RemovedAt *time.Time
}

// AgentStore keeps agents.
type AgentStore interface {
	// EnrollAgent checks the enrollment secret with the given digest and
	// stores a as a new agent enrolled with it, in the secret's ring when
	// a.Ring is empty, or else in the ring the ring rules choose. It
	// returns errs.ErrUnauthorized for a secret that is unknown, revoked
	// or expired.
	EnrollAgent(ctx context.Context, secretHash []byte, a *Agent) error

	// FindAgentByID returns an agent. It returns errs.ErrNotFound for an
	// unknown or removed agent.
	FindAgentByID(ctx context.Context, id string) (*Agent, error)

	// FindAgents returns the agents matching f in list order (hostname,
	// then id), removed ones left out.
	FindAgents(ctx context.Context, f AgentFilter) ([]*Agent, error)

	// FindAgentCredential returns the credential digest of an agent,
	// removed ones included. It returns errs.ErrNotFound for an unknown
	// agent.
	FindAgentCredential(ctx context.Context, id string) (*AgentCredential, error)

	// CheckIn records a check-in and returns the queued commands of the
	// agent, now delivered, oldest first. An agent whose ring follows the
	// rules moves to the ring they choose for what it reports. A removed
	// agent only gets its remove command; once that is over, CheckIn
	// returns errs.ErrUnauthorized. It returns errs.ErrNotFound for an
	// unknown agent, and errs.ErrConflict, writing nothing, when
	// c.InventoryBase is set and is not the hash of the stored inventory.
	CheckIn(ctx context.Context, id string, c CheckIn) ([]*Command, error)

	// SetAgentRing moves an agent to a ring ("" for none) by hand, where
	// it stays whatever the ring rules say, and returns it. It returns
	// errs.ErrNotFound for an unknown agent and errs.ErrInvalid for an
	// unknown ring.
	SetAgentRing(ctx context.Context, id, ring string) (*Agent, error)

	// SetAgentRingByRule hands the ring of an agent back to the ring
	// rules, which choose it at once, and returns the agent. It returns
	// errs.ErrNotFound for an unknown agent.
	SetAgentRingByRule(ctx context.Context, id string) (*Agent, error)

	// RemoveAgent marks an agent removed and queues cmd, its remove
	// command, in one transaction. It returns errs.ErrNotFound for an
	// unknown or already removed agent.
	RemoveAgent(ctx context.Context, id string, cmd *Command) error
}

// CheckHostname returns errs.ErrInvalid for a hostname an agent may not
// report.
func CheckHostname(h string) error {
	if h == "" || len(h) > 255 || strings.ContainsFunc(h, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return errs.Invalidf("hostname must have 1 to 255 printable characters")
	}
	return nil
}

// ValidPlatform reports whether p is one of Platforms.
func ValidPlatform(p string) bool {
	for _, q := range Platforms {
		if p == q {
			return true
		}
	}
	return false
}

// ValidFeatureUpgradeState reports whether s is one of
// FeatureUpgradeStates.
func ValidFeatureUpgradeState(s string) bool {
	for _, q := range FeatureUpgradeStates {
		if s == q {
			return true
		}
	}
	return false
}
