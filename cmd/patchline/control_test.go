package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/catalog/postgres/pgtest"
	"github.com/patchline/patchline/internal/control"
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

func TestControlOpenStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dsns := []string{filepath.Join(dir, "a", "control.db"), "sqlite:" + filepath.Join(dir, "b", "control.db")}
	if os.Getenv(pgtest.EnvVar) != "" {
		dsns = append(dsns, pgtest.NewDatabase(t))
	}
	for _, dsn := range dsns {
		s, err := openControlStore(ctx, dsn)
		if err != nil {
			t.Fatalf("open %s: %v", dsn, err)
		}
		if err := s.Ping(ctx); err != nil {
			t.Errorf("ping %s: %v", dsn, err)
		}
		s.Close()
	}
	if _, err := os.Stat(filepath.Join(dir, "b", "control.db")); err != nil {
		t.Errorf("sqlite: DSN did not create its file: %v", err)
	}
	if _, err := openControlStore(ctx, "sqlite:"); err == nil {
		t.Error("an empty sqlite: DSN opened")
	}
	// The password of a DSN stays out of the error.
	_, err := openControlStore(ctx, "postgres://u:secret@127.0.0.1:1/x?connect_timeout=1")
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("unreachable PostgreSQL: %v", err)
	}
}

func TestControlCommandUsage(t *testing.T) {
	env := &Env{Getenv: func(string) string { return "" }, Stderr: io.Discard, Stdout: io.Discard}
	ran := false
	cmd := controlCommand{name: "keys revoke", args: 1, run: func(context.Context, *Env, control.Store, []string) error {
		ran = true
		return nil
	}}
	tests := []struct {
		name string
		args []string
		want error
	}{
		{"no subcommand", nil, errUsage},
		{"unknown subcommand", []string{"rotate"}, errUsage},
		{"missing argument", []string{"revoke"}, errUsage},
		{"extra argument", []string{"revoke", "a", "b"}, errUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := runControlCommand(context.Background(), env, tt.args, cmd); !errors.Is(err, tt.want) {
				t.Errorf("error = %v, want %v", err, tt.want)
			}
		})
	}
	dir := t.TempDir()
	if err := runControlCommand(context.Background(), env, []string{"revoke", "plk_x", "--data", dir}, cmd); err != nil || !ran {
		t.Errorf("revoke: %v, ran %v", err, ran)
	}
	if _, err := os.Stat(filepath.Join(dir, "control.db")); err != nil {
		t.Errorf("the default control store is not in --data: %v", err)
	}
}
