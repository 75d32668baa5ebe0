// Package exposure_test measures endpoint exposure at fleet scale: the
// fleet risk list and an agent's vulnerabilities through the control API,
// with 10,000 agents evaluated against the bundled sample catalog.
//
//	go test ./bench/exposure -run '^$' -bench . -benchtime 200x
package exposure_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/benchtest"
	catalogsqlite "github.com/patchline/patchline/internal/catalog/sqlite"
	"github.com/patchline/patchline/internal/control/sqlstore"
	"github.com/patchline/patchline/internal/controlapi"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/exposure"
	"github.com/patchline/patchline/internal/ingest"
)

// fleetSize is the number of agents; PATCHLINE_BENCH_AGENTS overrides it.
func fleetSize() int {
	if n, err := strconv.Atoi(os.Getenv("PATCHLINE_BENCH_AGENTS")); err == nil && n > 0 {
		return n
	}
	return 10000
}

type fixture struct {
	srv    *httptest.Server
	key    string
	agents []string
}

var (
	setupOnce sync.Once
	fx        *fixture
	setupErr  error
)

// Inventories like the simulated fleet's: Windows 11 and 10 at builds
// months apart, macOS, Debian 12 servers, desktop applications.
var (
	win11 = []string{"22631.3880", "22631.4037", "22631.4169", "22631.4317", "22631.4460", "22631.4602"}
	win10 = []string{"19045.4651", "19045.4780", "19045.4894", "19045.5011", "19045.5247"}
	macos = []string{"13.4.1", "13.6.3", "14.2.1", "14.4.1", "14.6.1"}
	apps  = []device.Software{
		{Name: "Google Chrome", Version: "124.0.6367.119", Ecosystem: "Desktop"},
		{Name: "Mozilla Firefox", Version: "131.0", Ecosystem: "Desktop"},
		{Name: "7-Zip", Version: "24.06", Ecosystem: "Desktop"},
		{Name: "WinRAR", Version: "6.22", Ecosystem: "Desktop"},
		{Name: "PuTTY", Version: "0.79", Ecosystem: "Desktop"},
		{Name: "requests", Version: "2.31.0", Ecosystem: "PyPI"},
		{Name: "urllib3", Version: "2.0.6", Ecosystem: "PyPI"},
	}
	debian = []device.Software{
		{Name: "libsope1", Version: "5.8.0-1", Ecosystem: "Debian:12", Source: "sope"},
		{Name: "openssh-server", Version: "1:9.2p1-2+deb12u2", Ecosystem: "Debian:12", Source: "openssh"},
		{Name: "apparmor", Version: "3.0.8-3", Ecosystem: "Debian:12"},
		{Name: "chromium", Version: "97.0.4692.99-1", Ecosystem: "Debian:12"},
	}
)

func inventory(r *rand.Rand) device.Inventory {
	var inv device.Inventory
	switch r.IntN(4) {
	case 0:
		inv.Software = append(inv.Software, device.Software{Name: "Windows 11 Version 23H2", Version: "10.0." + win11[r.IntN(len(win11))], Ecosystem: "Windows", Arch: "x64"})
	case 1:
		inv.Software = append(inv.Software, device.Software{Name: "Windows 10 Version 22H2", Version: "10.0." + win10[r.IntN(len(win10))], Ecosystem: "Windows", Arch: "x64"})
	case 2:
		inv.Software = append(inv.Software, device.Software{Name: "macOS", Version: macos[r.IntN(len(macos))], Ecosystem: "Apple", Arch: "arm64"})
	default:
		inv.Software = append(inv.Software, debian...)
		return inv
	}
	for _, a := range apps {
		if r.IntN(10) < 6 {
			inv.Software = append(inv.Software, a)
		}
	}
	return inv
}

func setup(b *testing.B) *fixture {
	setupOnce.Do(func() { fx, setupErr = build(b) })
	if setupErr != nil {
		b.Fatal(setupErr)
	}
	return fx
}

