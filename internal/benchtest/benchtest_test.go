package benchtest

import (
	"testing"
	"time"
)

// TestCPUTimeGrows reads a CPU time that grows with work done and does
// not go back.
func TestCPUTimeGrows(t *testing.T) {
	before := CPUTime(t)
	deadline := time.Now().Add(10 * time.Second)
	x := 0
	for CPUTime(t) == before {
		if time.Now().After(deadline) {
			t.Fatalf("cpu time still %v after 10 s of work", before)
		}
		for i := range 1 << 20 {
			x ^= i * i
		}
	}
	if after := CPUTime(t); after < before {
		t.Errorf("cpu time went back from %v to %v (%d)", before, after, x)
	}
}

// TestCatalogPath skips without PATCHLINE_BENCH_CATALOG and gives its
// value with it.
func TestCatalogPath(t *testing.T) {
	t.Setenv("PATCHLINE_BENCH_CATALOG", "/data/catalog.db")
	if got := CatalogPath(t, "read"); got != "/data/catalog.db" {
		t.Errorf("CatalogPath = %q", got)
	}
	t.Setenv("PATCHLINE_BENCH_CATALOG", "")
	t.Run("unset", func(t *testing.T) {
		CatalogPath(t, "read")
		t.Error("CatalogPath did not skip")
	})
}
