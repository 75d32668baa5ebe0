// Package ratelimit limits how often each client may call the lookup API.
//
// A Limiter answers, for one client key, whether one more request is allowed
// now and what the client should be told about its quota (the X-RateLimit-*
// and Retry-After headers). Local is an in-process limiter for a single
// replica; Redis shares one limit across replicas. Both implement the generic
// cell rate algorithm (GCRA), a token bucket that stores one timestamp per
// client: a client may spend its whole quota at once, and the quota refills
// evenly over the period.
package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Limiter decides whether a client may make one more request.
type Limiter interface {
	// Allow counts one request of the client identified by key and reports
	// whether it is allowed. An error means the limiter could not decide
	// (a shared store is unreachable); callers choose whether to let the
	// request through.
	Allow(ctx context.Context, key string) (Result, error)
}

// Result is the decision of a Limiter for one request.
type Result struct {
	// Limit is the number of requests a client may make per period.
	Limit int
	// Remaining is how many more requests the client could make right now.
	Remaining int
	// Reset is when the client's quota will be whole again.
	Reset time.Time
	// RetryAfter is how long a refused client should wait before the next
	// request is allowed; zero when the request is allowed.
	RetryAfter time.Duration
	// Allowed reports whether the request may proceed.
	Allowed bool
}

// Rate is a quota: N requests per Period.
type Rate struct {
	N      int
	Period time.Duration
}

// String formats r the way Parse reads it.
func (r Rate) String() string {
	if r.N == 0 {
		return "off"
	}
	return strconv.Itoa(r.N) + "/" + r.Period.String()
}

// interval is the time one request costs: Period/N.
func (r Rate) interval() time.Duration { return r.Period / time.Duration(r.N) }

// MaxPeriod bounds the period of a quota: the limiters keep times a period
// ahead of now in int64 nanoseconds, which a period of centuries would
// overflow (and then never refuse anything).
const MaxPeriod = 366 * 24 * time.Hour

// Parse reads a quota written N/DURATION ("600/1m", "10/s", "5000/1h"), or
// "off" for no limit, which it returns as the zero Rate.
func Parse(s string) (Rate, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "off") {
		return Rate{}, nil
	}
	n, per, ok := strings.Cut(s, "/")
	if !ok {
		return Rate{}, fmt.Errorf("rate limit %q: want N/DURATION or off", s)
	}
	count, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil || count <= 0 {
		return Rate{}, fmt.Errorf("rate limit %q: want a positive number of requests", s)
	}
	per = strings.TrimSpace(per)
	if per != "" && (per[0] < '0' || per[0] > '9') {
		per = "1" + per // "10/s" means "10/1s"
	}
	d, err := time.ParseDuration(per)
	if err != nil || d <= 0 {
		return Rate{}, fmt.Errorf("rate limit %q: want a positive duration such as 1m", s)
	}
	if d/time.Duration(count) <= 0 {
		return Rate{}, fmt.Errorf("rate limit %q: too many requests for the period", s)
	}
	if d > MaxPeriod {
		return Rate{}, fmt.Errorf("rate limit %q: the period may be at most %s", s, MaxPeriod)
	}
	return Rate{N: count, Period: d}, nil
}
