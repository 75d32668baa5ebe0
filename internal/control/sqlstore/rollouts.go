package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"database/sql"

	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
)

// ringConflict maps a violated constraint of rings to its error.
func (s *Store) ringConflict(err error, r *device.Ring) error {
	name, ok := s.d.isUnique(err)
	switch {
	case !ok:
		return err
	case name == "rings_pkey" || strings.Contains(name, "rings.name"):
		return errs.Conflictf("ring %q exists", r.Name)
	}
	return errs.Conflictf("another ring has position %d", r.Position)
}

// CreateRing implements device.RingStore.
func (s *Store) CreateRing(ctx context.Context, r *device.Ring) (err error) {
	defer errs.Wrap(&err, "create ring %s", r.Name)
	return s.write(ctx, func(tx querier) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM rings WHERE name = ?`, r.Name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return errs.Conflictf("ring %q exists", r.Name)
		}
		rule, err := nullJSON(r.Rule)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO rings (name, position, description, created_at, rule) VALUES (?, ?, ?, ?, ?)`,
			r.Name, r.Position, r.Description, ms(r.CreatedAt), rule)
		if err != nil {
			return s.ringConflict(err, r)
		}
		if r.Rule == nil {
			return nil
		}
		return reassignRings(ctx, tx)
	})
}

