package agent

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/patchline/patchline/internal/agentproto"
)

// PolicySettings are the settings of a policy object that every agent
// checks against its own inventory. Other settings are the business of
// the endpoint (a PolicyChecker); an agent that cannot check a setting
// says so in the compliance message.
type PolicySettings struct {
	// RequiredPackages must be installed (by name, in any ecosystem).
	RequiredPackages []string `json:"requiredPackages"`
	// ForbiddenPackages must not be installed.
	ForbiddenPackages []string `json:"forbiddenPackages"`
	// MaxPendingUpdates bounds the updates available and not installed.
	MaxPendingUpdates *int `json:"maxPendingUpdates"`
	// NoPendingReboot, when true, requires that no restart is pending.
	NoPendingReboot *bool `json:"noPendingReboot"`
}

// knownSettings are the JSON names of PolicySettings.
var knownSettings = map[string]bool{"requiredPackages": true, "forbiddenPackages": true, "maxPendingUpdates": true, "noPendingReboot": true}

// CheckPolicy checks the settings CheckPolicy knows (PolicySettings)
// against snap. It returns whether the endpoint complies, nil when none of
// the settings is known, the findings that say why not, and the names of
// the settings it did not check.
func CheckPolicy(settings json.RawMessage, snap *Snapshot) (compliant *bool, findings, unchecked []string) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(settings, &all); err != nil {
		return nil, []string{"the settings are not a JSON object"}, nil
	}
	var ps PolicySettings
	if err := json.Unmarshal(settings, &ps); err != nil {
		return nil, []string{fmt.Sprintf("the settings do not parse: %v", err)}, nil
	}
	checked := false
	for name := range all {
		if knownSettings[name] {
			checked = true
		} else {
			unchecked = append(unchecked, name)
		}
	}
	sort.Strings(unchecked)
	installed := map[string]bool{}
	for _, sw := range snap.Inventory.Software {
		installed[sw.Name] = true
	}
	for _, name := range ps.RequiredPackages {
		if !installed[name] {
			findings = append(findings, name+" is not installed")
		}
	}
	for _, name := range ps.ForbiddenPackages {
		if installed[name] {
			findings = append(findings, name+" is installed")
		}
	}
	if ps.MaxPendingUpdates != nil {
		if n := len(snap.Inventory.PendingUpdates); n > *ps.MaxPendingUpdates {
			findings = append(findings, fmt.Sprintf("%d updates are pending, at most %d allowed", n, *ps.MaxPendingUpdates))
		}
	}
	if ps.NoPendingReboot != nil && *ps.NoPendingReboot && snap.RebootPending {
		findings = append(findings, "a restart is pending")
	}
	if !checked {
		return nil, findings, unchecked
	}
	ok := len(findings) == 0
	return &ok, findings, unchecked
}

// complianceMessage says what does not comply and what was not checked.
func complianceMessage(findings, unchecked []string) string {
	var parts []string
	if len(findings) > 0 {
		parts = append(parts, strings.Join(findings, "; "))
	}
	if len(unchecked) > 0 {
		parts = append(parts, "not checked on this endpoint: "+strings.Join(unchecked, ", "))
	}
	return strings.Join(parts, "; ")
}

// appliedPolicies returns the applied policies with their compliance,
// checked against snap.
func (a *Agent) appliedPolicies(snap *Snapshot) []agentproto.AppliedPolicy {
	policies, err := a.cfg.State.Policies()
	if err != nil {
		a.log.Warn("reading applied policies", "err", err)
		return []agentproto.AppliedPolicy{}
	}
	out := make([]agentproto.AppliedPolicy, 0, len(policies))
	for _, p := range policies {
		compliant, msg := a.checkPolicy(p.Settings, snap)
		out = append(out, agentproto.AppliedPolicy{PolicyID: p.ID, Version: p.Version, Compliant: compliant, Message: msg})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PolicyID < out[j].PolicyID })
	return out
}

func (a *Agent) checkPolicy(settings json.RawMessage, snap *Snapshot) (*bool, string) {
	if pc, ok := a.cfg.Endpoint.(PolicyChecker); ok {
		return pc.CheckPolicy(settings, snap)
	}
	compliant, findings, unchecked := CheckPolicy(settings, snap)
	return compliant, complianceMessage(findings, unchecked)
}
