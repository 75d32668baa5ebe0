package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/patchline/patchline/internal/control/schema"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/exposure"
)

var _ exposure.Store = (*Store)(nil)

// HasAgents implements exposure.Store.
func (s *Store) HasAgents(ctx context.Context) (bool, error) {
	var has bool
	err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM agents WHERE removed_at IS NULL)`).Scan(&has)
	if err != nil {
		return false, fmt.Errorf("look for agents: %w", err)
	}
	return has, nil
}

// PendingExposure implements exposure.Store. A removed agent comes with
// an empty inventory, so that its findings are cleared.
func (s *Store) PendingExposure(ctx context.Context, limit int) ([]exposure.Pending, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT q.agent_id, q.token, coalesce(a.inventory, ''), a.removed_at IS NOT NULL OR a.id IS NULL
		FROM exposure_queue q LEFT JOIN agents a ON a.id = q.agent_id
		ORDER BY q.agent_id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("pending exposure: %w", err)
	}
	defer rows.Close()
	var out []exposure.Pending
	for rows.Next() {
		var (
			p       exposure.Pending
			inv     string
			removed bool
		)
		if err := rows.Scan(&p.AgentID, &p.Token, &inv, &removed); err != nil {
			return nil, fmt.Errorf("pending exposure: %w", err)
		}
		if !removed && inv != "" {
			if err := json.Unmarshal([]byte(inv), &p.Inventory); err != nil {
				return nil, fmt.Errorf("pending exposure: inventory of agent %s: %w", p.AgentID, err)
			}
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// The statements of PutExposure, prepared at Open (see preparedTx): it
// runs them for every agent whose inventory changed, many per finding.
const (
	sqlAgentStatuses = `SELECT cve_key, min(status) FROM agent_vulnerabilities WHERE agent_id = ? GROUP BY cve_key`
	sqlAgentFixes    = `SELECT DISTINCT cve_key, ecosystem, product, fixed, kb, eol_from
		FROM agent_vulnerabilities WHERE agent_id = ? AND status = 'affected'`
	sqlDeleteAgentVulnerabilities = `DELETE FROM agent_vulnerabilities WHERE agent_id = ?`
	sqlInsertAgentVulnerability   = `INSERT OR IGNORE INTO agent_vulnerabilities
		(agent_id, cve_key, cve_id, ecosystem, product, package, installed, fixed, kb, status, reason, eol_from, eoes_from)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlDeleteAgentProducts = `DELETE FROM agent_products WHERE agent_id = ?`
	sqlInsertAgentProduct  = `INSERT OR IGNORE INTO agent_products (product_key, agent_id) VALUES (?, ?)`
	sqlDequeueExposure     = `DELETE FROM exposure_queue WHERE agent_id = ? AND token = ?`
	sqlDecrementFix        = `UPDATE cve_fixes SET agents = agents - 1
		WHERE cve_key = ? AND ecosystem = ? AND product = ? AND fixed = ? AND kb = ? AND eol_from = ?`
	sqlIncrementFix = `INSERT INTO cve_fixes (cve_key, ecosystem, product, fixed, kb, eol_from, agents)
		VALUES (?, ?, ?, ?, ?, ?, 1) ON CONFLICT DO UPDATE SET agents = agents + 1`
	sqlDeleteUnusedFixes = `DELETE FROM cve_fixes WHERE agents <= 0`
	sqlAddCounts         = `INSERT INTO cve_exposure (cve_key, affected, unknown) VALUES (?, ?, ?)
		ON CONFLICT (cve_key) DO UPDATE SET affected = affected + excluded.affected, unknown = unknown + excluded.unknown`
	sqlDeleteZeroCounts = `DELETE FROM cve_exposure WHERE affected <= 0 AND unknown <= 0`
)

// exposureQueries are the statements of PutExposure.
var exposureQueries = []string{
	sqlAgentStatuses, sqlAgentFixes, sqlDeleteAgentVulnerabilities, sqlInsertAgentVulnerability,
	sqlDeleteAgentProducts, sqlInsertAgentProduct, sqlDequeueExposure,
	sqlDecrementFix, sqlIncrementFix, sqlDeleteUnusedFixes, sqlAddCounts, sqlDeleteZeroCounts,
}

