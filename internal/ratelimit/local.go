package ratelimit

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
)

// DefaultMaxClients bounds the number of clients a Local limiter remembers.
const DefaultMaxClients = 100_000

const shards = 16

// Local is an in-process GCRA limiter. It remembers one timestamp per client
// (the "theoretical arrival time" of its next request) and forgets clients
// whose bucket has refilled, so its memory stays bounded by MaxClients
// however many addresses call it.
type Local struct {
	rate     Rate
	interval int64 // nanoseconds one request costs
	period   int64 // nanoseconds of the whole quota
	max      int   // clients per shard
	now      func() time.Time
	seed     maphash.Seed
	shards   [shards]shard
}

type shard struct {
	mu        sync.Mutex
	tat       map[string]int64 // Unix nanoseconds
	lastSweep int64
}

// LocalOption configures a Local limiter.
type LocalOption func(*Local)

// WithClock makes the limiter read the time from now (for tests).
func WithClock(now func() time.Time) LocalOption {
	return func(l *Local) { l.now = now }
}

// WithMaxClients bounds the number of clients the limiter remembers.
func WithMaxClients(n int) LocalOption {
	return func(l *Local) {
		l.max = max(n/shards, 1)
	}
}

// NewLocal returns a limiter that allows r.N requests per r.Period to each
// client. r must not be the zero Rate.
func NewLocal(r Rate, opts ...LocalOption) *Local {
	l := &Local{
		rate:     r,
		interval: int64(r.interval()),
		period:   int64(r.interval()) * int64(r.N),
		max:      DefaultMaxClients / shards,
		now:      time.Now,
		seed:     maphash.MakeSeed(),
	}
	for _, o := range opts {
		o(l)
	}
	for i := range l.shards {
		l.shards[i].tat = make(map[string]int64)
	}
	return l
}

// Allow implements Limiter. It never fails.
func (l *Local) Allow(_ context.Context, key string) (Result, error) {
	now := l.now().UnixNano()
	s := &l.shards[maphash.String(l.seed, key)%shards]
	s.mu.Lock()
	tat, ok := s.tat[key]
	if !ok || tat < now {
		tat = now
	}
	newTAT := tat + l.interval
	// The request is allowed while the client's debt (newTAT - now) stays
	// within one whole period.
	if newTAT-now > l.period {
		s.mu.Unlock()
		retry := newTAT - now - l.period
		return Result{
			Limit:      l.rate.N,
			Remaining:  0,
			Reset:      time.Unix(0, tat),
			RetryAfter: time.Duration(retry),
			Allowed:    false,
		}, nil
	}
	if !ok && (len(s.tat) >= l.max || now-s.lastSweep > l.period) {
		s.evict(now, l.max)
	}
	s.tat[key] = newTAT
	s.mu.Unlock()
	return Result{
		Limit:     l.rate.N,
		Remaining: int((l.period - (newTAT - now)) / l.interval),
		Reset:     time.Unix(0, newTAT),
		Allowed:   true,
	}, nil
}

// evict forgets the clients whose bucket is full again (they are the same as
// clients never seen); if that is not enough, it forgets arbitrary clients
// until a tenth of the room is free, which only makes the limiter lenient
// towards those clients. It runs when a shard is full, and at most once a
// period otherwise, so that memory follows the number of active clients.
func (s *shard) evict(now int64, max int) {
	s.lastSweep = now
	for k, tat := range s.tat {
		if tat <= now {
			delete(s.tat, k)
		}
	}
	target := max - max/10 - 1
	for k := range s.tat {
		if len(s.tat) <= target {
			break
		}
		delete(s.tat, k)
	}
}

// clients returns the number of clients the limiter remembers.
func (l *Local) clients() int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.tat)
		s.mu.Unlock()
	}
	return n
}
