package main

import (
	"errors"
	"strconv"
	"strings"
)

// defaultMemoryLimit is serve's soft limit of the Go heap. Without one,
// the collector lets the heap grow to twice what is live, and the
// process's resident memory with it: 607 MB after the querybatch mix on
// the catalog of make bench (300,000 CVEs, the package index built), for
// a live heap of about 165 MB of which the index is about 100 MB. With a limit
// the collector runs sooner instead; one too close to the live heap makes
// it run all the time (224 MiB took a querybatch from 0.7 to 4.8 s at the
// median, bench/RESULTS.md). The memory SQLite allocates for its page
// caches lies outside the limit.
const defaultMemoryLimit = "320MiB"

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
