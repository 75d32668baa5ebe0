package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
)

// TestReplicasUnderLoad runs three replicas (three pools) on one database
// at once: they queue, cancel and expire commands, check agents in and
// append to the audit log, all concurrently. No command is delivered twice,
// no operation fails on a lock, and the audit chain verifies.
func TestReplicasUnderLoad(t *testing.T) {
	ctx := context.Background()
	first := mustOpenPostgres(t)
	replicas := []*Store{first, mustOpenDSN(t, first.source), mustOpenDSN(t, first.source)}
	secret := apikey.HashSecret("load")
	if err := first.CreateEnrollSecret(ctx, &device.EnrollSecret{ID: "enr_load", SecretHash: secret, CreatedBy: "t", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	var agents []*device.Agent
	for i := 0; i < 4; i++ {
		a := &device.Agent{ID: device.NewID(device.AgentIDPrefix), Hostname: fmt.Sprintf("load-%d", i), OS: device.OS{Platform: "linux"},
			CredentialHash: apikey.HashSecret("c"), EnrolledAt: time.Now(), LastSeenAt: time.Now()}
		if err := replicas[i%3].EnrollAgent(ctx, secret, a); err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
	}

	var (
		mu        sync.Mutex
		delivered = map[string]int{}
		created   = map[string]bool{}
		wg        sync.WaitGroup
		stop      = make(chan struct{})
	)
	fail := func(what string, err error) {
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	// Queue commands, a batch for every agent, through every replica.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 40; i++ {
			var batch []*device.Command
			for _, a := range agents {
				batch = append(batch, device.NewCommand(a.ID, device.CollectLogs, nil, "x", time.Now()))
			}
			got, err := replicas[i%3].CreateCommands(ctx, batch, false)
			fail("create commands", err)
			mu.Lock()
			for _, c := range got {
				created[c.ID] = true
			}
			mu.Unlock()
		}
	}()
	// Cancel some as they come.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 40; i++ {
			cmds, err := replicas[i%3].FindCommands(ctx, device.CommandFilter{States: []device.CommandState{device.Queued}, Limit: 2})
			fail("find commands", err)
			for _, c := range cmds {
				_, err := replicas[(i+1)%3].CancelCommand(ctx, c.ID, time.Now())
				if err != nil && !errors.Is(err, errs.ErrConflict) {
					fail("cancel", err)
				}
			}
		}
	}()
	// Check every agent in through every replica.
	for r := range replicas {
		for _, a := range agents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					cmds, err := replicas[r].CheckIn(ctx, a.ID, device.CheckIn{Time: time.Now(), Hostname: a.Hostname, OS: a.OS, MaxCommands: 3})
					fail("check in", err)
					mu.Lock()
					for _, c := range cmds {
						delivered[c.ID]++
					}
					mu.Unlock()
					e := &audit.Entry{Time: time.Now(), Actor: "agent:" + a.ID, Action: "agent.checkin"}
					fail("append audit", replicas[(r+1)%3].AppendAudit(ctx, e))
				}
			}()
		}
	}
	// Expire nothing, often, from every replica.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 30; i++ {
			_, err := replicas[i%3].ExpireCommands(ctx, time.Now().Add(-time.Hour))
			fail("expire", err)
		}
	}()
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()

	for id, n := range delivered {
		if n != 1 {
			t.Errorf("command %s delivered %d times", id, n)
		}
		if !created[id] {
			t.Errorf("delivered %s, which was never created", id)
		}
	}
	left, err := first.FindCommands(ctx, device.CommandFilter{States: []device.CommandState{device.Queued}})
	fail("find queued", err)
	canceled, err := first.FindCommands(ctx, device.CommandFilter{States: []device.CommandState{device.Canceled}})
	fail("find canceled", err)
	// A delivered command may be canceled afterwards.
	undelivered := len(left)
	for _, c := range canceled {
		if delivered[c.ID] == 0 {
			undelivered++
		}
	}
	if got := len(delivered) + undelivered; got != len(created) {
		t.Errorf("%d delivered + %d queued or canceled before delivery, of %d created", len(delivered), undelivered, len(created))
	}
	res, err := audit.Verify(ctx, replicas[2])
	fail("verify", err)
	if res.Broken != nil || res.Entries == 0 {
		t.Errorf("Verify = %+v", res)
	}
	t.Logf("%d commands created, %d delivered, %d canceled; %d audit entries", len(created), len(delivered), len(canceled), res.Entries)
}
