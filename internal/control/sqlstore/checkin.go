package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"database/sql"

	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
)

// Check-ins are the most frequent write: a fleet of 300,000 agents at a
// 60-second interval is 5,000 a second. A check-in is one transaction on
// PostgreSQL, whose UPDATE of the agent's row holds the row's lock to the
// end, so that check-ins of one agent served by several replicas follow
// each other; the queued commands are taken FOR UPDATE SKIP LOCKED and
// marked delivered before the commit, so that each is delivered once. On
// SQLite check-ins that arrive together share a transaction
// (sqlite_checkin.go).

// The statements of a check-in.
const (
	sqlCheckIn = `UPDATE agents SET
		hostname = ?, os_platform = ?, os_name = ?, os_version = ?, os_build = ?, arch = ?,
		agent_version = ?, capability = ?, ips = ?, last_seen_at = ?,
		inventory = coalesce(?, inventory), inventory_hash = coalesce(?, inventory_hash),
		feature_upgrade = ?, feature_target = ?, applied_policies = ?, reboot_pending = ?,
		ring = CASE WHEN ring_source = 'rule' THEN ? ELSE ring END
		WHERE id = ? AND removed_at IS NULL
		RETURNING ` + returnHasQueued
	// sqlCheckInSame is sqlCheckIn for the usual check-in, which changes
	// neither the hostname, the ring nor the inventory: it leaves alone the
	// columns of the agents_list and agents_ring indexes, whose entries
	// SQLite would otherwise delete and insert again, and the inventory,
	// and matches no row when the hostname or the ring would change. Only
	// SQLite runs it (dialect.checkInSame): PostgreSQL compares the
	// indexed values itself, and a check-in that changes them would pay a
	// round trip for nothing.
	sqlCheckInSame = `UPDATE agents SET
		os_platform = ?, os_name = ?, os_version = ?, os_build = ?, arch = ?,
		agent_version = ?, capability = ?, ips = ?, last_seen_at = ?,
		feature_upgrade = ?, feature_target = ?, applied_policies = ?, reboot_pending = ?
		WHERE id = ? AND removed_at IS NULL AND hostname = ? AND (ring_source <> 'rule' OR ring IS NOT DISTINCT FROM ?)
		RETURNING ` + returnHasQueued
	// returnHasQueued is whether the agent that a check-in updated has
	// commands to deliver (its last_seen_at is the time of the check-in):
	// most check-ins have none, and end without another statement.
	returnHasQueued = `EXISTS (SELECT 1 FROM commands
		WHERE agent_id = agents.id AND state = 'queued' AND expires_at > agents.last_seen_at)`
	sqlDeliver = `UPDATE commands SET state = 'delivered', updated_at = ? WHERE id = ?`
)

// sqlQueuedCommands selects the commands a check-in delivers, in the order
// they were queued.
func sqlQueuedCommands(d *dialect) string {
	return `SELECT ` + commandColumns + ` FROM commands
		WHERE agent_id = ? AND state = 'queued' AND expires_at > ? AND (? = 0 OR type = 'remove')
		ORDER BY created_at, ` + d.queueOrder + ` LIMIT ? ` + d.skipLocked
}

func init() {
	for _, d := range []*dialect{sqliteDialect, postgresDialect} {
		d.queuedCommands = sqlQueuedCommands(d)
	}
}

// checkInRequest is one check-in.
type checkInRequest struct {
	id   string
	c    device.CheckIn
	args []any // of sqlCheckIn
	// same are the arguments of sqlCheckInSame, nil when the check-in
	// carries an inventory or the engine does not run it.
	same []any
	done chan checkInResult
}

// ringArg and sameRingArg are the indexes in checkInRequest.args and
// checkInRequest.same of the ring the rules choose, filled in within the
// transaction.
const (
	ringArg     = 16
	sameRingArg = 15
)

type checkInResult struct {
	cmds []*device.Command
	err  error
}

// CheckIn implements device.AgentStore.
func (s *Store) CheckIn(ctx context.Context, id string, c device.CheckIn) ([]*device.Command, error) {
	cmds, err := s.checkIn(ctx, id, c)
	if err != nil {
		// Wrapped once there is an error: the arguments of errs.Wrap
		// would be boxed on every check-in.
		return nil, fmt.Errorf("check in agent %s: %w", id, err)
	}
	return cmds, nil
}

