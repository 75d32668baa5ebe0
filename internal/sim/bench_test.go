package sim

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/agent"
	"github.com/patchline/patchline/internal/agentproto"
)

// BenchmarkCheckIn measures what a simulated endpoint spends on one
// check-in: the snapshot of its machine, the inventory compared with the
// one the server holds, the request built, sent and its answer parsed. The
// server answers at once with no commands, so that nearly all the time is
// the fleet's; the inventory does not change, the steady state of a fleet.
func BenchmarkCheckIn(b *testing.B) {
	const agents = 8
	var checkIns atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	enrolled := []byte(`{"agentId":"agt_bench","credential":"agt_bench.plat_bench","capability":2,"checkInIntervalSeconds":60}`)
	answer := []byte(`{"capability":2,"checkInIntervalSeconds":60,"commands":[]}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case agentproto.PathEnroll:
			w.WriteHeader(http.StatusCreated)
			w.Write(enrolled)
		case agentproto.PathCheckIn:
			w.Write(answer)
			// The first check-in of each agent, with the whole inventory,
			// is not counted.
			if checkIns.Add(1) == int64(b.N)+agents {
				cancel()
			}
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: agents}}
	var fleet []*agent.Agent
	for i := range agents {
		r := rand.New(rand.NewPCG(1, uint64(i)))
		m := newMachine(r, i+1, 1, 0, time.Now)
		fleet = append(fleet, agent.New(agent.Config{
			Server: srv.URL, EnrollSecret: "ples_bench", State: agent.NewMemoryState(), Endpoint: m,
			Interval: time.Nanosecond, AgentVersion: "bench", HTTP: hc, Rand: rand.New(rand.NewPCG(1, uint64(i)+1<<32)),
		}))
	}
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, a := range fleet {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.Run(ctx); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	hc.CloseIdleConnections()
}
