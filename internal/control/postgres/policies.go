package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/patchline/patchline/internal/control/schema"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
)

// CreatePolicy implements device.PolicyStore.
func (s *Store) CreatePolicy(ctx context.Context, p *device.Policy) error {
	err := s.write(ctx, func(tx pgx.Tx) error {
		p.Version = 1
		_, err := tx.Exec(ctx, `INSERT INTO policies (id, name, version, created_at) VALUES ($1, $2, $3, $4)`,
			p.ID, pgText(p.Name), p.Version, ms(p.CreatedAt))
		if _, ok := isUnique(err); ok {
			return errs.Conflictf("a policy named %q exists", p.Name)
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO policy_versions (policy_id, version, settings, created_by, created_at)
			VALUES ($1, $2, $3, $4, $5)`, p.ID, p.Version, pgText(string(p.Settings)), pgText(p.CreatedBy), ms(p.UpdatedAt))
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
	err := s.write(ctx, func(tx pgx.Tx) error {
		var err error
		if p, err = findPolicy(ctx, tx, id, `FOR NO KEY UPDATE OF p`); err != nil {
			return err
		}
		p.Version++
		p.Settings, p.CreatedBy, p.UpdatedAt = settings, by, fromMS(ms(now))
		if _, err := tx.Exec(ctx, `INSERT INTO policy_versions (policy_id, version, settings, created_by, created_at)
			VALUES ($1, $2, $3, $4, $5)`, p.ID, p.Version, pgText(string(settings)), pgText(by), ms(now)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE policies SET version = $1 WHERE id = $2`, p.Version, p.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update policy %s: %w", id, err)
	}
	return p, nil
}

// FindPolicyByID implements device.PolicyStore.
func (s *Store) FindPolicyByID(ctx context.Context, id string) (*device.Policy, error) {
	p, err := findPolicy(ctx, s.pool, id, "")
	if err != nil {
		return nil, fmt.Errorf("find policy %s: %w", id, err)
	}
	return p, nil
}

// findPolicy returns a policy at its current version; lock is "" or a
// locking clause.
func findPolicy(ctx context.Context, q querier, id, lock string) (*device.Policy, error) {
	p, err := schema.ScanPolicy(q.QueryRow(ctx, schema.PolicySelect+` WHERE p.id = $1 `+lock, pgText(id)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, schema.NotFound("policy", id)
	}
	return p, err
}

// FindPolicies implements device.PolicyStore.
func (s *Store) FindPolicies(ctx context.Context) ([]*device.Policy, error) {
	rows, err := s.pool.Query(ctx, schema.PolicySelect+` ORDER BY p.name`)
	if err != nil {
		return nil, fmt.Errorf("find policies: %w", err)
	}
	defer rows.Close()
	var out []*device.Policy
	for rows.Next() {
		p, err := schema.ScanPolicy(rows)
		if err != nil {
			return nil, fmt.Errorf("find policies: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
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
	clean := make([]string, len(ids))
	for i, id := range ids {
		clean[i] = pgText(id)
	}
	err := s.read(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id FROM policies WHERE id = ANY($1)`, clean)
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
			WHERE ap.policy_id = ANY($1) GROUP BY ap.policy_id`, clean)
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
		rows, err = tx.Query(ctx, `SELECT (params::jsonb) ->> 'policyId', count(DISTINCT agent_id) FROM commands
			WHERE type = 'apply-policy' AND state IN `+schema.ActiveStates+` AND (params::jsonb) ->> 'policyId' = ANY($1)
			GROUP BY (params::jsonb) ->> 'policyId'`, clean)
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
	err := s.read(ctx, func(tx pgx.Tx) error {
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
			where = append(where, `(a.hostname, a.id) > (`+a.add(pgText(f.After.Hostname))+`, `+a.add(pgText(f.After.ID))+`)`)
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