// PutExposure implements exposure.Store. It keeps the per-CVE counts of
// cve_exposure in the same transaction.
func (s *Store) PutExposure(ctx context.Context, agentID, token string, keys []string, findings []exposure.Finding) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		// The transaction ends when ctx does, after the statement under
		// way; the statements, one per finding, need not each watch ctx
		// as well (the driver starts a goroutine apiece for that).
		ctx := context.WithoutCancel(ctx)
		q := s.prepared(tx)
		old, err := agentStatuses(ctx, q, agentID)
		if err != nil {
			return err
		}
		oldFixes, err := agentFixes(ctx, q, agentID)
		if err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, sqlDeleteAgentVulnerabilities, agentID); err != nil {
			return err
		}
		cur := map[int64]exposure.Status{}
		curFixes := map[fixRow]bool{}
		for _, f := range findings {
			key, ok := cve.Key(f.CVEID)
			if !ok {
				continue
			}
			if f.Status == exposure.Affected {
				curFixes[fixRow{key, f.Ecosystem, f.Product, f.Fixed, f.KB, f.EOLFrom}] = true
			}
			if _, err := q.ExecContext(ctx, sqlInsertAgentVulnerability, agentID, key, f.CVEID, f.Ecosystem, f.Product, f.Package, f.Installed,
				f.Fixed, f.KB, string(f.Status), f.Reason, f.EOLFrom, f.EOESFrom); err != nil {
				return err
			}
			if cur[key] != exposure.Affected {
				cur[key] = f.Status
			}
		}
		if err := adjustCounts(ctx, q, old, cur); err != nil {
			return err
		}
		if err := adjustFixes(ctx, q, oldFixes, curFixes); err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, sqlDeleteAgentProducts, agentID); err != nil {
			return err
		}
		if token != "removed" {
			for _, k := range keys {
				if _, err := q.ExecContext(ctx, sqlInsertAgentProduct, k, agentID); err != nil {
					return err
				}
			}
		}
		_, err = q.ExecContext(ctx, sqlDequeueExposure, agentID, token)
		return err
	})
	if err != nil {
		return fmt.Errorf("store exposure of agent %s: %w", agentID, err)
	}
	return nil
}

// agentStatuses returns the status of each CVE of an agent as stored.
func agentStatuses(ctx context.Context, q querier, agentID string) (map[int64]exposure.Status, error) {
	rows, err := q.QueryContext(ctx, sqlAgentStatuses, agentID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]exposure.Status{}
	for rows.Next() {
		var key int64
		var st string
		if err := rows.Scan(&key, &st); err != nil {
			return nil, err
		}
		// min() picks 'affected' over 'unknown'.
		out[key] = exposure.Status(st)
	}
	return out, rows.Err()
}

// fixRow is a fixed version of a CVE's product as cve_fixes counts it.
type fixRow struct {
	cveKey                                 int64
	ecosystem, product, fixed, kb, eolFrom string
}

