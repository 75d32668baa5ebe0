package agent

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/device"
)

// This file holds what the agent makes of the Windows Update Agent's
// answers, apart from the COM calls that get them (wua_windows.go), so
// that it is tested on every platform.

// WUAUpdate is an update as the Windows Update Agent's search describes
// it (IUpdate).
type WUAUpdate struct {
	ID         string   // Identity.UpdateID
	Title      string   // Title
	KBs        []string // KBArticleIDs: "5034441"
	Severity   string   // MsrcSeverity: Critical, Important, Moderate, Low or ""
	Categories []string // Categories' names: "Security Updates", "Upgrades", …
	Downloaded bool     // IsDownloaded
	Reboot     bool     // InstallationBehavior.RebootBehavior is not 0 (never)
}

// UpdateID returns the id the agent reports for u: its first KB, else its
// update id.
func (u WUAUpdate) UpdateID() string {
	if len(u.KBs) > 0 {
		return "KB" + strings.TrimPrefix(strings.ToUpper(u.KBs[0]), "KB")
	}
	return u.ID
}

func (u WUAUpdate) inCategory(name string) bool {
	for _, c := range u.Categories {
		if strings.EqualFold(c, name) {
			return true
		}
	}
	return false
}

// Security reports whether u is a security or critical update.
func (u WUAUpdate) Security() bool {
	return u.Severity != "" || u.inCategory("Security Updates") || u.inCategory("Critical Updates")
}

// FeatureUpgrade reports whether u is a feature update to a new Windows
// release (the "Upgrades" classification).
func (u WUAUpdate) FeatureUpgrade() bool { return u.inCategory("Upgrades") }

// WUAPending returns the pending updates of a search's result, and the
// state of a feature upgrade among them: ready once it is downloaded
// (staged, waiting for the restart that finishes it), none while it is
// only offered.
func WUAPending(list []WUAUpdate) ([]agentproto.Update, agentproto.FeatureUpgrade) {
	pending := []agentproto.Update{}
	fu := agentproto.FeatureUpgrade{State: device.FeatureUpgradeNone}
	for _, u := range list {
		pending = append(pending, agentproto.Update{ID: u.UpdateID(), Title: u.Title, Severity: strings.ToLower(u.Severity), RebootRequired: u.Reboot})
		if u.FeatureUpgrade() && u.Downloaded {
			fu = agentproto.FeatureUpgrade{State: device.FeatureUpgradeReady, Target: featureTarget(u.Title)}
		}
	}
	return pending, fu
}

// featureRelease matches the release a feature update brings: "Windows 11,
// version 24H2", "Feature update to Windows 10, version 22H2".
var featureRelease = regexp.MustCompile(`(?i)(Windows \d+)(?:,)? version (\w+)`)

func featureTarget(title string) string {
	if m := featureRelease.FindStringSubmatch(title); m != nil {
		return m[1] + " " + m[2]
	}
	return title
}

// SelectWUA returns the updates of list that an install-updates command
// asks for: those whose KB or update id is in ids, or every security
// update (feature upgrades aside) when ids is empty. An id that names no
// pending update is an error.
func SelectWUA(list []WUAUpdate, ids []string) ([]WUAUpdate, error) {
	if len(ids) == 0 {
		var out []WUAUpdate
		for _, u := range list {
			if u.Security() && !u.FeatureUpgrade() {
				out = append(out, u)
			}
		}
		return out, nil
	}
	var out []WUAUpdate
	for _, id := range ids {
		want := strings.ToUpper(strings.TrimSpace(id))
		found := false
		for _, u := range list {
			match := strings.EqualFold(u.ID, want)
			for _, kb := range u.KBs {
				match = match || want == "KB"+strings.TrimPrefix(strings.ToUpper(kb), "KB") || want == strings.ToUpper(kb)
			}
			if match {
				found = true
				if !slices.ContainsFunc(out, func(o WUAUpdate) bool { return o.ID == u.ID }) {
					out = append(out, u)
				}
			}
		}
		if !found {
			return nil, fmt.Errorf("%s is not a pending update of this endpoint", id)
		}
	}
	return out, nil
}

