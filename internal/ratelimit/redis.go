package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Redis is a GCRA limiter whose state lives in Redis, so that every replica
// behind a load balancer enforces one shared limit per client.
//
// When Redis cannot be reached, the replica falls back to a Local limiter
// with the same quota (so each replica then enforces the quota on its own),
// logs the change once, and probes Redis in the background until it answers
// again, when it logs the recovery and goes back to the shared limit.
// Requests never wait on a Redis that is known to be down.
type Redis struct {
	client  *redis.Client
	limiter *redis_rate.Limiter
	limit   redis_rate.Limit
	prefix  string
	now     func() time.Time

	local      *Local
	logger     *slog.Logger
	probeEvery time.Duration

	down      atomic.Bool
	fallbacks atomic.Uint64
	quit      chan struct{}
	closeOnce sync.Once
	probes    sync.WaitGroup
}

// RedisOptions configures a Redis limiter.
type RedisOptions struct {
	// Prefix namespaces the keys ("patchline:lookup:").
	Prefix string
	// Logger receives the fallback and recovery messages; nil discards them.
	Logger *slog.Logger
	// ProbeEvery is how often a replica that fell back pings Redis; one
	// second when zero.
	ProbeEvery time.Duration
}

// Timeouts of the Redis connection, unless the URL sets its own: a rate
// limit decision that waits longer than this costs more than the local
// fallback.
const (
	redisDialTimeout = time.Second
	redisIOTimeout   = 250 * time.Millisecond
)

// OpenRedis returns a limiter that allows r.N requests per r.Period to each
// client, with its state in the Redis server at url
// (redis://[user:pass@]host:port/db). It fails only for a URL it cannot
// read: a server that does not answer yet makes the limiter start on its
// local fallback. r must not be the zero Rate.
func OpenRedis(ctx context.Context, url string, r Rate, o RedisOptions) (*Redis, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", err)
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = redisDialTimeout
	}
	if opts.ReadTimeout == 0 {
		opts.ReadTimeout = redisIOTimeout
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = redisIOTimeout
	}
	client := redis.NewClient(opts)
	l := &Redis{
		client:     client,
		limiter:    redis_rate.NewLimiter(client),
		limit:      redis_rate.Limit{Rate: r.N, Burst: r.N, Period: r.Period},
		prefix:     o.Prefix,
		now:        time.Now,
		local:      NewLocal(r),
		logger:     o.Logger,
		probeEvery: o.ProbeEvery,
		quit:       make(chan struct{}),
	}
	if l.logger == nil {
		l.logger = slog.New(slog.DiscardHandler)
	}
	if l.probeEvery <= 0 {
		l.probeEvery = time.Second
	}
	if err := client.Ping(ctx).Err(); err != nil {
		l.fallBack(fmt.Errorf("redis ping %s: %w", opts.Addr, err))
	}
	return l, nil
}

// Allow implements Limiter. It answers from the local fallback while Redis
// cannot be reached, and fails only when ctx is done.
func (l *Redis) Allow(ctx context.Context, key string) (Result, error) {
	if !l.down.Load() {
		res, err := l.allowShared(ctx, key)
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			// The client went away: no reason to doubt Redis.
			return Result{}, err
		}
		l.fallBack(err)
	}
	return l.local.Allow(ctx, key)
}

func (l *Redis) allowShared(ctx context.Context, key string) (Result, error) {
	res, err := l.limiter.Allow(ctx, l.prefix+key, l.limit)
	if err != nil {
		return Result{}, fmt.Errorf("redis rate limit: %w", err)
	}
	now := l.now()
	out := Result{
		Limit:     l.limit.Rate,
		Remaining: res.Remaining,
		Reset:     now.Add(max(res.ResetAfter, 0)),
		Allowed:   res.Allowed > 0,
	}
	if !out.Allowed {
		out.Remaining = 0
		out.RetryAfter = max(res.RetryAfter, 0)
	}
	return out, nil
}

// fallBack switches to the local limiter, once, and starts probing Redis.
func (l *Redis) fallBack(err error) {
	if !l.down.CompareAndSwap(false, true) {
		return
	}
	select {
	case <-l.quit:
		return // closed: nothing to probe
	default:
	}
	l.fallbacks.Add(1)
	l.logger.Warn("rate limit: Redis unreachable, using this replica's local limit until it answers", "err", err)
	l.probes.Add(1)
	go l.probe()
}

// probe pings Redis every probeEvery until it answers, then switches back to
// the shared limit.
func (l *Redis) probe() {
	defer l.probes.Done()
	t := time.NewTicker(l.probeEvery)
	defer t.Stop()
	for {
		select {
		case <-l.quit:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), redisDialTimeout)
		err := l.client.Ping(ctx).Err()
		cancel()
		if err == nil {
			l.down.Store(false)
			l.logger.Info("rate limit: Redis answers again, using the shared limit")
			return
		}
	}
}

// Shared reports whether the limiter is using Redis (true) or its local
// fallback (false).
func (l *Redis) Shared() bool { return !l.down.Load() }

// Fallbacks returns how many times the limiter has fallen back to its local
// limit since it was opened.
func (l *Redis) Fallbacks() uint64 { return l.fallbacks.Load() }

// Close stops the probe and disconnects from Redis.
func (l *Redis) Close() error {
	l.closeOnce.Do(func() { close(l.quit) })
	l.probes.Wait()
	return l.client.Close()
}
