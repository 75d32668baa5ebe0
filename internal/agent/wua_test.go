package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/agentproto"
)

// The titles, KB numbers and classifications are those Microsoft Update
// gives the updates of Windows 11 23H2 in November and December 2024.
var wuaList = []WUAUpdate{
	{ID: "a1", Title: "2024-12 Cumulative Update for Windows 11 Version 23H2 for x64-based Systems (KB5048685)", KBs: []string{"5048685"}, Severity: "Critical", Categories: []string{"Security Updates", "Windows 11"}, Reboot: true},
	{ID: "a2", Title: "Security Intelligence Update for Microsoft Defender Antivirus - KB2267602 (Version 1.421.1576.0)", KBs: []string{"2267602"}, Categories: []string{"Definition Updates"}},
	{ID: "a3", Title: "Windows 11, version 24H2", Categories: []string{"Upgrades"}, Downloaded: true, Reboot: true},
	{ID: "a4", Title: "2024-12 Cumulative Update for .NET Framework 3.5 and 4.8.1 for Windows 11, version 23H2 for x64 (KB5048158)", KBs: []string{"5048158"}, Severity: "Important", Categories: []string{"Security Updates"}},
}

func TestWUAPending(t *testing.T) {
	pending, fu := WUAPending(wuaList)
	want := []agentproto.Update{
		{ID: "KB5048685", Title: wuaList[0].Title, Severity: "critical", RebootRequired: true},
		{ID: "KB2267602", Title: wuaList[1].Title},
		{ID: "a3", Title: "Windows 11, version 24H2", RebootRequired: true},
		{ID: "KB5048158", Title: wuaList[3].Title, Severity: "important"},
	}
	if diff := cmp.Diff(want, pending); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
	if want := (agentproto.FeatureUpgrade{State: "ready", Target: "Windows 11 24H2"}); fu != want {
		t.Errorf("feature upgrade = %+v, want %+v", fu, want)
	}
	list := append([]WUAUpdate{}, wuaList...)
	list[2].Downloaded = false
	if _, fu := WUAPending(list); fu.State != "none" {
		t.Errorf("an offered feature update not downloaded: state %q, want none", fu.State)
	}
}

func TestSelectWUA(t *testing.T) {
	ids := func(list []WUAUpdate) []string {
		var out []string
		for _, u := range list {
			out = append(out, u.UpdateID())
		}
		return out
	}
	all, err := SelectWUA(wuaList, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"KB5048685", "KB5048158"}, ids(all)); diff != "" {
		t.Errorf("security updates (-want +got):\n%s", diff)
	}
	some, err := SelectWUA(wuaList, []string{"kb2267602", "5048158", "KB2267602"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"KB2267602", "KB5048158"}, ids(some)); diff != "" {
		t.Errorf("named updates (-want +got):\n%s", diff)
	}
	if _, err := SelectWUA(wuaList, []string{"KB5000000"}); err == nil || !strings.Contains(err.Error(), "KB5000000 is not a pending update") {
		t.Errorf("unknown KB: err = %v", err)
	}
}

func TestWUAInstalled(t *testing.T) {
	day := func(s string) time.Time { d, _ := time.Parse("2006-01-02", s); return d }
	history := []WUAHistoryEntry{ // newest first, as QueryHistory returns it
		{Operation: 2, ResultCode: wuaSucceeded, Date: day("2024-12-01"), Title: "2024-11 Cumulative Update Preview for Windows 11 Version 23H2 for x64-based Systems (KB5046756)"},
		{Operation: 1, ResultCode: wuaFailed, Date: day("2024-11-20"), Title: "2024-11 Cumulative Update for .NET Framework 3.5 and 4.8.1 (KB5045935)"},
		{Operation: 1, ResultCode: wuaSucceeded, Date: day("2024-11-18"), Title: "2024-11 Cumulative Update Preview for Windows 11 Version 23H2 for x64-based Systems (KB5046756)"},
		{Operation: 1, ResultCode: wuaSucceeded, Date: day("2024-11-13"), Title: "2024-11 Cumulative Update for Windows 11 Version 23H2 for x64-based Systems (KB5046633)"},
		{Operation: 1, ResultCode: wuaSucceededWithErrors, Date: day("2024-11-13"), Title: "Security Intelligence Update for Microsoft Defender Antivirus - KB2267602 (Version 1.421.1576.0)"},
		{Operation: 1, ResultCode: wuaSucceeded, Date: day("2024-10-09"), Title: "2024-10 Cumulative Update for Windows 11 Version 23H2 for x64-based Systems (KB5044285)"},
	}
	got := WUAInstalled(history)
	want := []agentproto.Update{
		{ID: "KB5046633", Title: history[3].Title + " installed 2024-11-13"},
		{ID: "KB5044285", Title: history[5].Title + " installed 2024-10-09"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("installed (-want +got):\n%s", diff)
	}
}

func TestWUAOutcome(t *testing.T) {
	sel := []WUAUpdate{wuaList[0], wuaList[3]}
	ok := WUAOutcome(sel, WUAInstallResult{ResultCode: wuaSucceeded, RebootRequired: true,
		Updates: []WUAUpdateResult{{ResultCode: wuaSucceeded}, {ResultCode: wuaSucceeded}}})
	if ok.Failed || ok.ExitCode == nil || *ok.ExitCode != 0 ||
		ok.Message != "installed 2 of 2 updates: KB5048685, KB5048158; a restart is required to finish" {
		t.Errorf("success: %+v", ok)
	}
	bad := WUAOutcome(sel, WUAInstallResult{ResultCode: wuaSucceededWithErrors,
		Updates: []WUAUpdateResult{{ResultCode: wuaSucceeded}, {ResultCode: wuaFailed, HResult: -2145124329}}})
	if !bad.Failed || bad.Message != "installed 1 of 2 updates: KB5048685; failed: KB5048158 (failed, 0x80240017)" {
		t.Errorf("partial failure: %+v", bad)
	}
	aborted := WUAOutcome(sel[:1], WUAInstallResult{ResultCode: wuaAborted, HResult: -2145124322})
	if !aborted.Failed || !strings.Contains(aborted.Message, "KB5048685 (aborted, 0x8024001E)") {
		t.Errorf("aborted: %+v", aborted)
	}
}
