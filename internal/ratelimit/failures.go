package ratelimit

import (
	"math"
	"strconv"
	"sync"
	"time"
)

// FailurePolicy says how Failures throttles: after Free failures of a key,
// each further failure locks the key for a delay that starts at Lockout
// and doubles, up to MaxLockout. A key's count is forgotten Forget after
// its last failure.
type FailurePolicy struct {
	Free       int
	Lockout    time.Duration
	MaxLockout time.Duration
	Forget     time.Duration
	// MaxTracked bounds the keys remembered; zero means 100,000.
	MaxTracked int
}

// Failures throttles repeated failures (of a sign-in, of a credential)
// per key: a client address, an account name. Callers ask Wait before
// they check a credential, and call Fail when it was wrong; while a key
// is locked the attempt is refused without being checked, so that a
// guesser learns nothing, not even from a right guess. The counts live
// in memory: a restart or another replica starts afresh, which bounds
// what an attacker gains to a few more guesses per replica and restart.
// Methods are safe for concurrent use.
type Failures struct {
	policy  FailurePolicy
	mu      sync.Mutex
	entries map[string]*failureCount
}

type failureCount struct {
	count int
	last  time.Time
	until time.Time // locked until then
}

// NewFailures returns an empty throttle with policy p.
func NewFailures(p FailurePolicy) *Failures {
	if p.MaxTracked <= 0 {
		p.MaxTracked = 100_000
	}
	return &Failures{policy: p, entries: map[string]*failureCount{}}
}

// Wait returns how long an attempt of the keys must wait, 0 when it may
// go on: the longest lock of any of them.
func (t *Failures) Wait(now time.Time, keys ...string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var d time.Duration
	for _, k := range keys {
		if f := t.entries[k]; f != nil && now.Before(f.until) {
			d = max(d, f.until.Sub(now))
		}
	}
	return d
}

// Fail records a failed attempt of each of the keys.
func (t *Failures) Fail(now time.Time, keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.entries) >= t.policy.MaxTracked {
		t.sweep(now)
	}
	for _, k := range keys {
		f := t.entries[k]
		if f == nil || now.Sub(f.last) > t.policy.Forget {
			f = &failureCount{}
			t.entries[k] = f
		}
		f.count++
		f.last = now
		if f.count >= t.policy.Free {
			exp := math.Min(float64(f.count-t.policy.Free), 20)
			lock := min(time.Duration(float64(t.policy.Lockout)*math.Pow(2, exp)), t.policy.MaxLockout)
			f.until = now.Add(lock)
		}
	}
}

// Clear forgets the failures of key.
func (t *Failures) Clear(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.entries, key)
}

// sweep forgets stale entries, and when that is not enough, the oldest
// half of the rest.
func (t *Failures) sweep(now time.Time) {
	for k, f := range t.entries {
		if now.Sub(f.last) > t.policy.Forget && !now.Before(f.until) {
			delete(t.entries, k)
		}
	}
	if len(t.entries) < t.policy.MaxTracked {
		return
	}
	var cutoff time.Time
	for _, f := range t.entries {
		if cutoff.IsZero() || f.last.Before(cutoff) {
			cutoff = f.last
		}
	}
	cutoff = cutoff.Add(now.Sub(cutoff) / 2)
	for k, f := range t.entries {
		if f.last.Before(cutoff) {
			delete(t.entries, k)
		}
	}
}

// RetryAfter formats a wait as the whole seconds of a Retry-After header,
// at least 1.
func RetryAfter(d time.Duration) string {
	return strconv.FormatInt(max(int64(math.Ceil(d.Seconds())), 1), 10)
}
