// Package exposure matches what agents report as installed against the
// remediation atoms of the CVE catalog: which CVEs affect each agent, and
// which version, build or KB fixes them.
//
// It reads the catalog through cve.Catalog and keeps its results in the
// control store through Store; the catalog knows nothing of agents. The
// Index is built from the catalog once and refreshed when the catalog
// changes; Match evaluates one inventory against it; Service keeps the
// stored results current, re-evaluating an agent when its inventory
// changes and, when the catalog changes, only the agents that hold a
// product whose atoms changed.
package exposure

import (
	"context"

	"github.com/patchline/patchline/internal/device"
)

// Status is how an inventory item stands against one CVE.
type Status string

// The statuses of a finding. An item that a CVE does not affect has no
// finding at all.
const (
	// Affected: the installed version is below the fix that applies to it.
	Affected Status = "affected"
	// Unknown: the catalog has atoms for the product, but the installed
	// version or every applicable fixed version does not parse, so the
	// item can be called neither affected nor fixed.
	Unknown Status = "unknown"
)

// Finding is one CVE that affects (or may affect) one inventory item.
type Finding struct {
	CVEID     string `json:"cveId"`
	Ecosystem string `json:"ecosystem"` // the catalog's
	Product   string `json:"product"`   // as the catalog names it
	Package   string `json:"package"`   // the inventory item's name
	Installed string `json:"installedVersion"`
	// Fixed is the fixed version that applies to the installed one, ""
	// when unknown.
	Fixed string `json:"fixedVersion"`
	// KB is the Microsoft update that brings Fixed, when known.
	KB     string `json:"kb,omitempty"`
	Status Status `json:"status"`
	// Reason says why the status is unknown.
	Reason string `json:"reason,omitempty"`
	// EOLFrom and EOESFrom, when set, say that the release the fix lands
	// on is past (or reaches on that date) its end of life or of extended
	// support: no further fix is to be expected.
	EOLFrom  string `json:"eolFrom,omitempty"`
	EOESFrom string `json:"eoesFrom,omitempty"`
}

// Risk is what ranks a CVE: KEV first, then EPSS, then CVSS.
type Risk struct {
	CVEID       string
	KEV         bool
	EPSS        *float64
	CVSS        *float64
	Severity    string
	Description string
}

// Pending is an agent whose exposure must be evaluated again.
type Pending struct {
	AgentID string
	// Token identifies the inventory change that queued the agent: a
	// result stored with an outdated token leaves the agent queued.
	Token     string
	Inventory device.Inventory
}

// AgentVulnerability is one CVE of one agent, with every item it affects.
type AgentVulnerability struct {
	Risk
	Status   Status // Affected when any item is affected
	Findings []Finding
}

// FleetVulnerability is one CVE across the fleet.
type FleetVulnerability struct {
	Risk
	Affected int // agents with an affected item
	Unknown  int // agents with items of unknown status only
	// Fixes are the distinct fixed versions (with their KB) that apply to
	// the affected agents.
	Fixes []Fix
}

// Fix is a fixed version of a product.
type Fix struct {
	Ecosystem string `json:"ecosystem"`
	Product   string `json:"product"`
	Version   string `json:"fixedVersion"`
	KB        string `json:"kb,omitempty"`
	EOLFrom   string `json:"eolFrom,omitempty"`
}

// Cursor is a position in risk order: KEV first, then EPSS descending,
// then CVSS descending, then CVE id order. Missing scores count as -1.
type Cursor struct {
	KEV    bool
	EPSS   float64
	CVSS   float64
	CVEKey int64
}

// FleetFilter selects a page of the fleet's vulnerabilities.
type FleetFilter struct {
	KEV   *bool
	After *Cursor
	Limit int // 0 means no limit
	// IncludeUnknown lists CVEs that only have agents of unknown status.
	IncludeUnknown bool
}

// AgentFilter selects the agents of one CVE.
type AgentFilter struct {
	CVEID  string
	Status Status // "" for both
	After  string // agent id to resume after
	Limit  int    // 0 means no limit
}

// CVEAgent is one agent of a CVE.
type CVEAgent struct {
	AgentID  string
	Hostname string
	Ring     string
	Status   Status
	Findings []Finding
}

// AddFinding adds a finding of agent ag (AgentID, Hostname and Ring set) to
// agents, the agents of one CVE in agent order as a store reads them, and
// returns it: a finding of the last agent joins its findings, and makes it
// affected when it is.
func AddFinding(agents []CVEAgent, ag CVEAgent, fi Finding) []CVEAgent {
	if n := len(agents); n > 0 && agents[n-1].AgentID == ag.AgentID {
		last := &agents[n-1]
		last.Findings = append(last.Findings, fi)
		if fi.Status == Affected {
			last.Status = Affected
		}
		return agents
	}
	ag.Status, ag.Findings = fi.Status, []Finding{fi}
	return append(agents, ag)
}

// Keep returns the agents of f's Status (all when empty), at most f.Limit.
func (f AgentFilter) Keep(agents []CVEAgent) []CVEAgent {
	if f.Status != "" {
		kept := agents[:0]
		for _, a := range agents {
			if a.Status == f.Status {
				kept = append(kept, a)
			}
		}
		agents = kept
	}
	if f.Limit > 0 && len(agents) > f.Limit {
		agents = agents[:f.Limit]
	}
	return agents
}

// Store keeps the exposure of every agent. The control store implements it.
type Store interface {
	// HasAgents reports whether the fleet has an agent that is not
	// removed.
	HasAgents(ctx context.Context) (bool, error)

	// PendingExposure returns up to limit agents queued for evaluation.
	// Check-ins queue an agent whenever its stored inventory changes.
	PendingExposure(ctx context.Context, limit int) ([]Pending, error)

	// PutExposure replaces the findings and product keys of an agent and
	// takes it off the queue unless it was queued again since token.
	PutExposure(ctx context.Context, agentID, token string, keys []string, findings []Finding) error

	// QueueExposure queues the agents holding a product of keys (as
	// stored by PutExposure), and returns how many it queued.
	QueueExposure(ctx context.Context, keys []string) (int, error)

	// PutRisks stores the risk of CVEs, replacing what was stored.
	PutRisks(ctx context.Context, risks []Risk) error

	// PutScores stores the risk of CVEs but for their description, which
	// stays as stored (empty for a CVE not stored yet).
	PutScores(ctx context.Context, risks []Risk) error

	// AgentVulnerabilities returns the CVEs of an agent in risk order. It
	// returns errs.ErrNotFound for an unknown or removed agent.
	AgentVulnerabilities(ctx context.Context, agentID string) ([]AgentVulnerability, error)

	// FleetVulnerabilities returns the CVEs of the fleet in risk order.
	FleetVulnerabilities(ctx context.Context, f FleetFilter) ([]FleetVulnerability, error)

	// VulnerabilityAgents returns the agents of one CVE, by agent id.
	VulnerabilityAgents(ctx context.Context, f AgentFilter) ([]CVEAgent, error)
}

// Less reports whether risk a ranks before risk b.
func Less(a, b Cursor) bool {
	if a.KEV != b.KEV {
		return a.KEV
	}
	if a.EPSS != b.EPSS {
		return a.EPSS > b.EPSS
	}
	if a.CVSS != b.CVSS {
		return a.CVSS > b.CVSS
	}
	return a.CVEKey < b.CVEKey
}
