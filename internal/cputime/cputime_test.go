package cputime

import (
	"testing"
	"time"
)

// TestProcessGrows reads a CPU time that grows with work done and does
// not go back.
func TestProcessGrows(t *testing.T) {
	before := Process(t)
	deadline := time.Now().Add(10 * time.Second)
	x := 0
	for Process(t) == before {
		if time.Now().After(deadline) {
			t.Fatalf("cpu time still %v after 10 s of work", before)
		}
		for i := range 1 << 20 {
			x ^= i * i
		}
	}
	if after := Process(t); after < before {
		t.Errorf("cpu time went back from %v to %v (%d)", before, after, x)
	}
}
