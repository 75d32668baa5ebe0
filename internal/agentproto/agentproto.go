// Package agentproto holds the wire types of the agent protocol, the routes
// under /agent/v1 that agents (never API keys) speak to the control service.
//
// Every request of an enrolled agent carries
//
//	Authorization: Bearer <agentId>.<credential>
//
// where the credential is the plat_ token returned once by Enroll. The
// server ignores fields it does not know and agents must do the same; a
// change that an old peer could misread bumps CapabilityVersion.
package agentproto

import (
	"encoding/json"
	"time"
)

// CapabilityVersion is the version of the protocol spoken by this code. It
// only goes up, one line per bump:
//
//	1: 2026-11-21: enroll, check-in with inventory and state, command
//	   reports, log bundle upload.
//	2: 2026-11-21: inventory deltas (CheckInRequest.InventoryDelta, refused
//	   with 409 when their base is not what the server holds), software
//	   architecture and source package, installed updates (Windows KBs),
//	   policy compliance in AppliedPolicy, HeaderAgentState on answers to
//	   a removed agent.
//	3: 2026-11-24: Update.RebootRequired (an update that needs a restart
//	   to install, as Windows Update and softwareupdate say),
//	   Software.Publisher and Software.Channel (an application's update
//	   channel) and Inventory.Notes (what the agent could not read),
//	   reported by the
//	   Windows and macOS agents. An older server leaves them out of the
//	   inventory it holds, so deltas to it fall back to full
//	   inventories.
//	4: 2026-11-25: POST /agent/v1/wait, the long poll that a server
//	   answers as soon as a command is queued for the agent, which then
//	   checks in at once. An older server answers it 404, and its agents
//	   check in on their interval alone.
const CapabilityVersion = 4

// MinCapabilityVersion is the oldest protocol version a server accepts.
// Newer agents than the server are welcome: they speak the server's
// version, which every answer names.
const MinCapabilityVersion = 1

// Architectures are the values of EnrollRequest.Arch and
// CheckInRequest.Arch: the GOARCH of the agent's build. An empty Arch
// means the agent did not say.
var Architectures = []string{"386", "amd64", "arm", "arm64", "loong64", "mips", "mips64", "mips64le", "mipsle", "ppc64", "ppc64le", "riscv64", "s390x"}

// KnownArch reports whether arch is one of Architectures.
func KnownArch(arch string) bool {
	for _, a := range Architectures {
		if a == arch {
			return true
		}
	}
	return false
}

// MaxIPs bounds the addresses of CheckInRequest.IPs.
const MaxIPs = 256

// Routes of the protocol.
const (
	PathEnroll    = "/agent/v1/enroll"
	PathCheckIn   = "/agent/v1/checkin"
	PathReport    = "/agent/v1/commands/{id}/report"     // POST a Report
	PathLogBundle = "/agent/v1/commands/{id}/log-bundle" // PUT the bundle's bytes
	PathWait      = "/agent/v1/wait"                     // POST a WaitRequest
)

// MaxLogBundleBytes bounds an uploaded log bundle.
const MaxLogBundleBytes = 32 << 20

// MaxRequestBytes bounds the JSON body of every other request, inventory
// included.
const MaxRequestBytes = 4 << 20

// WaitRequest asks the server to answer when a command is queued for the
// agent, or after TimeoutSeconds.
type WaitRequest struct {
	// TimeoutSeconds is how long the server may hold the request: from 1
	// to MaxWaitSeconds. Zero means DefaultWaitSeconds.
	TimeoutSeconds int `json:"timeoutSeconds"`
}

// Bounds of WaitRequest.TimeoutSeconds. The default stays under the 60
// seconds after which common reverse proxies cut a quiet request.
const (
	DefaultWaitSeconds = 50
	MaxWaitSeconds     = 300
)

// WaitResponse answers a wait: Commands is true when commands are queued
// for the agent (it checks in to take them), false when the time ran
// out.
type WaitResponse struct {
	Commands bool `json:"commands"`
}

// EnrollRequest asks to enroll an endpoint.
type EnrollRequest struct {
	EnrollSecret string `json:"enrollSecret"` // a ples_ token from `patchline enroll create`
	Capability   int    `json:"capability"`
	Hostname     string `json:"hostname"`
	OS           OS     `json:"os"`
	Arch         string `json:"arch"`
	AgentVersion string `json:"agentVersion"`
	// EnrollmentID is the agent's own random id of this enrollment, the
	// same in every attempt: a request sent again after its answer was
	// lost answers the agent the first one created (with a new credential)
	// instead of enrolling another, until that agent checks in. Optional.
	EnrollmentID string `json:"enrollmentId,omitempty"`
}

// EnrollResponse answers an enrollment.
type EnrollResponse struct {
	AgentID string `json:"agentId"`
	// Credential is the full bearer credential "<agentId>.<plat_…>",
	// returned only here: the server keeps a digest.
	Credential             string `json:"credential"`
	Capability             int    `json:"capability"`
	CheckInIntervalSeconds int    `json:"checkInIntervalSeconds"`
}

