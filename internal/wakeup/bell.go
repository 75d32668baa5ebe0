package wakeup

import (
	"context"

	"github.com/patchline/patchline/internal/control"
	"github.com/patchline/patchline/internal/device"
)

// Bell rings agents on every replica that may hold their waits. A ring
// that cannot be sent is logged and lost, never an error of the caller:
// the command it announced is queued, and the agent takes it at its next
// check-in.
type Bell interface {
	Ring(ctx context.Context, agentIDs []string)
}

// Ring implements Bell for a single replica: it wakes the waits of this
// hub.
func (h *Hub) Ring(_ context.Context, agentIDs []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range agentIDs {
		h.ringLocked(id)
	}
}

// Store is a control store that rings the agents of the commands it
// queues, whichever route or page queued them.
type Store struct {
	control.Store
	Bell Bell
}

// CreateCommands implements device.CommandStore, and rings the agents of
// the commands it created.
func (s Store) CreateCommands(ctx context.Context, cmds []*device.Command, skipActive bool) ([]*device.Command, error) {
	created, err := s.Store.CreateCommands(ctx, cmds, skipActive)
	if err == nil {
		s.ring(ctx, created)
	}
	return created, err
}

// AdvanceRollout implements device.RolloutStore, and rings the agents of
// the commands the new ring got.
func (s Store) AdvanceRollout(ctx context.Context, id string, a device.Advance) (*device.Rollout, []*device.Command, error) {
	ro, created, err := s.Store.AdvanceRollout(ctx, id, a)
	if err == nil {
		s.ring(ctx, created)
	}
	return ro, created, err
}

// RemoveAgent implements device.AgentStore, and rings the agent of the
// remove command.
func (s Store) RemoveAgent(ctx context.Context, id string, cmd *device.Command) error {
	err := s.Store.RemoveAgent(ctx, id, cmd)
	if err == nil {
		s.ring(ctx, []*device.Command{cmd})
	}
	return err
}

func (s Store) ring(ctx context.Context, cmds []*device.Command) {
	if len(cmds) == 0 {
		return
	}
	ids := make([]string, 0, len(cmds))
	seen := make(map[string]bool, len(cmds))
	for _, c := range cmds {
		if !seen[c.AgentID] {
			seen[c.AgentID] = true
			ids = append(ids, c.AgentID)
		}
	}
	// The request that queued the commands may end before the ring is
	// sent; the ring must not end with it.
	s.Bell.Ring(context.WithoutCancel(ctx), ids)
}