// agentFixes returns the fixes that apply to an agent's affected items.
func agentFixes(ctx context.Context, q querier, agentID string) (map[fixRow]bool, error) {
	rows, err := q.QueryContext(ctx, sqlAgentFixes, agentID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[fixRow]bool{}
	for rows.Next() {
		var f fixRow
		if err := rows.Scan(&f.cveKey, &f.ecosystem, &f.product, &f.fixed, &f.kb, &f.eolFrom); err != nil {
			return nil, err
		}
		out[f] = true
	}
	return out, rows.Err()
}

// adjustFixes moves one agent's contribution to cve_fixes from old to cur.
func adjustFixes(ctx context.Context, q querier, old, cur map[fixRow]bool) error {
	changed := false
	for f := range old {
		if cur[f] {
			continue
		}
		changed = true
		if _, err := q.ExecContext(ctx, sqlDecrementFix, f.cveKey, f.ecosystem, f.product, f.fixed, f.kb, f.eolFrom); err != nil {
			return err
		}
	}
	for f := range cur {
		if old[f] {
			continue
		}
		if _, err := q.ExecContext(ctx, sqlIncrementFix, f.cveKey, f.ecosystem, f.product, f.fixed, f.kb, f.eolFrom); err != nil {
			return err
		}
	}
	if changed {
		_, err := q.ExecContext(ctx, sqlDeleteUnusedFixes)
		return err
	}
	return nil
}

// adjustCounts moves one agent's contribution to cve_exposure from old to
// cur.
func adjustCounts(ctx context.Context, q querier, old, cur map[int64]exposure.Status) error {
	delta := map[int64][2]int{}
	add := func(key int64, st exposure.Status, n int) {
		d := delta[key]
		if st == exposure.Affected {
			d[0] += n
		} else {
			d[1] += n
		}
		delta[key] = d
	}
	for k, st := range old {
		add(k, st, -1)
	}
	for k, st := range cur {
		add(k, st, 1)
	}
	for k, d := range delta {
		if d[0] == 0 && d[1] == 0 {
			continue
		}
		if _, err := q.ExecContext(ctx, sqlAddCounts, k, d[0], d[1]); err != nil {
			return err
		}
	}
	_, err := q.ExecContext(ctx, sqlDeleteZeroCounts)
	return err
}

// QueueExposure implements exposure.Store.
func (s *Store) QueueExposure(ctx context.Context, keys []string) (int, error) {
	total := 0
	err := s.write(ctx, func(tx *sql.Tx) error {
		for len(keys) > 0 {
			n := min(len(keys), 500)
			args := make([]any, n)
			for i, k := range keys[:n] {
				args[i] = k
			}
			keys = keys[n:]
			res, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO exposure_queue (agent_id, token)
				SELECT DISTINCT agent_id, hex(randomblob(8)) FROM agent_products WHERE product_key IN (`+placeholders(n)+`)`, args...)
			if err != nil {
				return err
			}
			c, _ := res.RowsAffected()
			total += int(c)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("queue exposure: %w", err)
	}
	return total, nil
}

// PutRisks implements exposure.Store.
func (s *Store) PutRisks(ctx context.Context, risks []exposure.Risk) error {
	if len(risks) == 0 {
		return nil
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO cve_risks (cve_key, cve_id, kev, epss, cvss, severity, description)
			VALUES (?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, r := range risks {
			key, ok := cve.Key(r.CVEID)
			if !ok {
				continue
			}
			if _, err := st.ExecContext(ctx, key, r.CVEID, r.KEV, schema.OrMinus(r.EPSS), schema.OrMinus(r.CVSS), r.Severity, r.Description); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store CVE risks: %w", err)
	}
	return nil
}

// AgentVulnerabilities implements exposure.Store.
func (s *Store) AgentVulnerabilities(ctx context.Context, agentID string) ([]exposure.AgentVulnerability, error) {
	var out []exposure.AgentVulnerability
	err := s.read(ctx, func(tx *sql.Tx) error {
		var removed sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT removed_at FROM agents WHERE id = ?`, agentID).Scan(&removed)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && removed.Valid) {
			return schema.NotFound("agent", agentID)
		}
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+schema.RiskColumns+`, `+schema.FindingColumns+`
			FROM agent_vulnerabilities v JOIN cve_risks r ON r.cve_key = v.cve_key
			WHERE v.agent_id = ? ORDER BY `+schema.RiskOrder+`, v.ecosystem, v.product, v.package, v.installed`, agentID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var risk exposure.Risk
			var f exposure.Finding
			args := schema.ScanRisk(&risk, schema.FindingArgs(&f)...)
			if err := rows.Scan(args...); err != nil {
				return err
			}
			schema.FillRisk(&risk, args)
			f.CVEID = risk.CVEID
			if n := len(out); n > 0 && out[n-1].CVEID == risk.CVEID {
				out[n-1].Findings = append(out[n-1].Findings, f)
				if f.Status == exposure.Affected {
					out[n-1].Status = exposure.Affected
				}
				continue
			}
			out = append(out, exposure.AgentVulnerability{Risk: risk, Status: f.Status, Findings: []exposure.Finding{f}})
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("vulnerabilities of agent %s: %w", agentID, err)
	}
	return out, nil
}

// FleetVulnerabilities implements exposure.Store.
func (s *Store) FleetVulnerabilities(ctx context.Context, f exposure.FleetFilter) ([]exposure.FleetVulnerability, error) {
	where := []string{`1`}
	var args []any
	if !f.IncludeUnknown {
		where = append(where, `e.affected > 0`)
	}
	if f.KEV != nil {
		where = append(where, `r.kev = ?`)
		args = append(args, *f.KEV)
	}
	if c := f.After; c != nil {
		where = append(where, `(r.kev < ? OR (r.kev = ? AND (r.epss < ? OR (r.epss = ? AND (r.cvss < ? OR (r.cvss = ? AND r.cve_key > ?))))))`)
		args = append(args, c.KEV, c.KEV, c.EPSS, c.EPSS, c.CVSS, c.CVSS, c.CVEKey)
	}
	query := `SELECT ` + schema.RiskColumns + `, e.affected, e.unknown FROM cve_exposure e JOIN cve_risks r ON r.cve_key = e.cve_key
		WHERE ` + strings.Join(where, ` AND `) + ` ORDER BY ` + schema.RiskOrder
	if f.Limit > 0 {
		query += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	var out []exposure.FleetVulnerability
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var v exposure.FleetVulnerability
			a := schema.ScanRisk(&v.Risk, &v.Affected, &v.Unknown)
			if err := rows.Scan(a...); err != nil {
				rows.Close()
				return err
			}
			schema.FillRisk(&v.Risk, a)
			out = append(out, v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		fixes, err := tx.PrepareContext(ctx, `SELECT ecosystem, product, fixed, kb, eol_from FROM cve_fixes
			WHERE cve_key = ? ORDER BY ecosystem, product, fixed LIMIT 50`)
		if err != nil {
			return err
		}
		defer fixes.Close()
		for i := range out {
			key, _ := cve.Key(out[i].CVEID)
			rows, err := fixes.QueryContext(ctx, key)
			if err != nil {
				return err
			}
			for rows.Next() {
				var fx exposure.Fix
				if err := rows.Scan(&fx.Ecosystem, &fx.Product, &fx.Version, &fx.KB, &fx.EOLFrom); err != nil {
					rows.Close()
					return err
				}
				out[i].Fixes = append(out[i].Fixes, fx)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fleet vulnerabilities: %w", err)
	}
	return out, nil
}

// VulnerabilityAgents implements exposure.Store.
func (s *Store) VulnerabilityAgents(ctx context.Context, f exposure.AgentFilter) ([]exposure.CVEAgent, error) {
	key, ok := cve.Key(f.CVEID)
	if !ok {
		return nil, nil
	}
	where := []string{`v.cve_key = ?`}
	args := []any{key}
	if f.After != "" {
		where = append(where, `v.agent_id > ?`)
		args = append(args, f.After)
	}
	query := `SELECT v.agent_id, a.hostname, coalesce(a.ring, ''), ` + schema.FindingColumns + `
		FROM agent_vulnerabilities v JOIN agents a ON a.id = v.agent_id
		WHERE ` + strings.Join(where, ` AND `) + ` ORDER BY v.agent_id, v.ecosystem, v.product, v.package`
	var out []exposure.CVEAgent
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var a exposure.CVEAgent
			var fi exposure.Finding
			if err := rows.Scan(append([]any{&a.AgentID, &a.Hostname, &a.Ring}, schema.FindingArgs(&fi)...)...); err != nil {
				return err
			}
			fi.CVEID = f.CVEID
			out = exposure.AddFinding(out, a, fi)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("agents of %s: %w", f.CVEID, err)
	}
	return f.Keep(out), nil
}

// insertRolloutAgents stores the agents a rollout targets; none means
// every agent of its rings.
func insertRolloutAgents(ctx context.Context, tx *sql.Tx, rolloutID string, agents []string) error {
	if len(agents) == 0 {
		return nil
	}
	st, err := tx.PrepareContext(ctx, `INSERT OR IGNORE INTO rollout_agents (rollout_id, agent_id) VALUES (?, ?)`)
	if err != nil {
		return err
	}
	defer st.Close()
	for _, a := range agents {
		if _, err := st.ExecContext(ctx, rolloutID, a); err != nil {
			return err
		}
	}
	return nil
}
