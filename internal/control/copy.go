package control

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/errs"
)

// Kind is the type of a column as a copy carries it between backends.
type Kind int

// The kinds of columns. A NULL is a nil value whatever the kind.
const (
	// Text is a string.
	Text Kind = iota
	// Int is an int64: counts, positions, and times in Unix milliseconds.
	Int
	// Float is a float64.
	Float
	// Bool is a bool (an INTEGER 0 or 1 on SQLite).
	Bool
	// Bytes is a []byte: digests, hashes and log bundles.
	Bytes
)

// Column is a column of a table of the control store.
type Column struct {
	Name string
	Kind Kind
}

// Table is a table of the control store that a copy carries, with the
// columns it carries. Both backends name tables and columns alike.
type Table struct {
	Name    string
	Columns []Column
	// Order is the ORDER BY of the rows of a dump: the primary key. The
	// commands are dumped in the order they were queued instead, which
	// check-ins follow among commands of the same time.
	Order string
}

// ColumnNames returns the names of the columns of t, comma-separated.
func (t *Table) ColumnNames() string {
	names := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

func cols(kind Kind, names ...string) []Column {
	out := make([]Column, len(names))
	for i, n := range names {
		out[i] = Column{n, kind}
	}
	return out
}

func join(parts ...[]Column) []Column {
	var out []Column
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// Tables are the tables a copy carries, parents before the tables that
// refer to them. agent_policies is left out: the target derives it from
// agents.applied_policies as the rows arrive.
var Tables = []*Table{
	{Name: "rings", Order: "name", Columns: join(
		cols(Text, "name"), cols(Int, "position"), cols(Text, "description"), cols(Int, "created_at"), cols(Text, "rule"))},
	{Name: "api_keys", Order: "id", Columns: join(
		cols(Text, "id", "name"), cols(Bytes, "secret_hash"), cols(Bool, "privileged"), cols(Text, "created_by"),
		cols(Int, "created_at", "last_used_at", "expires_at", "revoked_at"))},
	{Name: "admins", Order: "id", Columns: join(
		cols(Text, "id", "email", "password_hash"), cols(Int, "created_at", "last_login_at"))},
	{Name: "admin_sessions", Order: "id_hash", Columns: join(
		cols(Bytes, "id_hash"), cols(Text, "admin_id"), cols(Int, "created_at", "last_seen_at", "expires_at", "reauth_at"),
		cols(Text, "client_address", "user_agent"))},
	{Name: "admin_totp", Order: "admin_id", Columns: join(
		cols(Text, "admin_id", "secret"), cols(Int, "enabled_at", "last_step"))},
	{Name: "enroll_secrets", Order: "id", Columns: join(
		cols(Text, "id"), cols(Bytes, "secret_hash"), cols(Text, "ring", "created_by"),
		cols(Int, "created_at", "expires_at", "revoked_at", "last_used_at", "uses"))},
	{Name: "agents", Order: "id", Columns: join(
		cols(Text, "id", "hostname", "os_platform", "os_name", "os_version", "os_build", "arch", "agent_version"),
		cols(Int, "capability"), cols(Text, "ips", "ring", "enroll_secret_id"), cols(Bytes, "credential_hash"),
		cols(Int, "enrolled_at", "last_seen_at"), cols(Text, "inventory", "feature_upgrade", "feature_target", "applied_policies"),
		cols(Bool, "reboot_pending"), cols(Int, "removed_at"), cols(Text, "ring_source", "inventory_hash"))},
	{Name: "policies", Order: "id", Columns: join(
		cols(Text, "id", "name"), cols(Int, "version", "created_at"))},
	{Name: "policy_versions", Order: "policy_id, version", Columns: join(
		cols(Text, "policy_id"), cols(Int, "version"), cols(Text, "settings", "created_by"), cols(Int, "created_at"))},
	{Name: "rollouts", Order: "id", Columns: join(
		cols(Text, "id", "name", "kind", "params", "policy_id"), cols(Int, "policy_version"), cols(Text, "rings"),
		cols(Int, "ring_index"), cols(Text, "state", "created_by"), cols(Int, "created_at", "updated_at"))},
	{Name: "rollout_agents", Order: "rollout_id, agent_id", Columns: cols(Text, "rollout_id", "agent_id")},
	{Name: "commands", Columns: join(
		cols(Text, "id", "agent_id", "type", "state", "params", "result", "created_by"),
		cols(Int, "created_at", "updated_at", "expires_at"), cols(Text, "rollout_id", "rollout_ring"))},
	{Name: "log_bundles", Order: "command_id", Columns: join(
		cols(Text, "command_id", "agent_id", "content_type"), cols(Int, "size"), cols(Bytes, "sha256", "content"),
		cols(Int, "created_at"))},
	{Name: "audit_log", Order: "id", Columns: join(
		cols(Int, "id", "time"), cols(Text, "actor", "key_id", "action", "method", "path"), cols(Int, "status"),
		cols(Text, "client_address", "details"), cols(Bytes, "prev_hash", "hash"))},
	{Name: "exposure_queue", Order: "agent_id", Columns: cols(Text, "agent_id", "token")},
	{Name: "agent_vulnerabilities", Order: "agent_id, cve_key, ecosystem, product, package, installed", Columns: join(
		cols(Text, "agent_id"), cols(Int, "cve_key"),
		cols(Text, "cve_id", "ecosystem", "product", "package", "installed", "fixed", "kb", "status", "reason", "eol_from", "eoes_from"))},
	{Name: "agent_products", Order: "product_key, agent_id", Columns: cols(Text, "product_key", "agent_id")},
	{Name: "cve_risks", Order: "cve_key", Columns: join(
		cols(Int, "cve_key"), cols(Text, "cve_id"), cols(Bool, "kev"), cols(Float, "epss", "cvss"), cols(Text, "severity", "description"))},
	{Name: "cve_exposure", Order: "cve_key", Columns: cols(Int, "cve_key", "affected", "unknown")},
	{Name: "cve_fixes", Order: "cve_key, ecosystem, product, fixed, kb, eol_from", Columns: join(
		cols(Int, "cve_key"), cols(Text, "ecosystem", "product", "fixed", "kb", "eol_from"), cols(Int, "agents"))},
	{Name: "alert_rules", Order: "id", Columns: join(
		cols(Text, "id", "name", "kind"), cols(Float, "threshold"), cols(Text, "webhook_url", "secret", "created_by"), cols(Int, "created_at"))},
	{Name: "alerts", Order: "id", Columns: join(
		cols(Text, "id", "rule_id", "cve_id", "body"), cols(Int, "created_at"), cols(Text, "state"),
		cols(Int, "attempts", "next_attempt", "delivered_at"))},
	{Name: "alert_seen", Order: "rule_id, cve_key, agent_id", Columns: join(cols(Text, "rule_id"), cols(Int, "cve_key"), cols(Text, "agent_id"))},
	{Name: "alert_deliveries", Order: "alert_id, attempt", Columns: join(
		cols(Text, "alert_id"), cols(Int, "attempt", "at", "status"), cols(Text, "error"))},
}

// DerivedTables are the tables that a store fills from the others, which a
// copy checks but does not carry.
var DerivedTables = []string{"agent_policies"}

// Copier is a control store that can be copied to another backend, table
// by table.
type Copier interface {
	// DumpTables reads every table of Tables in one snapshot, in the
	// order of Tables, and calls fn with each row: one value per column,
	// of the Go type of its Kind, or nil. It stops at the first error of
	// fn and returns it.
	DumpTables(ctx context.Context, fn func(t *Table, row []any) error) error

	// LoadTables runs fill in one transaction of the store, whose put
	// inserts a row as DumpTables passes it, ids and hashes as they are.
	// The transaction commits when fill returns nil; otherwise nothing is
	// written.
	LoadTables(ctx context.Context, fill func(put func(t *Table, row []any) error) error) error

	// CountRows returns how many rows each table of Tables and
	// DerivedTables holds.
	CountRows(ctx context.Context) (map[string]int64, error)
}

// Copy copies every row of the control store src into the empty store dst,
// in one transaction of dst, and checks the copy: the same number of rows
// in every table, and an audit chain that verifies. It returns how many
// rows of each table it copied. A dst that holds anything is refused with
// errs.ErrConflict.
func Copy(ctx context.Context, src, dst Store) (map[string]int64, error) {
	from, ok := src.(Copier)
	if !ok {
		return nil, fmt.Errorf("copy control store: cannot read a store of type %T", src)
	}
	to, ok := dst.(Copier)
	if !ok {
		return nil, fmt.Errorf("copy control store: cannot write a store of type %T", dst)
	}
	have, err := to.CountRows(ctx)
	if err != nil {
		return nil, fmt.Errorf("copy control store: %w", err)
	}
	if err := checkEmpty(have); err != nil {
		return nil, err
	}
	copied := map[string]int64{}
	err = to.LoadTables(ctx, func(put func(*Table, []any) error) error {
		return from.DumpTables(ctx, func(t *Table, row []any) error {
			copied[t.Name]++
			if err := put(t, row); err != nil {
				return fmt.Errorf("%s: %w", t.Name, err)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("copy control store: %w", err)
	}
	want, err := from.CountRows(ctx)
	if err != nil {
		return nil, fmt.Errorf("copy control store: %w", err)
	}
	got, err := to.CountRows(ctx)
	if err != nil {
		return nil, fmt.Errorf("copy control store: %w", err)
	}
	var diffs []string
	for _, t := range Tables {
		if got[t.Name] != copied[t.Name] {
			diffs = append(diffs, fmt.Sprintf("%s: %d copied, %d in the copy", t.Name, copied[t.Name], got[t.Name]))
		}
	}
	for _, name := range DerivedTables {
		if got[name] != want[name] {
			diffs = append(diffs, fmt.Sprintf("%s: %d in the source, %d in the copy", name, want[name], got[name]))
		}
	}
	if len(diffs) > 0 {
		return nil, fmt.Errorf("copy control store: the copy differs: %s", strings.Join(diffs, "; "))
	}
	res, err := audit.Verify(ctx, dst)
	if err != nil {
		return nil, fmt.Errorf("copy control store: verify the audit log of the copy: %w", err)
	}
	if res.Broken != nil {
		return nil, fmt.Errorf("copy control store: the audit log of the copy is broken at entry %d: %s", res.Broken.ID, res.Broken.Reason)
	}
	return copied, nil
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

// ErrRowShape is returned by a store's put when a row does not have one
// value per column of its table.
var ErrRowShape = errors.New("row does not match the columns of its table")
