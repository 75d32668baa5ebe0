// Package cputime reads the CPU time of the process, which the benchmarks
// of the hot paths report beside wall time: on a machine that other work
// shares, a request's CPU time moves far less than its latency.
package cputime

import (
	"testing"
	"time"
)

// Process returns the user and system CPU time the process has used so
// far; it stops tb when the system cannot tell.
func Process(tb testing.TB) time.Duration {
	tb.Helper()
	d, err := process()
	if err != nil {
		tb.Fatalf("cpu time of the process: %v", err)
	}
	return d
}