// WUAHistoryEntry is an entry of the Windows Update Agent's history
// (IUpdateHistoryEntry).
type WUAHistoryEntry struct {
	Operation  int // 1 installation, 2 uninstallation
	ResultCode int // OperationResultCode
	Date       time.Time
	Title      string
}

// The OperationResultCode values of the Windows Update Agent.
const (
	wuaNotStarted          = 0
	wuaInProgress          = 1
	wuaSucceeded           = 2
	wuaSucceededWithErrors = 3
	wuaFailed              = 4
	wuaAborted             = 5
)

// kbInTitle matches the KB of an update's title: "2024-11 Cumulative
// Update for Windows 11 Version 23H2 for x64-based Systems (KB5046633)".
var kbInTitle = regexp.MustCompile(`\(KB([0-9]{6,8})\)`)

// WUAInstalled returns the updates the history shows installed, newest
// first as the history lists them: the last operation on each KB counts,
// so an update uninstalled since is left out.
func WUAInstalled(history []WUAHistoryEntry) []agentproto.Update {
	seen := map[string]bool{}
	var out []agentproto.Update
	for _, h := range history {
		m := kbInTitle.FindStringSubmatch(h.Title)
		if m == nil {
			continue
		}
		kb := "KB" + m[1]
		if seen[kb] || (h.ResultCode != wuaSucceeded && h.ResultCode != wuaSucceededWithErrors) {
			continue
		}
		seen[kb] = true
		if h.Operation != 1 {
			continue // uninstalled last
		}
		title := h.Title
		if !h.Date.IsZero() {
			title += " installed " + h.Date.UTC().Format("2006-01-02")
		}
		out = append(out, agentproto.Update{ID: kb, Title: title})
	}
	return out
}

// WUAInstallResult is the outcome of an installation
// (IInstallationResult).
type WUAInstallResult struct {
	ResultCode     int
	HResult        int32
	RebootRequired bool
	// Updates are the result codes and HRESULTs of each update, in the
	// order they were given.
	Updates []WUAUpdateResult
}

// WUAUpdateResult is the result of one update of an installation.
type WUAUpdateResult struct {
	ResultCode int
	HResult    int32
}

// WUAOutcome is the Outcome of installing updates with result res.
func WUAOutcome(updates []WUAUpdate, res WUAInstallResult) Outcome {
	var ok, failed []string
	for i, u := range updates {
		r := WUAUpdateResult{ResultCode: res.ResultCode, HResult: res.HResult}
		if i < len(res.Updates) {
			r = res.Updates[i]
		}
		switch r.ResultCode {
		case wuaSucceeded, wuaSucceededWithErrors:
			ok = append(ok, u.UpdateID())
		default:
			failed = append(failed, fmt.Sprintf("%s (%s, 0x%08X)", u.UpdateID(), wuaResultName(r.ResultCode), uint32(r.HResult)))
		}
	}
	msg := fmt.Sprintf("installed %d of %d updates", len(ok), len(updates))
	if len(ok) > 0 {
		msg += ": " + strings.Join(ok, ", ")
	}
	if len(failed) > 0 {
		msg += "; failed: " + strings.Join(failed, ", ")
	}
	if res.RebootRequired {
		msg += "; a restart is required to finish"
	}
	out := Outcome{Message: msg, Data: map[string]any{"installed": ok, "rebootRequired": res.RebootRequired}}
	if len(failed) > 0 || res.ResultCode == wuaFailed || res.ResultCode == wuaAborted {
		out.Failed = true
		out.Data["failed"] = failed
		return out
	}
	zero := 0
	out.ExitCode = &zero
	return out
}

func wuaResultName(code int) string {
	switch code {
	case wuaNotStarted:
		return "not started"
	case wuaInProgress:
		return "in progress"
	case wuaSucceeded:
		return "succeeded"
	case wuaSucceededWithErrors:
		return "succeeded with errors"
	case wuaFailed:
		return "failed"
	case wuaAborted:
		return "aborted"
	}
	return fmt.Sprintf("result %d", code)
}
