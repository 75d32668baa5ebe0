//go:build !windows

package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// DefaultServiceStateDir is the state directory of the installed agent:
// /Library/Application Support/Patchline on macOS, /var/lib/patchline-agent
// elsewhere.
func DefaultServiceStateDir() string {
	if runtime.GOOS == "darwin" {
		return "/Library/Application Support/Patchline"
	}
	return "/var/lib/patchline-agent"
}

// SecureStateDir creates dir readable only by its owner (root).
func SecureStateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

func runQuiet(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// InstallService installs the agent as a launchd daemon on macOS or a
// systemd service on Linux, started now and at every boot.
func InstallService(spec ServiceSpec) error {
	switch runtime.GOOS {
	case "darwin":
		if _, err := os.Stat(LaunchdPlistPath); err == nil {
			return fmt.Errorf("%s exists already: run `patchline agent uninstall` first", LaunchdPlistPath)
		}
		if err := os.WriteFile(LaunchdPlistPath, LaunchdPlist(spec), 0o644); err != nil {
			return err
		}
		return runQuiet("launchctl", "bootstrap", "system", LaunchdPlistPath)
	case "linux":
		if _, err := os.Stat(SystemdUnitPath); err == nil {
			return fmt.Errorf("%s exists already: run `patchline agent uninstall` first", SystemdUnitPath)
		}
		if err := os.WriteFile(SystemdUnitPath, SystemdUnit(spec), 0o644); err != nil {
			return err
		}
		if err := runQuiet("systemctl", "daemon-reload"); err != nil {
			return err
		}
		return runQuiet("systemctl", "enable", "--now", ServiceName)
	}
	return fmt.Errorf("installing the agent as a service is not supported on %s", runtime.GOOS)
}

// UninstallService removes the agent's service, after stopping it when
// stop is set; the agent removed from Patchline removes its own service
// without stopping it, and exits.
func UninstallService(stop bool) error {
	switch runtime.GOOS {
	case "darwin":
		if stop {
			if err := runQuiet("launchctl", "bootout", "system/"+LaunchdLabel); err != nil {
				return err
			}
		}
		return os.Remove(LaunchdPlistPath)
	case "linux":
		args := []string{"disable", ServiceName}
		if stop {
			args = []string{"disable", "--now", ServiceName}
		}
		if err := runQuiet("systemctl", args...); err != nil {
			return err
		}
		if err := os.Remove(SystemdUnitPath); err != nil {
			return err
		}
		return runQuiet("systemctl", "daemon-reload")
	}
	return fmt.Errorf("the agent's service is not supported on %s", runtime.GOOS)
}

// RunService reports false: on macOS and Linux, launchd and systemd run
// the agent as an ordinary process.
func RunService(bool, func(ctx context.Context) error) (bool, error) { return false, nil }
