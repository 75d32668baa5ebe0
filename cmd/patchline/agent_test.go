package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/device"
)

func TestAgentConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     AgentConfig
		wantErr bool
		allow   []device.CommandType
	}{
		{"defaults", AgentConfig{Server: "http://127.0.0.1:8081", StateDir: "/tmp/s"}, false, nil},
		{"allow list", AgentConfig{Server: "https://p.example.com/", StateDir: "/tmp/s", Allow: "reboot, install-updates"}, false,
			[]device.CommandType{device.Reboot, device.InstallUpdates}},
		{"none", AgentConfig{Server: "http://localhost:8081", StateDir: "/tmp/s", Allow: "none"}, false, nil},
		{"plain HTTP to another machine", AgentConfig{Server: "http://patchline.example:8081", StateDir: "/tmp/s"}, true, nil},
		{"plain HTTP allowed", AgentConfig{Server: "http://patchline.example:8081", StateDir: "/tmp/s", InsecureHTTP: true}, false, nil},
		{"pin", AgentConfig{Server: "https://patchline.example:8081", StateDir: "/tmp/s", PinSHA256: "sha256//47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}, false, nil},
		{"pin in hex", AgentConfig{Server: "https://patchline.example:8081", StateDir: "/tmp/s", PinSHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}, false, nil},
		{"malformed pin", AgentConfig{Server: "https://patchline.example:8081", StateDir: "/tmp/s", PinSHA256: "abc"}, true, nil},
		{"pin over plain HTTP", AgentConfig{Server: "http://127.0.0.1:8081", StateDir: "/tmp/s", PinSHA256: "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}, true, nil},
		{"missing CA file", AgentConfig{Server: "https://patchline.example:8081", StateDir: "/tmp/s", CAFile: "/nonexistent/ca.pem"}, true, nil},
		{"non-destructive in --allow", AgentConfig{Server: "http://x", StateDir: "/tmp/s", Allow: "collect-logs"}, true, nil},
		{"unknown action", AgentConfig{Server: "http://x", StateDir: "/tmp/s", Allow: "format-disk"}, true, nil},
		{"no server", AgentConfig{StateDir: "/tmp/s"}, true, nil},
		{"server without scheme", AgentConfig{Server: "127.0.0.1:8081", StateDir: "/tmp/s"}, true, nil},
		{"relative log file", AgentConfig{Server: "http://x", StateDir: "/tmp/s", LogFiles: "syslog"}, true, nil},
		{"negative interval", AgentConfig{Server: "http://x", StateDir: "/tmp/s", Interval: -1}, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Validate = %v, want error %v", err, tt.wantErr)
			}
			if err == nil {
				if diff := cmp.Diff(tt.allow, tt.cfg.allow); diff != "" {
					t.Errorf("allow (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestDefaultStateDir(t *testing.T) {
	env := &Env{Getenv: func(k string) string {
		return map[string]string{"HOME": "/home/ops", "XDG_STATE_HOME": ""}[k]
	}}
	want := filepath.Join("/home/ops", ".local", "state", "patchline-agent")
	if os.Geteuid() == 0 {
		want = "/var/lib/patchline-agent"
	}
	if got := defaultStateDir(env); got != want {
		t.Errorf("defaultStateDir = %q, want %q", got, want)
	}
}
