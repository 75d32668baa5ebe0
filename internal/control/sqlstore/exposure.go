package sqlstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"database/sql"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/exposure"
)

// HasAgents implements exposure.Store.
func (s *Store) HasAgents(ctx context.Context) (bool, error) {
	var has bool
	err := s.rq().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM agents WHERE removed_at IS NULL)`).Scan(&has)
	return has, errs.Wrapf(err, "look for agents")
}

// PendingExposure implements exposure.Store. A removed agent comes with
// an empty inventory, so that its findings are cleared. Replicas may take
// the same agents: PutExposure of one agent is serialized, and its token
// keeps a newer change queued.
func (s *Store) PendingExposure(ctx context.Context, limit int) (_ []exposure.Pending, err error) {
	defer errs.Wrap(&err, "pending exposure")
	return queryAll(ctx, s.rq(), func(row scanner) (exposure.Pending, error) {
		var (
			p       exposure.Pending
			inv     string
			removed bool
		)
		if err := row.Scan(&p.AgentID, &p.Token, &inv, &removed); err != nil {
			return p, err
		}
		if !removed && inv != "" {
			if err := json.Unmarshal([]byte(inv), &p.Inventory); err != nil {
				return p, fmt.Errorf("inventory of agent %s: %w", p.AgentID, err)
			}
		}
		return p, nil
	}, `SELECT q.agent_id, q.token, coalesce(a.inventory, ''), a.removed_at IS NOT NULL OR a.id IS NULL
		FROM exposure_queue q LEFT JOIN agents a ON a.id = q.agent_id
		ORDER BY q.agent_id LIMIT ?`, limit)
}

// The statements of PutExposure, prepared at Open on SQLite: it runs them
// for every agent whose inventory changed, many per finding.
const (
	sqlAgentStatuses = `SELECT cve_key, min(status) FROM agent_vulnerabilities WHERE agent_id = ? GROUP BY cve_key`
	sqlAgentFixes    = `SELECT DISTINCT cve_key, ecosystem, product, fixed, kb, eol_from
		FROM agent_vulnerabilities WHERE agent_id = ? AND status = 'affected'`
	sqlDeleteAgentVulnerabilities = `DELETE FROM agent_vulnerabilities WHERE agent_id = ?`
	agentVulnerabilityColumns     = `agent_id, cve_key, cve_id, ecosystem, product, package, installed, fixed, kb, status, reason, eol_from, eoes_from`
	sqlDeleteAgentProducts        = `DELETE FROM agent_products WHERE agent_id = ?`
	sqlDequeueExposure            = `DELETE FROM exposure_queue WHERE agent_id = ? AND token = ?`
	sqlDecrementFix               = `UPDATE cve_fixes SET agents = agents - 1
		WHERE cve_key = ? AND ecosystem = ? AND product = ? AND fixed = ? AND kb = ? AND eol_from = ?`
	sqlIncrementFix = `INSERT INTO cve_fixes (cve_key, ecosystem, product, fixed, kb, eol_from, agents)
		VALUES (?, ?, ?, ?, ?, ?, 1)
		ON CONFLICT (cve_key, ecosystem, product, fixed, kb, eol_from) DO UPDATE SET agents = cve_fixes.agents + 1`
	sqlDeleteUnusedFixes = `DELETE FROM cve_fixes WHERE agents <= 0`
	sqlAddCounts         = `INSERT INTO cve_exposure (cve_key, affected, unknown) VALUES (?, ?, ?)
		ON CONFLICT (cve_key) DO UPDATE SET affected = cve_exposure.affected + excluded.affected, unknown = cve_exposure.unknown + excluded.unknown`
	putRiskColumns = `cve_key, cve_id, kev, epss, cvss, severity, description`
	riskConflict   = `ON CONFLICT (cve_key) DO UPDATE SET cve_id = excluded.cve_id, kev = excluded.kev, epss = excluded.epss,
		cvss = excluded.cvss, severity = excluded.severity, description = excluded.description`
	// scoreConflict is riskConflict but for the description.
	scoreConflict = `ON CONFLICT (cve_key) DO UPDATE SET cve_id = excluded.cve_id, kev = excluded.kev, epss = excluded.epss,
		cvss = excluded.cvss, severity = excluded.severity`
)

// sqlCVEFixes selects the fixes of one CVE, for each CVE of a page.
const sqlCVEFixes = `SELECT ecosystem, product, fixed, kb, eol_from FROM cve_fixes
	WHERE cve_key = ? ORDER BY ecosystem, product, fixed LIMIT 50`

// exposureQueries are the statements of PutExposure, PutRisks and
// PutScores.
var exposureQueries = []string{
	sqlAgentStatuses, sqlAgentFixes, sqlDeleteAgentVulnerabilities, insertOne("agent_vulnerabilities", agentVulnerabilityColumns, 13, doNothing),
	sqlDeleteAgentProducts, insertOne("agent_products", "product_key, agent_id", 2, doNothing), sqlDequeueExposure,
	sqlDecrementFix, sqlIncrementFix, sqlDeleteUnusedFixes, sqlAddCounts, insertOne("cve_risks", putRiskColumns, 7, riskConflict),
	insertOne("cve_risks", putRiskColumns, 7, scoreConflict),
}

// PutExposure implements exposure.Store. It keeps the per-CVE counts of
// cve_exposure and cve_fixes in the same transaction, under a lock of the
// agent so that two replicas evaluating it do not count it twice.
func (s *Store) PutExposure(ctx context.Context, agentID, token string, keys []string, findings []exposure.Finding) error {
	agentID = s.d.text(agentID)
	err := s.write(ctx, func(tx querier) error {
		if err := s.lock(ctx, tx, exposureLock, agentID); err != nil {
			return err
		}
		qctx := ctx
		if s.d.unwatched {
			// The transaction ends when ctx does, after the statement
			// under way; the statements, one per finding, need not each
			// watch ctx as well.
			qctx = context.WithoutCancel(ctx)
		}
		old, err := agentStatuses(qctx, tx, agentID)
		if err != nil {
			return err
		}
		oldFixes, err := agentFixes(qctx, tx, agentID)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(qctx, sqlDeleteAgentVulnerabilities, agentID); err != nil {
			return err
		}
		cur := map[int64]exposure.Status{}
		curFixes := map[fixRow]bool{}
		rows := make([][]any, 0, len(findings))
		for _, f := range findings {
			key, ok := cve.Key(f.CVEID)
			if !ok {
				continue
			}
			f = s.cleanFinding(f)
			if f.Status == exposure.Affected {
				curFixes[fixRow{key, f.Ecosystem, f.Product, f.Fixed, f.KB, f.EOLFrom}] = true
			}
			rows = append(rows, []any{agentID, key, f.CVEID, f.Ecosystem, f.Product, f.Package, f.Installed,
				f.Fixed, f.KB, string(f.Status), f.Reason, f.EOLFrom, f.EOESFrom})
			if cur[key] != exposure.Affected {
				cur[key] = f.Status
			}
		}
		if err := s.insertRows(qctx, tx, "agent_vulnerabilities", agentVulnerabilityColumns, doNothing, rows); err != nil {
			return err
		}
		if err := adjustCounts(qctx, tx, old, cur); err != nil {
			return err
		}
		if err := adjustFixes(qctx, tx, oldFixes, curFixes); err != nil {
			return err
		}
		if _, err := tx.Exec(qctx, sqlDeleteAgentProducts, agentID); err != nil {
			return err
		}
		if token != "removed" {
			rows := make([][]any, len(keys))
			for i, k := range keys {
				rows[i] = []any{k, agentID}
			}
			if err := s.insertRows(qctx, tx, "agent_products", "product_key, agent_id", doNothing, rows); err != nil {
				return err
			}
		}
		_, err = tx.Exec(qctx, sqlDequeueExposure, agentID, token)
		return err
	})
	if err != nil {
		return fmt.Errorf("store exposure of agent %s: %w", agentID, err)
	}
	return nil
}

// cleanFinding makes the text of a finding storable, so that the fixes
// it counts are those stored.
func (s *Store) cleanFinding(f exposure.Finding) exposure.Finding {
	for _, p := range []*string{&f.Ecosystem, &f.Product, &f.Package, &f.Installed, &f.Fixed, &f.KB, &f.Reason, &f.EOLFrom, &f.EOESFrom} {
		*p = s.d.text(*p)
	}
	return f
}

// agentStatuses returns the status of each CVE of an agent as stored.
func agentStatuses(ctx context.Context, q querier, agentID string) (map[int64]exposure.Status, error) {
	out := map[int64]exposure.Status{}
	err := eachRow(ctx, q, func(row scanner) error {
		var key int64
		var st string
		if err := row.Scan(&key, &st); err != nil {
			return err
		}
		// min() picks 'affected' over 'unknown'.
		out[key] = exposure.Status(st)
		return nil
	}, sqlAgentStatuses, agentID)
	return out, err
}

// fixRow is a fixed version of a CVE's product as cve_fixes counts it.
type fixRow struct {
	cveKey                                 int64
	ecosystem, product, fixed, kb, eolFrom string
}

func (a fixRow) compare(b fixRow) int {
	return cmp.Or(cmp.Compare(a.cveKey, b.cveKey), cmp.Compare(a.ecosystem, b.ecosystem), cmp.Compare(a.product, b.product),
		cmp.Compare(a.fixed, b.fixed), cmp.Compare(a.kb, b.kb), cmp.Compare(a.eolFrom, b.eolFrom))
}

// agentFixes returns the fixes that apply to an agent's affected items.
func agentFixes(ctx context.Context, q querier, agentID string) (map[fixRow]bool, error) {
	out := map[fixRow]bool{}
	err := eachRow(ctx, q, func(row scanner) error {
		var f fixRow
		if err := row.Scan(&f.cveKey, &f.ecosystem, &f.product, &f.fixed, &f.kb, &f.eolFrom); err != nil {
			return err
		}
		out[f] = true
		return nil
	}, sqlAgentFixes, agentID)
	return out, err
}

// adjustFixes moves one agent's contribution to cve_fixes from old to cur.
// Rows are written in key order, so that two agents' transactions lock
// them in the same order.
func adjustFixes(ctx context.Context, tx querier, old, cur map[fixRow]bool) error {
	type change struct {
		f     fixRow
		delta int
	}
	var changes []change
	for f := range old {
		if !cur[f] {
			changes = append(changes, change{f, -1})
		}
	}
	for f := range cur {
		if !old[f] {
			changes = append(changes, change{f, 1})
		}
	}
	if len(changes) == 0 {
		return nil
	}
	slices.SortFunc(changes, func(x, y change) int { return x.f.compare(y.f) })
	removed := false
	for _, c := range changes {
		f := c.f
		if c.delta < 0 {
			removed = true
			if _, err := tx.Exec(ctx, sqlDecrementFix, f.cveKey, f.ecosystem, f.product, f.fixed, f.kb, f.eolFrom); err != nil {
				return err
			}
			continue
		}
		if _, err := tx.Exec(ctx, sqlIncrementFix, f.cveKey, f.ecosystem, f.product, f.fixed, f.kb, f.eolFrom); err != nil {
			return err
		}
	}
	if removed {
		_, err := tx.Exec(ctx, sqlDeleteUnusedFixes)
		return err
	}
	return nil
}

// adjustCounts moves one agent's contribution to cve_exposure from old to
// cur, in key order.
func adjustCounts(ctx context.Context, tx querier, old, cur map[int64]exposure.Status) error {
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
	keys := make([]int64, 0, len(delta))
	for k, d := range delta {
		if d[0] != 0 || d[1] != 0 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	for _, k := range keys {
		d := delta[k]
		if _, err := tx.Exec(ctx, sqlAddCounts, k, d[0], d[1]); err != nil {
			return err
		}
	}
	var a args
	_, err := tx.Exec(ctx, `DELETE FROM cve_exposure WHERE cve_key IN `+in(&a, keys)+` AND affected <= 0 AND unknown <= 0`, a...)
	return err
}

// QueueExposure implements exposure.Store.
func (s *Store) QueueExposure(ctx context.Context, keys []string) (_ int, err error) {
	defer errs.Wrap(&err, "queue exposure")
	return writeResult(ctx, s, func(tx querier) (int, error) {
		total := 0
		for rest := keys; len(rest) > 0; {
			n := min(len(rest), 500)
			var a args
			list := in(&a, rest[:n])
			rest = rest[n:]
			res, err := tx.Exec(ctx, `INSERT INTO exposure_queue (agent_id, token)
				SELECT agent_id, `+s.d.token+` FROM (
					SELECT DISTINCT agent_id FROM agent_products WHERE product_key IN `+list+` ORDER BY agent_id) d
				WHERE true ON CONFLICT (agent_id) DO UPDATE SET token = excluded.token`, a...)
			if err != nil {
				return 0, err
			}
			total += int(rowsAffected(res))
		}
		return total, nil
	})
}

// PutRisks implements exposure.Store.
func (s *Store) PutRisks(ctx context.Context, risks []exposure.Risk) error {
	return s.putRisks(ctx, risks, riskConflict)
}

// PutScores implements exposure.Store.
func (s *Store) PutScores(ctx context.Context, risks []exposure.Risk) error {
	return s.putRisks(ctx, risks, scoreConflict)
}

// putRisks stores risks, with conflict saying what of a stored risk
// changes.
func (s *Store) putRisks(ctx context.Context, risks []exposure.Risk, conflict string) error {
	if len(risks) == 0 {
		return nil
	}
	byKey := map[int64]exposure.Risk{}
	for _, r := range risks {
		if key, ok := cve.Key(r.CVEID); ok {
			byKey[key] = r // the last of one CVE wins
		}
	}
	keys := make([]int64, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	err := s.write(ctx, func(tx querier) error {
		rows := make([][]any, len(keys))
		for i, key := range keys {
			r := byKey[key]
			rows[i] = []any{key, r.CVEID, r.KEV, orMinus(r.EPSS), orMinus(r.CVSS), r.Severity, r.Description}
		}
		return s.insertRows(ctx, tx, "cve_risks", putRiskColumns, conflict, rows)
	})
	return errs.Wrapf(err, "store CVE risks")
}

// AgentVulnerabilities implements exposure.Store.
func (s *Store) AgentVulnerabilities(ctx context.Context, agentID string) (_ []exposure.AgentVulnerability, err error) {
	defer errs.Wrap(&err, "vulnerabilities of agent %s", agentID)
	return readResult(ctx, s, func(tx querier) ([]exposure.AgentVulnerability, error) {
		var removed *int64
		err := tx.QueryRow(ctx, `SELECT removed_at FROM agents WHERE id = ?`, agentID).Scan(&removed)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && removed != nil) {
			return nil, notFound("agent", agentID)
		}
		if err != nil {
			return nil, err
		}
		var out []exposure.AgentVulnerability
		err = eachRow(ctx, tx, func(row scanner) error {
			var risk exposure.Risk
			var f exposure.Finding
			args := scanRisk(&risk, findingArgs(&f)...)
			if err := row.Scan(args...); err != nil {
				return err
			}
			fillRisk(&risk, args)
			f.CVEID = risk.CVEID
			if n := len(out); n > 0 && out[n-1].CVEID == risk.CVEID {
				out[n-1].Findings = append(out[n-1].Findings, f)
				if f.Status == exposure.Affected {
					out[n-1].Status = exposure.Affected
				}
				return nil
			}
			out = append(out, exposure.AgentVulnerability{Risk: risk, Status: f.Status, Findings: []exposure.Finding{f}})
			return nil
		}, `SELECT `+riskColumns+`, `+findingColumns+`
			FROM agent_vulnerabilities v JOIN cve_risks r ON r.cve_key = v.cve_key
			WHERE v.agent_id = ? ORDER BY `+riskOrder+`, v.ecosystem, v.product, v.package, v.installed`, agentID)
		return out, err
	})
}

// FleetVulnerabilities implements exposure.Store.
func (s *Store) FleetVulnerabilities(ctx context.Context, f exposure.FleetFilter) (_ []exposure.FleetVulnerability, err error) {
	defer errs.Wrap(&err, "fleet vulnerabilities")
	var where []string
	var a args
	if !f.IncludeUnknown {
		where = append(where, `e.affected > 0`)
	}
	if f.KEV != nil {
		where = append(where, `r.kev = `+a.add(*f.KEV))
	}
	if c := f.After; c != nil {
		where = append(where, `(r.kev < ? OR (r.kev = ? AND (r.epss < ? OR (r.epss = ? AND (r.cvss < ? OR (r.cvss = ? AND r.cve_key > ?))))))`)
		a = append(a, c.KEV, c.KEV, c.EPSS, c.EPSS, c.CVSS, c.CVSS, c.CVEKey)
	}
	query := a.selectWhere(`SELECT `+riskColumns+`, e.affected, e.unknown FROM cve_exposure e JOIN cve_risks r ON r.cve_key = e.cve_key`,
		where, riskOrder, f.Limit)
	return readResult(ctx, s, func(tx querier) ([]exposure.FleetVulnerability, error) {
		out, err := queryAll(ctx, tx, func(row scanner) (exposure.FleetVulnerability, error) {
			var v exposure.FleetVulnerability
			dst := scanRisk(&v.Risk, &v.Affected, &v.Unknown)
			err := row.Scan(dst...)
			fillRisk(&v.Risk, dst)
			return v, err
		}, query, a...)
		if err != nil {
			return nil, err
		}
		for i := range out {
			key, _ := cve.Key(out[i].CVEID)
			out[i].Fixes, err = queryAll(ctx, tx, func(row scanner) (exposure.Fix, error) {
				var fx exposure.Fix
				err := row.Scan(&fx.Ecosystem, &fx.Product, &fx.Version, &fx.KB, &fx.EOLFrom)
				return fx, err
			}, sqlCVEFixes, key)
			if err != nil {
				return nil, err
			}
		}
		return out, nil
	})
}

// VulnerabilityAgents implements exposure.Store.
func (s *Store) VulnerabilityAgents(ctx context.Context, f exposure.AgentFilter) (_ []exposure.CVEAgent, err error) {
	defer errs.Wrap(&err, "agents of %s", f.CVEID)
	key, ok := cve.Key(f.CVEID)
	if !ok {
		return nil, nil
	}
	var a args
	where := []string{`v.cve_key = ` + a.add(key)}
	if f.After != "" {
		where = append(where, `v.agent_id > `+a.add(f.After))
	}
	query := a.selectWhere(`SELECT v.agent_id, a.hostname, coalesce(a.ring, ''), `+findingColumns+`
		FROM agent_vulnerabilities v JOIN agents a ON a.id = v.agent_id`, where, `v.agent_id, v.ecosystem, v.product, v.package`, 0)
	var out []exposure.CVEAgent
	err = eachRow(ctx, s.rq(), func(row scanner) error {
		var ag exposure.CVEAgent
		var fi exposure.Finding
		if err := row.Scan(append([]any{&ag.AgentID, &ag.Hostname, &ag.Ring}, findingArgs(&fi)...)...); err != nil {
			return err
		}
		fi.CVEID = f.CVEID
		out = exposure.AddFinding(out, ag, fi)
		return nil
	}, query, a...)
	if err != nil {
		return nil, err
	}
	return f.Keep(out), nil
}
