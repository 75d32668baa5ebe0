package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/patchline/patchline/internal/alert"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
)

var _ alert.Store = (*Store)(nil)

const alertRuleColumns = `id, name, kind, threshold, webhook_url, secret, created_by, created_at`
const alertColumns = `id, rule_id, cve_id, body, created_at, state, attempts, next_attempt, delivered_at`

// CreateAlertRule implements alert.Store.
func (s *Store) CreateAlertRule(ctx context.Context, r *alert.Rule) error {
	_, err := s.wq().Exec(ctx, `INSERT INTO alert_rules (`+alertRuleColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.Name, string(r.Kind), r.Threshold, r.WebhookURL, r.Secret, r.CreatedBy, ms(r.CreatedAt))
	if _, ok := s.d.isUnique(err); ok {
		return errs.Conflictf("alert rule %s exists", r.ID)
	}
	return errs.Wrapf(err, "create alert rule")
}

// FindAlertRules implements alert.Store.
func (s *Store) FindAlertRules(ctx context.Context) (_ []*alert.Rule, err error) {
	defer errs.Wrap(&err, "find alert rules")
	return queryAll(ctx, s.rq(), scanAlertRule, `SELECT `+alertRuleColumns+` FROM alert_rules ORDER BY created_at DESC, id DESC`)
}

// FindAlertRuleByID implements alert.Store.
func (s *Store) FindAlertRuleByID(ctx context.Context, id string) (*alert.Rule, error) {
	r, err := scanAlertRule(s.rq().QueryRow(ctx, `SELECT `+alertRuleColumns+` FROM alert_rules WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errs.NotFoundf("no alert rule %s", id)
	}
	if err != nil {
		return nil, fmt.Errorf("find alert rule %s: %w", id, err)
	}
	return r, nil
}

func scanAlertRule(row scanner) (*alert.Rule, error) {
	var r alert.Rule
	var kind string
	var created int64
	if err := row.Scan(&r.ID, &r.Name, &kind, &r.Threshold, &r.WebhookURL, &r.Secret, &r.CreatedBy, &created); err != nil {
		return nil, err
	}
	r.Kind, r.CreatedAt = alert.Kind(kind), fromMS(created)
	return &r, nil
}

// DeleteAlertRule implements alert.Store.
func (s *Store) DeleteAlertRule(ctx context.Context, id string) error {
	err := s.write(ctx, func(tx querier) error {
		res, err := tx.Exec(ctx, `DELETE FROM alert_rules WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if rowsAffected(res) == 0 {
			return errs.NotFoundf("no alert rule %s", id)
		}
		_, err = tx.Exec(ctx, `DELETE FROM alert_seen WHERE rule_id = ?`, id)
		return err
	})
	if err != nil && !errors.Is(err, errs.ErrNotFound) {
		return fmt.Errorf("delete alert rule %s: %w", id, err)
	}
	return err
}

