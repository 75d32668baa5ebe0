package audit

import "time"

// Event is what an entry records. Each type has a name, its Action, and is
// listed in Events; its JSON encoding is the entry's details.
type Event interface {
	Action() string
}

// EventType describes one type of event.
type EventType struct {
	Action      string
	Description string
	New         func() Event // a zero value of the type, for decoding details
}

// Events lists every type of event, the one registry that the documentation
// and the tests are checked against.
var Events = []EventType{
	{"api.request", "an API-key request to /api that did nothing more specific (reads, and refused requests other than 401)", func() Event { return new(APIRequest) }},
	{"api.auth_failed", "a request to /api answered 401 (no key, a malformed, unknown, wrong, expired or revoked key), or 429 while its address was throttled for failed keys", func() Event { return new(APIAuthFailed) }},
	{"command.queued", "an API request queued commands for agents", func() Event { return new(CommandsQueued) }},
	{"command.canceled", "an API request canceled a command", func() Event { return new(CommandCanceled) }},
	{"agent.enrolled", "an agent enrolled with an enrollment secret", func() Event { return new(AgentEnrolled) }},
	{"agent.removed", "an agent was removed and told to uninstall itself", func() Event { return new(AgentRemoved) }},
	{"agent.ring_changed", "an agent was moved to another deployment ring", func() Event { return new(AgentRingChanged) }},
	{"ring.created", "a deployment ring was created", func() Event { return new(RingCreated) }},
	{"rollout.created", "a rollout was created", func() Event { return new(RolloutCreated) }},
	{"rollout.advanced", "a rollout moved on to its next ring and queued its commands", func() Event { return new(RolloutAdvanced) }},
	{"policy.created", "a policy object was created", func() Event { return new(PolicyCreated) }},
	{"policy.updated", "a policy object got a new version", func() Event { return new(PolicyUpdated) }},
	{"policy.deployed", "a policy object was deployed to agents", func() Event { return new(PolicyDeployed) }},
	{"key.created", "an API key was created", func() Event { return new(KeyCreated) }},
	{"key.privileged_enabled", "an API key was made privileged", func() Event { return new(KeyPrivilegeEnabled) }},
	{"key.revoked", "an API key was revoked", func() Event { return new(KeyRevoked) }},
	{"admin.created", "an administrator account was created", func() Event { return new(AdminCreated) }},
	{"admin.login", "an administrator signed in", func() Event { return new(AdminLogin) }},
	{"admin.login_failed", "a sign-in or a re-authentication as an administrator failed, or was refused while throttled", func() Event { return new(AdminLoginFailed) }},
	{"admin.logout", "an administrator signed out of the console", func() Event { return new(AdminLogout) }},
	{"admin.reauthenticated", "an administrator confirmed their identity again (password, and TOTP code when enrolled) for a privileged action", func() Event { return new(AdminReauthenticated) }},
	{"admin.totp_enabled", "an administrator turned on two-factor authentication (TOTP)", func() Event { return new(AdminTOTPEnabled) }},
	{"admin.totp_disabled", "an administrator turned off two-factor authentication (TOTP)", func() Event { return new(AdminTOTPDisabled) }},
	{"enroll_secret.created", "an enrollment secret was created", func() Event { return new(EnrollSecretCreated) }},
	{"enroll_secret.revoked", "an enrollment secret was revoked", func() Event { return new(EnrollSecretRevoked) }},
	{"log_bundle.downloaded", "an administrator downloaded the log bundle of a collect-logs command from the console", func() Event { return new(LogBundleDownloaded) }},
	{"audit.exported", "an administrator exported the System Audit log as CSV", func() Event { return new(AuditExported) }},
	{"alert_rule.created", "an alert rule was created, with the webhook it tells", func() Event { return new(AlertRuleCreated) }},
	{"alert_rule.deleted", "an alert rule was deleted", func() Event { return new(AlertRuleDeleted) }},
}

// LookupEvent returns the type of event with the given action name.
func LookupEvent(action string) (EventType, bool) {
	for _, t := range Events {
		if t.Action == action {
			return t, true
		}
	}
	return EventType{}, false
}

