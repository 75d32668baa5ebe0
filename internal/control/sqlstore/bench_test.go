package sqlstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/exposure"
)

// benchEngines are the engines of the benchmarks, with the parallelism of
// each: many check-ins at once on one SQLite server, fewer per replica on
// PostgreSQL.
var benchEngines = []struct {
	name        string
	open        func(testing.TB) *Store
	parallelism int
}{
	{"sqlite", mustOpenSQLite, 32},
	{"postgres", mustOpenPostgres, 4},
}

// benchEach runs bench on each engine.
func benchEach(b *testing.B, bench func(b *testing.B, s *Store, parallelism int)) {
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) { bench(b, e.open(b), e.parallelism) })
	}
}

// BenchmarkCheckIn measures agent check-ins (no inventory change, no
// commands) from many agents at once, the steady state of a fleet. The
// target is 5,000 a second on two cores.
func BenchmarkCheckIn(b *testing.B) { benchEach(b, benchCheckIn) }

func benchCheckIn(b *testing.B, s *Store, parallelism int) {
	ctx := context.Background()
	const fleet = 1000
	ids := enrollFleet(b, s, fleet, device.Inventory{Software: make([]device.Software, 200)})
	b.ResetTimer()
	b.SetParallelism(parallelism)
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			id := ids[i%fleet]
			i++
			if _, err := s.CheckIn(ctx, id, device.CheckIn{Time: time.Now(), Hostname: "h", OS: device.OS{Platform: "linux"}}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checkins/s")
}

// BenchmarkAppendAudit measures appending to the audit log, which every
// API request does.
func BenchmarkAppendAudit(b *testing.B) { benchEach(b, benchAppendAudit) }

func benchAppendAudit(b *testing.B, s *Store, parallelism int) {
	ctx := context.Background()
	b.SetParallelism(parallelism)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			e := &audit.Entry{Time: time.Now(), Actor: "key:plk_x", KeyID: "plk_x", Method: "GET", Path: "/api/agents", Status: 200, ClientAddress: "127.0.0.1"}
			e.SetEvent(audit.APIRequest{})
			if err := s.AppendAudit(ctx, e); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

// BenchmarkPutExposure measures storing the exposure of an agent: about 150
// findings over 15 products, as the simulated fleet's agents have against
// the sample catalog. Every agent of a fleet that just enrolled is
// evaluated once, while the fleet checks in.
func BenchmarkPutExposure(b *testing.B) { benchEach(b, benchPutExposure) }

func benchPutExposure(b *testing.B, s *Store, _ int) {
	ctx := context.Background()
	const fleet = 1000
	ids := enrollFleet(b, s, fleet, device.Inventory{})
	findings := func(i int) ([]string, []exposure.Finding) {
		var keys []string
		var out []exposure.Finding
		for p := range 15 {
			product := fmt.Sprintf("pkg%03d", (i*7+p*13)%200)
			keys = append(keys, "Debian:12/"+product)
			for c := range 10 {
				f := exposure.Finding{
					CVEID: fmt.Sprintf("CVE-2024-%05d", ((i*7+p*13)%200)*10+c), Ecosystem: "Debian:12", Product: product, Package: product,
					Installed: "1.0-1", Fixed: "1.0-2", Status: exposure.Affected,
				}
				if c%4 == 3 {
					f.Fixed, f.Status, f.Reason = "", exposure.Unknown, "no fixed version"
				}
				out = append(out, f)
			}
		}
		return keys, out
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		keys, fs := findings(i)
		if err := s.PutExposure(ctx, ids[i%fleet], "bench", keys, fs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "agents/s")
}

// enrollFleet enrolls n linux agents with inventory inv and returns their
// ids.
func enrollFleet(b *testing.B, s *Store, n int, inv device.Inventory) []string {
	ctx := context.Background()
	secret := apikey.HashSecret("bench")
	if err := s.CreateEnrollSecret(ctx, &device.EnrollSecret{ID: "enr_bench", SecretHash: secret, CreatedBy: "b", CreatedAt: t0}); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		a := &device.Agent{ID: device.NewID(device.AgentIDPrefix), Hostname: fmt.Sprintf("h%04d", i), OS: device.OS{Platform: "linux"},
			CredentialHash: apikey.HashSecret("c"), EnrolledAt: t0, LastSeenAt: t0, Inventory: inv}
		if err := s.EnrollAgent(ctx, secret, a); err != nil {
			b.Fatal(err)
		}
		ids[i] = a.ID
	}
	return ids
}
