package controltest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/device"
)

// testCheckInOrder: commands are delivered oldest first, and those of one
// time in the order they were queued, whatever their ids.
func testCheckInOrder(t *testing.T, b *Backend) {
	ctx := context.Background()
	f := newFixture(t, b)
	a := f.enroll("web-01", "linux", "")
	var want []string
	for i := 0; i < 12; i++ {
		at := t0.Add(time.Minute)
		if i >= 8 {
			at = t0.Add(time.Duration(20-i) * time.Second) // older than the first eight
		}
		c := device.NewCommand(a.ID, device.Reboot, nil, "x", at)
		c.ID = fmt.Sprintf("cmd_%02d", 11-i) // ids against the queue order
		if _, err := f.s.CreateCommands(ctx, []*device.Command{c}, false); err != nil {
			t.Fatal(err)
		}
		want = append(want, c.ID)
	}
	want = append(append([]string{}, want[8:][3], want[8:][2], want[8:][1], want[8:][0]), want[:8]...)
	var got []string
	for i := 0; i < 5; i++ {
		cmds, err := f.s.CheckIn(ctx, a.ID, device.CheckIn{Time: t0.Add(2 * time.Minute), Hostname: "web-01", OS: a.OS, MaxCommands: 3})
		wantKind(t, err, nil)
		got = append(got, cmdIDs(cmds)...)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delivery order (-want +got):\n%s", diff)
	}
}

// testReplicaCheckIns checks in one agent through two stores on one
// database (two replicas) at once: each command is delivered exactly once,
// each check-in's commands in queue order.
func testReplicaCheckIns(t *testing.T, b *Backend) {
	ctx := context.Background()
	f := newFixture(t, b)
	other := b.OpenAgain(t, f.s)
	stores := []interface {
		CheckIn(context.Context, string, device.CheckIn) ([]*device.Command, error)
	}{f.s, other}
	a := f.enroll("web-01", "linux", "")
	const n = 120
	order := map[string]int{}
	var cmds []*device.Command
	for i := 0; i < n; i++ {
		c := device.NewCommand(a.ID, device.Reboot, nil, "x", t0.Add(time.Duration(i/4)*time.Second))
		order[c.ID] = i
		cmds = append(cmds, c)
	}
	if _, err := f.s.CreateCommands(ctx, cmds, false); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[w%2]
			for i := 0; i < 30; i++ {
				got, err := s.CheckIn(ctx, a.ID, device.CheckIn{Time: t0.Add(time.Hour), Hostname: "web-01", OS: a.OS, MaxCommands: 2})
				if err != nil {
					t.Error(err)
					return
				}
				for j := 1; j < len(got); j++ {
					if order[got[j-1].ID] > order[got[j].ID] {
						t.Errorf("a check-in delivered %s before %s", got[j-1].ID, got[j].ID)
					}
				}
				mu.Lock()
				for _, c := range got {
					seen[c.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("%d of %d commands delivered", len(seen), n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("command %s delivered %d times", id, k)
		}
	}
	left, err := f.s.FindCommands(ctx, device.CommandFilter{AgentID: a.ID, States: []device.CommandState{device.Queued}})
	wantKind(t, err, nil)
	if len(left) != 0 {
		t.Errorf("%d commands still queued", len(left))
	}
}

// testReplicaAudit appends to the audit log through two stores on one
// database at once: the chain stays one chain, and verifies.
func testReplicaAudit(t *testing.T, b *Backend) {
	ctx := context.Background()
	s := b.open(t)
	other := b.OpenAgain(t, s)
	const n = 30
	var wg sync.WaitGroup
	for i := 0; i < 2*n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := &audit.Entry{Time: t0, Actor: "key:plk_a", KeyID: "plk_a", Method: "GET", Path: fmt.Sprintf("/api/agents/%d", i), Status: 200}
			e.SetEvent(audit.APIRequest{})
			target := s
			if i%2 == 1 {
				target = other
			}
			if err := target.AppendAudit(ctx, e); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for _, st := range []audit.Log{s, other} {
		res, err := audit.Verify(ctx, st)
		wantKind(t, err, nil)
		if res.Broken != nil || res.Entries != 2*n {
			t.Errorf("Verify = %+v, want %d entries", res, 2*n)
		}
	}
	var ids []int64
	wantKind(t, s.WalkAudit(ctx, func(e *audit.Entry) error {
		ids = append(ids, e.ID)
		return nil
	}), nil)
	if !sort.SliceIsSorted(ids, func(i, j int) bool { return ids[i] < ids[j] }) || len(ids) != 2*n || ids[len(ids)-1] != 2*n {
		t.Errorf("audit ids = %v", ids)
	}
}