// APIRequest is an API-key request with nothing more specific to record.
type APIRequest struct{}

// Action implements Event.
func (APIRequest) Action() string { return "api.request" }

// APIAuthFailed is a request refused with 401, or with 429 because its
// address failed too often.
type APIAuthFailed struct {
	// Reason is one of "missing key", "malformed key", "unknown key",
	// "wrong secret", "expired key", "revoked key", "throttled".
	Reason string `json:"reason"`
}

// Action implements Event.
func (APIAuthFailed) Action() string { return "api.auth_failed" }

// CommandsQueued records commands queued by one request.
type CommandsQueued struct {
	Type     string   `json:"type"`
	Commands []string `json:"commands"`
}

// Action implements Event.
func (CommandsQueued) Action() string { return "command.queued" }

// CommandCanceled records a canceled command.
type CommandCanceled struct {
	CommandID string `json:"commandId"`
	AgentID   string `json:"agentId"`
}

// Action implements Event.
func (CommandCanceled) Action() string { return "command.canceled" }

// AgentEnrolled records an enrollment.
type AgentEnrolled struct {
	AgentID        string `json:"agentId"`
	Hostname       string `json:"hostname"`
	EnrollSecretID string `json:"enrollSecretId"`
}

// Action implements Event.
func (AgentEnrolled) Action() string { return "agent.enrolled" }

// AgentRemoved records the removal of an agent.
type AgentRemoved struct {
	AgentID   string `json:"agentId"`
	CommandID string `json:"commandId"`
}

// Action implements Event.
func (AgentRemoved) Action() string { return "agent.removed" }

// AgentRingChanged records an agent moved between rings ("" is no ring).
type AgentRingChanged struct {
	AgentID string `json:"agentId"`
	From    string `json:"from"`
	To      string `json:"to"`
}

// Action implements Event.
func (AgentRingChanged) Action() string { return "agent.ring_changed" }

// RingCreated records a new deployment ring.
type RingCreated struct {
	Name     string `json:"name"`
	Position int    `json:"position"`
}

// Action implements Event.
func (RingCreated) Action() string { return "ring.created" }

// RolloutCreated records a new rollout.
type RolloutCreated struct {
	RolloutID string   `json:"rolloutId"`
	Kind      string   `json:"kind"`
	Rings     []string `json:"rings"`
}

// Action implements Event.
func (RolloutCreated) Action() string { return "rollout.created" }

// RolloutAdvanced records a rollout moving on to a ring.
type RolloutAdvanced struct {
	RolloutID string   `json:"rolloutId"`
	Ring      string   `json:"ring"`
	Commands  []string `json:"commands"`
}

// Action implements Event.
func (RolloutAdvanced) Action() string { return "rollout.advanced" }

// PolicyCreated records a new policy object.
type PolicyCreated struct {
	PolicyID string `json:"policyId"`
	Name     string `json:"name"`
}

// Action implements Event.
func (PolicyCreated) Action() string { return "policy.created" }

// PolicyUpdated records a new version of a policy object.
type PolicyUpdated struct {
	PolicyID string `json:"policyId"`
	Version  int    `json:"version"`
}

// Action implements Event.
func (PolicyUpdated) Action() string { return "policy.updated" }

// PolicyDeployed records the deployment of a policy object.
type PolicyDeployed struct {
	PolicyID string   `json:"policyId"`
	Version  int      `json:"version"`
	Commands []string `json:"commands"`
}

// Action implements Event.
func (PolicyDeployed) Action() string { return "policy.deployed" }

// KeyCreated records a new API key.
type KeyCreated struct {
	KeyID      string     `json:"keyId"`
	Name       string     `json:"name"`
	Privileged bool       `json:"privileged"`
	ExpiresAt  *time.Time `json:"expiresAt"`
}

// Action implements Event.
func (KeyCreated) Action() string { return "key.created" }

