package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The crash test kills `patchline serve` with SIGKILL at random points
// while it writes (API-key requests and their audit entries, enrollments
// and check-ins of agents, an ingest beside it), starts it again, and
// checks that both stores open, the audit chain verifies, and nothing the
// server acknowledged with a 2xx is lost.

// crashAcks is what the server acknowledged, across every run.
type crashAcks struct {
	mu sync.Mutex
	// agents maps the id of each enrolled agent to its credential and
	// the highest inventory version whose check-in was acknowledged.
	agents map[string]*crashAgent
	rings  []string
	// audited counts acknowledged requests that each append an audit
	// entry: API-key requests and enrollments.
	audited int
}

type crashAgent struct {
	credential string
	version    int
}

// crashClient makes the requests of the writers of one run.
type crashClient struct {
	base, key string
	http      *http.Client
}

// do sends a JSON request and decodes a 2xx answer into v; it returns the
// status, 0 when no answer came.
func (c *crashClient) do(ctx context.Context, method, path, key, bearer string, body, v any) int {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(b))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 && v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			return 0 // cut off mid-answer: not acknowledged
		}
	}
	return resp.StatusCode
}

// crashInventory is the check-in of an agent reporting inventory version n.
func crashInventory(host string, n int) map[string]any {
	return map[string]any{
		"capability": 2, "hostname": host,
		"os":        map[string]string{"platform": "linux", "name": "Debian GNU/Linux", "version": "12", "build": "6.1"},
		"inventory": map[string]any{"software": []any{map[string]string{"name": "crash-test", "version": strconv.Itoa(n), "ecosystem": "npm"}}, "pendingUpdates": []any{}},
	}
}

// apiWriter creates rings and reads the key until ctx is done or the
// server goes away.
func apiWriter(ctx context.Context, c *crashClient, acks *crashAcks, prefix string) {
	for i := 0; ctx.Err() == nil; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		switch c.do(ctx, "POST", "/api/rings", c.key, "", map[string]any{"name": name, "position": i}, &struct{}{}) {
		case http.StatusCreated:
			acks.mu.Lock()
			acks.rings = append(acks.rings, name)
			acks.audited++
			acks.mu.Unlock()
		case 0:
			return
		}
		if c.do(ctx, "GET", "/api/key", c.key, "", nil, &struct{}{}) == http.StatusOK {
			acks.mu.Lock()
			acks.audited++
			acks.mu.Unlock()
		}
	}
}

// agentWriter enrolls agents and checks them in with rising inventory
// versions until ctx is done or the server goes away.
func agentWriter(ctx context.Context, c *crashClient, acks *crashAcks, secret, prefix string) {
	var mine []string
	for i := 0; ctx.Err() == nil; i++ {
		if i%3 == 0 {
			var e struct{ AgentID, Credential string }
			host := fmt.Sprintf("%s-%d", prefix, i)
			status := c.do(ctx, "POST", "/agent/v1/enroll", "", "", map[string]any{
				"enrollSecret": secret, "capability": 2, "hostname": host,
				"os": map[string]string{"platform": "linux", "name": "Debian GNU/Linux", "version": "12", "build": "6.1"},
			}, &e)
			if status == 0 {
				return
			}
			if status == http.StatusCreated {
				acks.mu.Lock()
				acks.agents[e.AgentID] = &crashAgent{credential: e.Credential}
				acks.audited++
				acks.mu.Unlock()
				mine = append(mine, e.AgentID)
			}
			continue
		}
		if len(mine) == 0 {
			continue
		}
		id := mine[i%len(mine)]
		acks.mu.Lock()
		a := *acks.agents[id]
		acks.mu.Unlock()
		next := a.version + 1
		status := c.do(ctx, "POST", "/agent/v1/checkin", "", a.credential, crashInventory("crash-"+id, next), &struct{}{})
		if status == 0 {
			return
		}
		if status == http.StatusOK {
			acks.mu.Lock()
			acks.agents[id].version = max(acks.agents[id].version, next)
			acks.mu.Unlock()
		}
	}
}

// kill stops a running serve with SIGKILL.
func (s *server) kill(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s.cmd.Wait()
}

var auditEntriesRE = regexp.MustCompile(`(\d+) entries`)

