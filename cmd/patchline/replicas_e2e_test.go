package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/alert/alerttest"
	"github.com/patchline/patchline/internal/catalog/postgres/pgtest"
)

// replicaRedisDB is the Redis database the replica test owns: it clears
// the lookup rate-limit keys there before it starts.
const replicaRedisDB = 15

// TestEndToEndTwoReplicas runs two `serve` replicas on one PostgreSQL
// (catalog and control store) and one Redis, and calls them the way clients
// behind a load balancer would: alternating between them.
func TestEndToEndTwoReplicas(t *testing.T) {
	e2e(t)
	t.Parallel()
	catalogDSN := pgtest.NewDatabase(t)
	controlDSN := pgtest.NewDatabase(t)
	redisURL := replicaRedis(t)

	if res := runCLI(t, "", nil, "migrate", "--from", "sqlite:"+sampleCatalog, "--to", catalogDSN); res.Code != 0 {
		t.Fatalf("copy the sample catalog to PostgreSQL: exit %d\n%s", res.Code, res.Stderr)
	}
	stores := []string{"--control-db", controlDSN}
	key := mustControlCLI(t, append([]string{"keys", "create", "--name", "automation"}, stores...)...)
	priv := mustControlCLI(t, append([]string{"keys", "create", "--name", "ops", "--privileged", "--expires", "24h"}, stores...)...)
	doomed := mustControlCLI(t, append([]string{"keys", "create", "--name", "to-revoke"}, stores...)...)
	secret := mustControlCLI(t, append([]string{"enroll", "create", "--expires", "1h"}, stores...)...)

	// The quota leaves room for the paging below (about 400 requests, all
	// from 127.0.0.1) and is then spent whole by the rate-limit subtest.
	const quota = 1500
	clearRateLimit(t, redisURL)
	args := []string{"--catalog-db", catalogDSN, "--control-db", controlDSN, "--redis", redisURL,
		"--rate-limit", fmt.Sprintf("%d/24h", quota)}
	replicas := []*server{startServe(t, "", nil, args...), startServe(t, "", nil, args...)}
	for i, s := range replicas {
		if strings.Contains(s.Log(), "loading the bundled sample") {
			t.Fatalf("replica %d loaded the sample into the shared catalog", i)
		}
	}
	hc := &http.Client{Timeout: 30 * time.Second}

	t.Run("paging across replicas returns every row once", func(t *testing.T) {
		for _, first := range []string{
			"/api/v1/cve?limit=100",
			"/api/v1/cve?sort=epss&dir=desc&limit=100",
			"/api/v1/cve?q=remote+code+execution&limit=25",
		} {
			ids, pages := pageIDs(t, first, replicas[0].LookupURL, replicas[1].LookupURL)
			// One replica alone gives the same rows.
			want, _ := pageIDs(t, first, replicas[0].LookupURL)
			if !slices.Equal(ids, want) {
				t.Errorf("%s: %d rows across replicas, %d from one; first difference at %d", first, len(ids), len(want), firstDiff(ids, want))
			}
			seen := map[string]bool{}
			for _, id := range ids {
				if seen[id] {
					t.Errorf("%s: %s returned twice", first, id)
				}
				seen[id] = true
			}
			if len(ids) < 100 {
				t.Errorf("%s: only %d rows in %d pages", first, len(ids), pages)
			}
			t.Logf("%s: %d rows in %d pages, alternating replicas", first, len(ids), pages)
		}
	})

	t.Run("one rate limit shared through Redis", func(t *testing.T) {
		clearRateLimit(t, redisURL)
		allowed, refused := 0, 0
		var remaining []int
		for i := range quota + 6 {
			// Requests from the same client land on the replicas in turn.
			s := replicas[i%2]
			status, body, h := get(t, s.LookupURL+"/api/v1/cve/CVE-2021-44228")
			switch status {
			case http.StatusOK:
				allowed++
				n, err := strconv.Atoi(h.Get("X-RateLimit-Remaining"))
				if err != nil {
					t.Fatalf("X-RateLimit-Remaining: %v", err)
				}
				remaining = append(remaining, n)
			case http.StatusTooManyRequests:
				refused++
				if h.Get("Retry-After") == "" {
					t.Errorf("429 from replica %d without Retry-After", i%2)
				}
			default:
				t.Fatalf("replica %d: %d %s", i%2, status, body)
			}
		}
		if allowed != quota || refused != 6 {
			t.Errorf("alternating replicas: %d allowed, %d refused; want %d and 6 (one quota for both)", allowed, refused, quota)
		}
		// What either replica says is left only goes down, to nothing.
		for i := 1; i < len(remaining); i++ {
			if remaining[i] > remaining[i-1] {
				t.Errorf("X-RateLimit-Remaining went up from %d to %d at request %d", remaining[i-1], remaining[i], i)
				break
			}
		}
		if n := len(remaining); n == 0 || remaining[n-1] > 1 {
			t.Errorf("X-RateLimit-Remaining of the last allowed request: %v", remaining[max(n-1, 0):])
		}
		for i, s := range replicas {
			_, body, _ := get(t, s.LookupURL+"/metrics")
			if !strings.Contains(string(body), "patchline_ratelimit_shared 1") {
				t.Errorf("replica %d metrics do not show the shared limit in use", i)
			}
		}
	})

	t.Run("a replica without Redis falls back to its local limit", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		nowhere := "redis://" + ln.Addr().String() + "/0"
		ln.Close()
		s := startServe(t, "", nil, "--catalog-db", catalogDSN, "--control-db", controlDSN,
			"--redis", nowhere, "--rate-limit", "3/24h")
		var statuses []int
		for range 4 {
			status, _, _ := get(t, s.LookupURL+"/api/v1/cve/CVE-2021-44228")
			statuses = append(statuses, status)
		}
		if fmt.Sprint(statuses) != "[200 200 200 429]" {
			t.Errorf("statuses on the local fallback: %v, want [200 200 200 429]", statuses)
		}
		_, body, _ := get(t, s.LookupURL+"/metrics")
		for _, want := range []string{"patchline_ratelimit_shared 0", "patchline_ratelimit_fallbacks_total 1"} {
			if !strings.Contains(string(body), want) {
				t.Errorf("metrics lack %q", want)
			}
		}
		if !strings.Contains(s.Log(), "Redis unreachable") {
			t.Errorf("the log does not say Redis is unreachable:\n%s", s.Log())
		}
	})

	t.Run("a revoked key is refused by every replica", func(t *testing.T) {
		for i, s := range replicas {
			if status := keyStatus(t, hc, s, doomed); status != http.StatusOK {
				t.Fatalf("replica %d before revocation: %d", i, status)
			}
		}
		mustControlCLI(t, append([]string{"keys", "revoke", controlKeyID(doomed)}, stores...)...)
		for i, s := range replicas {
			if status := keyStatus(t, hc, s, doomed); status != http.StatusUnauthorized {
				t.Errorf("replica %d after revocation: %d, want 401", i, status)
			}
			if status := keyStatus(t, hc, s, key); status != http.StatusOK {
				t.Errorf("replica %d, another key: %d", i, status)
			}
		}
	})

	t.Run("each command is delivered once", func(t *testing.T) {
		const agents, perAgent = 6, 5
		type enrolled struct{ id, token string }
		var fleet []enrolled
		for i := range agents {
			var resp agentproto.EnrollResponse
			postJSON(t, hc, replicas[i%2].ControlURL+"/agent/v1/enroll", "", "", agentproto.EnrollRequest{
				EnrollSecret: secret, Capability: agentproto.CapabilityVersion, Hostname: fmt.Sprintf("replica-test-%02d", i),
				OS: agentproto.OS{Platform: "linux", Name: "Debian GNU/Linux", Version: "12"}, Arch: "amd64", AgentVersion: "1.0.0",
			}, http.StatusCreated, &resp)
			fleet = append(fleet, enrolled{resp.AgentID, resp.Credential})
		}
		queued := map[string]string{} // command id → agent id
		for i, a := range fleet {
			for j := range perAgent {
				var cmd struct {
					ID string `json:"id"`
				}
				postJSON(t, hc, replicas[(i+j)%2].ControlURL+"/api/agents/"+a.id+"/collect-logs", key, "", nil, http.StatusAccepted, &cmd)
				queued[cmd.ID] = a.id
			}
		}

		// Every agent checks in to both replicas at once, a few times over.
		var mu sync.Mutex
		delivered := map[string][]string{} // command id → agents that got it
		var wg sync.WaitGroup
		for _, a := range fleet {
			for _, s := range replicas {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 4 {
						var resp agentproto.CheckInResponse
						postJSON(t, hc, s.ControlURL+"/agent/v1/checkin", "", a.token, agentproto.CheckInRequest{
							Capability: agentproto.CapabilityVersion, Hostname: "replica-test", Arch: "amd64", AgentVersion: "1.0.0",
							OS:        agentproto.OS{Platform: "linux", Name: "Debian GNU/Linux", Version: "12"},
							IPs:       []string{"192.0.2.10"},
							Inventory: &agentproto.Inventory{Software: []agentproto.Software{}, PendingUpdates: []agentproto.Update{}},
						}, http.StatusOK, &resp)
						mu.Lock()
						for _, c := range resp.Commands {
							delivered[c.ID] = append(delivered[c.ID], a.id)
						}
						mu.Unlock()
					}
				}()
			}
		}
		wg.Wait()
		for id, agent := range queued {
			got := delivered[id]
			if len(got) != 1 || got[0] != agent {
				t.Errorf("command %s of %s delivered to %v, want once to its agent", id, agent, got)
			}
		}
		if len(delivered) != len(queued) {
			t.Errorf("%d commands delivered, %d queued", len(delivered), len(queued))
		}

		// The agents list, paged across replicas two at a time.
		var hosts []string
		next := "/api/agents?limit=2"
		for i := 0; next != ""; i++ {
			var page struct {
				Results []struct {
					Hostname string `json:"hostname"`
				} `json:"results"`
				NextCursor *string `json:"nextCursor"`
			}
			getJSON(t, hc, replicas[i%2].ControlURL+next, key, &page)
			for _, r := range page.Results {
				hosts = append(hosts, r.Hostname)
			}
			next = ""
			if page.NextCursor != nil {
				next = "/api/agents?limit=2&cursor=" + url.QueryEscape(*page.NextCursor)
			}
		}
		if len(hosts) != agents || !slices.IsSorted(hosts) {
			t.Errorf("agents paged across replicas: %v", hosts)
		}
	})

	t.Run("a command reaches the long poll held on the other replica", func(t *testing.T) {
		var a agentproto.EnrollResponse
		postJSON(t, hc, replicas[0].ControlURL+"/agent/v1/enroll", "", "", agentproto.EnrollRequest{
			EnrollSecret: secret, Capability: agentproto.CapabilityVersion, Hostname: "replica-wait",
			OS: agentproto.OS{Platform: "windows", Name: "Windows 11 Pro", Version: "23H2", Build: "22631.4460"}, Arch: "amd64", AgentVersion: "1.0.0",
		}, http.StatusCreated, &a)
		type answer struct {
			resp agentproto.WaitResponse
			at   time.Time
		}
		answered := make(chan answer, 1)
		go func() {
			var resp agentproto.WaitResponse
			postJSON(t, &http.Client{Timeout: 2 * time.Minute}, replicas[0].ControlURL+agentproto.PathWait, "", a.Credential,
				agentproto.WaitRequest{TimeoutSeconds: 90}, http.StatusOK, &resp)
			answered <- answer{resp, time.Now()}
		}()
		// Once replica 0 holds the long poll, the command is queued on
		// replica 1.
		waitFor(t, "the long poll held by replica 0", 30*time.Second, func() bool {
			resp, err := hc.Get(replicas[0].ControlURL + "/metrics")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return strings.Contains(string(b), "\npatchline_agent_long_polls 1\n")
		})
		queuedAt := time.Now()
		postJSON(t, hc, replicas[1].ControlURL+"/api/agents/"+a.AgentID+"/collect-logs", key, "", nil, http.StatusAccepted, nil)
		select {
		case got := <-answered:
			if !got.resp.Commands {
				t.Fatalf("the long poll answered %+v, want commands", got.resp)
			}
			t.Logf("queued on replica 1, answered on replica 0 after %v", got.at.Sub(queuedAt).Round(time.Millisecond))
		case <-time.After(60 * time.Second):
			t.Fatal("the long poll on replica 0 did not hear of the command queued on replica 1")
		}
	})

	t.Run("both replicas evaluate an alert rule: one webhook", func(t *testing.T) {
		hook := alerttest.NewReceiver(t)
		var rule struct{ ID, Secret string }
		postJSON(t, hc, replicas[1].ControlURL+"/api/alert-rules", priv, "", map[string]any{
			"name": "KEV on endpoints", "kind": "kev", "webhookUrl": hook.URL}, http.StatusCreated, &rule)
		hook.SetSecret(rule.Secret)
		var a agentproto.EnrollResponse
		postJSON(t, hc, replicas[0].ControlURL+"/agent/v1/enroll", "", "", agentproto.EnrollRequest{
			EnrollSecret: secret, Capability: agentproto.CapabilityVersion, Hostname: "winrar-pc",
			OS: agentproto.OS{Platform: "windows", Name: "Windows 11 Pro", Version: "23H2", Build: "22631.4460"}, Arch: "amd64", AgentVersion: "1.0.0",
		}, http.StatusCreated, &a)
		// WinRAR 6.22: CVE-2023-38831, in CISA KEV, fixed in 6.23.
		postJSON(t, hc, replicas[0].ControlURL+"/agent/v1/checkin", "", a.Credential, agentproto.CheckInRequest{
			Capability: agentproto.CapabilityVersion, Hostname: "winrar-pc", Arch: "amd64", AgentVersion: "1.0.0",
			OS: agentproto.OS{Platform: "windows", Name: "Windows 11 Pro", Version: "23H2", Build: "22631.4460"}, IPs: []string{},
			Inventory: &agentproto.Inventory{Software: []agentproto.Software{{Name: "WinRAR", Version: "6.22", Ecosystem: "Desktop"}}, PendingUpdates: []agentproto.Update{}},
		}, http.StatusOK, nil)
		waitFor(t, "the alert of CVE-2023-38831", 2*time.Minute, func() bool {
			for _, p := range hook.Payloads() {
				if p.CVEID == "CVE-2023-38831" {
					return true
				}
			}
			return false
		})
		time.Sleep(12 * time.Second) // both replicas evaluate twice more
		n := 0
		for _, p := range hook.Payloads() {
			if p.CVEID == "CVE-2023-38831" {
				n++
				if len(p.Agents) != 1 || p.Agents[0].ID != a.AgentID || len(p.Fixes) == 0 || p.Fixes[0].Version != "6.23" {
					t.Errorf("alert %+v", p)
				}
			}
		}
		if n != 1 {
			t.Errorf("the webhook got %d alerts of CVE-2023-38831, want 1", n)
		}
	})

	// Both replicas appended to one audit chain: it verifies.
	if res := runCLI(t, "", nil, "audit", "verify", "--control-db", controlDSN); res.Code != 0 {
		t.Errorf("audit verify: exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
	}
}