// UpdateRing implements device.RingStore.
func (s *Store) UpdateRing(ctx context.Context, r *device.Ring) (err error) {
	defer errs.Wrap(&err, "update ring %s", r.Name)
	return s.write(ctx, func(tx querier) error {
		rule, err := nullJSON(r.Rule)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE rings SET position = ?, description = ?, rule = ? WHERE name = ?`,
			r.Position, r.Description, rule, r.Name)
		if err != nil {
			return s.ringConflict(err, r)
		}
		if rowsAffected(tag) == 0 {
			return errs.NotFoundf("ring %q not found", r.Name)
		}
		return reassignRings(ctx, tx)
	})
}

// scanRing reads the columns of ringColumns.
func scanRing(row scanner) (*device.Ring, error) {
	var r device.Ring
	var created int64
	var rule *string
	if err := row.Scan(&r.Name, &r.Position, &r.Description, &created, &rule); err != nil {
		return nil, err
	}
	r.CreatedAt = fromMS(created)
	if rule != nil {
		r.Rule = new(device.RingRule)
		if err := json.Unmarshal([]byte(*rule), r.Rule); err != nil {
			return nil, fmt.Errorf("ring %s rule: %w", r.Name, err)
		}
	}
	return &r, nil
}

// FindRings implements device.RingStore.
func (s *Store) FindRings(ctx context.Context) (_ []*device.Ring, err error) {
	defer errs.Wrap(&err, "find rings")
	return findRings(ctx, s.rq())
}

// sqlFindRings selects every ring in order.
const sqlFindRings = `SELECT ` + ringColumns + ` FROM rings ORDER BY position`

func findRings(ctx context.Context, q querier) ([]*device.Ring, error) {
	return queryAll(ctx, q, scanRing, sqlFindRings)
}

// FindRingByName implements device.RingStore.
func (s *Store) FindRingByName(ctx context.Context, name string) (_ *device.Ring, err error) {
	defer errs.Wrap(&err, "find ring %s", name)
	return findRing(ctx, s.rq(), name)
}

func findRing(ctx context.Context, q querier, name string) (*device.Ring, error) {
	r, err := scanRing(q.QueryRow(ctx, `SELECT `+ringColumns+` FROM rings WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errs.NotFoundf("ring %q not found", name)
	}
	return r, err
}

// CreateRollout implements device.RolloutStore.
func (s *Store) CreateRollout(ctx context.Context, r *device.Rollout) (err error) {
	defer errs.Wrap(&err, "create rollout %s", r.Name)
	given := r.Rings
	return s.write(ctx, func(tx querier) error {
		r.Rings = given
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
		r.Rings = append([]string(nil), r.Rings...)
		sort.SliceStable(r.Rings, func(i, j int) bool { return order[r.Rings[i]] < order[r.Rings[j]] })
		if r.Kind == device.ApplyPolicy {
			p, err := findPolicy(ctx, tx, r.PolicyID, "")
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
		var policyVersion *int
		if r.Kind == device.ApplyPolicy {
			policyVersion = &r.PolicyVersion
		}
		_, err = tx.Exec(ctx, `INSERT INTO rollouts (`+rolloutColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.Name, string(r.Kind), nullBytes(r.Params), nullString(r.PolicyID), policyVersion, string(rings),
			r.RingIndex, string(r.State), r.CreatedBy, ms(r.CreatedAt), ms(r.UpdatedAt))
		if err != nil {
			return err
		}
		return s.insertRolloutAgents(ctx, tx, r.ID, r.Agents)
	})
}

// FindRolloutByID implements device.RolloutStore.
func (s *Store) FindRolloutByID(ctx context.Context, id string) (_ *device.Rollout, err error) {
	defer errs.Wrap(&err, "find rollout %s", id)
	return findRollout(ctx, s.rq(), id, "")
}

// findRollout returns a rollout; lock is "" or a locking clause.
func findRollout(ctx context.Context, q querier, id, lock string) (*device.Rollout, error) {
	return findOne(ctx, q, scanRollout, "rollout", id, `SELECT `+rolloutColumns+` FROM rollouts WHERE id = ? `+lock)
}

// FindRollouts implements device.RolloutStore.
func (s *Store) FindRollouts(ctx context.Context, f device.RolloutFilter) (_ []*device.Rollout, err error) {
	defer errs.Wrap(&err, "find rollouts")
	var where []string
	var a args
	if f.State != "" {
		where = append(where, `state = `+a.add(string(f.State)))
	}
	if f.Before != "" {
		where = append(where, `(created_at, id) < (SELECT created_at, id FROM rollouts WHERE id = `+a.add(f.Before)+`)`)
	}
	query := a.selectWhere(`SELECT `+rolloutColumns+` FROM rollouts`, where, `created_at DESC, id DESC`, f.Limit)
	return queryAll(ctx, s.rq(), scanRollout, query, a...)
}

// AdvanceRollout implements device.RolloutStore. It locks the rollout's
// row, so that two replicas cannot both start its next ring.
func (s *Store) AdvanceRollout(ctx context.Context, id string, a device.Advance) (*device.Rollout, []*device.Command, error) {
	var r *device.Rollout
	var cmds []*device.Command
	err := s.write(ctx, func(tx querier) error {
		cmds = nil
		var err error
		if r, err = findRollout(ctx, tx, id, s.d.lockRow); err != nil {
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
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM commands
				WHERE rollout_id = ? AND rollout_ring = ? AND state IN `+activeStates, r.ID, cur).Scan(&active); err != nil {
				return err
			}
			if active > 0 {
				return errs.Conflictf("ring %s of rollout %s still has %d commands in progress", cur, id, active)
			}
		}
		next := r.NextRing()
		agents, err := queryAll(ctx, tx, scanString, `SELECT id FROM agents WHERE ring = ? AND removed_at IS NULL
			AND (NOT EXISTS (SELECT 1 FROM rollout_agents WHERE rollout_id = ?)
				OR id IN (SELECT agent_id FROM rollout_agents WHERE rollout_id = ?))
			ORDER BY id`, next, r.ID, r.ID)
		if err != nil {
			return err
		}
		for _, agentID := range agents {
			c := device.NewCommand(agentID, r.Kind, r.Params, a.CreatedBy, a.Now)
			c.RolloutID, c.RolloutRing = r.ID, next
			if err := s.insertCommand(ctx, tx, c); err != nil {
				return err
			}
			cmds = append(cmds, c)
		}
		r.RingIndex++
		r.State = device.RolloutInProgress
		r.UpdatedAt = fromMS(ms(a.Now))
		if _, err = tx.Exec(ctx, `UPDATE rollouts SET ring_index = ?, state = ?, updated_at = ? WHERE id = ?`,
			r.RingIndex, string(r.State), ms(r.UpdatedAt), r.ID); err != nil {
			return err
		}
		// A last ring without agents completes the rollout at once.
		if err := s.settleRollouts(ctx, tx, r.ID, a.Now); err != nil {
			return err
		}
		r, err = findRollout(ctx, tx, r.ID, "")
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
func (s *Store) settleRollouts(ctx context.Context, tx querier, id string, now time.Time) error {
	var a args
	query := `UPDATE rollouts SET state = 'completed', updated_at = ` + a.add(ms(now)) + `
		WHERE state = 'in-progress' AND ring_index = ` + s.d.jsonLength("rings") + ` - 1
		AND NOT EXISTS (SELECT 1 FROM commands
			WHERE commands.rollout_id = rollouts.id AND commands.state IN ` + activeStates + `)`
	if id != "" {
		query += ` AND id = ` + a.add(id)
	}
	_, err := tx.Exec(ctx, query, a...)
	return err
}

// RolloutProgress implements device.RolloutStore.
func (s *Store) RolloutProgress(ctx context.Context, id string) (_ []device.RingProgress, err error) {
	defer errs.Wrap(&err, "rollout progress %s", id)
	return readResult(ctx, s, func(tx querier) ([]device.RingProgress, error) {
		r, err := findRollout(ctx, tx, id, "")
		if err != nil {
			return nil, err
		}
		counts := map[string]map[device.CommandState]int{}
		err = eachRow(ctx, tx, func(row scanner) error {
			var ring, state string
			var n int
			if err := row.Scan(&ring, &state, &n); err != nil {
				return err
			}
			if counts[ring] == nil {
				counts[ring] = map[device.CommandState]int{}
			}
			counts[ring][device.CommandState(state)] = n
			return nil
		}, `SELECT rollout_ring, state, count(*) FROM commands WHERE rollout_id = ? GROUP BY rollout_ring, state`, r.ID)
		if err != nil {
			return nil, err
		}
		var out []device.RingProgress
		for i := 0; i <= r.RingIndex && i < len(r.Rings); i++ {
			states := counts[r.Rings[i]]
			if states == nil {
				states = map[device.CommandState]int{}
			}
			out = append(out, device.RingProgress{Ring: r.Rings[i], States: states})
		}
		return out, nil
	})
}

// scanRollout reads the columns of rolloutColumns.
func scanRollout(row scanner) (*device.Rollout, error) {
	var r device.Rollout
	var kind, state, rings string
	var params, policyID *string
	var policyVersion *int
	var created, updated int64
	if err := row.Scan(&r.ID, &r.Name, &kind, &params, &policyID, &policyVersion, &rings, &r.RingIndex,
		&state, &r.CreatedBy, &created, &updated); err != nil {
		return nil, err
	}
	r.Kind, r.State = device.CommandType(kind), device.RolloutState(state)
	if params != nil {
		r.Params = json.RawMessage(*params)
	}
	r.PolicyID = str(policyID)
	if policyVersion != nil {
		r.PolicyVersion = *policyVersion
	}
	if err := json.Unmarshal([]byte(rings), &r.Rings); err != nil {
		return nil, fmt.Errorf("rollout %s rings: %w", r.ID, err)
	}
	r.CreatedAt, r.UpdatedAt = fromMS(created), fromMS(updated)
	return &r, nil
}

// insertRolloutAgents stores the agents a rollout targets; none means
// every agent of its rings.
func (s *Store) insertRolloutAgents(ctx context.Context, tx querier, rolloutID string, agents []string) error {
	rows := make([][]any, 0, len(agents))
	seen := map[string]bool{}
	for _, a := range agents {
		if !seen[a] {
			seen[a] = true
			rows = append(rows, []any{rolloutID, a})
		}
	}
	return s.insertRows(ctx, tx, "rollout_agents", "rollout_id, agent_id", doNothing, rows)
}
