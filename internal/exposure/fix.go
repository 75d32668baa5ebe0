package exposure

import (
	"context"
	"fmt"
	"time"

	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
)

// NewFixRollout returns the install-updates rollout that installs the fix
// of a CVE on the agents it affects: every pending update of each of
// those agents, ring by ring through every ring. It returns
// errs.ErrConflict when no agent is affected. The caller stores it with
// device.RolloutStore.CreateRollout, which keeps only the rings that
// exist, in order.
func NewFixRollout(ctx context.Context, store Store, cveID, by string, now time.Time) (*device.Rollout, error) {
	agents, err := store.VulnerabilityAgents(ctx, AgentFilter{CVEID: cveID, Status: Affected})
	if err != nil {
		return nil, fmt.Errorf("fix rollout for %s: %w", cveID, err)
	}
	if len(agents) == 0 {
		return nil, errs.Conflictf("no agent is affected by %s", cveID)
	}
	ro := &device.Rollout{
		ID:        device.NewID(device.RolloutIDPrefix),
		Name:      "Install the fix of " + cveID,
		Kind:      device.InstallUpdates,
		CreatedBy: by,
		CreatedAt: now,
		UpdatedAt: now,
	}
	for _, a := range agents {
		ro.Agents = append(ro.Agents, a.AgentID)
	}
	return ro, nil
}
