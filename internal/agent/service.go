package agent

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"strings"
)

// ServiceName is the name the agent's service is registered under: the
// Windows service, the launchd label's last part, the systemd unit.
const ServiceName = "patchline-agent"

// ServiceSpec is what installing the agent as a service of the operating
// system needs: the program and its arguments (`agent --server … --state
// …`), and the state directory, where the enrollment secret is kept
// rather than on a command line that every local user can read.
type ServiceSpec struct {
	Executable string
	Args       []string
	StateDir   string
}

// EnrollSecretFile is the file of the state directory that holds the
// enrollment secret of an installed agent.
const EnrollSecretFile = "enroll-secret"

// LaunchdLabel is the label of the agent's launchd daemon on macOS.
const LaunchdLabel = "com.patchline.agent"

// LaunchdPlistPath is where the daemon's property list is installed.
const LaunchdPlistPath = "/Library/LaunchDaemons/" + LaunchdLabel + ".plist"

// LaunchdPlist returns the property list of the agent's launchd daemon:
// started at boot, kept alive, its output in the state directory.
func LaunchdPlist(spec ServiceSpec) []byte {
	var b bytes.Buffer
	esc := func(s string) string {
		var e bytes.Buffer
		xml.EscapeText(&e, []byte(s))
		return e.String()
	}
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>` + LaunchdLabel + `</string>
	<key>ProgramArguments</key>
	<array>
`)
	for _, a := range append([]string{spec.Executable}, spec.Args...) {
		fmt.Fprintf(&b, "\t\t<string>%s</string>\n", esc(a))
	}
	fmt.Fprintf(&b, `	</array>
	<key>RunAtLoad</key>
	<true/>
	<key>KeepAlive</key>
	<dict>
		<key>SuccessfulExit</key>
		<false/>
	</dict>
	<key>ThrottleInterval</key>
	<integer>30</integer>
	<key>StandardErrorPath</key>
	<string>%s/agent.stderr.log</string>
</dict>
</plist>
`, esc(strings.TrimRight(spec.StateDir, "/")))
	return b.Bytes()
}

// SystemdUnitPath is where the agent's systemd unit is installed.
const SystemdUnitPath = "/etc/systemd/system/" + ServiceName + ".service"

// SystemdUnit returns the agent's systemd unit: started at boot,
// restarted when it fails, but not after it stopped because the endpoint
// was removed (exit status 0).
func SystemdUnit(spec ServiceSpec) []byte {
	quote := func(s string) string {
		if s != "" && !strings.ContainsAny(s, " \t\"'\\$%;") {
			return s
		}
		r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", "$$", "%", "%%")
		return `"` + r.Replace(s) + `"`
	}
	var line []string
	for _, a := range append([]string{spec.Executable}, spec.Args...) {
		line = append(line, quote(a))
	}
	return []byte(`[Unit]
Description=Patchline agent
Documentation=https://github.com/patchline/patchline/blob/main/docs/agent.md
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=` + strings.Join(line, " ") + `
Restart=on-failure
RestartSec=30s

[Install]
WantedBy=multi-user.target
`)
}
