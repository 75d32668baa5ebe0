package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWindowsUpdatePolicy(t *testing.T) {
	reg := mustReadReg(t, "windows11-23h2.reg")
	settings := json.RawMessage(`{"windowsUpdate": {"deferQualityUpdatesDays": 7, "deferFeatureUpdatesDays": 60,
		"productVersion": "Windows 11", "targetReleaseVersion": "23H2"}, "noPendingReboot": true}`)
	snap := &Snapshot{}
	compliant, msg := CheckWindowsPolicy(reg, settings, snap)
	if compliant == nil || *compliant || !strings.Contains(msg, "Windows Update policy DeferQualityUpdatesPeriodInDays is not set, want 7") {
		t.Fatalf("before applying: compliant %v, %q", compliant, msg)
	}
	p, err := ParseWindowsUpdatePolicy(settings)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Apply(reg); err != nil {
		t.Fatal(err)
	}
	vals, _ := reg.Values(regWindowsUpdatePol)
	got := map[string]string{}
	for k, v := range vals {
		got[k] = v.Text()
	}
	want := map[string]string{
		"DeferQualityUpdates": "1", "DeferQualityUpdatesPeriodInDays": "7",
		"DeferFeatureUpdates": "1", "DeferFeatureUpdatesPeriodInDays": "60",
		"TargetReleaseVersion": "1", "TargetReleaseVersionInfo": "23H2", "ProductVersion": "Windows 11",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("registry (-want +got):\n%s", diff)
	}
	compliant, msg = CheckWindowsPolicy(reg, settings, snap)
	if compliant == nil || !*compliant || msg != "" {
		t.Errorf("after applying: compliant %v, %q", compliant, msg)
	}
	// A setting changed by hand is found.
	reg.SetValue(regWindowsUpdatePol, "DeferFeatureUpdatesPeriodInDays", RegValue{Kind: RegNumber, Number: 0})
	if compliant, msg := CheckWindowsPolicy(reg, settings, snap); *compliant || !strings.Contains(msg, "DeferFeatureUpdatesPeriodInDays is 0, want 60") {
		t.Errorf("changed by hand: compliant %v, %q", *compliant, msg)
	}
}

func TestWindowsUpdatePolicyInvalid(t *testing.T) {
	for _, tc := range []struct{ settings, want string }{
		{`{"windowsUpdate": {"deferQualityUpdatesDays": 31}}`, "want 0 to 30"},
		{`{"windowsUpdate": {"deferFeatureUpdatesDays": -1}}`, "want 0 to 365"},
		{`{"windowsUpdate": {"targetReleaseVersion": "23H2"}}`, "go together"},
		{`{"windowsUpdate": {"productVersion": "Windows 12", "targetReleaseVersion": "23H2"}}`, "want Windows 10 or Windows 11"},
		{`{"windowsUpdate": {"productVersion": "Windows 11", "targetReleaseVersion": "latest"}}`, "want a release such as 23H2"},
		{`{"windowsUpdate": "yes"}`, "windowsUpdate:"},
	} {
		if _, err := ParseWindowsUpdatePolicy(json.RawMessage(tc.settings)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one containing %q", tc.settings, err, tc.want)
		}
	}
	if p, err := ParseWindowsUpdatePolicy(json.RawMessage(`{"maxPendingUpdates": 3}`)); p != nil || err != nil {
		t.Errorf("no windowsUpdate: %v, %v", p, err)
	}
}
