package ratelimit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRedisStartsOnFallback opens the limiter on a port where nothing
// listens: it starts on its local limit instead of failing.
func TestRedisStartsOnFallback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var logs syncBuffer
	l, err := OpenRedis(context.Background(), "redis://"+addr+"/0", Rate{N: 2, Period: time.Minute},
		RedisOptions{Prefix: "patchline:test:", Logger: slog.New(slog.NewTextHandler(&logs, nil)), ProbeEvery: time.Hour})
	if err != nil {
		t.Fatalf("OpenRedis on an unreachable server: %v", err)
	}
	defer l.Close()
	if l.Shared() || l.Fallbacks() != 1 {
		t.Errorf("Shared() = %v, Fallbacks() = %d; want false, 1", l.Shared(), l.Fallbacks())
	}
	var allowed []bool
	for range 3 {
		r, err := l.Allow(context.Background(), "198.51.100.9")
		if err != nil {
			t.Fatalf("Allow on the fallback: %v", err)
		}
		allowed = append(allowed, r.Allowed)
	}
	if fmt.Sprint(allowed) != "[true true false]" {
		t.Errorf("local fallback decisions = %v, want [true true false]", allowed)
	}
	if !strings.Contains(logs.String(), "Redis unreachable") {
		t.Errorf("log does not say Redis is unreachable:\n%s", logs.String())
	}
	if _, err := OpenRedis(context.Background(), "http://"+addr, Rate{N: 2, Period: time.Minute}, RedisOptions{}); err == nil {
		t.Error("OpenRedis accepted an http:// URL")
	}
}

// TestRedisFallbackAndRecovery puts a TCP relay between the limiter and the
// Redis server at PATCHLINE_TEST_REDIS, cuts it and restores it: the limiter
// falls back to its local limit without failing a request, says so, and
// returns to the shared limit, whose state Redis kept, by itself.
func TestRedisFallbackAndRecovery(t *testing.T) {
	target := os.Getenv("PATCHLINE_TEST_REDIS")
	if target == "" {
		t.Skip("PATCHLINE_TEST_REDIS is not set: skipping the Redis fallback test (set it to a URL such as redis://127.0.0.1:6379/0)")
	}
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	relay := startRelay(t, u.Host)
	u.Host = relay.addr
	ctx := context.Background()
	var logs syncBuffer
	prefix := fmt.Sprintf("patchline:test:%d:", time.Now().UnixNano())
	l, err := OpenRedis(ctx, u.String(), Rate{N: 3, Period: time.Minute},
		RedisOptions{Prefix: prefix, Logger: slog.New(slog.NewTextHandler(&logs, nil)), ProbeEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	allow := func() Result {
		t.Helper()
		r, err := l.Allow(ctx, "198.51.100.7")
		if err != nil {
			t.Fatalf("Allow: %v", err)
		}
		return r
	}
	if r := allow(); !r.Allowed || r.Remaining != 2 || !l.Shared() {
		t.Fatalf("first request: %+v shared=%v", r, l.Shared())
	}

	relay.stop()
	// The first request after the cut finds Redis gone and is answered by
	// the local limit, whose bucket for this client is full.
	if r := allow(); !r.Allowed || r.Remaining != 2 {
		t.Errorf("first request on the fallback: %+v", r)
	}
	if l.Shared() || l.Fallbacks() != 1 {
		t.Errorf("after the cut: Shared() = %v, Fallbacks() = %d", l.Shared(), l.Fallbacks())
	}
	if !strings.Contains(logs.String(), "Redis unreachable") {
		t.Errorf("no fallback message in the log:\n%s", logs.String())
	}

	relay.start(t)
	deadline := time.Now().Add(10 * time.Second)
	for !l.Shared() {
		if time.Now().After(deadline) {
			t.Fatal("the limiter did not return to Redis within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "Redis answers again") {
		t.Errorf("no recovery message in the log:\n%s", logs.String())
	}
	// Redis remembers the one request it counted before the cut.
	if r := allow(); !r.Allowed || r.Remaining != 1 {
		t.Errorf("first request after recovery: %+v, want remaining 1 from the shared state", r)
	}
	if l.Fallbacks() != 1 {
		t.Errorf("Fallbacks() = %d, want 1", l.Fallbacks())
	}
}

// relay forwards TCP connections from a local port to a target, and can be
// cut (listener and connections closed) and restored on the same port.
type relay struct {
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func startRelay(t *testing.T, target string) *relay {
	r := &relay{target: target, addr: "127.0.0.1:0"}
	r.start(t)
	t.Cleanup(r.stop)
	return r
}

func (r *relay) start(t *testing.T) {
	t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port may take a moment to be free again
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.ln = ln
	r.addr = ln.Addr().String()
	r.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", r.target)
			if err != nil {
				c.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, c, up)
			r.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
}

func (r *relay) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ln != nil {
		r.ln.Close()
		r.ln = nil
	}
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
