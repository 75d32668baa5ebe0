package main

import (
	"testing"
	"time"
)

func TestControlParseLifetime(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"720h", 720 * time.Hour, true},
		{"30d", 30 * 24 * time.Hour, true},
		{"90m", 90 * time.Minute, true},
		{"1s", time.Second, true},
		{"0d", 0, false},
		{"-1h", 0, false},
		{"d", 0, false},
		{"forever", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseLifetime(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("parseLifetime(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestControlParseArgs(t *testing.T) {
	env := &Env{Getenv: func(string) string { return "" }}
	var c controlFlags
	fs := newFlags("keys revoke", env)
	bindControlFlags(fs, &c)
	pos, err := parseArgs(fs, env, []string{"plk_x", "--data", "/tmp/d"})
	if err != nil || len(pos) != 1 || pos[0] != "plk_x" || c.data != "/tmp/d" {
		t.Errorf("parseArgs = %v, %v, data %q", pos, err, c.data)
	}
}
