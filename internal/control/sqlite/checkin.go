package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/patchline/patchline/internal/control/schema"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
)

// Check-ins are the most frequent write: a fleet of 300,000 agents at a
// 60-second interval is 5,000 a second. Committing is most of the cost of
// one, so check-ins that arrive while another commit is under way are
// applied together, in one transaction (group commit). Nothing waits for
// a batch to fill: a lone check-in commits at once.

// maxCheckInBatch bounds the check-ins of one transaction.
const maxCheckInBatch = 256

// The statements of a check-in, prepared once on the write connection.
const (
	sqlCheckIn = `UPDATE agents SET
		hostname = ?, os_platform = ?, os_name = ?, os_version = ?, os_build = ?, arch = ?,
		agent_version = ?, capability = ?, ips = ?, last_seen_at = ?,
		inventory = coalesce(?, inventory), inventory_hash = coalesce(?, inventory_hash),
		feature_upgrade = ?, feature_target = ?, applied_policies = ?, reboot_pending = ?,
		ring = CASE WHEN ring_source = 'rule' THEN ? ELSE ring END
		WHERE id = ? AND removed_at IS NULL`
	// sqlCheckInSame is sqlCheckIn for the usual check-in, which changes
	// neither the hostname, the ring nor the inventory: it leaves alone the
	// columns of the agents_list and agents_ring indexes, whose entries
	// SQLite would otherwise delete and insert again, and the inventory,
	// and matches no row when the hostname or the ring would change.
	sqlCheckInSame = `UPDATE agents SET
		os_platform = ?, os_name = ?, os_version = ?, os_build = ?, arch = ?,
		agent_version = ?, capability = ?, ips = ?, last_seen_at = ?,
		feature_upgrade = ?, feature_target = ?, applied_policies = ?, reboot_pending = ?
		WHERE id = ? AND removed_at IS NULL AND hostname = ? AND (ring_source != 'rule' OR ring IS ?)`
	sqlQueuedCommands = `SELECT ` + schema.CommandColumns + ` FROM commands
		WHERE agent_id = ? AND state = 'queued' AND expires_at > ? AND (? = 0 OR type = 'remove')
		ORDER BY created_at, rowid LIMIT ?` // rowid: the order they were queued in
	sqlDeliver = `UPDATE commands SET state = 'delivered', updated_at = ? WHERE id = ?`
)

// checkInRequest is one check-in waiting for its transaction.
type checkInRequest struct {
	id   string
	c    device.CheckIn
	args []any // of sqlCheckIn
	// same are the arguments of sqlCheckInSame, nil when the check-in
	// carries an inventory.
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
	var invHash any
	if c.Inventory != nil {
		invHash = c.InventoryHash
	}
	req := &checkInRequest{
		id: id,
		c:  c,
		args: []any{c.Hostname, c.OS.Platform, c.OS.Name, c.OS.Version, c.OS.Build, c.Arch,
			c.AgentVersion, c.Capability, ips, ms(c.Time), inv, invHash,
			fu.State, fu.Target, applied, c.RebootPending, nil, id},
		done: make(chan checkInResult, 1),
	}
	if c.Inventory == nil {
		a := req.args // the same values, not boxed again
		req.same = []any{a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[12], a[13], a[14], a[15], a[17], a[0], nil}
	}
	select {
	case s.checkIns <- req:
	case <-s.quit:
		return nil, fmt.Errorf("check in agent %s: the store is closed", id)
	case <-ctx.Done():
		return nil, fmt.Errorf("check in agent %s: %w", id, ctx.Err())
	}
	// Once handed over, the check-in is applied whatever happens to ctx:
	// waiting for it is short.
	r := <-req.done
	if r.err != nil {
		return nil, fmt.Errorf("check in agent %s: %w", id, r.err)
	}
	return r.cmds, nil
}

