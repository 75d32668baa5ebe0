package console

import (
	"math"
	"strings"
	"sync"
	"time"
)

// Sign-in throttling. Failed attempts are counted per client address and
// per account name (whether or not the account exists, so that the answer
// reveals nothing); after freeFailures failures, each further one locks
// that address or account for a delay that doubles, up to maxLockout.
// Counts are forgotten forgetAfter after the last failure, and a success
// clears the account's count. The counts live in memory: a restart or
// another replica starts afresh, which bounds what an attacker gains to
// a few more guesses per replica and restart.
const (
	freeFailures = 5
	baseLockout  = 2 * time.Second
	maxLockout   = 15 * time.Minute
	forgetAfter  = time.Hour
	maxTracked   = 100_000 // entries kept, at most
)

// throttle counts failed sign-ins.
type throttle struct {
	mu      sync.Mutex
	entries map[string]*failures
}

type failures struct {
	count int
	last  time.Time
	until time.Time // locked until then
}

func newThrottle() *throttle {
	return &throttle{entries: map[string]*failures{}}
}

// keys returns the throttle keys of an attempt.
func throttleKeys(addr, account string) []string {
	keys := []string{"addr:" + addr}
	if account != "" {
		keys = append(keys, "acct:"+strings.ToLower(strings.TrimSpace(account)))
	}
	return keys
}

// wait returns how long the attempt must wait, 0 when it may go on.
func (t *throttle) wait(now time.Time, addr, account string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var d time.Duration
	for _, k := range throttleKeys(addr, account) {
		if f := t.entries[k]; f != nil && now.Before(f.until) {
			d = max(d, f.until.Sub(now))
		}
	}
	return d
}

// fail records a failed attempt.
func (t *throttle) fail(now time.Time, addr, account string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.entries) >= maxTracked {
		t.sweep(now)
	}
	for _, k := range throttleKeys(addr, account) {
		f := t.entries[k]
		if f == nil || now.Sub(f.last) > forgetAfter {
			f = &failures{}
			t.entries[k] = f
		}
		f.count++
		f.last = now
		if f.count >= freeFailures {
			exp := math.Min(float64(f.count-freeFailures), 20)
			lock := min(time.Duration(float64(baseLockout)*math.Pow(2, exp)), maxLockout)
			f.until = now.Add(lock)
		}
	}
}

// succeed clears the count of an account after a successful sign-in. The
// address keeps its count: signing in to one's own account must not reset
// the guesses made at others from the same place.
func (t *throttle) succeed(account string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.entries, "acct:"+strings.ToLower(strings.TrimSpace(account)))
}

// sweep forgets stale entries, and when that is not enough, the oldest
// half of the rest.
func (t *throttle) sweep(now time.Time) {
	for k, f := range t.entries {
		if now.Sub(f.last) > forgetAfter && !now.Before(f.until) {
			delete(t.entries, k)
		}
	}
	if len(t.entries) < maxTracked {
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
