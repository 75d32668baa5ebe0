package wakeup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/patchline/patchline/internal/control"
	"github.com/patchline/patchline/internal/device"
)

// isRung reports whether ch is closed.
func isRung(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// rungWithin waits up to d for ch to close.
func rungWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

func mustWait(t *testing.T, h *Hub, agentID string) (<-chan struct{}, func()) {
	t.Helper()
	ch, done, err := h.Wait(agentID)
	if err != nil {
		t.Fatalf("Wait(%s): %v", agentID, err)
	}
	t.Cleanup(done)
	return ch, done
}

func TestHubRingsOnlyTheAgentsNamed(t *testing.T) {
	h := NewHub(0)
	a1, _ := mustWait(t, h, "agt_a")
	a2, _ := mustWait(t, h, "agt_a")
	b, doneB := mustWait(t, h, "agt_b")
	if h.Held() != 3 {
		t.Fatalf("Held = %d, want 3", h.Held())
	}
	h.Ring(context.Background(), []string{"agt_a", "agt_unknown"})
	if !isRung(a1) || !isRung(a2) || isRung(b) {
		t.Errorf("rung: a1 %v a2 %v b %v, want a1 and a2 only", isRung(a1), isRung(a2), isRung(b))
	}
	if h.Held() != 1 {
		t.Errorf("Held after the ring = %d, want 1", h.Held())
	}
	doneB()
	doneB() // done twice counts once
	if h.Held() != 0 {
		t.Errorf("Held after done = %d, want 0", h.Held())
	}
}

func TestHubBoundsAndCloses(t *testing.T) {
	h := NewHub(2)
	_, done1 := mustWait(t, h, "agt_a")
	mustWait(t, h, "agt_b")
	if _, _, err := h.Wait("agt_c"); !errors.Is(err, ErrFull) {
		t.Fatalf("a third wait on a hub of two: %v, want ErrFull", err)
	}
	done1()
	c, _ := mustWait(t, h, "agt_c")
	h.Close()
	if !isRung(c) {
		t.Error("Close did not end a held wait")
	}
	if _, _, err := h.Wait("agt_d"); !errors.Is(err, ErrClosed) {
		t.Errorf("Wait after Close: %v, want ErrClosed", err)
	}
}

// fakeStore is a control store that only queues commands: the methods
// that Store rings after.
type fakeStore struct {
	control.Store
	fail error
}

func (f *fakeStore) CreateCommands(_ context.Context, cmds []*device.Command, _ bool) ([]*device.Command, error) {
	if f.fail != nil {
		return nil, f.fail
	}
	return cmds[:len(cmds)-1], nil // the last one was skipped as already active
}

func (f *fakeStore) AdvanceRollout(_ context.Context, id string, _ device.Advance) (*device.Rollout, []*device.Command, error) {
	return &device.Rollout{ID: id}, []*device.Command{{AgentID: "agt_r"}}, f.fail
}

func (f *fakeStore) RemoveAgent(_ context.Context, _ string, _ *device.Command) error { return f.fail }

func TestStoreRingsTheAgentsOfWhatItQueued(t *testing.T) {
	ctx := context.Background()
	h := NewHub(0)
	fake := &fakeStore{}
	s := Store{Store: fake, Bell: h}
	a, _ := mustWait(t, h, "agt_a")
	b, _ := mustWait(t, h, "agt_b")
	if _, err := s.CreateCommands(ctx, []*device.Command{{AgentID: "agt_a"}, {AgentID: "agt_a"}, {AgentID: "agt_b"}}, true); err != nil {
		t.Fatal(err)
	}
	if !isRung(a) || isRung(b) {
		t.Errorf("after CreateCommands: a rung %v, b rung %v; want a only (b's command was not created)", isRung(a), isRung(b))
	}
	r, _ := mustWait(t, h, "agt_r")
	if _, _, err := s.AdvanceRollout(ctx, "rol_1", device.Advance{}); err != nil || !isRung(r) {
		t.Errorf("AdvanceRollout: err %v, rung %v", err, isRung(r))
	}
	x, _ := mustWait(t, h, "agt_x")
	if err := s.RemoveAgent(ctx, "agt_x", &device.Command{AgentID: "agt_x"}); err != nil || !isRung(x) {
		t.Errorf("RemoveAgent: err %v, rung %v", err, isRung(x))
	}

	fake.fail = errors.New("database is locked")
	y, _ := mustWait(t, h, "agt_y")
	if _, err := s.CreateCommands(ctx, []*device.Command{{AgentID: "agt_y"}, {AgentID: "agt_y"}}, false); err == nil {
		t.Error("the store's error was lost")
	}
	if err := s.RemoveAgent(ctx, "agt_y", &device.Command{AgentID: "agt_y"}); err == nil {
		t.Error("the store's error was lost")
	}
	if isRung(y) {
		t.Error("a failed store call rang")
	}
}

// pgDSN returns the PostgreSQL server of the tests, or skips.
func pgDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("PATCHLINE_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("PATCHLINE_TEST_POSTGRES is not set: the PostgreSQL bell needs a postgres:// URL of a server to test")
	}
	return dsn
}

func startBell(t *testing.T, dsn string) (*PGBell, *Hub) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := NewHub(0)
	b, err := NewPGBell(ctx, dsn, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); b.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; b.Close() })
	select {
	case <-b.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("the bell did not listen")
	}
	return b, h
}

// TestPGBellAcrossReplicas rings, through one PostgreSQL database, the
// waits held by another replica's hub, many agents at a time, and again
// after the listening connection was cut.
func TestPGBellAcrossReplicas(t *testing.T) {
	dsn := pgDSN(t)
	ctx := context.Background()
	ringer, _ := startBell(t, dsn)
	_, hub := startBell(t, dsn)

	const n = 1000 // about 30 kB of ids: several notifications
	var ids []string
	var waits []<-chan struct{}
	for i := range n {
		id := fmt.Sprintf("agt_wakeuptest%010d", i)
		ch, _ := mustWait(t, hub, id)
		ids, waits = append(ids, id), append(waits, ch)
	}
	other, _ := mustWait(t, hub, "agt_not_rung")
	ringer.Ring(ctx, ids)
	for i, ch := range waits {
		if !rungWithin(ch, 10*time.Second) {
			t.Fatalf("agent %d of %d was not rung", i, n)
		}
	}
	if isRung(other) {
		t.Error("an agent nobody rang was rung")
	}

	// The listening connections are cut: each bell connects again and
	// rings every wait of its hub, which then asks its store again.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'LISTEN `+pgChannel+`'`); err != nil {
		t.Fatal(err)
	}
	if !rungWithin(other, 30*time.Second) {
		t.Fatal("the waits were not rung after the bell listened again")
	}
	late, _ := mustWait(t, hub, "agt_late")
	deadline := time.Now().Add(30 * time.Second)
	for !isRung(late) && time.Now().Before(deadline) {
		ringer.Ring(ctx, []string{"agt_late"})
		time.Sleep(100 * time.Millisecond)
	}
	if !isRung(late) {
		t.Error("no ring arrives after the connection was cut")
	}
}
