package main

import (
	"io"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"224MiB", 224 << 20, true},
		{"1GiB", 1 << 30, true},
		{"512 MB", 512e6, true},
		{"300000000", 300000000, true},
		{"64KiB", 64 << 10, true},
		{"off", 0, true},
		{"OFF", 0, true},
		{"", 0, false},
		{"0", 0, false},
		{"-1MiB", 0, false},
		{"1.5GiB", 0, false},
		{"12 parsecs", 0, false},
		{"99999999999GiB", 0, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseSize(tc.in)
			if (err == nil) != tc.ok || got != tc.want {
				t.Errorf("parseSize(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
			}
		})
	}
}

// TestServeMemoryLimit reads --memory-limit from the flag and the
// environment, with its default, and refuses a size it cannot read.
func TestServeMemoryLimit(t *testing.T) {
	parse := func(env map[string]string, args ...string) (ServeConfig, error) {
		var c ServeConfig
		e := &Env{Stderr: io.Discard, Getenv: func(k string) string { return env[k] }}
		fs := newFlags("serve", e)
		bindServeFlags(fs, &c)
		if err := parseFlags(fs, e, args); err != nil {
			return c, err
		}
		return c, c.Validate()
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want int64
	}{
		{"default", nil, nil, 0},
		{"flag", nil, []string{"--memory-limit", "1GiB"}, 1 << 30},
		{"environment", map[string]string{"PATCHLINE_MEMORY_LIMIT": "320MiB"}, nil, 320 << 20},
		{"off", nil, []string{"--memory-limit", "off"}, 0},
	} {
		c, err := parse(tc.env, tc.args...)
		if err != nil || c.memoryLimit != tc.want {
			t.Errorf("%s: memory limit %d, %v; want %d", tc.name, c.memoryLimit, err, tc.want)
		}
	}
	if _, err := parse(nil, "--memory-limit", "lots"); err == nil || !strings.Contains(err.Error(), "--memory-limit") {
		t.Errorf("--memory-limit lots: %v, want an error naming the flag", err)
	}
	// Built in code without a limit: Validate gives the default, none.
	c := ServeConfig{CVEAddr: "127.0.0.1:0", ControlAddr: "127.0.0.1:0"}
	if err := c.Validate(); err != nil || c.memoryLimit != 0 {
		t.Errorf("zero config: memory limit %d, %v", c.memoryLimit, err)
	}
}