// checkInLoop applies check-ins in batches until quit is closed.
func (s *Store) checkInLoop() {
	defer s.loops.Done()
	for {
		var first *checkInRequest
		select {
		case first = <-s.checkIns:
		case <-s.quit:
			return
		}
		batch := []*checkInRequest{first}
	drain:
		for len(batch) < maxCheckInBatch {
			select {
			case r := <-s.checkIns:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		s.applyCheckIns(batch)
	}
}

// applyCheckIns applies a batch in one transaction. Errors of one check-in
// (an unknown or removed agent) write nothing and stay with it; a database
// error fails the transaction, and the check-ins are then tried one by one.
func (s *Store) applyCheckIns(batch []*checkInRequest) {
	ctx := context.Background()
	results := make([]checkInResult, len(batch))
	err := s.write(ctx, func(tx *sql.Tx) error {
		rows, err := tx.StmtContext(ctx, s.stmts.rings).QueryContext(ctx)
		if err != nil {
			return err
		}
		rings, err := scanRings(rows)
		if err != nil {
			return err
		}
		st := &checkInStmts{
			checkIn:        tx.StmtContext(ctx, s.stmts.checkIn),
			checkInSame:    tx.StmtContext(ctx, s.stmts.checkInSame),
			queuedCommands: tx.StmtContext(ctx, s.stmts.queuedCommands),
		}
		for i, r := range batch {
			ring := nullString(device.RingFor(rings, r.c.Hostname, r.c.OS))
			r.args[ringArg] = ring
			if r.same != nil {
				r.same[sameRingArg] = ring
			}
			cmds, err := s.checkInTx(ctx, tx, st, r)
			if err != nil && errs.StatusOf(err) == 500 {
				return err
			}
			results[i] = checkInResult{cmds, err}
		}
		return nil
	})
	if err != nil && len(batch) > 1 {
		for _, r := range batch {
			s.applyCheckIns([]*checkInRequest{r})
		}
		return
	}
	for i, r := range batch {
		if err != nil {
			results[i] = checkInResult{err: err}
		}
		r.done <- results[i]
	}
}

// checkInStmts are the prepared statements of check-ins within one
// transaction.
type checkInStmts struct {
	checkIn, checkInSame, queuedCommands *sql.Stmt
}

// checkInTx applies one check-in within tx.
func (s *Store) checkInTx(ctx context.Context, tx *sql.Tx, st *checkInStmts, r *checkInRequest) ([]*device.Command, error) {
	if r.c.Inventory != nil && r.c.InventoryBase != "" {
		var stored string
		err := tx.QueryRowContext(ctx, `SELECT inventory_hash FROM agents WHERE id = ?`, r.id).Scan(&stored)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, schema.NotFound("agent", r.id)
		}
		if err != nil {
			return nil, err
		}
		if stored != r.c.InventoryBase {
			return nil, errs.Conflictf("the inventory delta is based on %q but the server holds %q: send the full inventory", r.c.InventoryBase, stored)
		}
	}
	var n int64
	if r.same != nil {
		res, err := st.checkInSame.ExecContext(ctx, r.same...)
		if err != nil {
			return nil, err
		}
		n, _ = res.RowsAffected()
	}
	if n == 0 {
		res, err := st.checkIn.ExecContext(ctx, r.args...)
		if err != nil {
			return nil, err
		}
		n, _ = res.RowsAffected()
	}
	now := ms(r.c.Time)
	removedOnly := 0
	if n == 0 {
		// Unknown, or removed: a removed agent hears only about its
		// removal, and not at all once that is over.
		var removed sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT removed_at FROM agents WHERE id = ?`, r.id).Scan(&removed)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, schema.NotFound("agent", r.id)
		}
		if err != nil {
			return nil, err
		}
		var active int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM commands
			WHERE agent_id = ? AND type = 'remove' AND state IN `+schema.ActiveStates, r.id).Scan(&active); err != nil {
			return nil, err
		}
		if active == 0 {
			return nil, errs.Unauthorizedf("the agent has been removed")
		}
		if _, err := tx.ExecContext(ctx, `UPDATE agents SET last_seen_at = ? WHERE id = ?`, now, r.id); err != nil {
			return nil, err
		}
		removedOnly = 1
	}
	rows, err := st.queuedCommands.QueryContext(ctx, r.id, now, removedOnly, r.c.MaxCommands)
	if err != nil {
		return nil, err
	}
	delivered, err := scanCommands(rows)
	if err != nil || len(delivered) == 0 {
		return nil, err
	}
	deliver := tx.StmtContext(ctx, s.stmts.deliver)
	for _, cmd := range delivered {
		if _, err := deliver.ExecContext(ctx, now, cmd.ID); err != nil {
			return nil, err
		}
		cmd.State = device.Delivered
		cmd.UpdatedAt = fromMS(now)
	}
	return delivered, nil
}
