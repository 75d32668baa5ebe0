package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/control/schema"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
)

// CreateRing implements device.RingStore.
func (s *Store) CreateRing(ctx context.Context, r *device.Ring) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM rings WHERE name = ?`, r.Name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return errs.Conflictf("ring %q exists", r.Name)
		}
		rule, err := ruleJSON(r.Rule)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO rings (name, position, description, created_at, rule) VALUES (?, ?, ?, ?, ?)`,
			r.Name, r.Position, r.Description, ms(r.CreatedAt), rule)
		if isUnique(err) {
			return errs.Conflictf("another ring has position %d", r.Position)
		}
		if err != nil || r.Rule == nil {
			return err
		}
		return reassignRings(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("create ring %s: %w", r.Name, err)
	}
	return nil
}

// UpdateRing implements device.RingStore.
func (s *Store) UpdateRing(ctx context.Context, r *device.Ring) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		rule, err := ruleJSON(r.Rule)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE rings SET position = ?, description = ?, rule = ? WHERE name = ?`,
			r.Position, r.Description, rule, r.Name)
		if isUnique(err) {
			return errs.Conflictf("another ring has position %d", r.Position)
		}
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errs.NotFoundf("ring %q not found", r.Name)
		}
		return reassignRings(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("update ring %s: %w", r.Name, err)
	}
	return nil
}

// ruleJSON encodes a ring rule for its column, nil as NULL.
func ruleJSON(r *device.RingRule) (any, error) {
	if r == nil {
		return nil, nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// scanRing reads the columns of schema.RingColumns.
func scanRing(row scanner) (*device.Ring, error) {
	var r device.Ring
	var created int64
	var rule sql.NullString
	if err := row.Scan(&r.Name, &r.Position, &r.Description, &created, &rule); err != nil {
		return nil, err
	}
	r.CreatedAt = fromMS(created)
	if rule.Valid {
		r.Rule = new(device.RingRule)
		if err := json.Unmarshal([]byte(rule.String), r.Rule); err != nil {
			return nil, fmt.Errorf("ring %s rule: %w", r.Name, err)
		}
	}
	return &r, nil
}

// FindRings implements device.RingStore.
func (s *Store) FindRings(ctx context.Context) ([]*device.Ring, error) {
	rings, err := findRings(ctx, s.db)
	if err != nil {
		return nil, fmt.Errorf("find rings: %w", err)
	}
	return rings, nil
}

// sqlFindRings selects every ring in order.
const sqlFindRings = `SELECT ` + schema.RingColumns + ` FROM rings ORDER BY position`

func findRings(ctx context.Context, q querier) ([]*device.Ring, error) {
	rows, err := q.QueryContext(ctx, sqlFindRings)
	if err != nil {
		return nil, err
	}
	return scanRings(rows)
}

// scanRings reads the rings of sqlFindRings and closes rows.
func scanRings(rows *sql.Rows) ([]*device.Ring, error) {
	defer rows.Close()
	var out []*device.Ring
	for rows.Next() {
		r, err := scanRing(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// FindRingByName implements device.RingStore.
func (s *Store) FindRingByName(ctx context.Context, name string) (*device.Ring, error) {
	r, err := findRing(ctx, s.db, name)
	if err != nil {
		return nil, fmt.Errorf("find ring %s: %w", name, err)
	}
	return r, nil
}

func findRing(ctx context.Context, q querier, name string) (*device.Ring, error) {
	r, err := scanRing(q.QueryRowContext(ctx, `SELECT `+schema.RingColumns+` FROM rings WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errs.NotFoundf("ring %q not found", name)
	}
	return r, err
}

