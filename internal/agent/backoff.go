package agent

import (
	"math/rand/v2"
	"time"
)

// Backoff spaces out retries while the server cannot be reached: each
// failure doubles the wait, from Base up to Max, and the wait is drawn
// between half of that and all of it ("equal jitter"), so that a fleet
// that lost its server together does not come back in step.
type Backoff struct {
	Base, Max time.Duration
	// Rand draws the jitter; nil means the process-wide source.
	Rand *rand.Rand

	failures int
}

// Next returns the wait before the next retry and counts a failure.
func (b *Backoff) Next() time.Duration {
	d := b.Base
	for i := 0; i < b.failures && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	b.failures++
	half := d / 2
	return half + time.Duration(b.float()*float64(d-half))
}

// Reset starts over after a success.
func (b *Backoff) Reset() { b.failures = 0 }

// Failures returns the failures since the last Reset.
func (b *Backoff) Failures() int { return b.failures }

func (b *Backoff) float() float64 {
	if b.Rand != nil {
		return b.Rand.Float64()
	}
	return rand.Float64()
}

// Jitter returns d changed by up to a fifth either way, drawn from r (the
// process-wide source when nil): agents that started together drift apart
// instead of checking in at the same instant forever.
func Jitter(d time.Duration, r *rand.Rand) time.Duration {
	f := rand.Float64
	if r != nil {
		f = r.Float64
	}
	return time.Duration(float64(d) * (0.8 + 0.4*f()))
}
