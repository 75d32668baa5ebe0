package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/errs"
)

// copyTables are the tables Copy carries, parents before the tables that
// refer to them, each with the order its rows are read and written in:
// the primary key, or "" for the order commands were queued in (the
// dialect's queueOrder), which the target numbers anew as the rows arrive,
// so that check-ins take commands of one time in the same order.
var copyTables = []struct{ name, order string }{
	{"rings", "name"},
	{"api_keys", "id"},
	{"admins", "id"},
	{"admin_sessions", "id_hash"},
	{"admin_totp", "admin_id"},
	{"enroll_secrets", "id"},
	{"agents", "id"},
	{"policies", "id"},
	{"policy_versions", "policy_id, version"},
	{"rollouts", "id"},
	{"rollout_agents", "rollout_id, agent_id"},
	{"commands", ""},
	{"log_bundles", "command_id"},
	{"audit_log", "id"},
	{"exposure_queue", "agent_id"},
	{"agent_vulnerabilities", "agent_id, cve_key, ecosystem, product, package, installed"},
	{"agent_products", "product_key, agent_id"},
	{"cve_risks", "cve_key"},
	{"cve_exposure", "cve_key"},
	{"cve_fixes", "cve_key, ecosystem, product, fixed, kb, eol_from"},
	{"alert_rules", "id"},
	{"alerts", "id"},
	{"alert_seen", "rule_id, cve_key, agent_id"},
	{"alert_deliveries", "alert_id, attempt"},
}

// derivedTables are the tables a store fills from the others, which Copy
// checks but does not carry: the target derives agent_policies from
// agents.applied_policies as the rows arrive.
var derivedTables = []string{"agent_policies"}

// Copied is how many rows Copy carried of a table.
type Copied struct {
	Table string
	Rows  int64
}

