package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"database/sql"

	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
)

// CreateCommands implements device.CommandStore. It locks the row of each
// agent, so that two replicas queueing with skipActive do not both queue.
func (s *Store) CreateCommands(ctx context.Context, cmds []*device.Command, skipActive bool) (_ []*device.Command, err error) {
	defer errs.Wrap(&err, "create commands")
	return writeResult(ctx, s, func(tx querier) ([]*device.Command, error) {
		var created []*device.Command
		for _, c := range cmds {
			var removed *int64
			err := tx.QueryRow(ctx, `SELECT removed_at FROM agents WHERE id = ? `+s.d.lockRow, c.AgentID).Scan(&removed)
			if errors.Is(err, sql.ErrNoRows) || err == nil && removed != nil {
				return nil, notFound("agent", c.AgentID)
			}
			if err != nil {
				return nil, err
			}
			if skipActive {
				var n int
				if err := tx.QueryRow(ctx, `SELECT count(*) FROM commands
					WHERE agent_id = ? AND type = ? AND state IN `+activeStates, c.AgentID, string(c.Type)).Scan(&n); err != nil {
					return nil, err
				}
				if n > 0 {
					continue
				}
			}
			if err := s.insertCommand(ctx, tx, c); err != nil {
				return nil, err
			}
			created = append(created, c)
		}
		return created, nil
	})
}

func (s *Store) insertCommand(ctx context.Context, tx querier, c *device.Command) error {
	result, err := nullJSON(c.Result)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO commands (`+commandColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.AgentID, string(c.Type), string(c.State), nullBytes(c.Params), result, c.CreatedBy,
		ms(c.CreatedAt), ms(c.UpdatedAt), ms(c.ExpiresAt), nullString(c.RolloutID), nullString(c.RolloutRing))
	if _, ok := s.d.isUnique(err); ok {
		return errs.Conflictf("command %s exists", c.ID)
	}
	return err
}

// FindCommandByID implements device.CommandStore.
func (s *Store) FindCommandByID(ctx context.Context, id string) (_ *device.Command, err error) {
	defer errs.Wrap(&err, "find command %s", id)
	return findCommand(ctx, s.rq(), id, "")
}

// findCommand returns a command; lock is "" or a locking clause.
func findCommand(ctx context.Context, q querier, id, lock string) (*device.Command, error) {
	return findOne(ctx, q, scanCommand, "command", id, `SELECT `+commandColumns+` FROM commands WHERE id = ? `+lock)
}

// FindCommands implements device.CommandStore.
func (s *Store) FindCommands(ctx context.Context, f device.CommandFilter) (_ []*device.Command, err error) {
	defer errs.Wrap(&err, "find commands")
	var where []string
	var a args
	if f.AgentID != "" {
		where = append(where, `agent_id = `+a.add(f.AgentID))
	}
	if f.Type != "" {
		where = append(where, `type = `+a.add(string(f.Type)))
	}
	if len(f.States) > 0 {
		where = append(where, `state IN `+in(&a, f.States))
	}
	if f.RolloutID != "" {
		where = append(where, `rollout_id = `+a.add(f.RolloutID))
	}
	if f.Before != nil {
		where = append(where, `(created_at, id) < (`+a.add(ms(f.Before.CreatedAt))+`, `+a.add(f.Before.ID)+`)`)
	}
	query := a.selectWhere(`SELECT `+commandColumns+` FROM commands`, where, `created_at DESC, id DESC`, f.Limit)
	return queryAll(ctx, s.rq(), scanCommand, query, a...)
}

// ReportCommand implements device.CommandStore.
func (s *Store) ReportCommand(ctx context.Context, agentID, id string, r device.Report) (_ *device.Command, err error) {
	defer errs.Wrap(&err, "report command %s", id)
	return writeResult(ctx, s, func(tx querier) (*device.Command, error) {
		c, err := findCommand(ctx, tx, id, s.d.lockRow)
		if err != nil {
			return nil, err
		}
		if c.AgentID != agentID {
			return nil, notFound("command", id)
		}
		if !device.CanTransition(c.State, r.State) {
			return nil, errs.Conflictf("command %s is %s and cannot become %s", id, c.State, r.State)
		}
		if err := setCommandState(ctx, tx, c, r.State, r.Result, r.Time); err != nil {
			return nil, err
		}
		if c.RolloutID != "" && c.State.Final() {
			return c, s.settleRollouts(ctx, tx, c.RolloutID, r.Time)
		}
		return c, nil
	})
}

// setCommandState moves c to state st, with result when not nil, at now.
func setCommandState(ctx context.Context, tx querier, c *device.Command, st device.CommandState, result *device.Result, now time.Time) error {
	if result != nil {
		c.Result = result
	}
	res, err := nullJSON(c.Result)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE commands SET state = ?, result = ?, updated_at = ? WHERE id = ?`,
		string(st), res, ms(now), c.ID); err != nil {
		return err
	}
	c.State, c.UpdatedAt = st, fromMS(ms(now))
	return nil
}

