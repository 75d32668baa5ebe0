// Command load drives a running `patchline serve` on 127.0.0.1 with fixed
// mixes of requests and prints a Markdown table of the results.
//
// Each HTTP mix runs against the lookup API and against a bare net/http
// handler started by this program that answers the same requests with the
// very bytes the lookup API gave for them, in alternating rounds (A B A B
// …) of the same duration and connections, so that both sides share the
// same minutes of the machine. Each round's ratio of the two request
// rates is logged; the table gives the median ratio, the load average
// before and after the mix, and the latencies of the median round.
//
//	load cve -url http://127.0.0.1:PORT -conns 64 -duration 10s -rounds 3 -pid PID [-mixes all,batch]
//	load cve -url http://127.0.0.1:PORT -mixes list,bulk -shapes shapes.txt
//	load peer -url http://127.0.0.1:PORT -paths FILE -conns 64 -duration 10s -rounds 3
//	load checkins -metrics http://127.0.0.1:PORT/metrics -agents 6000 -duration 20s
//	load fleet -control http://127.0.0.1:P1,http://127.0.0.1:P2 -key KEY -dsn postgres://… -agents 10000 -commands 1000
//
// fleet measures how fast commands reach a simulated fleet that holds its
// long polls (bench/fleet.sh).
//
// peer drives any server (another CVE service, for a side-by-side) with
// the paths of FILE, one a line, against its own bare replay of them.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/patchline/patchline/bench/mix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: load cve|peer|checkins|fleet [flags]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "cve":
		cveMain(os.Args[2:])
	case "peer":
		peerMain(os.Args[2:])
	case "checkins":
		checkinsMain(os.Args[2:])
	case "fleet":
		fleetMain(os.Args[2:])
	default:
		fmt.Fprintln(os.Stderr, "usage: load cve|peer|checkins|fleet [flags]")
		os.Exit(2)
	}
}

// request is one request of a mix, with the response the lookup API gave.
type request struct {
	method, path string
	body         []byte
	resp         []byte
	ctype        string
}

func (r *request) key() string { return r.method + " " + r.path + "\x00" + string(r.body) }

// result is what one run of a mix measured.
type result struct {
	n        int
	errors   int
	bytes    int64
	elapsed  time.Duration
	p50, p99 time.Duration
	slowest  []timed // the slowest requests, slowest first
}

// timed is the latency of one request.
type timed struct {
	d    time.Duration
	path string
}

func (r result) rps() float64 { return float64(r.n) / r.elapsed.Seconds() }

func newClient(conns int) *http.Client {
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns,
		DisableCompression: true, IdleConnTimeout: time.Minute,
	}}
}

// run sends reqs, picked at random, from conns connections for d against
// base, and measures the latency of each.
func run(client *http.Client, base string, reqs []*request, conns int, d time.Duration, seed uint64) result {
	var (
		mu    sync.Mutex
		all   []timed
		res   result
		wg    sync.WaitGroup
		start = time.Now()
		end   = start.Add(d)
	)
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			var lat []timed
			var n, errs int
			var nb int64
			for time.Now().Before(end) {
				q := reqs[rng.IntN(len(reqs))]
				t := time.Now()
				req, _ := http.NewRequest(q.method, base+q.path, bytes.NewReader(q.body))
				if q.body != nil {
					req.Header.Set("Content-Type", "application/json")
				}
				resp, err := client.Do(req)
				if err != nil {
					errs++
					continue
				}
				m, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs++
					continue
				}
				lat = append(lat, timed{time.Since(t), q.path})
				n++
				nb += m
			}
			mu.Lock()
			all = append(all, lat...)
			res.n += n
			res.errors += errs
			res.bytes += nb
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	slices.SortFunc(all, func(a, b timed) int { return cmp.Compare(a.d, b.d) })
	if len(all) > 0 {
		res.p50 = all[len(all)*50/100].d
		res.p99 = all[min(len(all)-1, len(all)*99/100)].d
	}
	seen := map[string]bool{}
	for i := len(all) - 1; i >= 0 && len(res.slowest) < 5; i-- {
		if !seen[all[i].path] {
			seen[all[i].path] = true
			res.slowest = append(res.slowest, all[i])
		}
	}
	return res
}

