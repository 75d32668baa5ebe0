package ratelimit

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    Rate
		wantErr bool
	}{
		{in: "600/1m", want: Rate{600, time.Minute}},
		{in: "10/s", want: Rate{10, time.Second}},
		{in: " 5000 / 1h ", want: Rate{5000, time.Hour}},
		{in: "1/500ms", want: Rate{1, 500 * time.Millisecond}},
		{in: "off", want: Rate{}},
		{in: "OFF", want: Rate{}},
		{in: "", want: Rate{}},
		{in: "600", wantErr: true},
		{in: "0/1m", wantErr: true},
		{in: "-1/1m", wantErr: true},
		{in: "x/1m", wantErr: true},
		{in: "10/0s", wantErr: true},
		{in: "10/-1m", wantErr: true},
		{in: "10/fortnight", wantErr: true},
		{in: "2000000000/1ns", wantErr: true},
		{in: "1/8784h", want: Rate{1, MaxPeriod}},
		{in: "1/8785h", wantErr: true},
		{in: "1/2562047h", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Parse(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestRateString(t *testing.T) {
	for _, r := range []Rate{{600, time.Minute}, {}} {
		back, err := Parse(r.String())
		if err != nil || back != r {
			t.Errorf("Parse(%q) = %v, %v; want %v", r.String(), back, err, r)
		}
	}
}

// fakeClock is a clock that moves only when told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestLocalBurstThenRefill(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := NewLocal(Rate{N: 3, Period: 3 * time.Second}, WithClock(clock.now))

	type step struct {
		advance time.Duration
		want    Result
	}
	start := clock.t
	steps := []step{
		{0, Result{Limit: 3, Remaining: 2, Reset: start.Add(1 * time.Second), Allowed: true}},
		{0, Result{Limit: 3, Remaining: 1, Reset: start.Add(2 * time.Second), Allowed: true}},
		{0, Result{Limit: 3, Remaining: 0, Reset: start.Add(3 * time.Second), Allowed: true}},
		// The quota is spent: refused, and told to come back in a second.
		{0, Result{Limit: 3, Remaining: 0, Reset: start.Add(3 * time.Second), RetryAfter: time.Second, Allowed: false}},
		{500 * time.Millisecond, Result{Limit: 3, Remaining: 0, Reset: start.Add(3 * time.Second), RetryAfter: 500 * time.Millisecond, Allowed: false}},
		// One request's worth refilled.
		{500 * time.Millisecond, Result{Limit: 3, Remaining: 0, Reset: start.Add(4 * time.Second), Allowed: true}},
		// Idle for long: the whole quota is back, no more.
		{time.Hour, Result{Limit: 3, Remaining: 2, Reset: start.Add(time.Hour + 2*time.Second), Allowed: true}},
	}
	for i, s := range steps {
		clock.advance(s.advance)
		got, err := l.Allow(ctx, "198.51.100.7")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("step %d (-want +got):\n%s", i, diff)
		}
	}
	// Another client has its own quota.
	got, _ := l.Allow(ctx, "198.51.100.8")
	if !got.Allowed || got.Remaining != 2 {
		t.Errorf("other client: %+v", got)
	}
}

func TestLocalSustainedRate(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := NewLocal(Rate{N: 60, Period: time.Minute}, WithClock(clock.now))
	allowed := 0
	// Ten minutes of one request every 100ms: the first minute's burst,
	// then one a second.
	for range 6000 {
		if r, _ := l.Allow(ctx, "c"); r.Allowed {
			allowed++
		}
		clock.advance(100 * time.Millisecond)
	}
	if allowed < 60+599 || allowed > 60+601 {
		t.Errorf("allowed %d requests in 10 minutes, want about %d", allowed, 60+600)
	}
}

func TestLocalBoundedMemory(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	const max = 1600
	l := NewLocal(Rate{N: 10, Period: time.Minute}, WithClock(clock.now), WithMaxClients(max))
	for i := range 50_000 {
		l.Allow(ctx, fmt.Sprintf("client-%d", i))
		if i%1000 == 0 {
			clock.advance(time.Second)
		}
	}
	if n := l.clients(); n > max {
		t.Errorf("remembers %d clients, want at most %d", n, max)
	}
	// Clients whose bucket has refilled are the first to go: a new client
	// in a full shard sweeps them all out of it.
	clock.advance(2 * time.Minute)
	before := l.clients()
	for i := range 64 {
		l.Allow(ctx, fmt.Sprintf("new-%d", i))
	}
	if after := l.clients(); after >= before/2 {
		t.Errorf("remembers %d clients after idle ones could go (%d before)", after, before)
	}
}

func TestParseProxies(t *testing.T) {
	ps, err := ParseProxies(" 10.0.0.0/8, 192.0.2.7 ,2001:db8::/32,::ffff:203.0.113.0/120")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "192.0.2.7/32", "2001:db8::/32", "203.0.113.0/24"}
	var got []string
	for _, p := range ps {
		got = append(got, p.String())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0"} {
		if _, err := ParseProxies(bad); err == nil {
			t.Errorf("ParseProxies(%q) succeeded", bad)
		}
	}
	if ps, err := ParseProxies(""); err != nil || len(ps) != 0 {
		t.Errorf("ParseProxies(\"\") = %v, %v", ps, err)
	}
}