func (s *Store) checkIn(ctx context.Context, id string, c device.CheckIn) ([]*device.Command, error) {
	ips, inv, applied, err := agentJSON(c.IPs, c.Inventory, c.AppliedPolicies)
	if err != nil {
		return nil, err
	}
	fu := c.FeatureUpgrade
	if fu.State == "" {
		fu.State = device.FeatureUpgradeNone
	}
	if c.MaxCommands <= 0 {
		c.MaxCommands = 100
	}
	var invHash *string
	if c.Inventory != nil {
		invHash = &c.InventoryHash
	}
	req := &checkInRequest{
		id: id,
		c:  c,
		args: []any{c.Hostname, c.OS.Platform, c.OS.Name, c.OS.Version, c.OS.Build, c.Arch,
			c.AgentVersion, c.Capability, ips, ms(c.Time), inv, invHash,
			fu.State, fu.Target, applied, c.RebootPending, nil, id},
	}
	if c.Inventory == nil && s.d.checkInSame {
		a := req.args // the same values, not boxed again
		req.same = []any{a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[12], a[13], a[14], a[15], a[17], a[0], nil}
	}
	if s.checkIns != nil {
		r, err := s.groupCheckIn(ctx, req)
		if err != nil {
			return nil, err // not handed over: the store is closed, or ctx done
		}
		return r.cmds, r.err
	}
	return writeResult(ctx, s, func(tx querier) ([]*device.Command, error) {
		rings, err := findRings(ctx, tx)
		if err != nil {
			return nil, err
		}
		return s.checkInTx(ctx, tx, rings, req)
	})
}

// checkInTx applies one check-in within tx, with the rings the rules
// choose from.
func (s *Store) checkInTx(ctx context.Context, tx querier, rings []*device.Ring, r *checkInRequest) ([]*device.Command, error) {
	ring := nullString(device.RingFor(rings, r.c.Hostname, r.c.OS))
	r.args[ringArg] = ring
	if r.same != nil {
		r.same[sameRingArg] = ring
	}
	if r.c.Inventory != nil && r.c.InventoryBase != "" {
		var stored string
		err := tx.QueryRow(ctx, `SELECT inventory_hash FROM agents WHERE id = ? `+s.d.lockRow, r.id).Scan(&stored)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, notFound("agent", r.id)
		}
		if err != nil {
			return nil, err
		}
		if stored != r.c.InventoryBase {
			return nil, errs.Conflictf("the inventory delta is based on %q but the server holds %q: send the full inventory", r.c.InventoryBase, stored)
		}
	}
	var updated, queued bool
	var err error
	if r.same != nil {
		if updated, queued, err = updateAgent(ctx, tx, sqlCheckInSame, r.same); err != nil {
			return nil, err
		}
	}
	if !updated {
		if updated, queued, err = updateAgent(ctx, tx, sqlCheckIn, r.args); err != nil {
			return nil, err
		}
	}
	now := ms(r.c.Time)
	removedOnly := 0
	if !updated {
		// Unknown, or removed: a removed agent hears only about its
		// removal, and not at all once that is over.
		var removed *int64
		err := tx.QueryRow(ctx, `SELECT removed_at FROM agents WHERE id = ? `+s.d.lockRow, r.id).Scan(&removed)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, notFound("agent", r.id)
		}
		if err != nil {
			return nil, err
		}
		var active int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM commands
			WHERE agent_id = ? AND type = 'remove' AND state IN `+activeStates, r.id).Scan(&active); err != nil {
			return nil, err
		}
		if active == 0 {
			return nil, errs.Unauthorizedf("the agent has been removed")
		}
		if _, err := tx.Exec(ctx, `UPDATE agents SET last_seen_at = ? WHERE id = ?`, now, r.id); err != nil {
			return nil, err
		}
		removedOnly, queued = 1, true
	}
	if !queued {
		return nil, nil
	}
	delivered, err := queryAll(ctx, tx, scanCommand, s.d.queuedCommands, r.id, now, removedOnly, r.c.MaxCommands)
	if err != nil || len(delivered) == 0 {
		return nil, err
	}
	for _, cmd := range delivered {
		if _, err := tx.Exec(ctx, sqlDeliver, now, cmd.ID); err != nil {
			return nil, err
		}
		cmd.State = device.Delivered
		cmd.UpdatedAt = fromMS(now)
	}
	return delivered, nil
}

// updateAgent runs one of the UPDATEs of a check-in: whether it updated
// the agent (known and not removed), and whether the agent then has
// commands to deliver.
func updateAgent(ctx context.Context, tx querier, query string, args []any) (updated, queued bool, err error) {
	err = tx.QueryRow(ctx, query, args...).Scan(&queued)
	if errors.Is(err, sql.ErrNoRows) {
		return false, false, nil
	}
	return err == nil, queued, err
}
