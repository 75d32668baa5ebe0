package main

import (
	"errors"
	"strconv"
	"strings"
)

// defaultMemoryLimit is serve's soft limit of the Go heap: none. A limit
// bounds the resident memory of a lookup server: with 320 MiB, serve held
// 496 MB after the querybatch mix on the catalog of make bench (300,000
// CVEs, the package index built) where it held 607 MB without one, for a
// live heap of about 165 MB. But a limit below the live heap makes the
// collector run all the time (224 MiB took a querybatch from 0.7 to 4.8 s
// at the median), and a control service's live heap grows with its
// agents: with 6,000 agents and the limit, serve held 785 MB and answered
// half the check-ins a second of the run before the limit existed
// (bench/RESULTS.md, 15:28 UTC). So the limit is the operator's choice,
// for the heap they measured. The memory SQLite
// allocates for its page caches lies outside it.
const defaultMemoryLimit = "off"

// sizeUnits are the units parseSize reads, longest first.
var sizeUnits = []struct {
	suffix string
	n      int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1},
}

// parseSize reads a size in bytes: a whole number with an optional unit
// (B, KB, MB, GB, KiB, MiB, GiB), or "off" for none (0).
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "off") {
		return 0, nil
	}
	num, mult := s, int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.n
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return 0, errors.New("want a size such as 256MiB, 1GiB or 300000000, or off")
	}
	if n > (1<<62)/mult {
		return 0, errors.New("size too large")
	}
	return n * mult, nil
}