// CreateRollout implements device.RolloutStore.
func (s *Store) CreateRollout(ctx context.Context, r *device.Rollout) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		all, err := findRings(ctx, tx)
		if err != nil {
			return err
		}
		order := map[string]int{}
		for _, ring := range all {
			order[ring.Name] = ring.Position
		}
		if len(r.Rings) == 0 {
			for _, ring := range all {
				r.Rings = append(r.Rings, ring.Name)
			}
		}
		if len(r.Rings) == 0 {
			return errs.Invalidf("there are no deployment rings to roll out to")
		}
		seen := map[string]bool{}
		for _, name := range r.Rings {
			if _, ok := order[name]; !ok {
				return errs.Invalidf("there is no ring %q", name)
			}
			if seen[name] {
				return errs.Invalidf("ring %q is listed twice", name)
			}
			seen[name] = true
		}
		sort.SliceStable(r.Rings, func(i, j int) bool { return order[r.Rings[i]] < order[r.Rings[j]] })
		if r.Kind == device.ApplyPolicy {
			p, err := findPolicy(ctx, tx, r.PolicyID)
			if errors.Is(err, errs.ErrNotFound) {
				return errs.Invalidf("there is no policy %s", r.PolicyID)
			}
			if err != nil {
				return err
			}
			r.PolicyVersion = p.Version
			if r.Params, err = json.Marshal(device.ApplyPolicyParams{PolicyID: p.ID, Version: p.Version, Settings: p.Settings}); err != nil {
				return err
			}
		}
		r.RingIndex, r.State = -1, device.RolloutPending
		rings, err := json.Marshal(r.Rings)
		if err != nil {
			return err
		}
		var policyVersion any
		if r.Kind == device.ApplyPolicy {
			policyVersion = r.PolicyVersion
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO rollouts (`+schema.RolloutColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.Name, string(r.Kind), nullBytes(r.Params), nullString(r.PolicyID), policyVersion, string(rings),
			r.RingIndex, string(r.State), r.CreatedBy, ms(r.CreatedAt), ms(r.UpdatedAt))
		if err != nil {
			return err
		}
		return insertRolloutAgents(ctx, tx, r.ID, r.Agents)
	})
	if err != nil {
		return fmt.Errorf("create rollout %s: %w", r.Name, err)
	}
	return nil
}

// FindRolloutByID implements device.RolloutStore.
func (s *Store) FindRolloutByID(ctx context.Context, id string) (*device.Rollout, error) {
	r, err := findRollout(ctx, s.db, id)
	if err != nil {
		return nil, fmt.Errorf("find rollout %s: %w", id, err)
	}
	return r, nil
}

func findRollout(ctx context.Context, q querier, id string) (*device.Rollout, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+schema.RolloutColumns+` FROM rollouts WHERE id = ?`, id)
	if err != nil {
		return nil, err
	}
	out, err := scanRollouts(rows)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, schema.NotFound("rollout", id)
	}
	return out[0], nil
}

// FindRollouts implements device.RolloutStore.
func (s *Store) FindRollouts(ctx context.Context, f device.RolloutFilter) ([]*device.Rollout, error) {
	var where []string
	var args []any
	if f.State != "" {
		where = append(where, `state = ?`)
		args = append(args, string(f.State))
	}
	if f.Before != "" {
		where = append(where, `(created_at, id) < (SELECT created_at, id FROM rollouts WHERE id = ?)`)
		args = append(args, f.Before)
	}
	query := `SELECT ` + schema.RolloutColumns + ` FROM rollouts`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	query += ` ORDER BY created_at DESC, id DESC`
	if f.Limit > 0 {
		query += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("find rollouts: %w", err)
	}
	out, err := scanRollouts(rows)
	if err != nil {
		return nil, fmt.Errorf("find rollouts: %w", err)
	}
	return out, nil
}

// AdvanceRollout implements device.RolloutStore.
func (s *Store) AdvanceRollout(ctx context.Context, id string, a device.Advance) (*device.Rollout, []*device.Command, error) {
	var r *device.Rollout
	var cmds []*device.Command
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		if r, err = findRollout(ctx, tx, id); err != nil {
			return err
		}
		if r.State == device.RolloutCompleted {
			return errs.Conflictf("rollout %s is completed", id)
		}
		if r.NextRing() == "" {
			return errs.Conflictf("every ring of rollout %s has been started: it completes when the commands of ring %s are over", id, r.CurrentRing())
		}
		if a.FromRing != "" && a.FromRing != r.CurrentRing() {
			cur := r.CurrentRing()
			if cur == "" {
				cur = "none (not started)"
			}
			return errs.Conflictf("rollout %s is at ring %s, not %s", id, cur, a.FromRing)
		}
		if cur := r.CurrentRing(); cur != "" {
			var active int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM commands
				WHERE rollout_id = ? AND rollout_ring = ? AND state IN `+schema.ActiveStates, id, cur).Scan(&active); err != nil {
				return err
			}
			if active > 0 {
				return errs.Conflictf("ring %s of rollout %s still has %d commands in progress", cur, id, active)
			}
		}
		next := r.NextRing()
		rows, err := tx.QueryContext(ctx, `SELECT id FROM agents WHERE ring = ? AND removed_at IS NULL
			AND (NOT EXISTS (SELECT 1 FROM rollout_agents WHERE rollout_id = ?)
				OR id IN (SELECT agent_id FROM rollout_agents WHERE rollout_id = ?))
			ORDER BY id`, next, id, id)
		if err != nil {
			return err
		}
		var agents []string
		for rows.Next() {
			var agentID string
			if err := rows.Scan(&agentID); err != nil {
				rows.Close()
				return err
			}
			agents = append(agents, agentID)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, agentID := range agents {
			c := device.NewCommand(agentID, r.Kind, r.Params, a.CreatedBy, a.Now)
			c.RolloutID, c.RolloutRing = r.ID, next
			if err := insertCommand(ctx, tx, c); err != nil {
				return err
			}
			cmds = append(cmds, c)
		}
		r.RingIndex++
		r.State = device.RolloutInProgress
		r.UpdatedAt = fromMS(ms(a.Now))
		if _, err = tx.ExecContext(ctx, `UPDATE rollouts SET ring_index = ?, state = ?, updated_at = ? WHERE id = ?`,
			r.RingIndex, string(r.State), ms(r.UpdatedAt), id); err != nil {
			return err
		}
		// A last ring without agents completes the rollout at once.
		if err := settleRollouts(ctx, tx, id, a.Now); err != nil {
			return err
		}
		r, err = findRollout(ctx, tx, id)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("advance rollout %s: %w", id, err)
	}
	return r, cmds, nil
}