func build(b *testing.B) (*fixture, error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "patchline-exposure-bench")
	if err != nil {
		return nil, err
	}
	cat, err := catalogsqlite.Open(ctx, filepath.Join(dir, "catalog.db"))
	if err != nil {
		return nil, err
	}
	if _, err := ingest.Run(ctx, cat, ingest.SampleSources(), ingest.Options{}); err != nil {
		return nil, err
	}
	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "control.db"))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	secret := apikey.HashSecret("bench")
	if err := store.CreateEnrollSecret(ctx, &device.EnrollSecret{ID: "enr_bench", SecretHash: secret, CreatedBy: "bench", CreatedAt: now}); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(1, 2))
	n := fleetSize()
	f := &fixture{}
	start := time.Now()
	for i := range n {
		a := &device.Agent{ID: device.NewID(device.AgentIDPrefix), Hostname: fmt.Sprintf("host-%05d", i), OS: device.OS{Platform: "windows"},
			CredentialHash: apikey.HashSecret("c"), EnrolledAt: now, LastSeenAt: now}
		if err := store.EnrollAgent(ctx, secret, a); err != nil {
			return nil, err
		}
		inv := inventory(r)
		if _, err := store.CheckIn(ctx, a.ID, device.CheckIn{Time: now, Hostname: a.Hostname, OS: a.OS, Inventory: &inv, InventoryHash: strconv.Itoa(i)}); err != nil {
			return nil, err
		}
		f.agents = append(f.agents, a.ID)
	}
	b.Logf("%d agents enrolled with inventory in %s", n, time.Since(start).Round(time.Millisecond))
	svc := exposure.NewService(cat, store, nil)
	start = time.Now()
	if err := svc.RefreshCatalog(ctx); err != nil {
		return nil, err
	}
	b.Logf("index of %d CVEs built in %s", svc.Index.Len(), time.Since(start).Round(time.Millisecond))
	start = time.Now()
	evaluated, err := svc.Drain(ctx)
	if err != nil {
		return nil, err
	}
	b.Logf("%d agents evaluated in %s", evaluated, time.Since(start).Round(time.Millisecond))
	full, k, err := apikey.New(apikey.Params{Name: "bench", CreatedBy: "bench"}, now)
	if err != nil {
		return nil, err
	}
	if err := store.CreateKey(ctx, k); err != nil {
		return nil, err
	}
	api := controlapi.New(controlapi.Config{Agents: store, Commands: store, Rings: store, Rollouts: store, Policies: store,
		Keys: store, Audit: store, EnrollSecrets: store, Exposure: store})
	f.srv = httptest.NewServer(api)
	f.key = full
	return f, nil
}

// get answers the time of one request.
func get(b *testing.B, f *fixture, path string) time.Duration {
	req, _ := http.NewRequest("GET", f.srv.URL+path, nil)
	req.Header.Set("X-API-Key", f.key)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	return d
}

func report(b *testing.B, lat []time.Duration) {
	benchtest.ReportLatencies(b, lat)
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}

// BenchmarkFleetVulnerabilities measures GET /api/vulnerabilities, the
// first page (limit 50) of the fleet risk list. Target: under 200 ms.
func BenchmarkFleetVulnerabilities(b *testing.B) {
	f := setup(b)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		lat = append(lat, get(b, f, "/api/vulnerabilities?limit=50"))
	}
	report(b, lat)
}

// BenchmarkAgentVulnerabilities measures GET
// /api/agents/{id}/vulnerabilities for agents picked at random.
func BenchmarkAgentVulnerabilities(b *testing.B) {
	f := setup(b)
	r := rand.New(rand.NewPCG(3, 4))
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		lat = append(lat, get(b, f, "/api/agents/"+f.agents[r.IntN(len(f.agents))]+"/vulnerabilities?limit=50"))
	}
	report(b, lat)
}
