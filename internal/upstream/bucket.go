package upstream

import (
	"context"
	"sync"
	"time"
)

// TokenBucket limits a rate of requests: it holds up to Burst tokens,
// refilled continuously at N per Period, and each request takes one.
type TokenBucket struct {
	mu     sync.Mutex
	burst  float64
	rate   float64 // tokens per second
	tokens float64
	last   time.Time
	now    func() time.Time
	sleep  func(context.Context, time.Duration) error
}

// NewTokenBucket returns a full bucket of burst tokens refilled at n per
// period.
func NewTokenBucket(n int, period time.Duration, burst int) *TokenBucket {
	if burst < 1 {
		burst = 1
	}
	return &TokenBucket{
		burst:  float64(burst),
		rate:   float64(n) / period.Seconds(),
		tokens: float64(burst),
		now:    time.Now,
		sleep:  sleep,
	}
}

// NVDLimiter returns a bucket for the NVD's published limits: 5 requests
// in a rolling 30 s window without an API key, 50 with one. The burst is
// one request, so that no 30 s window ever holds more than the limit (a
// full bucket of 5 followed by the refill would allow 9).
func NVDLimiter(withKey bool) *TokenBucket {
	if withKey {
		return NewTokenBucket(50, 30*time.Second, 1)
	}
	return NewTokenBucket(5, 30*time.Second, 1)
}

// Wait takes a token, waiting for one if the bucket is empty, or returns
// the error of ctx.
func (b *TokenBucket) Wait(ctx context.Context) error {
	b.mu.Lock()
	now := b.now()
	if !b.last.IsZero() {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	b.tokens--
	var wait time.Duration
	if b.tokens < 0 {
		// The token is taken now, on credit: later callers queue behind.
		wait = time.Duration(-b.tokens / b.rate * float64(time.Second))
	}
	b.mu.Unlock()
	if wait == 0 {
		return ctx.Err()
	}
	if err := b.sleep(ctx, wait); err != nil {
		b.mu.Lock()
		b.tokens++ // give the token back
		b.mu.Unlock()
		return err
	}
	return nil
}
