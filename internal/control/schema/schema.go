// Package schema holds what the control store's queries share of its tables:
// the column lists and orderings of their queries, and the conversions
// between rows and domain values that do not depend on the database driver.
// The store (internal/control/sqlstore) keeps the same tables with the
// same columns on SQLite and PostgreSQL, so that a control store can be
// copied from one to the other and lists order alike on both.
package schema

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/exposure"
)

// fromMS converts a column of Unix milliseconds to a time.
func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// AgentColumns are the columns of agents that the stores read and write, in order.
const AgentColumns = `id, hostname, os_platform, os_name, os_version, os_build, arch, agent_version, capability,
	ips, ring, enroll_secret_id, credential_hash, enrolled_at, last_seen_at, inventory,
	feature_upgrade, feature_target, applied_policies, reboot_pending, removed_at, ring_source, inventory_hash`

// RingColumns are the columns of rings, in order.
const RingColumns = `name, position, description, created_at, rule`

// RolloutColumns are the columns of rollouts, in order.
const RolloutColumns = `id, name, kind, params, policy_id, policy_version, rings, ring_index, state, created_by, created_at, updated_at`

// SessionColumns are the columns of a console session, of sessions s joined with admins a.
const SessionColumns = `s.id_hash, s.admin_id, a.email, s.created_at, s.last_seen_at, s.expires_at, s.reauth_at, s.client_address, s.user_agent`

// CommandColumns are the columns of commands, in order.
const CommandColumns = `id, agent_id, type, state, params, result, created_by, created_at, updated_at, expires_at, rollout_id, rollout_ring`

// ActiveStates is the SQL list of device.ActiveStates.
const ActiveStates = `('queued', 'delivered', 'running')`

// KeyColumns are the columns of api_keys, in order.
const KeyColumns = `id, name, secret_hash, privileged, created_by, created_at, last_used_at, expires_at, revoked_at`

// LikeEscape escapes s for a LIKE pattern with ESCAPE '\'.
func LikeEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(s)
}

// NotFound wraps errs.ErrNotFound with a client-facing message.
func NotFound(what, id string) error {
	return errs.NotFoundf("%s %s not found", what, id)
}

// OrMinus stores an optional score: -1 for none.
func OrMinus(f *float64) float64 {
	if f == nil {
		return -1
	}
	return *f
}

// FromMinus reads a score stored by OrMinus.
func FromMinus(f float64) *float64 {
	if f < 0 {
		return nil
	}
	return &f
}

// RiskColumns are the columns ScanRisk reads, of cve_risks aliased r.
const RiskColumns = `r.cve_id, r.kev, r.epss, r.cvss, r.severity, r.description`

// ScanRisk returns the scan destinations of RiskColumns (then extra) into dst; FillRisk completes dst after the scan.
func ScanRisk(dst *exposure.Risk, extra ...any) []any {
	return append([]any{&dst.CVEID, &dst.KEV, new(float64), new(float64), &dst.Severity, &dst.Description}, extra...)
}

// FillRisk sets the scores of dst from the destinations ScanRisk returned.
func FillRisk(dst *exposure.Risk, args []any) {
	dst.EPSS = FromMinus(*args[2].(*float64))
	dst.CVSS = FromMinus(*args[3].(*float64))
}

// RiskOrder orders rows of cve_risks r by risk.
const RiskOrder = `r.kev DESC, r.epss DESC, r.cvss DESC, r.cve_key`

// FindingColumns are the columns of agent_vulnerabilities v that FindingArgs scans.
const FindingColumns = `v.ecosystem, v.product, v.package, v.installed, v.fixed, v.kb, v.status, v.reason, v.eol_from, v.eoes_from`

// FindingArgs returns the scan destinations of FindingColumns into f.
func FindingArgs(f *exposure.Finding) []any {
	return []any{&f.Ecosystem, &f.Product, &f.Package, &f.Installed, &f.Fixed, &f.KB, (*string)(&f.Status), &f.Reason, &f.EOLFrom, &f.EOESFrom}
}

// PolicySelect reads the current version of policies, for ScanPolicy.
const PolicySelect = `SELECT p.id, p.name, p.version, v.settings, v.created_by, p.created_at, v.created_at
	FROM policies p JOIN policy_versions v ON v.policy_id = p.id AND v.version = p.version`

// ScanPolicy scans a row of PolicySelect.
func ScanPolicy(row interface{ Scan(dest ...any) error }) (*device.Policy, error) {
	var p device.Policy
	var settings string
	var created, updated int64
	if err := row.Scan(&p.ID, &p.Name, &p.Version, &settings, &p.CreatedBy, &created, &updated); err != nil {
		return nil, err
	}
	p.Settings = json.RawMessage(settings)
	p.CreatedAt, p.UpdatedAt = fromMS(created), fromMS(updated)
	return &p, nil
}

// AuditColumns are the columns of audit_log, in order.
const AuditColumns = `id, time, actor, key_id, action, method, path, status, client_address, details, prev_hash, hash`

// EnrollColumns are the columns of enroll_secrets, in order.
const EnrollColumns = `id, secret_hash, ring, created_by, created_at, expires_at, revoked_at, last_used_at, uses`

// AdminColumns are the columns of admins, in order.
const AdminColumns = `id, email, password_hash, created_at, last_login_at`

// TimeOr returns t, or the time of now when t is zero.
func TimeOr(t time.Time, now func() time.Time) time.Time {
	if t.IsZero() {
		return now()
	}
	return t
}
