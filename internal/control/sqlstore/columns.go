package sqlstore

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/exposure"
)

// The column lists and orderings of the store's queries, and the
// conversions between rows and domain values that several queries share.

// agentColumns are the columns of agents that the store reads and writes, in order.
const agentColumns = `id, hostname, os_platform, os_name, os_version, os_build, arch, agent_version, capability,
	ips, ring, enroll_secret_id, credential_hash, enrolled_at, last_seen_at, inventory,
	feature_upgrade, feature_target, applied_policies, reboot_pending, removed_at, ring_source, inventory_hash`

// ringColumns are the columns of rings, in order.
const ringColumns = `name, position, description, created_at, rule`

// rolloutColumns are the columns of rollouts, in order.
const rolloutColumns = `id, name, kind, params, policy_id, policy_version, rings, ring_index, state, created_by, created_at, updated_at`

// sessionColumns are the columns of a console session, of sessions s joined with admins a.
const sessionColumns = `s.id_hash, s.admin_id, a.email, s.created_at, s.last_seen_at, s.expires_at, s.reauth_at, s.client_address, s.user_agent`

// commandColumns are the columns of commands, in order.
const commandColumns = `id, agent_id, type, state, params, result, created_by, created_at, updated_at, expires_at, rollout_id, rollout_ring`

// activeStates is the SQL list of device.activeStates.
const activeStates = `('queued', 'delivered', 'running')`

// keyColumns are the columns of api_keys, in order.
const keyColumns = `id, name, secret_hash, privileged, created_by, created_at, last_used_at, expires_at, revoked_at`

// likeEscape escapes s for a LIKE pattern with ESCAPE '\'.
func likeEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(s)
}

// notFound wraps errs.ErrNotFound with a client-facing message.
func notFound(what, id string) error {
	return errs.NotFoundf("%s %s not found", what, id)
}

// orMinus stores an optional score: -1 for none.
func orMinus(f *float64) float64 {
	if f == nil {
		return -1
	}
	return *f
}

// fromMinus reads a score stored by orMinus.
func fromMinus(f float64) *float64 {
	if f < 0 {
		return nil
	}
	return &f
}

// riskColumns are the columns scanRisk reads, of cve_risks aliased r.
const riskColumns = `r.cve_id, r.kev, r.epss, r.cvss, r.severity, r.description`

// scanRisk returns the scan destinations of riskColumns (then extra) into dst; fillRisk completes dst after the scan.
func scanRisk(dst *exposure.Risk, extra ...any) []any {
	return append([]any{&dst.CVEID, &dst.KEV, new(float64), new(float64), &dst.Severity, &dst.Description}, extra...)
}

// fillRisk sets the scores of dst from the destinations scanRisk returned.
func fillRisk(dst *exposure.Risk, args []any) {
	dst.EPSS = fromMinus(*args[2].(*float64))
	dst.CVSS = fromMinus(*args[3].(*float64))
}

// riskOrder orders rows of cve_risks r by risk.
const riskOrder = `r.kev DESC, r.epss DESC, r.cvss DESC, r.cve_key`

// findingColumns are the columns of agent_vulnerabilities v that findingArgs scans.
const findingColumns = `v.ecosystem, v.product, v.package, v.installed, v.fixed, v.kb, v.status, v.reason, v.eol_from, v.eoes_from`

// findingArgs returns the scan destinations of findingColumns into f.
func findingArgs(f *exposure.Finding) []any {
	return []any{&f.Ecosystem, &f.Product, &f.Package, &f.Installed, &f.Fixed, &f.KB, (*string)(&f.Status), &f.Reason, &f.EOLFrom, &f.EOESFrom}
}

// policySelect reads the current version of policies, for scanPolicy.
const policySelect = `SELECT p.id, p.name, p.version, v.settings, v.created_by, p.created_at, v.created_at
	FROM policies p JOIN policy_versions v ON v.policy_id = p.id AND v.version = p.version`

// scanPolicy scans a row of policySelect.
func scanPolicy(row scanner) (*device.Policy, error) {
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

// auditColumns are the columns of audit_log, in order.
const auditColumns = `id, time, actor, key_id, action, method, path, status, client_address, details, prev_hash, hash`

// enrollColumns are the columns of enroll_secrets, in order.
const enrollColumns = `id, secret_hash, ring, created_by, created_at, expires_at, revoked_at, last_used_at, uses`

// adminColumns are the columns of admins, in order.
const adminColumns = `id, email, password_hash, created_at, last_login_at`

// timeOr returns t, or the time of now when t is zero.
func timeOr(t time.Time, now func() time.Time) time.Time {
	if t.IsZero() {
		return now()
	}
	return t
}
