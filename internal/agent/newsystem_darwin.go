//go:build darwin

package agent

// NewSystem returns the endpoint of the machine the agent runs on: a Mac
// (MacSystem).
func NewSystem(cfg SystemConfig) Endpoint {
	return &MacSystem{LogFiles: cfg.LogFiles, AgentLog: cfg.AgentLog, Logger: cfg.Logger}
}
