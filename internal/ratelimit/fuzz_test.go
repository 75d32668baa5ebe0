package ratelimit

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzParse feeds --rate-limit values to Parse: what it accepts is a
// usable quota (a positive count and a period at least one nanosecond per
// request) that formats back to itself.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"600/1m", "10/s", " 5000 / 1h ", "1/500ms", "off", "OFF", "", "600", "0/1m", "-1/1m",
		"10/fortnight", "2000000000/1ns", "9223372036854775807/1h", "1/9223372036854775807ns", "1/-0s", "1/+1s", "1/.5s", "1/2562047h", "1/8784h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil || r == (Rate{}) {
			return
		}
		if r.N <= 0 || r.Period <= 0 || r.interval() <= 0 {
			t.Fatalf("Parse(%q) = %+v: not a usable quota", s, r)
		}
		back, err := Parse(r.String())
		if err != nil || back != r {
			t.Fatalf("Parse(%q) = %+v; Parse(%q) = %+v, %v", s, r, r.String(), back, err)
		}
		clock := &fakeClock{t: time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)}
		l := NewLocal(r, WithClock(clock.now))
		if res, _ := l.Allow(t.Context(), "k"); !res.Allowed || res.Limit != r.N || !res.Reset.After(clock.t) {
			t.Fatalf("the first request under %+v: %+v", r, res)
		}
		if r.N == 1 {
			if res, _ := l.Allow(t.Context(), "k"); res.Allowed || res.RetryAfter <= 0 {
				t.Fatalf("the second request under %+v: %+v", r, res)
			}
		}
	})
}

// FuzzClientAddr feeds peer addresses and X-Forwarded-For headers to
// ClientAddr and Key: the client is the peer unless the peer is a trusted
// proxy, it is never a trusted proxy when an untrusted hop was named, and
// its key is short whatever the header holds.
func FuzzClientAddr(f *testing.F) {
	for _, s := range []struct{ proxies, remote, xff string }{
		{"", "192.0.2.10:50000", ""},
		{"10.0.0.0/8", "10.0.0.1:443", "198.51.100.7"},
		{"10.0.0.0/8", "10.0.0.1:443", "203.0.113.9, 198.51.100.7, 10.0.0.2"},
		{"10.0.0.0/8, ::1", "[::1]:8080", "2001:db8::1"},
		{"::ffff:10.0.0.0/104", "[::ffff:10.0.0.1]:1", "[2001:db8::1]:4711"},
		{"10.0.0.0/8", "10.0.0.1:443", "198.51.100.7\r\nX-Injected: 1"},
		{"10.0.0.0/8", "10.0.0.1:443", "fe80::1%eth0"},
		{"10.0.0.0/8", "10.0.0.1:443", "unknown, 198.51.100.7"},
		{"0.0.0.0/0", "10.0.0.1:443", strings.Repeat("1.1.1.1,", 100)},
		{"", "not an address", ""},
		{"", "[fe80::1%eth0]:80", ""},
	} {
		f.Add(s.proxies, s.remote, s.xff)
	}
	f.Fuzz(func(t *testing.T, proxies, remote, xff string) {
		ps, err := ParseProxies(proxies)
		if err != nil {
			return
		}
		r := httptest.NewRequest("GET", "http://lookup.test/", nil)
		r.RemoteAddr = remote
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		got := ps.ClientAddr(r)
		peer := parseHostPort(remote)
		if !peer.IsValid() || !ps.Contains(peer) {
			if got != peer {
				t.Fatalf("ClientAddr with untrusted peer %q = %v, want the peer", remote, got)
			}
		}
		if got.IsValid() && got.Zone() != "" {
			t.Fatalf("ClientAddr = %v keeps a zone", got)
		}
		if got.Is4In6() {
			t.Fatalf("ClientAddr = %v is not unmapped", got)
		}
		if k := Key(got); len(k) > len("ffff:ffff:ffff:ffff::/64") || k == "" {
			t.Fatalf("Key(%v) = %q", got, k)
		}
		if got.IsValid() && ps.Contains(got) && got != peer {
			// A trusted hop may only be the answer when every hop right of
			// the first malformed one is trusted.
			hops := strings.Split(xff, ",")
			for i := len(hops) - 1; i >= 0; i-- {
				a := parseHostPort(strings.TrimSpace(hops[i]))
				if !a.IsValid() {
					break
				}
				if !ps.Contains(a) {
					t.Fatalf("ClientAddr = trusted %v although %v was named", got, a)
				}
			}
		}
	})
}

// FuzzLocal drives a Local limiter with a fuzzed sequence of clients and
// clock steps: it never allows more than its burst plus what the elapsed
// time refills, and its memory stays within its bound. (A limiter that
// runs out of room forgets clients at random, which is lenient on
// purpose; the clients here fit in its room.)
func FuzzLocal(f *testing.F) {
	f.Add(uint8(3), []byte{0, 0, 0, 0, 1, 1, 200, 0, 0})
	f.Add(uint8(1), []byte{0, 255, 0, 255, 0})
	f.Fuzz(func(t *testing.T, n uint8, steps []byte) {
		if n == 0 || len(steps) > 4096 {
			return
		}
		clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
		rate := Rate{N: int(n), Period: time.Second}
		l := NewLocal(rate, WithClock(clock.now), WithMaxClients(shards*16))
		start := clock.t
		allowed := map[byte]int{}
		for _, s := range steps {
			if s >= 240 {
				clock.advance(time.Duration(s-239) * 100 * time.Millisecond)
				continue
			}
			client := s % 8
			res, err := l.Allow(t.Context(), string(rune('a'+client)))
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed {
				allowed[client]++
			} else if res.RetryAfter <= 0 {
				t.Fatalf("refused without a Retry-After: %+v", res)
			}
			if res.Remaining < 0 || res.Remaining > res.Limit {
				t.Fatalf("remaining %d of %d", res.Remaining, res.Limit)
			}
		}
		elapsed := clock.t.Sub(start)
		limit := int(n) + int(elapsed/rate.interval()) + 1
		for c, got := range allowed {
			if got > limit {
				t.Fatalf("client %d: %d requests allowed in %v at %v", c, got, elapsed, rate)
			}
		}
		if l.clients() > 8 {
			t.Fatalf("the limiter remembers %d clients of 8", l.clients())
		}
		// Many more clients than its room: the limiter forgets some.
		for i := range len(steps) {
			l.Allow(t.Context(), string(steps[:i]))
		}
		if l.clients() > shards*16 {
			t.Fatalf("the limiter remembers %d clients", l.clients())
		}
	})
}