// settleRollouts marks completed the in-progress rollouts (the one with
// the given id, or all when it is empty) whose last ring has started and
// has no active command left. Whatever ends commands calls it in the same
// transaction.
func settleRollouts(ctx context.Context, tx *sql.Tx, id string, now time.Time) error {
	query := `UPDATE rollouts SET state = 'completed', updated_at = ?
		WHERE state = 'in-progress' AND ring_index = json_array_length(rings) - 1
		AND NOT EXISTS (SELECT 1 FROM commands
			WHERE commands.rollout_id = rollouts.id AND commands.state IN ` + schema.ActiveStates + `)`
	args := []any{ms(now)}
	if id != "" {
		query += ` AND id = ?`
		args = append(args, id)
	}
	_, err := tx.ExecContext(ctx, query, args...)
	return err
}

// RolloutProgress implements device.RolloutStore.
func (s *Store) RolloutProgress(ctx context.Context, id string) ([]device.RingProgress, error) {
	var out []device.RingProgress
	err := s.read(ctx, func(tx *sql.Tx) error {
		r, err := findRollout(ctx, tx, id)
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT rollout_ring, state, count(*) FROM commands
			WHERE rollout_id = ? GROUP BY rollout_ring, state`, id)
		if err != nil {
			return err
		}
		defer rows.Close()
		counts := map[string]map[device.CommandState]int{}
		for rows.Next() {
			var ring, state string
			var n int
			if err := rows.Scan(&ring, &state, &n); err != nil {
				return err
			}
			if counts[ring] == nil {
				counts[ring] = map[device.CommandState]int{}
			}
			counts[ring][device.CommandState(state)] = n
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for i := 0; i <= r.RingIndex && i < len(r.Rings); i++ {
			states := counts[r.Rings[i]]
			if states == nil {
				states = map[device.CommandState]int{}
			}
			out = append(out, device.RingProgress{Ring: r.Rings[i], States: states})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rollout progress %s: %w", id, err)
	}
	return out, nil
}

func scanRollouts(rows *sql.Rows) ([]*device.Rollout, error) {
	defer rows.Close()
	var out []*device.Rollout
	for rows.Next() {
		var r device.Rollout
		var kind, state, rings string
		var params, policyID sql.NullString
		var policyVersion sql.NullInt64
		var created, updated int64
		if err := rows.Scan(&r.ID, &r.Name, &kind, &params, &policyID, &policyVersion, &rings, &r.RingIndex,
			&state, &r.CreatedBy, &created, &updated); err != nil {
			return nil, err
		}
		r.Kind, r.State = device.CommandType(kind), device.RolloutState(state)
		if params.Valid {
			r.Params = json.RawMessage(params.String)
		}
		r.PolicyID, r.PolicyVersion = policyID.String, int(policyVersion.Int64)
		if err := json.Unmarshal([]byte(rings), &r.Rings); err != nil {
			return nil, fmt.Errorf("rollout %s rings: %w", r.ID, err)
		}
		r.CreatedAt, r.UpdatedAt = fromMS(created), fromMS(updated)
		out = append(out, &r)
	}
	return out, rows.Err()
}
