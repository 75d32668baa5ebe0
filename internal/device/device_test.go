package device

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/errs"
)

func TestTransitions(t *testing.T) {
	tests := []struct {
		from, to CommandState
		ok       bool
	}{
		{Queued, Delivered, true},
		{Queued, Running, false},
		{Queued, Canceled, true},
		{Queued, Expired, true},
		{Delivered, Running, true},
		{Delivered, Succeeded, true},
		{Delivered, Canceled, true},
		{Running, Failed, true},
		{Running, Canceled, false},
		{Running, Queued, false},
		{Succeeded, Failed, false},
		{Failed, Running, false},
		{Expired, Delivered, false},
		{Canceled, Queued, false},
	}
	for _, tt := range tests {
		if got := CanTransition(tt.from, tt.to); got != tt.ok {
			t.Errorf("CanTransition(%s, %s) = %v, want %v", tt.from, tt.to, got, tt.ok)
		}
	}
	for _, s := range CommandStates {
		if s.Final() != (len(transitions[s]) == 0) {
			t.Errorf("state %s: Final = %v but it has transitions %v", s, s.Final(), transitions[s])
		}
	}
}

func TestNewCommand(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	c := NewCommand("agt_x", Reboot, nil, "key:plk_x", now)
	if c.State != Queued || !strings.HasPrefix(c.ID, CommandIDPrefix) || c.ExpiresAt != now.Add(24*time.Hour) {
		t.Errorf("NewCommand = %+v", c)
	}
	if InstallUpdates.TTL() <= Reboot.TTL() {
		t.Errorf("updates expire before reboots")
	}
}

func TestChecks(t *testing.T) {
	tests := []struct {
		name string
		err  error
		ok   bool
	}{
		{"ring", CheckRingName("pilot-1"), true},
		{"ring upper case", CheckRingName("Pilot"), false},
		{"ring empty", CheckRingName(""), false},
		{"policy", CheckPolicy("screen lock", json.RawMessage(`{"lockAfterMinutes":5}`)), true},
		{"policy array", CheckPolicy("x", json.RawMessage(`[1]`)), false},
		{"policy null", CheckPolicy("x", json.RawMessage(`null`)), false},
		{"policy no name", CheckPolicy("", json.RawMessage(`{}`)), false},
		{"policy too big", CheckPolicy("x", json.RawMessage(`{"a":"`+strings.Repeat("x", MaxPolicySettings)+`"}`)), false},
		{"hostname", CheckHostname("web-01.example.com"), true},
		{"hostname control", CheckHostname("web\n01"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if (tt.err == nil) != tt.ok || tt.err != nil && !errors.Is(tt.err, errs.ErrInvalid) {
				t.Errorf("error = %v, want ok=%v", tt.err, tt.ok)
			}
		})
	}
}
