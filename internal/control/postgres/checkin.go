package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/patchline/patchline/internal/control/schema"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
)

// A check-in is one transaction. Its UPDATE of the agent's row holds the
// row's lock to the end, so that check-ins of one agent served by several
// replicas follow each other; the queued commands are taken FOR UPDATE
// SKIP LOCKED and marked delivered before the commit, so that each is
// delivered once.

const (
	sqlCheckIn = `UPDATE agents SET
		hostname = $1, os_platform = $2, os_name = $3, os_version = $4, os_build = $5, arch = $6,
		agent_version = $7, capability = $8, ips = $9, last_seen_at = $10,
		inventory = coalesce($11, inventory), inventory_hash = coalesce($12, inventory_hash),
		feature_upgrade = $13, feature_target = $14, applied_policies = $15, reboot_pending = $16,
		ring = CASE WHEN ring_source = 'rule' THEN $17 ELSE ring END
		WHERE id = $18 AND removed_at IS NULL`
	// seq: the order they were queued in.
	sqlQueuedCommands = `SELECT ` + schema.CommandColumns + ` FROM commands
		WHERE agent_id = $1 AND state = 'queued' AND expires_at > $2 AND (NOT $3 OR type = 'remove')
		ORDER BY created_at, seq LIMIT $4
		FOR UPDATE SKIP LOCKED`
	sqlDeliver = `UPDATE commands SET state = 'delivered', updated_at = $1 WHERE id = ANY($2)`
)

// CheckIn implements device.AgentStore.
func (s *Store) CheckIn(ctx context.Context, id string, c device.CheckIn) ([]*device.Command, error) {
	ips, inv, applied, err := agentJSON(c.IPs, c.Inventory, c.AppliedPolicies)
	if err != nil {
		return nil, fmt.Errorf("check in agent %s: %w", id, err)
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
		h := pgText(c.InventoryHash)
		invHash = &h
	}
	id = pgText(id)
	var delivered []*device.Command
	err = s.write(ctx, func(tx pgx.Tx) error {
		delivered = nil
		if c.Inventory != nil && c.InventoryBase != "" {
			var stored string
			err := tx.QueryRow(ctx, `SELECT inventory_hash FROM agents WHERE id = $1 FOR NO KEY UPDATE`, id).Scan(&stored)
			if errors.Is(err, pgx.ErrNoRows) {
				return schema.NotFound("agent", id)
			}
			if err != nil {
				return err
			}
			if stored != c.InventoryBase {
				return errs.Conflictf("the inventory delta is based on %q but the server holds %q: send the full inventory", c.InventoryBase, stored)
			}
		}
		rings, err := findRings(ctx, tx)
		if err != nil {
			return err
		}
		now := ms(c.Time)
		tag, err := tx.Exec(ctx, sqlCheckIn,
			pgText(c.Hostname), pgText(c.OS.Platform), pgText(c.OS.Name), pgText(c.OS.Version), pgText(c.OS.Build), pgText(c.Arch),
			pgText(c.AgentVersion), c.Capability, ips, now, inv, invHash,
			pgText(fu.State), pgText(fu.Target), applied, c.RebootPending,
			nullString(device.RingFor(rings, c.Hostname, c.OS)), id)
		if err != nil {
			return err
		}
		removedOnly := false
		if tag.RowsAffected() == 0 {
			// Unknown, or removed: a removed agent hears only about its
			// removal, and not at all once that is over.
			var removed *int64
			err := tx.QueryRow(ctx, `SELECT removed_at FROM agents WHERE id = $1 FOR NO KEY UPDATE`, id).Scan(&removed)
			if errors.Is(err, pgx.ErrNoRows) {
				return schema.NotFound("agent", id)
			}
			if err != nil {
				return err
			}
			var active int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM commands
				WHERE agent_id = $1 AND type = 'remove' AND state IN `+schema.ActiveStates, id).Scan(&active); err != nil {
				return err
			}
			if active == 0 {
				return errs.Unauthorizedf("the agent has been removed")
			}
			if _, err := tx.Exec(ctx, `UPDATE agents SET last_seen_at = $1 WHERE id = $2`, now, id); err != nil {
				return err
			}
			removedOnly = true
		}
		rows, err := tx.Query(ctx, sqlQueuedCommands, id, now, removedOnly, c.MaxCommands)
		if err != nil {
			return err
		}
		cmds, err := scanCommands(rows)
		if err != nil || len(cmds) == 0 {
			return err
		}
		ids := make([]string, len(cmds))
		for i, cmd := range cmds {
			ids[i] = cmd.ID
			cmd.State = device.Delivered
			cmd.UpdatedAt = fromMS(now)
		}
		if _, err := tx.Exec(ctx, sqlDeliver, now, ids); err != nil {
			return err
		}
		delivered = cmds
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("check in agent %s: %w", id, err)
	}
	return delivered, nil
}
