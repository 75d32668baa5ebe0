package device

import (
	"context"
	"encoding/json"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/errs"
)

// Ring is a deployment ring: a group of agents that receive a rollout
// together, rings in order of Position (pilot before broad).
type Ring struct {
	Name        string // lower-case slug, the identifier
	Position    int    // order of the rings, unique
	Description string
	// Rule, when set, puts in this ring the agents whose ring follows the
	// rules (RingSourceRule) and that it matches, unless a ring of a lower
	// position matches them first.
	Rule      *RingRule
	CreatedAt time.Time
}

// RingRule selects agents by what they report. Every condition set must
// hold; a rule without conditions matches every agent (a catch-all last
// ring). Patterns are shell globs (path.Match: *, ?, [a-z]) matched
// without regard to case.
type RingRule struct {
	OS       []string `json:"os,omitempty"`       // platforms: windows, macos, linux
	Hostname string   `json:"hostname,omitempty"` // "lab-*", "*-pilot-??"
	OSName   string   `json:"osName,omitempty"`   // "Windows 10*", "Ubuntu"
}

// Matches reports whether an agent with this hostname and OS matches r.
func (r *RingRule) Matches(hostname string, os OS) bool {
	if len(r.OS) > 0 && !contains(r.OS, os.Platform) {
		return false
	}
	return globMatch(r.Hostname, hostname) && globMatch(r.OSName, os.Name)
}