func TestCrashEndToEnd(t *testing.T) {
	e2e(t)
	data := t.TempDir()
	d := []string{"--data", data}
	env := []string{"PATCHLINE_CONTROL_DB=", "PATCHLINE_CATALOG_DB="}
	if res := runCLI(t, "", nil, "ingest", "--data", data,
		"cvelist="+filepath.Join(sampleData, "cvelist/CVE-2021-44228.json"),
		"kev="+filepath.Join(sampleData, "kev/known_exploited_vulnerabilities.json")); res.Code != 0 {
		t.Fatalf("ingest: %s%s", res.Stdout, res.Stderr)
	}
	priv := mustControlCLI(t, append([]string{"keys", "create", "--name", "crash", "--privileged", "--expires", "1h"}, d...)...)
	secret := mustControlCLI(t, append([]string{"enroll", "create", "--expires", "1h"}, d...)...)
	const cliEntries = 2 // key.created, enroll_secret.created

	// An EPSS file large enough that its ingest is still running when
	// the server is killed.
	big := filepath.Join(t.TempDir(), "epss.csv")
	var b strings.Builder
	b.WriteString("#model_version:v2025.03.14,score_date:2026-11-20T00:00:00+0000\ncve,epss,percentile\n")
	for i := range 200_000 {
		fmt.Fprintf(&b, "CVE-2099-%d,0.5,0.5\n", 10000+i)
	}
	if err := os.WriteFile(big, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PATCHLINE_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("kill points from seed %d (PATCHLINE_CRASH_SEED)", seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	acks := &crashAcks{agents: map[string]*crashAgent{}}
	deadline := time.Now().Add(40 * time.Second)
	rounds := 0
	for round := 0; round < 5 && time.Now().Before(deadline); round++ {
		srv := startServe(t, data, env, "--rate-limit", "off")
		ingest := exec.Command(binary, "ingest", "--data", data, "epss="+big)
		if err := ingest.Start(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		c := &crashClient{base: srv.ControlURL, key: priv, http: &http.Client{Timeout: 5 * time.Second}}
		var wg sync.WaitGroup
		for w := range 2 {
			wg.Go(func() { apiWriter(ctx, c, acks, fmt.Sprintf("ring-%d-%d", round, w)) })
			wg.Go(func() { agentWriter(ctx, c, acks, secret, fmt.Sprintf("host-%d-%d", round, w)) })
		}
		time.Sleep(time.Duration(200+rng.IntN(1300)) * time.Millisecond)
		srv.kill(t)
		ingest.Process.Signal(syscall.SIGKILL)
		ingest.Wait()
		cancel()
		wg.Wait()
		rounds++
	}
	acks.mu.Lock()
	defer acks.mu.Unlock()
	t.Logf("%d runs killed; acknowledged: %d agents, %d rings, %d audited requests", rounds, len(acks.agents), len(acks.rings), acks.audited)
	if len(acks.agents) == 0 || len(acks.rings) == 0 {
		t.Fatal("nothing was acknowledged before the kills: the test tests nothing")
	}

	// Both stores open and serve.
	srv := startServe(t, data, env, "--rate-limit", "off")
	if status, body, _ := get(t, srv.LookupURL+"/api/v1/cve/CVE-2021-44228"); status != http.StatusOK {
		t.Errorf("the catalog after the kills: %d %s", status, body)
	}
	c := &crashClient{base: srv.ControlURL, key: priv, http: &http.Client{Timeout: 30 * time.Second}}
	ctx := context.Background()

	// Every acknowledged enrollment is listed, with at least the last
	// acknowledged inventory.
	listed := map[string]bool{}
	for cursor, pages := "", 0; pages < 1000; pages++ {
		var page struct {
			Results []struct {
				ID string `json:"id"`
			} `json:"results"`
			NextCursor *string `json:"nextCursor"`
		}
		path := "/api/agents?limit=100"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		if status := c.do(ctx, "GET", path, priv, "", nil, &page); status != http.StatusOK {
			t.Fatalf("GET %s: %d", path, status)
		}
		for _, a := range page.Results {
			listed[a.ID] = true
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	for id, a := range acks.agents {
		if !listed[id] {
			t.Errorf("agent %s got a 201 enrollment but is not listed after the crash", id)
			continue
		}
		if a.version == 0 {
			continue
		}
		var got struct {
			Inventory struct {
				Software []struct{ Name, Version string } `json:"software"`
			} `json:"inventory"`
		}
		if status := c.do(ctx, "GET", "/api/agents/"+id, priv, "", nil, &got); status != http.StatusOK {
			t.Errorf("GET agent %s: %d", id, status)
			continue
		}
		v := -1
		for _, sw := range got.Inventory.Software {
			if sw.Name == "crash-test" {
				v, _ = strconv.Atoi(sw.Version)
			}
		}
		if v < a.version {
			t.Errorf("agent %s: inventory version %d after the crash, but the check-in of version %d was acknowledged", id, v, a.version)
		}
	}
	// Every acknowledged ring exists.
	for _, name := range acks.rings {
		if status := c.do(ctx, "GET", "/api/rings/"+name, priv, "", nil, &struct{}{}); status != http.StatusOK {
			t.Errorf("ring %s got a 201 but is answered %d after the crash", name, status)
		}
	}

	// The audit chain verifies and holds an entry for every acknowledged
	// request (and more: refused and unacknowledged ones).
	r := controlCLI(t, "", append([]string{"audit", "verify"}, d...)...)
	if r.Code != 0 {
		t.Fatalf("audit verify after the crashes: exit %d: %s%s", r.Code, r.Stdout, r.Stderr)
	}
	m := auditEntriesRE.FindStringSubmatch(r.Stdout + r.Stderr)
	if m == nil {
		t.Fatalf("audit verify says no entry count: %s%s", r.Stdout, r.Stderr)
	}
	if n, _ := strconv.Atoi(m[1]); n < acks.audited+cliEntries {
		t.Errorf("the audit log has %d entries; %d requests were acknowledged", n, acks.audited+cliEntries)
	}

	// The catalog takes a whole ingest again.
	if res := runCLI(t, "", nil, "ingest", "--data", data, "kev="+filepath.Join(sampleData, "kev/known_exploited_vulnerabilities.json")); res.Code != 0 {
		t.Errorf("ingest after the crashes: exit %d: %s%s", res.Code, res.Stdout, res.Stderr)
	}
}