// bare is the comparison server: it answers each request of the mixes with
// the bytes captured from the lookup API, nothing else.
type bare struct {
	byKey  map[string]*request
	addr   string
	prefix string // the path prefix of the measured server's requests, left out of the keys
}

func startBare(reqs []*request, prefix string) *bare {
	b := &bare{byKey: map[string]*request{}, prefix: prefix}
	for _, r := range reqs {
		b.byKey[r.key()] = r
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	b.addr = "http://" + ln.Addr().String()
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if r.Method == http.MethodPost {
			body, _ = io.ReadAll(r.Body)
		}
		path := strings.TrimPrefix(r.URL.RequestURI(), b.prefix)
		q, ok := b.byKey[r.Method+" "+path+"\x00"+string(body)]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", q.ctype)
		w.Header().Set("Content-Length", strconv.Itoa(len(q.resp)))
		w.Write(q.resp)
	}))
	return b
}

// captureIf captures reqs when the mix runs, and returns none otherwise.
func captureIf(runs bool, client *http.Client, base string, reqs []*request) []*request {
	if !runs {
		return nil
	}
	return capture(client, base, reqs)
}

// capture sends each request once to the lookup API and keeps its answer.
func capture(client *http.Client, base string, reqs []*request) []*request {
	var out []*request
	for _, q := range reqs {
		req, _ := http.NewRequest(q.method, base+q.path, bytes.NewReader(q.body))
		if q.body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			log.Fatalf("%s %s: %v", q.method, q.path, err)
		}
		q.resp, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		q.ctype = resp.Header.Get("Content-Type")
		if resp.StatusCode != http.StatusOK {
			log.Printf("skipping %s %s: %s", q.method, q.path, resp.Status)
			continue
		}
		out = append(out, q)
	}
	return out
}