// Copy copies every row of the control store src into the empty store dst,
// in one transaction of dst that reads src in one snapshot, and checks the
// copy: the same number of rows in every table, and an audit chain that
// verifies. Each table carries every column src has, but the queue order
// of commands: ids, digests, hashes and times as they are, so that keys,
// agent credentials and sessions go on working. It returns how many rows
// of each table it copied, in the order of copyTables. A dst that holds
// anything is refused with errs.ErrConflict.
func Copy(ctx context.Context, src, dst *Store) ([]Copied, error) {
	have, err := dst.countRows(ctx)
	if err != nil {
		return nil, fmt.Errorf("copy control store: %w", err)
	}
	if err := checkEmpty(have); err != nil {
		return nil, err
	}
	copied := make([]Copied, len(copyTables))
	err = dst.writeOnce(ctx, func(to querier) error {
		return src.read(ctx, func(from querier) error {
			for i, t := range copyTables {
				n, err := copyTable(ctx, src.d, dst.d, from, to.(*runner), t.name, cmp.Or(t.order, src.d.queueOrder))
				if err != nil {
					return fmt.Errorf("%s: %w", t.name, err)
				}
				copied[i] = Copied{t.name, n}
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("copy control store: %w", err)
	}
	if err := checkCopy(ctx, src, dst, copied); err != nil {
		return nil, fmt.Errorf("copy control store: %w", err)
	}
	return copied, nil
}

// copyTable writes the rows of table as from reads them, in order, through
// to, and returns how many it wrote. Values go as the source's driver reads
// them, but for the target's booleans (SQLite keeps them as integers) and
// text (SQLite may hand it over as bytes), and strings made storable.
func copyTable(ctx context.Context, sd, dd *dialect, from querier, to *runner, table, order string) (int64, error) {
	srcCols, err := tableColumns(ctx, from, table)
	if err != nil {
		return 0, err
	}
	dstCols, err := tableColumns(ctx, to, table)
	if err != nil {
		return 0, err
	}
	dstType := map[string]string{}
	for _, c := range dstCols {
		dstType[c.Name()] = strings.ToUpper(c.DatabaseTypeName())
	}
	var cols, types []string // the columns carried, and their types in dst
	for _, c := range srcCols {
		if n := c.Name(); n != sd.queueOrder && n != dd.queueOrder {
			cols, types = append(cols, n), append(types, dstType[n])
		}
	}
	list := strings.Join(cols, ", ")
	ins, err := to.tx.PrepareContext(ctx, dd.rebind(insertOne(table, list, len(cols), "")))
	if err != nil {
		return 0, err
	}
	defer ins.Close()
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var n int64
	err = eachRow(ctx, from, func(r scanner) error {
		if err := r.Scan(ptrs...); err != nil {
			return err
		}
		for i, v := range vals {
			switch x := v.(type) {
			case int64:
				if types[i] == "BOOL" {
					v = x != 0
				}
			case []byte:
				if types[i] == "TEXT" {
					v = string(x)
				}
			}
			if dd.arg != nil {
				v = dd.arg(v)
			}
			vals[i] = v
		}
		n++
		_, err := ins.ExecContext(ctx, vals...)
		return err
	}, `SELECT `+list+` FROM `+table+` ORDER BY `+order)
	return n, err
}

// tableColumns returns the columns of table as q's database has them.
func tableColumns(ctx context.Context, q querier, table string) ([]*sql.ColumnType, error) {
	rows, err := q.Query(ctx, `SELECT * FROM `+table+` WHERE false`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return rows.ColumnTypes()
}

// checkCopy compares the rows copied of each table with those dst holds,
// and those of the derived tables with src's, and verifies dst's audit
// chain.
func checkCopy(ctx context.Context, src, dst *Store, copied []Copied) error {
	want, err := src.countRows(ctx)
	if err != nil {
		return err
	}
	got, err := dst.countRows(ctx)
	if err != nil {
		return err
	}
	var diffs []string
	for _, c := range copied {
		if got[c.Table] != c.Rows {
			diffs = append(diffs, fmt.Sprintf("%s: %d copied, %d in the copy", c.Table, c.Rows, got[c.Table]))
		}
	}
	for _, name := range derivedTables {
		if got[name] != want[name] {
			diffs = append(diffs, fmt.Sprintf("%s: %d in the source, %d in the copy", name, want[name], got[name]))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("the copy differs: %s", strings.Join(diffs, "; "))
	}
	res, err := audit.Verify(ctx, dst)
	if err != nil {
		return fmt.Errorf("verify the audit log of the copy: %w", err)
	}
	if res.Broken != nil {
		return fmt.Errorf("the audit log of the copy is broken at entry %d: %s", res.Broken.ID, res.Broken.Reason)
	}
	return nil
}

// checkEmpty fails with errs.ErrConflict unless every table is empty.
func checkEmpty(counts map[string]int64) error {
	var full []string
	for name, n := range counts {
		if n > 0 {
			full = append(full, fmt.Sprintf("%d %s", n, name))
		}
	}
	if len(full) == 0 {
		return nil
	}
	sort.Strings(full)
	return errs.Conflictf("the target control store is not empty (%s): migrate copies into an empty control store only", strings.Join(full, ", "))
}

// countRows returns how many rows each table of copyTables and
// derivedTables holds.
func (s *Store) countRows(ctx context.Context) (map[string]int64, error) {
	names := slices.Clone(derivedTables)
	for _, t := range copyTables {
		names = append(names, t.name)
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = `(SELECT count(*) FROM ` + n + `)`
	}
	counts := make([]int64, len(names))
	dst := make([]any, len(names))
	for i := range counts {
		dst[i] = &counts[i]
	}
	if err := s.rq().QueryRow(ctx, `SELECT `+strings.Join(parts, ", ")).Scan(dst...); err != nil {
		return nil, fmt.Errorf("count rows: %w", err)
	}
	out := make(map[string]int64, len(names))
	for i, n := range names {
		out[n] = counts[i]
	}
	return out, nil
}