// AddAlerts implements alert.Store: one transaction per candidate, in
// which each agent is marked seen for the rule and CVE unless it was;
// concurrent replicas each mark an agent at most once between them.
func (s *Store) AddAlerts(ctx context.Context, candidates []alert.Candidate, build func(alert.Candidate, []alert.Agent) (*alert.Alert, error)) ([]*alert.Alert, error) {
	var out []*alert.Alert
	for _, c := range candidates {
		key, ok := cve.Key(c.CVE.CVEID)
		if !ok {
			continue
		}
		var created *alert.Alert
		err := s.write(ctx, func(tx querier) error {
			created = nil
			var named []alert.Agent
			for _, a := range c.Agents {
				res, err := tx.Exec(ctx, `INSERT INTO alert_seen (rule_id, cve_key, agent_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, c.Rule.ID, key, a.ID)
				if err != nil {
					return err
				}
				if rowsAffected(res) == 1 {
					named = append(named, a)
				}
			}
			if len(named) == 0 {
				return nil
			}
			a, err := build(c, named)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO alerts (`+alertColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				a.ID, a.RuleID, a.CVEID, string(a.Body), ms(a.CreatedAt), string(a.State), a.Attempts, msPtr(a.NextAttempt), msPtr(a.DeliveredAt)); err != nil {
				return err
			}
			created = a
			return nil
		})
		if err != nil {
			return out, fmt.Errorf("add alert of %s for %s: %w", c.CVE.CVEID, c.Rule.ID, err)
		}
		if created != nil {
			out = append(out, created)
		}
	}
	return out, nil
}

// FindAlerts implements alert.Store.
func (s *Store) FindAlerts(ctx context.Context, f alert.Filter) (_ []*alert.Alert, err error) {
	defer errs.Wrap(&err, "find alerts")
	var where []string
	var a args
	if f.RuleID != "" {
		where = append(where, `rule_id = `+a.add(f.RuleID))
	}
	if f.Before != nil {
		where = append(where, `(created_at, id) < (`+a.add(ms(f.Before.CreatedAt))+`, `+a.add(f.Before.ID)+`)`)
	}
	query := a.selectWhere(`SELECT `+alertColumns+` FROM alerts`, where, `created_at DESC, id DESC`, f.Limit)
	return queryAll(ctx, s.rq(), scanAlert, query, a...)
}

// FindAlertByID implements alert.Store.
func (s *Store) FindAlertByID(ctx context.Context, id string) (*alert.Alert, error) {
	out, err := readResult(ctx, s, func(tx querier) (*alert.Alert, error) {
		a, err := scanAlert(tx.QueryRow(ctx, `SELECT `+alertColumns+` FROM alerts WHERE id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return nil, errs.NotFoundf("no alert %s", id)
		}
		if err != nil {
			return nil, err
		}
		err = eachRow(ctx, tx, func(row scanner) error {
			var d alert.Delivery
			var at int64
			if err := row.Scan(&d.Attempt, &at, &d.Status, &d.Error); err != nil {
				return err
			}
			d.At = fromMS(at)
			a.Deliveries = append(a.Deliveries, d)
			return nil
		}, `SELECT attempt, at, status, error FROM alert_deliveries WHERE alert_id = ? ORDER BY attempt`, id)
		return a, err
	})
	if err != nil && !errors.Is(err, errs.ErrNotFound) {
		return nil, fmt.Errorf("find alert %s: %w", id, err)
	}
	return out, err
}

func scanAlert(row scanner) (*alert.Alert, error) {
	var a alert.Alert
	var body, state string
	var created int64
	var next, delivered *int64
	if err := row.Scan(&a.ID, &a.RuleID, &a.CVEID, &body, &created, &state, &a.Attempts, &next, &delivered); err != nil {
		return nil, err
	}
	a.Body, a.State, a.CreatedAt = []byte(body), alert.State(state), fromMS(created)
	a.NextAttempt, a.DeliveredAt = fromNullMS(next), fromNullMS(delivered)
	return &a, nil
}

// TakeDueAlerts implements alert.Store. On PostgreSQL the due rows are
// locked and skipped by other replicas until the lease is written.
func (s *Store) TakeDueAlerts(ctx context.Context, now time.Time, lease time.Duration, limit int) (_ []*alert.Alert, err error) {
	defer errs.Wrap(&err, "take due alerts")
	return writeResult(ctx, s, func(tx querier) ([]*alert.Alert, error) {
		out, err := queryAll(ctx, tx, scanAlert, `SELECT `+alertColumns+` FROM alerts WHERE state = ? AND next_attempt <= ?
			ORDER BY next_attempt, id LIMIT ? `+s.d.skipLocked, string(alert.Pending), ms(now), limit)
		if err != nil {
			return nil, err
		}
		until := ms(now.Add(lease))
		for _, a := range out {
			if _, err := tx.Exec(ctx, `UPDATE alerts SET next_attempt = ? WHERE id = ?`, until, a.ID); err != nil {
				return nil, err
			}
		}
		return out, nil
	})
}

// RecordDelivery implements alert.Store.
func (s *Store) RecordDelivery(ctx context.Context, id string, d alert.Delivery, state alert.State, next *time.Time) (err error) {
	defer errs.Wrap(&err, "record delivery of %s", id)
	return s.write(ctx, func(tx querier) error {
		if _, err := tx.Exec(ctx, `INSERT INTO alert_deliveries (alert_id, attempt, at, status, error) VALUES (?, ?, ?, ?, ?)`,
			id, d.Attempt, ms(d.At), d.Status, d.Error); err != nil {
			return err
		}
		var delivered *int64
		if state == alert.Delivered {
			at := ms(d.At)
			delivered = &at
		}
		_, err := tx.Exec(ctx, `UPDATE alerts SET state = ?, attempts = ?, next_attempt = ?, delivered_at = ? WHERE id = ?`,
			string(state), d.Attempt, msPtr(next), delivered, id)
		return err
	})
}