// replicaRedis returns the URL of the replica test's Redis database, and
// skips the test when PATCHLINE_TEST_REDIS is not set.
func replicaRedis(t *testing.T) string {
	t.Helper()
	base := os.Getenv("PATCHLINE_TEST_REDIS")
	if base == "" {
		t.Skip("PATCHLINE_TEST_REDIS is not set: skipping the two-replica test (set it to a URL such as redis://127.0.0.1:6379/0)")
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("PATCHLINE_TEST_REDIS: %v", err)
	}
	u.Path = fmt.Sprintf("/%d", replicaRedisDB)
	return u.String()
}

// clearRateLimit deletes the lookup rate-limit state from the Redis
// database at u, so that the quota starts whole.
func clearRateLimit(t *testing.T, u string) {
	t.Helper()
	opts, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	ctx := context.Background()
	keys, err := c.Keys(ctx, "*patchline:lookup:*").Result()
	if err != nil {
		t.Fatalf("redis: %v", err)
	}
	if len(keys) > 0 {
		if err := c.Del(ctx, keys...).Err(); err != nil {
			t.Fatalf("redis: %v", err)
		}
	}
}

// pageIDs follows a list's cursors from its first page to its end, asking
// the servers in turn, and returns the ids and the number of pages.
func pageIDs(t *testing.T, first string, bases ...string) ([]string, int) {
	t.Helper()
	var ids []string
	next, pages := first, 0
	for next != "" {
		base := bases[pages%len(bases)]
		status, body, _ := get(t, base+next)
		if status != http.StatusOK {
			t.Fatalf("GET %s from %s: %d %s", next, base, status, body)
		}
		var page struct {
			Results []struct {
				ID string `json:"cveId"`
			} `json:"results"`
			NextCursor *string `json:"nextCursor"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Results {
			ids = append(ids, r.ID)
		}
		next = ""
		if page.NextCursor != nil {
			next = withCursor(t, first, *page.NextCursor)
		}
		pages++
	}
	return ids, pages
}

// withCursor returns the path of the first page with its cursor set.
func withCursor(t *testing.T, first, cursor string) string {
	t.Helper()
	u, err := url.Parse(first)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("cursor", cursor)
	u.RawQuery = q.Encode()
	return u.String()
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// keyStatus returns the status of GET /api/key with the given key.
func keyStatus(t *testing.T, hc *http.Client, s *server, key string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", s.ControlURL+"/api/key", nil)
	req.Header.Set("X-API-Key", key)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// postJSON POSTs body (JSON, or nothing when nil) with an API key or an
// agent bearer token, checks the status and decodes the answer into out.
func postJSON(t *testing.T, hc *http.Client, u, key, bearer string, body any, want int, out any) {
	t.Helper()
	var rd *strings.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Error(err)
			return
		}
		rd = strings.NewReader(string(b))
	} else {
		rd = strings.NewReader("")
	}
	req, _ := http.NewRequest("POST", u, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	doJSON(t, hc, req, want, out)
}

// getJSON GETs u with an API key and decodes the 200 answer into out.
func getJSON(t *testing.T, hc *http.Client, u, key string, out any) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("X-API-Key", key)
	doJSON(t, hc, req, http.StatusOK, out)
}

func doJSON(t *testing.T, hc *http.Client, req *http.Request, want int, out any) {
	t.Helper()
	resp, err := hc.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", req.Method, req.URL, err)
		return
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil && resp.StatusCode != http.StatusNoContent {
		t.Errorf("%s %s: %d, body not JSON: %v", req.Method, req.URL, resp.StatusCode, err)
		return
	}
	if resp.StatusCode != want {
		t.Errorf("%s %s: %d, want %d: %s", req.Method, req.URL, resp.StatusCode, want, raw)
		return
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Errorf("%s %s: %v", req.Method, req.URL, err)
		}
	}
}
