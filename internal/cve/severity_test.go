package cve

import (
	"math"
	"testing"
)

func TestSeverityOf(t *testing.T) {
	tests := []struct {
		name    string
		version string
		score   float64
		want    string
	}{
		{"v2 zero", "2.0", 0, SeverityLow},
		{"v2 low", "2.0", 3.9, SeverityLow},
		{"v2 medium", "2.0", 4.0, SeverityMedium},
		{"v2 medium top", "2.0", 6.9, SeverityMedium},
		{"v2 high", "2.0", 7.0, SeverityHigh},
		{"v2 has no critical", "2.0", 10, SeverityHigh},
		{"v3.0 none", "3.0", 0, SeverityNone},
		{"v3.1 low", "3.1", 0.1, SeverityLow},
		{"v3.1 low top", "3.1", 3.9, SeverityLow},
		{"v3.1 medium", "3.1", 4.0, SeverityMedium},
		{"v3.1 high", "3.1", 7.0, SeverityHigh},
		{"v3.1 high top", "3.1", 8.9, SeverityHigh},
		{"v3.1 critical", "3.1", 9.0, SeverityCritical},
		{"v3.1 log4shell", "3.1", 10, SeverityCritical},
		{"v4.0 pan-os", "4.0", 9.3, SeverityCritical},
		{"v4.0 medium", "4.0", 5.9, SeverityMedium},
		{"unknown version", "5.0", 5, ""},
		{"empty version", "", 5, ""},
		{"negative", "3.1", -1, ""},
		{"above ten", "3.1", 10.1, ""},
		{"NaN", "3.1", math.NaN(), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SeverityOf(tt.version, tt.score); got != tt.want {
				t.Errorf("SeverityOf(%q, %v) = %q, want %q", tt.version, tt.score, got, tt.want)
			}
		})
	}
}