// CancelCommand implements device.CommandStore.
func (s *Store) CancelCommand(ctx context.Context, id string, now time.Time) (_ *device.Command, err error) {
	defer errs.Wrap(&err, "cancel command %s", id)
	return writeResult(ctx, s, func(tx querier) (*device.Command, error) {
		c, err := findCommand(ctx, tx, id, s.d.lockRow)
		if err != nil {
			return nil, err
		}
		if !device.CanTransition(c.State, device.Canceled) {
			return nil, errs.Conflictf("command %s is %s and can no longer be canceled", id, c.State)
		}
		if err := setCommandState(ctx, tx, c, device.Canceled, &device.Result{Message: "canceled"}, now); err != nil {
			return nil, err
		}
		if c.RolloutID != "" {
			return c, s.settleRollouts(ctx, tx, c.RolloutID, now)
		}
		return c, nil
	})
}

// ExpireCommands implements device.CommandStore. Replicas may sweep at the
// same time: the second finds the commands the first expired no longer
// active.
func (s *Store) ExpireCommands(ctx context.Context, now time.Time) (_ int, err error) {
	defer errs.Wrap(&err, "expire commands")
	return writeResult(ctx, s, func(tx querier) (int, error) {
		result, _ := json.Marshal(device.Result{Message: "expired: the agent did not finish it in time"})
		tag, err := tx.Exec(ctx, `UPDATE commands SET state = 'expired', result = coalesce(result, ?), updated_at = ?
			WHERE state IN `+activeStates+` AND expires_at <= ?`, string(result), ms(now), ms(now))
		if err != nil {
			return 0, err
		}
		n := int(rowsAffected(tag))
		if n == 0 {
			return 0, nil
		}
		return n, s.settleRollouts(ctx, tx, "", now)
	})
}

// SaveLogBundle implements device.CommandStore.
func (s *Store) SaveLogBundle(ctx context.Context, b *device.LogBundle) (err error) {
	defer errs.Wrap(&err, "save log bundle of %s", b.CommandID)
	return s.write(ctx, func(tx querier) error {
		c, err := findCommand(ctx, tx, b.CommandID, s.d.lockRow)
		if err != nil {
			return err
		}
		if c.AgentID != b.AgentID || c.Type != device.CollectLogs {
			return notFound("collect-logs command", b.CommandID)
		}
		if c.State.Final() {
			return errs.Conflictf("command %s is %s", c.ID, c.State)
		}
		_, err = tx.Exec(ctx, `INSERT INTO log_bundles (command_id, agent_id, content_type, size, sha256, content, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, c.ID, c.AgentID, b.ContentType, b.Size, b.SHA256, b.Content, ms(b.CreatedAt))
		if _, ok := s.d.isUnique(err); ok {
			return errs.Conflictf("command %s already has a log bundle", c.ID)
		}
		return err
	})
}

// FindLogBundle implements device.CommandStore.
func (s *Store) FindLogBundle(ctx context.Context, commandID string) (*device.LogBundle, error) {
	var b device.LogBundle
	var created int64
	err := s.rq().QueryRow(ctx, `SELECT command_id, agent_id, content_type, size, sha256, content, created_at
		FROM log_bundles WHERE command_id = ?`, commandID).
		Scan(&b.CommandID, &b.AgentID, &b.ContentType, &b.Size, &b.SHA256, &b.Content, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errs.NotFoundf("command %s has no log bundle", commandID)
	}
	if err != nil {
		return nil, fmt.Errorf("find log bundle of %s: %w", commandID, err)
	}
	b.CreatedAt = fromMS(created)
	return &b, nil
}

// scanCommand reads the columns of commandColumns.
func scanCommand(row scanner) (*device.Command, error) {
	var c device.Command
	var params, result, rolloutID, rolloutRing *string
	var typ, state string
	var created, updated, expires int64
	if err := row.Scan(&c.ID, &c.AgentID, &typ, &state, &params, &result, &c.CreatedBy,
		&created, &updated, &expires, &rolloutID, &rolloutRing); err != nil {
		return nil, err
	}
	c.Type, c.State = device.CommandType(typ), device.CommandState(state)
	c.CreatedAt, c.UpdatedAt, c.ExpiresAt = fromMS(created), fromMS(updated), fromMS(expires)
	c.RolloutID, c.RolloutRing = str(rolloutID), str(rolloutRing)
	if params != nil {
		c.Params = json.RawMessage(*params)
	}
	if result != nil {
		c.Result = new(device.Result)
		if err := json.Unmarshal([]byte(*result), c.Result); err != nil {
			return nil, fmt.Errorf("command %s result: %w", c.ID, err)
		}
	}
	return &c, nil
}
