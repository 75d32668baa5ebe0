package controlapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/control/sqlstore"
	"github.com/patchline/patchline/internal/device"
)

// BenchmarkCheckIn measures POST /agent/v1/checkin through the whole
// handler chain on the SQLite store: the agent chain, authentication of
// the credential, decoding and checking the report, the store's
// transaction, the answer and the request metrics. The check-ins carry no
// inventory change and get no commands, the steady state of a fleet, from
// many agents at once as on a server.
func BenchmarkCheckIn(b *testing.B) {
	ctx := context.Background()
	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(b.TempDir(), "control.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	srv := New(Config{
		Agents: store, Commands: store, Rings: store, Rollouts: store, Policies: store,
		Keys: store, Audit: store, EnrollSecrets: store, Metrics: NewMetrics(prometheus.NewRegistry()),
	})
	now := time.Now()
	enrollSecret := apikey.NewSecret(device.EnrollSecretPrefix)
	if err := store.CreateEnrollSecret(ctx, &device.EnrollSecret{
		ID: device.NewID(device.EnrollSecretIDPrefix), SecretHash: apikey.HashSecret(enrollSecret), CreatedBy: "bench", CreatedAt: now,
	}); err != nil {
		b.Fatal(err)
	}
	const fleet = 1000
	sw := make([]device.Software, 200)
	for i := range sw {
		sw[i] = device.Software{Name: fmt.Sprintf("package-%03d", i), Version: "1.2.3-4", Ecosystem: "Debian:12", Arch: "amd64"}
	}
	type benchAgent struct {
		auth string
		body []byte
	}
	agents := make([]benchAgent, fleet)
	for i := range agents {
		secret := apikey.NewSecret(device.AgentCredentialPrefix)
		a := &device.Agent{
			ID: device.NewID(device.AgentIDPrefix), Hostname: fmt.Sprintf("host-%04d", i),
			OS: device.OS{Platform: "linux", Name: "Debian GNU/Linux", Version: "12", Build: "6.1.0-18-amd64"}, Arch: "amd64",
			AgentVersion: "1.4.0", Capability: agentproto.CapabilityVersion, CredentialHash: apikey.HashSecret(secret),
			EnrolledAt: now, LastSeenAt: now, Inventory: device.Inventory{Software: sw},
		}
		if err := store.EnrollAgent(ctx, apikey.HashSecret(enrollSecret), a); err != nil {
			b.Fatal(err)
		}
		body, err := json.Marshal(agentproto.CheckInRequest{
			Capability: agentproto.CapabilityVersion, Hostname: a.Hostname,
			OS:   agentproto.OS{Platform: a.OS.Platform, Name: a.OS.Name, Version: a.OS.Version, Build: a.OS.Build},
			Arch: a.Arch, AgentVersion: a.AgentVersion, IPs: []string{fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)},
			FeatureUpgrade: agentproto.FeatureUpgrade{State: device.FeatureUpgradeNone}, AppliedPolicies: []agentproto.AppliedPolicy{},
		})
		if err != nil {
			b.Fatal(err)
		}
		agents[i] = benchAgent{auth: "Bearer " + a.ID + "." + secret, body: body}
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.SetParallelism(32) // many agents at once, as on a server
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			a := agents[i%fleet]
			i++
			r := httptest.NewRequest(http.MethodPost, "http://control.test"+agentproto.PathCheckIn, bytes.NewReader(a.body))
			r.RemoteAddr = "192.0.2.7:4711"
			r.Header.Set("Authorization", a.auth)
			r.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, r)
			if rec.Code != http.StatusOK {
				b.Errorf("status %d: %s", rec.Code, rec.Body)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checkins/s")
}