func cveMain(args []string) {
	fs := flag.NewFlagSet("cve", flag.ExitOnError)
	base := fs.String("url", "http://127.0.0.1:18080", "base URL of the lookup listener (127.0.0.1 only)")
	conns := fs.Int("conns", 64, "connections of the GET /cve/{id} mix")
	queryConns := fs.Int("query-conns", 8, "connections of the list, batch and querybatch mixes (querybatch also runs on 1)")
	dur := fs.Duration("duration", 10*time.Second, "duration of each round of each side")
	rounds := fs.Int("rounds", 3, "rounds of each side, alternating")
	pid := fs.Int("pid", 0, "process id of the server, for its RSS")
	seed := fs.Uint64("seed", 1, "seed of the request mixes")
	only := fs.String("mixes", "hot,all,list,batch,querybatch,bulk", "the mixes to run, comma-separated: hot and all (GET by id over 2,000 ids and over the whole catalog), list, batch, querybatch, bulk")
	shapes := fs.String("shapes", "", "file to write the time of each list request to, slowest first (each asked alone, the median of 5)")
	fs.Parse(args)
	if u, err := url.Parse(*base); err != nil || (u.Hostname() != "127.0.0.1" && u.Hostname() != "localhost") {
		log.Fatalf("-url %q: want a 127.0.0.1 address", *base)
	}
	want := map[string]bool{}
	for _, m := range strings.Split(*only, ",") {
		switch m = strings.TrimSpace(m); m {
		case "hot", "all", "list", "batch", "querybatch", "bulk":
			want[m] = true
		default:
			log.Fatalf("-mixes: unknown mix %q", m)
		}
	}
	api := *base + "/api/v1"
	client := newClient(*conns)
	rng := rand.New(rand.NewPCG(*seed, 7))

	// The bulk stream first: it lists every id, and is a measurement.
	bulk := &request{method: "GET", path: "/cve/bulk.jsonl"}
	bulkReqs := capture(client, api, []*request{bulk})
	ids := idsOf(bulk.resp)
	log.Printf("catalog: %d records, bulk stream %.1f MB", len(ids), float64(len(bulk.resp))/1e6)
	if len(ids) == 0 {
		log.Fatal("the catalog is empty")
	}

	// GET by id twice: 2,000 ids asked again and again, as the records in
	// the news are, and 20,000 ids from the whole catalog, most of them
	// out of the server's memory.
	var recReqs, coldReqs, listReqs, batchReqs []*request
	for range 2000 {
		recReqs = append(recReqs, &request{method: "GET", path: "/cve/" + ids[rng.IntN(len(ids))]})
	}
	for range 20000 {
		coldReqs = append(coldReqs, &request{method: "GET", path: "/cve/" + ids[rng.IntN(len(ids))]})
	}
	queries := mix.ListQueries(rng, 150)
	if !want["list"] {
		queries = nil
	}
	for _, q := range queries {
		// Each query, then two pages further by its cursor.
		path := "/cve?" + q
		for page := 0; page < 3 && path != ""; page++ {
			r := &request{method: "GET", path: path}
			got := capture(client, api, []*request{r})
			if len(got) == 0 {
				break
			}
			listReqs = append(listReqs, r)
			var p struct {
				Next *string `json:"nextCursor"`
			}
			json.Unmarshal(r.resp, &p)
			path = ""
			if p.Next != nil {
				path = "/cve?" + q + "&cursor=" + url.QueryEscape(*p.Next)
			}
		}
	}
	for range 100 {
		var b struct {
			IDs []string `json:"ids"`
		}
		for range 100 {
			b.IDs = append(b.IDs, ids[rng.IntN(len(ids))])
		}
		body, _ := json.Marshal(b)
		batchReqs = append(batchReqs, &request{method: "POST", path: "/cve/batch", body: body})
	}
	// The batches are captured for the batch mix and for the querybatch
	// mix, which asks for the packages of their records.
	querybatchFrom := captureIf(want["batch"] || want["querybatch"], client, api, batchReqs)
	batchReqs = nil
	if want["batch"] {
		batchReqs = querybatchFrom
	}
	coldReqs = captureIf(want["all"], client, api, coldReqs)
	recReqs = captureIf(want["hot"], client, api, recReqs)
	if *shapes != "" {
		writeShapes(client, api, listReqs, *shapes)
	}

	b := startBare(slices.Concat(recReqs, coldReqs, listReqs, batchReqs, bulkReqs), "/api/v1")
	bareAPI := b.addr + "/api/v1"
	printHeader("lookup API")
	mix := func(name string, reqs []*request, conns int, d time.Duration) (result, result) {
		return interleaved(name, api, bareAPI, reqs, conns, d, *rounds, *seed)
	}
	if want["hot"] {
		mix(fmt.Sprintf("GET /cve/{id} (%d ids)", len(recReqs)), recReqs, *conns, *dur)
	}
	if want["all"] {
		mix(fmt.Sprintf("GET /cve/{id} (%d ids of the whole catalog)", len(coldReqs)), coldReqs, *conns, *dur)
	}
	if len(listReqs) > 0 {
		mix(fmt.Sprintf("GET /cve?… limit=50 (%d queries)", len(listReqs)), listReqs, *queryConns, *dur)
	}
	if want["batch"] {
		mix("POST /cve/batch (100 ids)", batchReqs, *queryConns, *dur)
	}
	var bulkLine string
	if want["bulk"] {
		ra, rb := mix("GET /cve/bulk.jsonl", bulkReqs, 1, *dur)
		bulkLine = fmt.Sprintf("bulk.jsonl: %.1f MB per stream; lookup API %.0f MB/s, bare handler %.0f MB/s (%.0f%%)",
			float64(len(bulk.resp))/1e6, float64(ra.bytes)/1e6/ra.elapsed.Seconds(), float64(rb.bytes)/1e6/rb.elapsed.Seconds(),
			100*float64(ra.bytes)/ra.elapsed.Seconds()/(float64(rb.bytes)/rb.elapsed.Seconds()))
	}
	// The serving memory of the lookup API proper, before the querybatch
	// mix makes the server build its package index.
	rss := []string{rssLine(*pid, "after the lookup mixes")}

	// The OSV API's querybatch: 1,000 packages of the catalog's fixes each,
	// at their fixed versions, once the server's package index is built;
	// one batch at a time (a scanner's batches in turn: the latency of a
	// batch), then on the connections of the other mixes (the server's
	// throughput, each batch waiting for the others' CPU).
	if want["querybatch"] {
		waitForPackageIndex(client, *base)
		osvReqs := capture(client, *base, querybatchRequests(rng, querybatchFrom, 20))
		if len(osvReqs) > 0 {
			ob := startBare(osvReqs, "")
			for _, conns := range slices.Compact([]int{1, *queryConns}) {
				interleaved("POST /osv/v1/querybatch (1,000 packages)", *base, ob.addr, osvReqs, conns, *dur, *rounds, *seed)
			}
			rss = append(rss, rssLine(*pid, "after the querybatch mix, with the package index"))
		}
	}
	if bulkLine != "" {
		fmt.Println("\n" + bulkLine)
	}
	if *pid > 0 {
		fmt.Println(strings.Join(rss, "\n"))
	}
}

