package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// fleetMain measures command delivery to a simulated fleet held in long
// polls by one or more control replicas: it waits until the replicas hold
// -agents long polls between them (the sum of patchline_agent_long_polls),
// queues one collect-logs command to each of -commands agents spread over
// the fleet through the control API (round robin over the replicas), and
// reads from the control database, in milliseconds, when each command was
// created and when its agent reported it running. The simulator must run
// with a large --time-scale, so that the commands are still running when
// they are read; a command that already finished counts with its finish
// time, an upper bound of its start.
func fleetMain(args []string) {
	fs := flag.NewFlagSet("fleet", flag.ExitOnError)
	controls := fs.String("control", "", "comma-separated base URLs of the control replicas")
	key := fs.String("key", "", "API key of the control service")
	dsn := fs.String("dsn", "", "PostgreSQL DSN of the control database")
	agents := fs.Int("agents", 10000, "long polls to wait for before queuing commands")
	commands := fs.Int("commands", 1000, "agents to send a command to")
	conns := fs.Int("conns", 16, "API calls in flight at once while queuing")
	warmup := fs.Duration("warmup", 10*time.Minute, "longest wait for the fleet to hold its long polls")
	settle := fs.Duration("settle", 90*time.Second, "longest wait for the commands to start")
	pids := fs.String("pids", "", "comma-separated NAME=PID of the processes whose RSS and descriptors are shown")
	fs.Parse(args)
	bases := strings.Split(*controls, ",")
	if *controls == "" || *key == "" || *dsn == "" || *commands < 1 {
		log.Fatal("fleet: -control, -key, -dsn and -commands are required")
	}
	procs := parsePids(*pids)

	// 1. The fleet holds its long polls.
	start := time.Now()
	deadline := start.Add(*warmup)
	var held []float64
	for {
		held = gauges(bases, "patchline_agent_long_polls")
		total := sum(held)
		enrolled := 0.0
		for _, b := range bases {
			ok, _ := counter(b+"/metrics", "/agent/v1/enroll")
			enrolled += ok
		}
		if int(total) >= *agents || time.Now().After(deadline) {
			log.Printf("fleet: %.0f enrolled, %.0f long polls held %v after %s (load %s)", enrolled, total, held, time.Since(start).Round(time.Second), loadAvg())
			break
		}
		if int(time.Since(start).Seconds())%10 == 0 {
			log.Printf("fleet: %.0f enrolled, %.0f long polls held %v (load %s)", enrolled, total, held, loadAvg())
		}
		time.Sleep(time.Second)
	}
	// Check-ins of the first minute settle before the measurement.
	time.Sleep(5 * time.Second)
	held = gauges(bases, "patchline_agent_long_polls")
	fmt.Printf("long polls held: %.0f (%s) of %d agents, %s after the fleet started; load average %s\n\n",
		sum(held), joinFloats(held), *agents, time.Since(start).Round(time.Second), loadAvg())
	printProcs("with the fleet holding its long polls", procs)

	// 2. The agents, every n-th of those that checked in since they
	// enrolled, so that both simulators and both replicas get commands.
	// An enrollment the server completed after its endpoint gave up
	// waiting leaves an agent that never checks in: none is picked.
	ctx := context.Background()
	db, err := pgx.Connect(ctx, *dsn)
	if err != nil {
		log.Fatalf("fleet: %v", err)
	}
	defer db.Close(ctx)
	var enrolledRows int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM agents`).Scan(&enrolledRows); err != nil {
		log.Fatalf("fleet: %v", err)
	}
	ids, err := liveAgents(ctx, db)
	if err != nil {
		log.Fatalf("fleet: %v", err)
	}
	fmt.Printf("agents in the control database: %d, of which %d checked in after enrolling", enrolledRows, len(ids))
	if enrolledRows > len(ids) {
		fmt.Print(" (the others: enrollments answered after their endpoint gave up waiting, and enrolled again)")
	}
	fmt.Print("\n\n")
	if len(ids) < *commands {
		log.Fatalf("fleet: %d agents checked in, fewer than the %d to send commands to", len(ids), *commands)
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: *conns}}
	step := len(ids) / *commands
	picked := make([]string, *commands)
	for i := range picked {
		picked[i] = ids[i*step]
	}

	// 3. The commands, each through one API call.
	type sent struct {
		id       string
		at       time.Time
		took     time.Duration
		status   int
		errorMsg string
	}
	out := make([]sent, len(picked))
	var wg sync.WaitGroup
	next := make(chan int)
	load0 := loadAvg()
	t0 := time.Now()
	for w := 0; w < *conns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				base := bases[i%len(bases)]
				s := &out[i]
				s.at = time.Now()
				var err error
				s.id, s.status, err = queueCollectLogs(client, base, *key, picked[i])
				s.took = time.Since(s.at)
				if err != nil {
					s.errorMsg = err.Error()
				}
			}
		}()
	}
	for i := range picked {
		next <- i
	}
	close(next)
	wg.Wait()
	queueTime := time.Since(t0)
	var callLat []time.Duration
	var cmdIDs []string
	sentAt := map[string]time.Time{}
	apiErrors := map[string]int{}
	for _, s := range out {
		if s.errorMsg != "" {
			apiErrors[fmt.Sprintf("%d %s", s.status, s.errorMsg)]++
			continue
		}
		callLat = append(callLat, s.took)
		cmdIDs = append(cmdIDs, s.id)
		sentAt[s.id] = s.at
	}

	// 4. When each started, from the control database.
	var rows map[string]commandRow
	settleEnd := time.Now().Add(*settle)
	for {
		rows, err = commandRows(ctx, db, cmdIDs)
		if err != nil {
			log.Fatalf("fleet: %v", err)
		}
		waiting := 0
		for _, r := range rows {
			if r.state == "queued" || r.state == "delivered" {
				waiting++
			}
		}
		if waiting == 0 || time.Now().After(settleEnd) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	var fromCreate, fromCall []time.Duration
	states := map[string]int{}
	finished := 0
	for id, r := range rows {
		states[r.state]++
		switch r.state {
		case "running", "succeeded", "failed":
			if r.state != "running" {
				finished++
			}
			fromCreate = append(fromCreate, time.Duration(r.updated-r.created)*time.Millisecond)
			fromCall = append(fromCall, time.UnixMilli(r.updated).Sub(sentAt[id]))
		}
	}
	slices.Sort(fromCreate)
	slices.Sort(fromCall)
	slices.Sort(callLat)

	fmt.Printf("commands: %d collect-logs queued by %d API calls (%d at a time, round robin over %d replicas) in %s, %.0f calls/s; API call p50 %s, p99 %s; load average %s before, %s after\n\n",
		len(cmdIDs), len(picked), *conns, len(bases), queueTime.Round(time.Millisecond), float64(len(picked))/queueTime.Seconds(),
		ms(pct(callLat, 50)), ms(pct(callLat, 99)), load0, loadAvg())
	fmt.Println("| from | started | p50 | p90 | p99 | max | within 1 s |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|")
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"the command's createdAt (server clock)", fromCreate}, {"the start of the API call (same machine's clock)", fromCall}} {
		within := 0
		for _, d := range m.d {
			if d <= time.Second {
				within++
			}
		}
		fmt.Printf("| %s | %d of %d | %s | %s | %s | %s | %d (%.1f %%) |\n", m.name, len(m.d), len(picked),
			ms(pct(m.d, 50)), ms(pct(m.d, 90)), ms(pct(m.d, 99)), ms(pct(m.d, 100)), within, 100*float64(within)/float64(len(picked)))
	}
	fmt.Println()
	fmt.Printf("states when read (%s after the last call, at most %s): %s", time.Since(t0.Add(queueTime)).Round(100*time.Millisecond), *settle, formatCounts(states))
	if finished > 0 {
		fmt.Printf(" (%d finished before they were read: their finish counts as their start)", finished)
	}
	fmt.Println()
	if len(apiErrors) > 0 {
		fmt.Printf("API calls that failed: %s\n", formatCounts(apiErrors))
	} else {
		fmt.Println("API calls that failed: none")
	}
	held = gauges(bases, "patchline_agent_long_polls")
	fmt.Printf("long polls held after the commands: %.0f (%s); load average %s\n\n", sum(held), joinFloats(held), loadAvg())
	printProcs("after the commands", procs)
}

// commandRow is a command's state and its times in milliseconds.
type commandRow struct {
	state            string
	created, updated int64
}

// commandRows reads the state and the times, in milliseconds, of the
// commands ids.
func commandRows(ctx context.Context, db *pgx.Conn, ids []string) (map[string]commandRow, error) {
	rows, err := db.Query(ctx, `SELECT id, state, created_at, updated_at FROM commands WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]commandRow{}
	for rows.Next() {
		var id string
		var r commandRow
		if err := rows.Scan(&id, &r.state, &r.created, &r.updated); err != nil {
			return nil, err
		}
		out[id] = r
	}
	return out, rows.Err()
}

