package device

import (
	"errors"
	"testing"

	"github.com/patchline/patchline/internal/errs"
)

func TestRingRules(t *testing.T) {
	win := OS{Platform: PlatformWindows, Name: "Windows 10 Pro", Version: "22H2"}
	mac := OS{Platform: PlatformMacOS, Name: "macOS", Version: "14.4.1"}
	tests := []struct {
		name     string
		rule     RingRule
		hostname string
		os       OS
		want     bool
	}{
		{"empty rule matches all", RingRule{}, "anything", mac, true},
		{"platform", RingRule{OS: []string{"windows", "linux"}}, "x", win, true},
		{"other platform", RingRule{OS: []string{"linux"}}, "x", win, false},
		{"hostname glob, any case", RingRule{Hostname: "IT-*"}, "it-lt-0016", win, true},
		{"hostname glob misses", RingRule{Hostname: "it-*"}, "fin-lt-0002", win, false},
		{"os name glob", RingRule{OSName: "windows 10*"}, "x", win, true},
		{"every condition", RingRule{OS: []string{"windows"}, Hostname: "it-*"}, "fin-lt-0002", win, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.rule.Matches(tt.hostname, tt.os); got != tt.want {
				t.Errorf("Matches = %v, want %v", got, tt.want)
			}
		})
	}

	rings := []*Ring{
		{Name: "canary"},
		{Name: "pilot", Rule: &RingRule{Hostname: "it-*"}},
		{Name: "broad", Rule: &RingRule{}},
	}
	if got := RingFor(rings, "it-lt-1", win); got != "pilot" {
		t.Errorf("RingFor it-lt-1 = %q", got)
	}
	if got := RingFor(rings, "fin-lt-1", win); got != "broad" {
		t.Errorf("RingFor fin-lt-1 = %q", got)
	}
	if got := RingFor(rings[:2], "fin-lt-1", win); got != "" {
		t.Errorf("RingFor without a catch-all = %q", got)
	}

	for _, bad := range []RingRule{{OS: []string{"beos"}}, {Hostname: "[a-"}, {OSName: string(make([]byte, 201))}} {
		if err := CheckRingRule(&bad); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("CheckRingRule(%+v) = %v", bad, err)
		}
	}
	if err := CheckRingRule(&RingRule{OS: []string{"macos"}, Hostname: "lab-??"}); err != nil {
		t.Errorf("a good rule: %v", err)
	}
}

func TestComplianceState(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		applied, current int
		compliant        *bool
		want             string
	}{
		{3, 3, &yes, ComplianceCompliant},
		{3, 3, &no, ComplianceNoncompliant},
		{3, 3, nil, ComplianceUnknown},
		{2, 3, &yes, ComplianceOutdated},
	}
	for _, tt := range tests {
		if got := ComplianceState(tt.applied, tt.current, tt.compliant); got != tt.want {
			t.Errorf("ComplianceState(%d, %d, %v) = %s, want %s", tt.applied, tt.current, tt.compliant, got, tt.want)
		}
	}
}