// OS describes the operating system.
type OS struct {
	Platform string `json:"platform"` // windows, macos or linux
	Name     string `json:"name"`
	Version  string `json:"version"`
	Build    string `json:"build"`
}

// Software is one installed package or application.
type Software struct {
	Name      string `json:"name"`
	Version   string `json:"version"`
	Ecosystem string `json:"ecosystem"` // as in the CVE catalog: "Debian:12", "Windows", "Desktop", …
	Arch      string `json:"arch,omitempty"`
	// Source is the source package a binary package was built from
	// (dpkg's Source, the RPM's source RPM name, apk's origin), which is
	// what distribution trackers name in their advisories.
	Source string `json:"source,omitempty"`
	// Publisher is the publisher of a desktop application, as its
	// operating system lists it.
	Publisher string `json:"publisher,omitempty"`
	// Channel is the update channel of an application that has one:
	// Microsoft 365 Apps' "Current Channel", "Monthly Enterprise
	// Channel", ….
	Channel string `json:"channel,omitempty"`
}

// Update is an available update not yet installed, or an installed one.
type Update struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Severity string `json:"severity,omitempty"`
	// RebootRequired is set on a pending update that needs a restart to
	// install.
	RebootRequired bool `json:"rebootRequired,omitempty"`
}

// Inventory is what is installed and what is pending.
type Inventory struct {
	Software       []Software `json:"software"`
	PendingUpdates []Update   `json:"pendingUpdates"`
	// InstalledUpdates are updates known by an id rather than as a
	// package version: the KBs of a Windows endpoint.
	InstalledUpdates []Update `json:"installedUpdates,omitempty"`
	// Notes say what the agent could not read, one line a source ("Windows
	// Update search: …"): the inventory holds the rest.
	Notes []string `json:"notes,omitempty"`
}

// FeatureUpgrade is the state of an OS feature upgrade: none, staging,
// ready (waits for the restart that finishes it), finishing or failed.
type FeatureUpgrade struct {
	State  string `json:"state"`
	Target string `json:"target,omitempty"`
}

// AppliedPolicy is a policy version the agent has applied, and whether the
// endpoint complies with it as last checked.
type AppliedPolicy struct {
	PolicyID string `json:"policyId"`
	Version  int    `json:"version"`
	// Compliant is nil when the agent could check none of the settings.
	Compliant *bool `json:"compliant,omitempty"`
	// Message says what does not comply, or which settings the endpoint
	// cannot check.
	Message string `json:"message,omitempty"`
}

// CheckInRequest reports an agent's state and asks for commands.
type CheckInRequest struct {
	Capability   int      `json:"capability"`
	Hostname     string   `json:"hostname"`
	OS           OS       `json:"os"`
	Arch         string   `json:"arch"`
	AgentVersion string   `json:"agentVersion"`
	IPs          []string `json:"ips"`
	// Inventory is sent when it changed since the last accepted check-in,
	// and may be left out (null) otherwise. After a first full inventory,
	// agents send InventoryDelta instead; at most one of the two is set.
	Inventory       *Inventory      `json:"inventory"`
	InventoryDelta  *InventoryDelta `json:"inventoryDelta,omitempty"`
	FeatureUpgrade  FeatureUpgrade  `json:"featureUpgrade"`
	AppliedPolicies []AppliedPolicy `json:"appliedPolicies"`
	RebootPending   bool            `json:"rebootPending"`
}

// CheckInResponse answers a check-in with the commands to run.
type CheckInResponse struct {
	Capability             int       `json:"capability"`
	CheckInIntervalSeconds int       `json:"checkInIntervalSeconds"`
	Commands               []Command `json:"commands"`
}

// Command is a command as delivered to the agent.
type Command struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Params    json.RawMessage `json:"params,omitempty"`
	CreatedAt time.Time       `json:"createdAt"`
	ExpiresAt time.Time       `json:"expiresAt"`
}

// Report states of a command.
const (
	StateRunning   = "running"
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
)

// Report tells the server how a command went.
type Report struct {
	State  string  `json:"state"` // running, succeeded or failed
	Result *Result `json:"result"`
}

// Result is the outcome of a command. A command refused by the endpoint's
// local --allow list fails with Message "not allowed by this endpoint's
// local policy".
type Result struct {
	Message  string          `json:"message"`
	ExitCode *int            `json:"exitCode,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
}

// NotAllowedMessage is the Result.Message of a command the endpoint's
// local policy refuses.
const NotAllowedMessage = "not allowed by this endpoint's local policy"

// ReportResponse acknowledges a report.
type ReportResponse struct {
	ID    string `json:"id"`
	State string `json:"state"`
}

// LogBundleResponse acknowledges an uploaded log bundle.
type LogBundleResponse struct {
	CommandID string `json:"commandId"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256"` // hex
}
