package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/device"
)

// Endpoint is the machine an agent manages: the real one (System) or a
// simulated one (package sim). The agent does the protocol, the state,
// the local --allow policy, policies and its own removal; the endpoint
// reports what it is and runs the commands that change it.
type Endpoint interface {
	// Snapshot returns what the endpoint reports at a check-in. It returns
	// ErrUnavailable while the endpoint cannot check in (it restarts).
	Snapshot(ctx context.Context) (*Snapshot, error)

	// Execute runs a command the local policy allows: collect-logs,
	// install-updates, reboot or finish-feature-upgrade.
	Execute(ctx context.Context, cmd Command) Outcome
}

// ErrUnavailable is returned by Endpoint.Snapshot while the endpoint cannot
// check in: the agent skips that check-in.
var ErrUnavailable = errors.New("the endpoint is not available")

// PolicyChecker is implemented by endpoints that check policy settings
// beyond the ones CheckPolicy knows.
type PolicyChecker interface {
	// CheckPolicy returns whether the endpoint complies with settings (nil
	// when it cannot tell) and a message that says why not.
	CheckPolicy(settings json.RawMessage, snap *Snapshot) (compliant *bool, message string)
}

// Snapshot is what an endpoint reports.
type Snapshot struct {
	Hostname       string
	OS             agentproto.OS
	Arch           string
	IPs            []string
	Inventory      agentproto.Inventory
	FeatureUpgrade agentproto.FeatureUpgrade
	RebootPending  bool
}

// Command is a command to run.
type Command struct {
	ID     string
	Type   device.CommandType
	Params json.RawMessage
}

// Outcome is how a command ended.
type Outcome struct {
	Failed   bool
	Message  string
	ExitCode *int
	Data     map[string]any // a JSON object, per type
	// Bundle is the log bundle of a collect-logs command, of type
	// BundleType.
	Bundle     []byte
	BundleType string
}

// Failf returns a failed Outcome whose message is format applied to args.
func Failf(format string, args ...any) Outcome {
	return Outcome{Failed: true, Message: fmt.Sprintf(format, args...)}
}

// Destructive lists the command types that change the endpoint and run
// only when the agent's --allow list names them. The others are always
// allowed: collect-logs reads, apply-policy records settings and checks
// them without changing the system, and remove deletes only the agent's
// own state after an administrator already removed the endpoint.
var Destructive = []device.CommandType{device.InstallUpdates, device.Reboot, device.FinishFeatureUpgrade}

// IsDestructive reports whether t is one of Destructive.
func IsDestructive(t device.CommandType) bool {
	for _, d := range Destructive {
		if d == t {
			return true
		}
	}
	return false
}

// PolicyApplier is implemented by endpoints that change the system to
// apply a policy's settings (a Windows endpoint writes its Windows Update
// for Business settings to the registry) rather than only check them.
type PolicyApplier interface {
	// ApplyPolicy applies the settings it knows of a policy; it returns
	// an error for settings that do not parse or cannot be applied.
	ApplyPolicy(ctx context.Context, settings json.RawMessage) error
}

// SystemConfig is what NewSystem, the endpoint of the machine the agent
// runs on, needs.
type SystemConfig struct {
	// LogFiles replace the system's usual log files in a log bundle.
	LogFiles []string
	// AgentLog is the agent's own log file, added to log bundles.
	AgentLog string
	Logger   *slog.Logger
}
