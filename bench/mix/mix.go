// Package mix draws the list queries of bench/load's list mix, so that the
// Go benchmarks that replay the mix over a real catalog ask what the load
// tool asks.
package mix

import (
	"math/rand/v2"
	"net/url"
	"strconv"
)

// ListQueries draws n list queries, limit=50, over every filter and sort,
// as query strings.
func ListQueries(rng *rand.Rand, n int) []string {
	sorts := []string{"", "published", "epss", "cvss", "fix", "kev", "cve"}
	severities := [][]string{{"CRITICAL"}, {"HIGH"}, {"MEDIUM"}, {"LOW"}, {"CRITICAL", "HIGH"}}
	words := []string{"remote", "overflow", "linux", "apache", "injection", "windows", "denial", "log4j", "kernel", "memory"}
	var out []string
	for range n {
		v := url.Values{}
		v.Set("limit", "50")
		if s := sorts[rng.IntN(len(sorts))]; s != "" {
			v.Set("sort", s)
		}
		if rng.IntN(2) == 0 {
			v.Set("dir", "asc")
		}
		if rng.IntN(3) == 0 {
			v["severity"] = severities[rng.IntN(len(severities))]
		}
		if rng.IntN(4) == 0 {
			v.Set("kev", strconv.FormatBool(rng.IntN(2) == 0))
		}
		if rng.IntN(4) == 0 {
			v.Set("fix", strconv.FormatBool(rng.IntN(2) == 0))
		}
		if rng.IntN(4) == 0 {
			v.Set("epss_min", []string{"0.1", "0.5", "0.9"}[rng.IntN(3)])
		}
		if rng.IntN(4) == 0 {
			v.Set("year", strconv.Itoa(2005+rng.IntN(21)))
		}
		if rng.IntN(6) == 0 {
			v.Set("q", words[rng.IntN(len(words))])
		}
		out = append(out, v.Encode())
	}
	return out
}

// LoadListQueries returns the list queries bench/load's cve command asks
// with seed over a catalog of n records (rejected ones included): its
// generator draws the ids of 22,000 GET requests first.
func LoadListQueries(seed uint64, n int) []string {
	rng := rand.New(rand.NewPCG(seed, 7))
	for range 2000 + 20000 {
		rng.IntN(n)
	}
	return ListQueries(rng, 150)
}
