package console

import (
	"strings"
	"time"

	"github.com/patchline/patchline/internal/ratelimit"
)

// Sign-in throttling, on the failure throttle the control API shares
// (ratelimit.Failures). Failed attempts are counted per client address
// and per account name (whether or not the account exists, so that the
// answer reveals nothing); after freeFailures failures, each further one
// locks that address or account for a delay that doubles, up to
// maxLockout. Counts are forgotten forgetAfter after the last failure,
// and a success clears the account's count.
const (
	freeFailures = 5
	baseLockout  = 2 * time.Second
	maxLockout   = 15 * time.Minute
	forgetAfter  = time.Hour
	maxTracked   = 100_000 // entries kept, at most
)

// throttle counts failed sign-ins.
type throttle struct {
	f *ratelimit.Failures
}

func newThrottle() *throttle {
	return &throttle{f: ratelimit.NewFailures(ratelimit.FailurePolicy{
		Free: freeFailures, Lockout: baseLockout, MaxLockout: maxLockout, Forget: forgetAfter, MaxTracked: maxTracked,
	})}
}

// throttleKeys returns the throttle keys of an attempt.
func throttleKeys(addr, account string) []string {
	keys := []string{"addr:" + addr}
	if account != "" {
		keys = append(keys, accountKey(account))
	}
	return keys
}

func accountKey(account string) string {
	return "acct:" + strings.ToLower(strings.TrimSpace(account))
}

// wait returns how long the attempt must wait, 0 when it may go on.
func (t *throttle) wait(now time.Time, addr, account string) time.Duration {
	return t.f.Wait(now, throttleKeys(addr, account)...)
}

// fail records a failed attempt.
func (t *throttle) fail(now time.Time, addr, account string) {
	t.f.Fail(now, throttleKeys(addr, account)...)
}

// succeed clears the count of an account after a successful sign-in. The
// address keeps its count: signing in to one's own account must not reset
// the guesses made at others from the same place.
func (t *throttle) succeed(account string) {
	t.f.Clear(accountKey(account))
}
