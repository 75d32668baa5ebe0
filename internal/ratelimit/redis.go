package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Redis is a GCRA limiter whose state lives in Redis, so that every replica
// behind a load balancer enforces one shared limit per client.
type Redis struct {
	client  *redis.Client
	limiter *redis_rate.Limiter
	limit   redis_rate.Limit
	prefix  string
	now     func() time.Time
}

// OpenRedis connects to the Redis server at url (redis://[user:pass@]host:port/db)
// and returns a limiter that allows r.N requests per r.Period to each client.
// prefix namespaces the keys ("patchline:lookup:").
func OpenRedis(ctx context.Context, url string, r Rate, prefix string) (*Redis, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", err)
	}
	client := redis.NewClient(opts)
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("redis ping %s: %w", opts.Addr, err)
	}
	return &Redis{
		client:  client,
		limiter: redis_rate.NewLimiter(client),
		limit:   redis_rate.Limit{Rate: r.N, Burst: r.N, Period: r.Period},
		prefix:  prefix,
		now:     time.Now,
	}, nil
}

// Allow implements Limiter. It fails when Redis cannot be reached.
func (l *Redis) Allow(ctx context.Context, key string) (Result, error) {
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

// Close disconnects from Redis.
func (l *Redis) Close() error { return l.client.Close() }
