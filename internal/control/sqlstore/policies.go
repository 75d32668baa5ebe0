package sqlstore

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
)

// CreatePolicy implements device.PolicyStore.
func (s *Store) CreatePolicy(ctx context.Context, p *device.Policy) (err error) {
	defer errs.Wrap(&err, "create policy %s", p.Name)
	return s.write(ctx, func(tx querier) error {
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
}

// UpdatePolicy implements device.PolicyStore. It locks the policy's row,
// so that versions follow each other.
func (s *Store) UpdatePolicy(ctx context.Context, id string, settings json.RawMessage, by string, now time.Time) (_ *device.Policy, err error) {
	defer errs.Wrap(&err, "update policy %s", id)
	return writeResult(ctx, s, func(tx querier) (*device.Policy, error) {
		p, err := findPolicy(ctx, tx, id, s.d.lockOf("p"))
		if err != nil {
			return nil, err
		}
		p.Version++
		p.Settings, p.CreatedBy, p.UpdatedAt = settings, by, fromMS(ms(now))
		if _, err := tx.Exec(ctx, `INSERT INTO policy_versions (policy_id, version, settings, created_by, created_at)
			VALUES (?, ?, ?, ?, ?)`, p.ID, p.Version, string(settings), by, ms(now)); err != nil {
			return nil, err
		}
		_, err = tx.Exec(ctx, `UPDATE policies SET version = ? WHERE id = ?`, p.Version, p.ID)
		return p, err
	})
}

// FindPolicyByID implements device.PolicyStore.
func (s *Store) FindPolicyByID(ctx context.Context, id string) (_ *device.Policy, err error) {
	defer errs.Wrap(&err, "find policy %s", id)
	return findPolicy(ctx, s.rq(), id, "")
}

// findPolicy returns a policy at its current version; lock is "" or a
// locking clause.
func findPolicy(ctx context.Context, q querier, id, lock string) (*device.Policy, error) {
	return findOne(ctx, q, scanPolicy, "policy", id, policySelect+` WHERE p.id = ? `+lock)
}

// FindPolicies implements device.PolicyStore.
func (s *Store) FindPolicies(ctx context.Context) (_ []*device.Policy, err error) {
	defer errs.Wrap(&err, "find policies")
	return queryAll(ctx, s.rq(), scanPolicy, policySelect+` ORDER BY p.name`)
}

// PolicyCompliance implements device.PolicyStore.
func (s *Store) PolicyCompliance(ctx context.Context, ids []string) (_ map[string]*device.Compliance, err error) {
	defer errs.Wrap(&err, "policy compliance")
	if len(ids) == 0 {
		return map[string]*device.Compliance{}, nil
	}
	var a args
	list := in(&a, ids)
	policyID := s.d.jsonField("params", "policyId")
	return readResult(ctx, s, func(tx querier) (map[string]*device.Compliance, error) {
		out := map[string]*device.Compliance{}
		err := eachRow(ctx, tx, func(row scanner) error {
			var id string
			if err := row.Scan(&id); err != nil {
				return err
			}
			out[id] = &device.Compliance{}
			return nil
		}, `SELECT id FROM policies WHERE id IN `+list, a...)
		if err != nil {
			return nil, err
		}
		err = eachRow(ctx, tx, func(row scanner) error {
			var id string
			var c device.Compliance
			if err := row.Scan(&id, &c.Compliant, &c.Noncompliant, &c.Unknown, &c.Outdated); err != nil {
				return err
			}
			if out[id] != nil {
				*out[id] = c
			}
			return nil
		}, `SELECT ap.policy_id,
				count(*) FILTER (WHERE ap.version >= p.version AND ap.compliant),
				count(*) FILTER (WHERE ap.version >= p.version AND NOT ap.compliant),
				count(*) FILTER (WHERE ap.version >= p.version AND ap.compliant IS NULL),
				count(*) FILTER (WHERE ap.version < p.version)
			FROM agent_policies ap
			JOIN policies p ON p.id = ap.policy_id
			JOIN agents a ON a.id = ap.agent_id AND a.removed_at IS NULL
			WHERE ap.policy_id IN `+list+` GROUP BY ap.policy_id`, a...)
		if err != nil {
			return nil, err
		}
		err = eachRow(ctx, tx, func(row scanner) error {
			var id string
			var n int
			if err := row.Scan(&id, &n); err != nil {
				return err
			}
			if out[id] != nil {
				out[id].Pending = n
			}
			return nil
		}, `SELECT `+policyID+`, count(DISTINCT agent_id) FROM commands
			WHERE type = 'apply-policy' AND state IN `+activeStates+` AND `+policyID+` IN `+list+`
			GROUP BY `+policyID, a...)
		return out, err
	})
}

// FindPolicyAgents implements device.PolicyStore.
func (s *Store) FindPolicyAgents(ctx context.Context, f device.PolicyAgentFilter) (_ []*device.PolicyAgent, err error) {
	defer errs.Wrap(&err, "find agents of policy %s", f.PolicyID)
	return readResult(ctx, s, func(tx querier) ([]*device.PolicyAgent, error) {
		p, err := findPolicy(ctx, tx, f.PolicyID, "")
		if err != nil {
			return nil, err
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
			return nil, errs.Invalidf("compliance state must be one of %s, got %q", strings.Join(device.ComplianceStates, ", "), f.State)
		}
		if f.After != nil {
			where = append(where, `(a.hostname, a.id) > (`+a.add(f.After.Hostname)+`, `+a.add(f.After.ID)+`)`)
		}
		query := a.selectWhere(`SELECT a.id, a.hostname, ap.version, ap.compliant, ap.message, a.last_seen_at
			FROM agent_policies ap JOIN agents a ON a.id = ap.agent_id`, where, `a.hostname, a.id`, f.Limit)
		return queryAll(ctx, tx, func(row scanner) (*device.PolicyAgent, error) {
			var pa device.PolicyAgent
			var seen int64
			if err := row.Scan(&pa.AgentID, &pa.Hostname, &pa.Version, &pa.Compliant, &pa.Message, &seen); err != nil {
				return nil, err
			}
			pa.LastSeenAt = fromMS(seen)
			pa.State = device.ComplianceState(pa.Version, p.Version, pa.Compliant)
			return &pa, nil
		}, query, a...)
	})
}
