// Package benchtest holds what the benchmarks of the hot paths share: the
// CPU time of the process, which they report beside wall time (on a
// machine that other work shares, a request's CPU time moves far less
// than its latency), the catalog they run over, and the latencies they
// report.
package benchtest

import (
	"os"
	"slices"
	"testing"
	"time"
)

// CPUTime returns the user and system CPU time the process has used so
// far; it stops tb when the system cannot tell.
func CPUTime(tb testing.TB) time.Duration {
	tb.Helper()
	d, err := process()
	if err != nil {
		tb.Fatalf("cpu time of the process: %v", err)
	}
	return d
}

// CatalogPath returns the catalog.db that PATCHLINE_BENCH_CATALOG names
// (such as the 300,000 CVEs of make bench), and skips tb when it is not
// set; use says what the benchmark does with it.
func CatalogPath(tb testing.TB, use string) string {
	tb.Helper()
	path := os.Getenv("PATCHLINE_BENCH_CATALOG")
	if path == "" {
		tb.Skipf("PATCHLINE_BENCH_CATALOG is not set: it names the catalog.db %s", use)
	}
	return path
}

// ReportLatencies reports the median and the 99th percentile of lat, in
// milliseconds, as p50-ms and p99-ms; it sorts lat.
func ReportLatencies(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(p int) float64 { return float64(lat[(len(lat)-1)*p/100].Microseconds()) / 1000 }
	b.ReportMetric(at(50), "p50-ms")
	b.ReportMetric(at(99), "p99-ms")
}
