//go:build !windows && !darwin

package agent

// NewSystem returns the endpoint of the machine the agent runs on: a
// Linux system (System).
func NewSystem(cfg SystemConfig) Endpoint {
	return &System{LogFiles: cfg.LogFiles, AgentLog: cfg.AgentLog, Logger: cfg.Logger}
}
