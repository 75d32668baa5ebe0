package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"database/sql"

	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
)

// CreatePolicy implements device.PolicyStore.
func (s *Store) CreatePolicy(ctx context.Context, p *device.Policy) error {
	err := s.write(ctx, func(tx querier) error {
		p.Version = 1
		_, err := tx.Exec(ctx, `INSERT INTO policies (id, name, version, created_at) VALUES (?, ?, ?, ?)`,
			p.ID, p.Name, p.Version, ms(p.CreatedAt))
		if _, ok := s.d.isUnique(err); ok {
			return errs.Conflictf("a policy named %q exists", p.Name)
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO policy_versions (policy_id, version, settings, created_by, created_at)
			VALUES (?, ?, ?, ?, ?)`, p.ID, p.Version, string(p.Settings), p.CreatedBy, ms(p.UpdatedAt))
		return err
	})
	if err != nil {
		return fmt.Errorf("create policy %s: %w", p.Name, err)
	}
	return nil
}

// UpdatePolicy implements device.PolicyStore. It locks the policy's row,
// so that versions follow each other.
func (s *Store) UpdatePolicy(ctx context.Context, id string, settings json.RawMessage, by string, now time.Time) (*device.Policy, error) {
	var p *device.Policy
	err := s.write(ctx, func(tx querier) error {
		var err error
		if p, err = findPolicy(ctx, tx, id, s.d.lockOf("p")); err != nil {
			return err
		}
		p.Version++
		p.Settings, p.CreatedBy, p.UpdatedAt = settings, by, fromMS(ms(now))
		if _, err := tx.Exec(ctx, `INSERT INTO policy_versions (policy_id, version, settings, created_by, created_at)
			VALUES (?, ?, ?, ?, ?)`, p.ID, p.Version, string(settings), by, ms(now)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE policies SET version = ? WHERE id = ?`, p.Version, p.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update policy %s: %w", id, err)
	}
	return p, nil
}

// FindPolicyByID implements device.PolicyStore.
func (s *Store) FindPolicyByID(ctx context.Context, id string) (*device.Policy, error) {
	p, err := findPolicy(ctx, s.rq(), id, "")
	if err != nil {
		return nil, fmt.Errorf("find policy %s: %w", id, err)
	}
	return p, nil
}

// findPolicy returns a policy at its current version; lock is "" or a
// locking clause.
func findPolicy(ctx context.Context, q querier, id, lock string) (*device.Policy, error) {
	p, err := scanPolicy(q.QueryRow(ctx, policySelect+` WHERE p.id = ? `+lock, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("policy", id)
	}
	return p, err
}

// FindPolicies implements device.PolicyStore.
func (s *Store) FindPolicies(ctx context.Context) ([]*device.Policy, error) {
	out, err := queryAll(ctx, s.rq(), scanPolicy, policySelect+` ORDER BY p.name`)
	if err != nil {
		return nil, fmt.Errorf("find policies: %w", err)
	}
	return out, nil
}

// PolicyCompliance implements device.PolicyStore.
func (s *Store) PolicyCompliance(ctx context.Context, ids []string) (map[string]*device.Compliance, error) {
	out := map[string]*device.Compliance{}
	if len(ids) == 0 {
		return out, nil
	}
	var a args
	list := in(&a, ids)
	policyID := s.d.jsonField("params", "policyId")
	err := s.read(ctx, func(tx querier) error {
		rows, err := tx.Query(ctx, `SELECT id FROM policies WHERE id IN `+list, a...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			out[id] = &device.Compliance{}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT ap.policy_id,
				count(*) FILTER (WHERE ap.version >= p.version AND ap.compliant),
				count(*) FILTER (WHERE ap.version >= p.version AND NOT ap.compliant),
				count(*) FILTER (WHERE ap.version >= p.version AND ap.compliant IS NULL),
				count(*) FILTER (WHERE ap.version < p.version)
			FROM agent_policies ap
			JOIN policies p ON p.id = ap.policy_id
			JOIN agents a ON a.id = ap.agent_id AND a.removed_at IS NULL
			WHERE ap.policy_id IN `+list+` GROUP BY ap.policy_id`, a...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			var c device.Compliance
			if err := rows.Scan(&id, &c.Compliant, &c.Noncompliant, &c.Unknown, &c.Outdated); err != nil {
				rows.Close()
				return err
			}
			if out[id] != nil {
				*out[id] = c
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT `+policyID+`, count(DISTINCT agent_id) FROM commands
			WHERE type = 'apply-policy' AND state IN `+activeStates+` AND `+policyID+` IN `+list+`
			GROUP BY `+policyID, a...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var n int
			if err := rows.Scan(&id, &n); err != nil {
				return err
			}
			if out[id] != nil {
				out[id].Pending = n
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("policy compliance: %w", err)
	}
	return out, nil
}

// FindPolicyAgents implements device.PolicyStore.
func (s *Store) FindPolicyAgents(ctx context.Context, f device.PolicyAgentFilter) ([]*device.PolicyAgent, error) {
	var out []*device.PolicyAgent
	err := s.read(ctx, func(tx querier) error {
		p, err := findPolicy(ctx, tx, f.PolicyID, "")
		if err != nil {
			return err
		}
		var a args
		where := []string{`ap.policy_id = ` + a.add(p.ID), `a.removed_at IS NULL`}
		switch f.State {
		case device.ComplianceOutdated:
			where = append(where, `ap.version < `+a.add(p.Version))
		case device.ComplianceCompliant:
			where = append(where, `ap.version >= `+a.add(p.Version)+` AND ap.compliant`)
		case device.ComplianceNoncompliant:
			where = append(where, `ap.version >= `+a.add(p.Version)+` AND NOT ap.compliant`)
		case device.ComplianceUnknown:
			where = append(where, `ap.version >= `+a.add(p.Version)+` AND ap.compliant IS NULL`)
		case "":
		default:
			return errs.Invalidf("compliance state must be one of %s, got %q", strings.Join(device.ComplianceStates, ", "), f.State)
		}
		if f.After != nil {
			where = append(where, `(a.hostname, a.id) > (`+a.add(f.After.Hostname)+`, `+a.add(f.After.ID)+`)`)
		}
		query := `SELECT a.id, a.hostname, ap.version, ap.compliant, ap.message, a.last_seen_at
			FROM agent_policies ap JOIN agents a ON a.id = ap.agent_id
			WHERE ` + strings.Join(where, ` AND `) + ` ORDER BY a.hostname, a.id`
		if f.Limit > 0 {
			query += ` LIMIT ` + a.add(f.Limit)
		}
		rows, err := tx.Query(ctx, query, a...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var pa device.PolicyAgent
			var seen int64
			if err := rows.Scan(&pa.AgentID, &pa.Hostname, &pa.Version, &pa.Compliant, &pa.Message, &seen); err != nil {
				return err
			}
			pa.LastSeenAt = fromMS(seen)
			pa.State = device.ComplianceState(pa.Version, p.Version, pa.Compliant)
			out = append(out, &pa)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("find agents of policy %s: %w", f.PolicyID, err)
	}
	return out, nil
}
