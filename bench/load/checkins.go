package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// checkinsMain measures the check-ins the control service answers while a
// simulated fleet runs, from the request counter of its /metrics.
func checkinsMain(args []string) {
	fs := flag.NewFlagSet("checkins", flag.ExitOnError)
	metrics := fs.String("metrics", "http://127.0.0.1:18081/metrics", "metrics URL of the control listener")
	agents := fs.Int("agents", 0, "agents of the fleet: the measurement starts once they all enrolled")
	warmup := fs.Duration("warmup", 3*time.Minute, "longest wait for the fleet to enroll")
	dur := fs.Duration("duration", 20*time.Second, "measurement window")
	fs.Parse(args)
	deadline := time.Now().Add(*warmup)
	for {
		ok, other := counter(*metrics, "/agent/v1/enroll")
		enrolled := ok + other
		if int(enrolled) >= *agents || time.Now().After(deadline) {
			log.Printf("fleet: %d agents enrolled", int(enrolled))
			break
		}
		time.Sleep(time.Second)
	}
	time.Sleep(2 * time.Second)
	c0, e0 := counter(*metrics, "/agent/v1/checkin")
	t0 := time.Now()
	time.Sleep(*dur)
	c1, e1 := counter(*metrics, "/agent/v1/checkin")
	el := time.Since(t0).Seconds()
	fmt.Printf("check-ins: %.0f/s answered 2xx over %.0fs (%.0f non-200)\n", (c1-c0)/el, el, e1-e0)
}

var counterRe = regexp.MustCompile(`^patchline_control_requests_total\{code="(\d+)",route="([^"]*)"\} (\S+)`)

// counter sums the requests of routes containing route: answered 2xx, and
// others.
func counter(metrics, route string) (ok, other float64) {
	resp, err := http.Get(metrics)
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := counterRe.FindStringSubmatch(sc.Text())
		if m == nil || !strings.Contains(m[2], route) {
			continue
		}
		v, _ := strconv.ParseFloat(m[3], 64)
		if m[1][0] == '2' {
			ok += v
		} else {
			other += v
		}
	}
	return ok, other
}