// liveAgents returns the ids of the agents that checked in after they
// enrolled.
func liveAgents(ctx context.Context, db *pgx.Conn) ([]string, error) {
	rows, err := db.Query(ctx, `SELECT id FROM agents WHERE last_seen_at > enrolled_at ORDER BY id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// queueCollectLogs asks for the logs of an agent and returns the id of
// the command.
func queueCollectLogs(client *http.Client, base, key, agentID string) (string, int, error) {
	req, _ := http.NewRequest(http.MethodPost, base+"/api/agents/"+url.PathEscape(agentID)+"/collect-logs", strings.NewReader("{}"))
	req.Header.Set("X-API-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return "", resp.StatusCode, fmt.Errorf("%s", strings.TrimSpace(string(b)))
	}
	var c struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(b, &c); err != nil || c.ID == "" {
		return "", resp.StatusCode, fmt.Errorf("no command id in %q", b)
	}
	return c.ID, resp.StatusCode, nil
}

// gauges reads a gauge from the /metrics of each base URL; a replica that
// does not answer counts 0.
func gauges(bases []string, name string) []float64 {
	out := make([]float64, len(bases))
	for i, b := range bases {
		resp, err := http.Get(b + "/metrics")
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
				out[i], _ = strconv.ParseFloat(v, 64)
			}
		}
		resp.Body.Close()
	}
	return out
}

type proc struct {
	name string
	pid  int
}

func parsePids(s string) []proc {
	var out []proc
	for _, f := range strings.Split(s, ",") {
		name, p, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(p)
		if err != nil {
			log.Fatalf("fleet: -pids %q: %v", f, err)
		}
		out = append(out, proc{name, pid})
	}
	return out
}

// printProcs prints the resident memory, peak and open descriptors of
// the processes.
func printProcs(when string, procs []proc) {
	if len(procs) == 0 {
		return
	}
	fmt.Printf("| process (%s) | RSS | peak RSS | open fds | threads |\n|---|---:|---:|---:|---:|\n", when)
	for _, p := range procs {
		fds := "?"
		if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.pid)); err == nil {
			fds = strconv.Itoa(len(ents))
		}
		threads := "?"
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid)); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "Threads:"); ok {
					threads = strings.TrimSpace(v)
				}
			}
		}
		fmt.Printf("| %s | %s | %s | %s | %s |\n", p.name, procStatus(p.pid, "VmRSS"), procStatus(p.pid, "VmHWM"), fds, threads)
	}
	fmt.Println()
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := (len(d)*p + 99) / 100
	return d[max(0, min(len(d)-1, i-1))]
}

func sum(v []float64) float64 {
	t := 0.0
	for _, x := range v {
		t += x
	}
	return t
}

func joinFloats(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strings.Join(s, " + ")
}

func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