// rssLine returns a line with the memory of the server process pid
// ("" for pid 0): RssAnon is its own memory; RssFile the pages of the
// files it maps (its binary, SQLite's WAL index), page cache the kernel
// may take back.
func rssLine(pid int, when string) string {
	if pid <= 0 {
		return ""
	}
	return fmt.Sprintf("serve RSS %s: %s, peak %s (own memory %s, mapped files %s)",
		when, procStatus(pid, "VmRSS"), procStatus(pid, "VmHWM"), procStatus(pid, "RssAnon"), procStatus(pid, "RssFile"))
}

// writeShapes asks each list request alone, five times, and writes the
// median time of each to file, slowest first: which shapes cost the most.
func writeShapes(client *http.Client, api string, reqs []*request, file string) {
	type shape struct {
		d    time.Duration
		path string
	}
	var out []shape
	for _, q := range reqs {
		var ts []time.Duration
		for range 5 {
			t := time.Now()
			resp, err := client.Get(api + q.path)
			if err != nil {
				log.Fatalf("GET %s: %v", q.path, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			ts = append(ts, time.Since(t))
		}
		slices.Sort(ts)
		out = append(out, shape{ts[len(ts)/2], q.path})
	}
	slices.SortFunc(out, func(a, b shape) int { return cmp.Compare(b.d, a.d) })
	var b strings.Builder
	var total time.Duration
	for _, s := range out {
		total += s.d
	}
	fmt.Fprintf(&b, "# %d list requests, each the median of 5 asked alone; total %s\n", len(out), ms(total))
	for _, s := range out {
		fmt.Fprintf(&b, "%s\t%s\n", ms(s.d), s.path)
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		log.Fatal(err)
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

func printHeader(server string) {
	fmt.Printf("| work | conns | %s req/s | bare handler req/s | ratio (median of rounds) | rounds | p50 | p99 | bare p99 | errors | load avg before → after |\n", server)
	fmt.Printf("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|\n")
}

// interleaved runs a mix against the server at base and the bare handler
// at bareBase in alternating rounds, A B A B …, and prints the row of the
// median round. It returns the totals of each side.
func interleaved(name, base, bareBase string, reqs []*request, conns int, d time.Duration, rounds int, seed uint64) (result, result) {
	before := loadAvg()
	type round struct{ a, b result }
	var rs []round
	client, bareClient := newClient(conns), newClient(conns)
	for i := range max(rounds, 1) {
		ra := run(client, base, reqs, conns, d, seed+uint64(i))
		rb := run(bareClient, bareBase, reqs, conns, d, seed+uint64(i))
		log.Printf("%s: round %d: %.0f req/s against %.0f bare: %.0f%% (load %s)", name, i+1, ra.rps(), rb.rps(), 100*ra.rps()/rb.rps(), loadAvg())
		rs = append(rs, round{ra, rb})
	}
	ratio := func(r round) float64 { return r.a.rps() / r.b.rps() }
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(x, y round) int { return cmp.Compare(ratio(x), ratio(y)) })
	med := sorted[len(sorted)/2]
	var each []string
	var ta, tb result
	for _, r := range rs {
		each = append(each, fmt.Sprintf("%.0f%%", 100*ratio(r)))
		ta.n, ta.errors, ta.bytes, ta.elapsed = ta.n+r.a.n, ta.errors+r.a.errors, ta.bytes+r.a.bytes, ta.elapsed+r.a.elapsed
		tb.n, tb.errors, tb.bytes, tb.elapsed = tb.n+r.b.n, tb.errors+r.b.errors, tb.bytes+r.b.bytes, tb.elapsed+r.b.elapsed
	}
	fmt.Printf("| %s | %d | %.0f | %.0f | %.0f%% | %s | %s | %s | %s | %d | %s → %s |\n", name, conns, med.a.rps(), med.b.rps(),
		100*ratio(med), strings.Join(each, " "), ms(med.a.p50), ms(med.a.p99), ms(med.b.p99), ta.errors, before, loadAvg())
	for _, t := range med.a.slowest {
		log.Printf("%s: slowest %s %s", name, ms(t.d), t.path)
	}
	return ta, tb
}

// loadAvg is the one-minute load average of the machine.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

// peerMain drives any HTTP server on this machine with a list of paths,
// against a bare replay of its own answers, as cveMain does the lookup
// API: the same tool measures other servers side by side.
func peerMain(args []string) {
	fs := flag.NewFlagSet("peer", flag.ExitOnError)
	base := fs.String("url", "", "base URL of the server (127.0.0.1 only)")
	paths := fs.String("paths", "", "file of the paths to request, one a line (GET), relative to -url")
	name := fs.String("name", "peer", "name of the server in the table")
	conns := fs.Int("conns", 64, "connections")
	dur := fs.Duration("duration", 10*time.Second, "duration of each round of each side")
	rounds := fs.Int("rounds", 3, "rounds of each side, alternating")
	seed := fs.Uint64("seed", 1, "seed of the request order")
	fs.Parse(args)
	if u, err := url.Parse(*base); err != nil || (u.Hostname() != "127.0.0.1" && u.Hostname() != "localhost") {
		log.Fatalf("-url %q: want a 127.0.0.1 address", *base)
	}
	b, err := os.ReadFile(*paths)
	if err != nil {
		log.Fatal(err)
	}
	var reqs []*request
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			reqs = append(reqs, &request{method: "GET", path: line})
		}
	}
	reqs = capture(newClient(*conns), *base, reqs)
	if len(reqs) == 0 {
		log.Fatal("no path answered 200")
	}
	bareSrv := startBare(reqs, "")
	printHeader(*name)
	interleaved(fmt.Sprintf("GET (%d paths)", len(reqs)), *base, bareSrv.addr, reqs, *conns, *dur, *rounds, *seed)
}

var idRe = regexp.MustCompile(`"cveId":"(CVE-\d+-\d+)"`)

func idsOf(bulk []byte) []string {
	var ids []string
	sc := bufio.NewScanner(bytes.NewReader(bulk))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if m := idRe.FindSubmatch(sc.Bytes()); m != nil {
			ids = append(ids, string(m[1]))
		}
	}
	return ids
}

func procStatus(pid int, field string) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return fmt.Sprintf("%.0f MB", float64(kb)/1024)
		}
	}
	return "?"
}
