package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/device"
)

// BenchmarkCheckIn measures agent check-ins (no inventory change, no
// commands) from many agents at once, as BenchmarkCheckIn of the SQLite
// store does.
func BenchmarkCheckIn(b *testing.B) {
	ctx := context.Background()
	s := mustOpen(b)
	secret := apikey.HashSecret("bench")
	if err := s.CreateEnrollSecret(ctx, &device.EnrollSecret{ID: "enr_bench", SecretHash: secret, CreatedBy: "b", CreatedAt: time.Now()}); err != nil {
		b.Fatal(err)
	}
	const fleet = 1000
	ids := make([]string, fleet)
	for i := range ids {
		a := &device.Agent{ID: device.NewID(device.AgentIDPrefix), Hostname: fmt.Sprintf("h%04d", i), OS: device.OS{Platform: "linux"},
			CredentialHash: apikey.HashSecret("c"), EnrolledAt: time.Now(), LastSeenAt: time.Now(),
			Inventory: device.Inventory{Software: make([]device.Software, 200)}}
		if err := s.EnrollAgent(ctx, secret, a); err != nil {
			b.Fatal(err)
		}
		ids[i] = a.ID
	}
	b.ResetTimer()
	b.SetParallelism(4)
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
// API request does, from one replica.
func BenchmarkAppendAudit(b *testing.B) {
	ctx := context.Background()
	s := mustOpen(b)
	b.SetParallelism(4)
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