func globMatch(pattern, s string) bool {
	if pattern == "" {
		return true
	}
	ok, _ := path.Match(strings.ToLower(pattern), strings.ToLower(s))
	return ok
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// CheckRingRule returns errs.ErrInvalid for a rule that cannot be stored:
// an unknown platform, or a pattern that is malformed or longer than 200
// bytes.
func CheckRingRule(r *RingRule) error {
	for _, p := range r.OS {
		if !ValidPlatform(p) {
			return errs.Invalidf("rule.os must list platforms among %s, got %q", strings.Join(Platforms, ", "), p)
		}
	}
	for _, f := range []struct{ name, pattern string }{{"hostname", r.Hostname}, {"osName", r.OSName}} {
		if len(f.pattern) > 200 {
			return errs.Invalidf("rule.%s must have at most 200 bytes", f.name)
		}
		if _, err := path.Match(f.pattern, ""); err != nil {
			return errs.Invalidf("rule.%s %q is not a valid pattern (*, ?, [a-z])", f.name, f.pattern)
		}
	}
	return nil
}

// RingFor returns the ring that the rules of rings, in order, choose for
// an agent: the first whose rule matches, "" when none does.
func RingFor(rings []*Ring, hostname string, os OS) string {
	for _, r := range rings {
		if r.Rule != nil && r.Rule.Matches(hostname, os) {
			return r.Name
		}
	}
	return ""
}

var ringName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// CheckRingName returns errs.ErrInvalid unless name is a lower-case slug of
// at most 63 characters.
func CheckRingName(name string) error {
	if !ringName.MatchString(name) {
		return errs.Invalidf("ring name %q must be a lower-case slug of letters, digits and dashes, at most 63 long", name)
	}
	return nil
}

// RingStore keeps deployment rings.
type RingStore interface {
	// CreateRing stores a new ring. It returns errs.ErrConflict when its
	// name or position is taken.
	CreateRing(ctx context.Context, r *Ring) error

	// FindRings returns every ring in order.
	FindRings(ctx context.Context) ([]*Ring, error)

	// FindRingByName returns a ring. It returns errs.ErrNotFound for an
	// unknown name.
	FindRingByName(ctx context.Context, name string) (*Ring, error)

	// UpdateRing stores the position, description and rule of the ring
	// named r.Name. Agents whose ring follows the rules move to the ring
	// the new rules choose, in the same transaction. It returns
	// errs.ErrNotFound for an unknown ring and errs.ErrConflict when the
	// position is taken.
	UpdateRing(ctx context.Context, r *Ring) error
}

// RolloutState is where a rollout stands.
type RolloutState string

// The rollout states.
const (
	RolloutPending    RolloutState = "pending"     // no ring started
	RolloutInProgress RolloutState = "in-progress" // a ring started, commands or rings to go
	RolloutCompleted  RolloutState = "completed"   // every ring started and every command over
)

// Rollout is the staged delivery of one change (updates, or a version of a
// policy object) through deployment rings, one ring at a time, in order.
type Rollout struct {
	ID            string
	Name          string
	Kind          CommandType     // InstallUpdates or ApplyPolicy
	Params        json.RawMessage // parameters of every command it queues
	PolicyID      string          // for ApplyPolicy
	PolicyVersion int             // for ApplyPolicy: the version fixed at creation
	Rings         []string        // in ring order
	// Agents, when set, are the only agents of those rings the rollout
	// reaches (the agents a CVE affects); empty means every agent.
	Agents    []string
	RingIndex int // index in Rings of the last ring started, -1 before the first
	State     RolloutState
	CreatedBy string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// CurrentRing returns the ring last started, "" before the first.
func (r *Rollout) CurrentRing() string {
	if r.RingIndex < 0 || r.RingIndex >= len(r.Rings) {
		return ""
	}
	return r.Rings[r.RingIndex]
}

// NextRing returns the ring the next advance starts, "" when none is left.
func (r *Rollout) NextRing() string {
	if r.RingIndex+1 >= len(r.Rings) {
		return ""
	}
	return r.Rings[r.RingIndex+1]
}

// Advance asks a rollout to start its next ring.
type Advance struct {
	// FromRing, when set, must be the rollout's current ring ("" before the
	// first ring has no such check): a client that retries an advance does
	// not move the rollout twice.
	FromRing  string
	CreatedBy string
	Now       time.Time
}

// RingProgress counts the commands of a rollout in one ring by state.
type RingProgress struct {
	Ring   string
	States map[CommandState]int
}

// RolloutFilter selects rollouts. Zero values mean "no filter".
type RolloutFilter struct {
	State RolloutState
	// Before, when set, resumes after the rollout with this id, newest
	// first.
	Before string
	Limit  int // 0 means no limit
}

// RolloutStore keeps rollouts.
type RolloutStore interface {
	// CreateRollout stores a new rollout. Its Rings must exist and are
	// stored in ring order (all rings, in order, when empty); for an
	// ApplyPolicy rollout, the store fixes PolicyVersion and Params to the
	// policy's current version. It returns errs.ErrInvalid for an unknown
	// ring or policy or an empty ring list.
	CreateRollout(ctx context.Context, r *Rollout) error

	// FindRolloutByID returns a rollout. It returns errs.ErrNotFound for an
	// unknown id.
	FindRolloutByID(ctx context.Context, id string) (*Rollout, error)

	// FindRollouts returns the rollouts matching f, newest first.
	FindRollouts(ctx context.Context, f RolloutFilter) ([]*Rollout, error)

	// AdvanceRollout starts the next ring of a rollout: it queues a
	// command for every agent of that ring, in one transaction, and returns
	// the rollout and the commands. It never skips a ring. It returns
	// errs.ErrNotFound for an unknown rollout and errs.ErrConflict when
	// every ring has been started, when a.FromRing is not its current ring,
	// or while commands of the current ring are still active. A rollout
	// completes when the commands of its last ring are over, which the
	// store notes as they end.
	AdvanceRollout(ctx context.Context, id string, a Advance) (*Rollout, []*Command, error)

	// RolloutProgress returns the state counts of the rollout's commands
	// per started ring, in ring order.
	RolloutProgress(ctx context.Context, id string) ([]RingProgress, error)
}

// Policy is a policy object: named, versioned settings for agents. Every
// change makes a new version; deployments name the version.
type Policy struct {
	ID        string
	Name      string
	Version   int             // 1, 2, …
	Settings  json.RawMessage // a JSON object
	CreatedBy string          // of the current version
	CreatedAt time.Time       // of the policy
	UpdatedAt time.Time       // of the current version
}

// MaxPolicySettings bounds the JSON of a policy's settings, in bytes.
const MaxPolicySettings = 64 << 10

// PolicyStore keeps policy objects and their versions.
type PolicyStore interface {
	// CreatePolicy stores a new policy at version 1. It returns
	// errs.ErrConflict when the name is taken.
	CreatePolicy(ctx context.Context, p *Policy) error

	// UpdatePolicy stores settings as the next version of a policy and
	// returns it. It returns errs.ErrNotFound for an unknown id.
	UpdatePolicy(ctx context.Context, id string, settings json.RawMessage, by string, now time.Time) (*Policy, error)

	// FindPolicyByID returns the current version of a policy. It returns
	// errs.ErrNotFound for an unknown id.
	FindPolicyByID(ctx context.Context, id string) (*Policy, error)

	// FindPolicies returns the current version of every policy, by name.
	FindPolicies(ctx context.Context) ([]*Policy, error)

	// PolicyCompliance counts, for each policy of ids, the agents by what
	// they report about it. Unknown ids are left out of the map.
	PolicyCompliance(ctx context.Context, ids []string) (map[string]*Compliance, error)

	// FindPolicyAgents returns the agents that report having applied the
	// policy of f, in list order (hostname, then id), removed ones left
	// out. It returns errs.ErrNotFound for an unknown policy.
	FindPolicyAgents(ctx context.Context, f PolicyAgentFilter) ([]*PolicyAgent, error)
}

// Compliance counts the agents of one policy by what they report. An agent
// counts once among Compliant, Noncompliant, Unknown and Outdated; Pending
// counts apart the agents with an apply-policy command of the policy not
// over yet.
type Compliance struct {
	Compliant    int // applied the current version and comply
	Noncompliant int // applied the current version and do not comply
	Unknown      int // applied the current version and could not check it
	Outdated     int // applied an older version
	Pending      int
}

// The compliance states of a PolicyAgent.
const (
	ComplianceCompliant    = "compliant"
	ComplianceNoncompliant = "noncompliant"
	ComplianceUnknown      = "unknown"
	ComplianceOutdated     = "outdated"
)

// ComplianceStates lists the compliance states.
var ComplianceStates = []string{ComplianceCompliant, ComplianceNoncompliant, ComplianceUnknown, ComplianceOutdated}

// PolicyAgent is what one agent reports about one policy.
type PolicyAgent struct {
	AgentID    string
	Hostname   string
	Version    int   // the version the agent applied
	Compliant  *bool // nil when the agent could check none of the settings
	Message    string
	LastSeenAt time.Time
	State      string // one of ComplianceStates, against the policy's current version
}

// PolicyAgentFilter selects the agents of a policy.
type PolicyAgentFilter struct {
	PolicyID string
	State    string       // one of ComplianceStates, "" for all
	After    *AgentCursor // resume after this agent
	Limit    int          // 0 means no limit
}

// ComplianceState returns the compliance state of an agent that applied
// version applied of a policy whose current version is current.
func ComplianceState(applied, current int, compliant *bool) string {
	switch {
	case applied < current:
		return ComplianceOutdated
	case compliant == nil:
		return ComplianceUnknown
	case *compliant:
		return ComplianceCompliant
	}
	return ComplianceNoncompliant
}

// EnrollSecret is a secret that lets agents enroll, kept as a digest.
type EnrollSecret struct {
	ID         string
	SecretHash []byte
	Ring       string // ring of the agents it enrolls, "" for none
	CreatedBy  string
	CreatedAt  time.Time
	ExpiresAt  *time.Time
	RevokedAt  *time.Time
	LastUsedAt *time.Time
	Uses       int // agents enrolled with it
}

// Usable reports whether s may enroll agents at now.
func (s *EnrollSecret) Usable(now time.Time) bool {
	return s.RevokedAt == nil && (s.ExpiresAt == nil || now.Before(*s.ExpiresAt))
}

// EnrollSecretStore keeps enrollment secrets.
type EnrollSecretStore interface {
	// CreateEnrollSecret stores a new secret. It returns errs.ErrInvalid
	// for an unknown ring.
	CreateEnrollSecret(ctx context.Context, s *EnrollSecret) error

	// FindEnrollSecrets returns every enrollment secret, newest first.
	FindEnrollSecrets(ctx context.Context) ([]*EnrollSecret, error)

	// RevokeEnrollSecret revokes a secret for good and returns it. It
	// returns errs.ErrNotFound for an unknown id and errs.ErrConflict for
	// one already revoked.
	RevokeEnrollSecret(ctx context.Context, id string, at time.Time) (*EnrollSecret, error)
}

// CheckPolicy returns errs.ErrInvalid for a policy name or settings that
// cannot be stored: the name must be 1 to 100 characters, the settings a
// JSON object of at most MaxPolicySettings bytes.
func CheckPolicy(name string, settings json.RawMessage) error {
	if n := len([]rune(name)); n == 0 || n > 100 {
		return errs.Invalidf("policy name must have 1 to 100 characters")
	}
	if len(settings) > MaxPolicySettings {
		return errs.Invalidf("policy settings are larger than %d bytes", MaxPolicySettings)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(settings, &obj); err != nil || obj == nil {
		return errs.Invalidf("policy settings must be a JSON object")
	}
	return nil
}
