package device

import (
	"context"
	"encoding/json"
	"time"
)

// CommandType is what a command asks an agent to do.
type CommandType string

// The command types.
const (
	CollectLogs          CommandType = "collect-logs"
	InstallUpdates       CommandType = "install-updates"
	Reboot               CommandType = "reboot"
	Remove               CommandType = "remove"
	FinishFeatureUpgrade CommandType = "finish-feature-upgrade"
	ApplyPolicy          CommandType = "apply-policy"
)

// CommandTypes lists the command types.
var CommandTypes = []CommandType{CollectLogs, InstallUpdates, Reboot, Remove, FinishFeatureUpgrade, ApplyPolicy}

// TTL returns how long a command of type t may stay unfinished before it
// expires. A reboot or a log collection that arrives days late is more
// surprise than help; an update or a policy is still wanted.
func (t CommandType) TTL() time.Duration {
	switch t {
	case CollectLogs, Reboot:
		return 24 * time.Hour
	}
	return 7 * 24 * time.Hour
}

// CommandState is where a command stands.
type CommandState string

// The command states: queued → delivered → running → succeeded | failed |
// expired | canceled.
const (
	Queued    CommandState = "queued"    // waits for the agent's next check-in
	Delivered CommandState = "delivered" // handed to the agent
	Running   CommandState = "running"   // the agent reported it started
	Succeeded CommandState = "succeeded"
	Failed    CommandState = "failed"
	Expired   CommandState = "expired"  // not finished within its type's TTL
	Canceled  CommandState = "canceled" // canceled before it ran
)

// CommandStates lists the command states in lifecycle order.
var CommandStates = []CommandState{Queued, Delivered, Running, Succeeded, Failed, Expired, Canceled}

// ActiveStates are the states of a command that is not over.
var ActiveStates = []CommandState{Queued, Delivered, Running}

// Final reports whether s is a final state.
func (s CommandState) Final() bool {
	switch s {
	case Succeeded, Failed, Expired, Canceled:
		return true
	}
	return false
}

var transitions = map[CommandState][]CommandState{
	Queued:    {Delivered, Expired, Canceled},
	Delivered: {Running, Succeeded, Failed, Expired, Canceled},
	Running:   {Succeeded, Failed, Expired},
}

// CanTransition reports whether a command may go from one state to another.
func CanTransition(from, to CommandState) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Result is what an agent reports about a command.
type Result struct {
	// Message says what happened, and why for a failure ("not allowed by
	// this endpoint's local policy").
	Message  string          `json:"message"`
	ExitCode *int            `json:"exitCode,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"` // a JSON object, per type
}

// Command is an instruction to one agent.
type Command struct {
	ID          string
	AgentID     string
	Type        CommandType
	State       CommandState
	Params      json.RawMessage // a JSON object, per type; nil for none
	Result      *Result         // nil until the agent reports one
	CreatedBy   string          // the actor that queued it: "key:<keyId>", …
	CreatedAt   time.Time
	UpdatedAt   time.Time
	ExpiresAt   time.Time
	RolloutID   string // the rollout that queued it, "" for none
	RolloutRing string // the ring of the rollout it was queued for
}

// NewCommand returns a queued command of type t for an agent.
func NewCommand(agentID string, t CommandType, params json.RawMessage, createdBy string, now time.Time) *Command {
	now = now.UTC()
	return &Command{
		ID:        NewID(CommandIDPrefix),
		AgentID:   agentID,
		Type:      t,
		State:     Queued,
		Params:    params,
		CreatedBy: createdBy,
		CreatedAt: now,
		UpdatedAt: now,
		ExpiresAt: now.Add(t.TTL()),
	}
}

// InstallUpdatesParams are the parameters of an install-updates command.
type InstallUpdatesParams struct {
	// Updates are the ids of the pending updates to install; empty means
	// all of them.
	Updates []string `json:"updates,omitempty"`
}

// RebootParams are the parameters of a reboot command.
type RebootParams struct {
	// DelaySeconds is how long the agent warns the user before it reboots.
	DelaySeconds int `json:"delaySeconds,omitempty"`
}

// ApplyPolicyParams are the parameters of an apply-policy command: the
// policy version itself, so that the agent needs nothing more.
type ApplyPolicyParams struct {
	PolicyID string          `json:"policyId"`
	Version  int             `json:"version"`
	Settings json.RawMessage `json:"settings"`
}

// Report is an agent's report about one of its commands.
type Report struct {
	State  CommandState // Running, Succeeded or Failed
	Result *Result
	Time   time.Time
}

// CommandCursor is the position of a command in list order: newest first.
type CommandCursor struct {
	CreatedAt time.Time
	ID        string
}

// CommandFilter selects commands. Zero values mean "no filter".
type CommandFilter struct {
	AgentID   string
	Type      CommandType
	States    []CommandState
	RolloutID string
	Before    *CommandCursor // resume after this command, newest first
	Limit     int            // 0 means no limit
}

// LogBundle is a log archive an agent uploaded for a collect-logs command.
type LogBundle struct {
	CommandID   string
	AgentID     string
	ContentType string
	Size        int64
	SHA256      []byte
	Content     []byte // nil when only the metadata was read
	CreatedAt   time.Time
}

// CommandStore keeps commands.
type CommandStore interface {
	// CreateCommands queues cmds in one transaction. With skipActive, a
	// command is left out when its agent already has an active command of
	// the same type. It returns the commands it queued, and
	// errs.ErrNotFound when an agent is unknown or removed.
	CreateCommands(ctx context.Context, cmds []*Command, skipActive bool) ([]*Command, error)

	// FindCommandByID returns a command. It returns errs.ErrNotFound for an
	// unknown id.
	FindCommandByID(ctx context.Context, id string) (*Command, error)

	// FindCommands returns the commands matching f, newest first.
	FindCommands(ctx context.Context, f CommandFilter) ([]*Command, error)

	// ReportCommand applies an agent's report to one of its commands and
	// returns the command. It returns errs.ErrNotFound when the command is
	// not the agent's and errs.ErrConflict when the state cannot follow the
	// current one.
	ReportCommand(ctx context.Context, agentID, id string, r Report) (*Command, error)

	// CancelCommand cancels a queued or delivered command and returns it.
	// It returns errs.ErrNotFound for an unknown command and
	// errs.ErrConflict for one that is running or over.
	CancelCommand(ctx context.Context, id string, now time.Time) (*Command, error)

	// ExpireCommands moves every active command past its expiry to Expired
	// and returns how many it moved.
	ExpireCommands(ctx context.Context, now time.Time) (int, error)

	// SaveLogBundle stores the log bundle of a collect-logs command of the
	// agent. It returns errs.ErrNotFound when the command is not the
	// agent's or not a collect-logs command, and errs.ErrConflict when the
	// command is over or already has a bundle.
	SaveLogBundle(ctx context.Context, b *LogBundle) error

	// FindLogBundle returns the log bundle of a command, content included.
	// It returns errs.ErrNotFound when there is none.
	FindLogBundle(ctx context.Context, commandID string) (*LogBundle, error)
}