func TestClientAddr(t *testing.T) {
	proxies, _ := ParseProxies("10.0.0.0/8, 2001:db8::1")
	tests := []struct {
		name    string
		proxies Proxies
		remote  string
		xff     []string
		want    string
	}{
		{"direct", proxies, "203.0.113.5:4711", nil, "203.0.113.5"},
		{"direct ignores forwarded-for", proxies, "203.0.113.5:4711", []string{"198.51.100.1"}, "203.0.113.5"},
		{"no proxies trusted", nil, "10.1.1.1:80", []string{"198.51.100.1"}, "10.1.1.1"},
		{"through a proxy", proxies, "10.1.1.1:80", []string{"198.51.100.1"}, "198.51.100.1"},
		{"forged entries on the left are ignored", proxies, "10.1.1.1:80", []string{"1.2.3.4, 198.51.100.1"}, "198.51.100.1"},
		{"through two proxies", proxies, "10.1.1.1:80", []string{"198.51.100.1, 10.2.2.2"}, "198.51.100.1"},
		{"several headers", proxies, "10.1.1.1:80", []string{"1.2.3.4", "198.51.100.1, 10.2.2.2"}, "198.51.100.1"},
		{"only proxies", proxies, "10.1.1.1:80", []string{"10.3.3.3"}, "10.3.3.3"},
		{"proxy without header", proxies, "10.1.1.1:80", nil, "10.1.1.1"},
		{"malformed entry stops the walk", proxies, "10.1.1.1:80", []string{"198.51.100.1, garbage"}, "10.1.1.1"},
		{"ipv6 proxy", proxies, "[2001:db8::1]:443", []string{"2001:db8:ffff::9"}, "2001:db8:ffff::9"},
		{"entry with port", proxies, "10.1.1.1:80", []string{"198.51.100.1:5555"}, "198.51.100.1"},
		{"mapped v4", proxies, "[::ffff:10.1.1.1]:80", []string{"198.51.100.1"}, "198.51.100.1"},
		{"unreadable remote", proxies, "pipe", nil, "invalid IP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := tt.proxies.ClientAddr(r).String(); got != tt.want {
				t.Errorf("ClientAddr = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestKey(t *testing.T) {
	tests := map[string]string{
		"203.0.113.5":          "203.0.113.5",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::1": "2001:db8:1:2::/64",
		"::ffff:203.0.113.5":   "203.0.113.5",
		"2001:db8:1:3:3:4:5:6": "2001:db8:1:3::/64",
		"fe80::1%eth0":         "fe80::/64",
		"2001:db8:0:1::1":      "2001:db8:0:1::/64",
	}
	for in, want := range tests {
		a := netip.MustParseAddr(in).Unmap()
		if got := Key(a); got != want {
			t.Errorf("Key(%s) = %s, want %s", in, got, want)
		}
	}
	if got := Key(netip.Addr{}); got != "unknown" {
		t.Errorf("Key(zero) = %s", got)
	}
}

// TestRedis runs against the Redis server at PATCHLINE_TEST_REDIS.
func TestRedis(t *testing.T) {
	url := os.Getenv("PATCHLINE_TEST_REDIS")
	if url == "" {
		t.Skip("PATCHLINE_TEST_REDIS is not set: skipping the Redis limiter test")
	}
	ctx := context.Background()
	prefix := fmt.Sprintf("patchline:test:%d:", time.Now().UnixNano())
	l, err := OpenRedis(ctx, url, Rate{N: 3, Period: time.Minute}, RedisOptions{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// A second replica shares the limit.
	l2, err := OpenRedis(ctx, url, Rate{N: 3, Period: time.Minute}, RedisOptions{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	var got []string
	for i := range 4 {
		lim := l
		if i%2 == 1 {
			lim = l2
		}
		r, err := lim.Allow(ctx, "198.51.100.7")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("allowed=%v remaining=%d limit=%d", r.Allowed, r.Remaining, r.Limit))
		if !r.Allowed {
			if r.RetryAfter <= 0 || r.RetryAfter > 20*time.Second {
				t.Errorf("RetryAfter = %v, want about 20s", r.RetryAfter)
			}
		}
		if r.Reset.Before(time.Now()) || r.Reset.After(time.Now().Add(time.Minute+time.Second)) {
			t.Errorf("Reset = %v, want within a minute", r.Reset)
		}
	}
	want := []string{
		"allowed=true remaining=2 limit=3",
		"allowed=true remaining=1 limit=3",
		"allowed=true remaining=0 limit=3",
		"allowed=false remaining=0 limit=3",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