// KeyPrivilegeEnabled records a key made privileged.
type KeyPrivilegeEnabled struct {
	KeyID     string    `json:"keyId"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// Action implements Event.
func (KeyPrivilegeEnabled) Action() string { return "key.privileged_enabled" }

// KeyRevoked records a revoked API key.
type KeyRevoked struct {
	KeyID string `json:"keyId"`
}

// Action implements Event.
func (KeyRevoked) Action() string { return "key.revoked" }

// AdminCreated records a new administrator account.
type AdminCreated struct {
	Email string `json:"email"`
}

// Action implements Event.
func (AdminCreated) Action() string { return "admin.created" }

// AdminLogin records an administrator signing in.
type AdminLogin struct {
	Email string `json:"email"`
}

// Action implements Event.
func (AdminLogin) Action() string { return "admin.login" }

// AdminLoginFailed records a failed sign-in or re-authentication.
type AdminLoginFailed struct {
	Email string `json:"email"`
	// Reason is one of "unknown account", "wrong password", "wrong code",
	// "throttled", or "re-authentication: " followed by one of these. It
	// is for the audit log only: the console tells the person signing in
	// nothing that reveals whether an account exists.
	Reason string `json:"reason,omitempty"`
}

// Action implements Event.
func (AdminLoginFailed) Action() string { return "admin.login_failed" }

// EnrollSecretCreated records a new enrollment secret.
type EnrollSecretCreated struct {
	ID        string     `json:"id"`
	Ring      string     `json:"ring,omitempty"`
	ExpiresAt *time.Time `json:"expiresAt"`
}

// Action implements Event.
func (EnrollSecretCreated) Action() string { return "enroll_secret.created" }

// EnrollSecretRevoked records a revoked enrollment secret.
type EnrollSecretRevoked struct {
	ID string `json:"id"`
}

// Action implements Event.
func (EnrollSecretRevoked) Action() string { return "enroll_secret.revoked" }

// AdminLogout records an administrator signing out.
type AdminLogout struct {
	Email string `json:"email"`
}

// Action implements Event.
func (AdminLogout) Action() string { return "admin.logout" }

// AdminReauthenticated records an administrator confirming their identity
// again, which opens a short window for privileged actions.
type AdminReauthenticated struct {
	Email string `json:"email"`
	// For is the console path of the action that asked for it.
	For string `json:"for,omitempty"`
}

// Action implements Event.
func (AdminReauthenticated) Action() string { return "admin.reauthenticated" }

// AdminTOTPEnabled records an administrator enrolling in TOTP.
type AdminTOTPEnabled struct {
	Email string `json:"email"`
}

// Action implements Event.
func (AdminTOTPEnabled) Action() string { return "admin.totp_enabled" }

// AdminTOTPDisabled records an administrator removing their TOTP
// enrollment.
type AdminTOTPDisabled struct {
	Email string `json:"email"`
}

// Action implements Event.
func (AdminTOTPDisabled) Action() string { return "admin.totp_disabled" }

// LogBundleDownloaded records the download of a log bundle.
type LogBundleDownloaded struct {
	CommandID string `json:"commandId"`
	AgentID   string `json:"agentId"`
}

// Action implements Event.
func (LogBundleDownloaded) Action() string { return "log_bundle.downloaded" }

// AuditExported records an export of the audit log, with its filters.
type AuditExported struct {
	KeyID string     `json:"keyId,omitempty"`
	Actor string     `json:"actor,omitempty"`
	Of    string     `json:"action,omitempty"` // the action filter
	Since *time.Time `json:"since,omitempty"`
	Until *time.Time `json:"until,omitempty"`
}

// Action implements Event.
func (AuditExported) Action() string { return "audit.exported" }

// AlertRuleCreated records a new alert rule.
type AlertRuleCreated struct {
	RuleID     string  `json:"ruleId"`
	Name       string  `json:"name"`
	Kind       string  `json:"kind"`
	Threshold  float64 `json:"threshold"`
	WebhookURL string  `json:"webhookUrl"`
}

// Action implements Event.
func (AlertRuleCreated) Action() string { return "alert_rule.created" }

// AlertRuleDeleted records a deleted alert rule.
type AlertRuleDeleted struct {
	RuleID string `json:"ruleId"`
}

// Action implements Event.
func (AlertRuleDeleted) Action() string { return "alert_rule.deleted" }
