package agent

import (
	"context"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/wakeup"
)

// countingEndpoint counts the snapshots of a fakeEndpoint.
type countingEndpoint struct {
	*fakeEndpoint
	snapshots int
}

func (c *countingEndpoint) Snapshot(ctx context.Context) (*Snapshot, error) {
	c.mu.Lock()
	c.snapshots++
	c.mu.Unlock()
	return c.fakeEndpoint.Snapshot(ctx)
}

func (c *countingEndpoint) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snapshots
}

// runWaitingAgent runs an agent that checks in once an hour and holds
// 30-second long polls, until the test ends.
func runWaitingAgent(t *testing.T, ts *testServer, ep Endpoint) *Agent {
	t.Helper()
	a, _, _ := runAgent(t, Config{Server: ts.url, EnrollSecret: ts.secret, State: NewMemoryState(), Endpoint: ep,
		Interval: time.Hour, Wait: 30 * time.Second, AgentVersion: "test"})
	return a
}

// checkInCount returns the number of check-ins the server got.
func (ts *testServer) checkInCount() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.checkIns)
}

// An agent that checks in once an hour gets a command through its long
// poll: the server answers it when the command is queued, and the agent
// checks in at once with the snapshot it already has.
func TestAgentTakesCommandsThroughTheLongPoll(t *testing.T) {
	hub := wakeup.NewHub(0)
	ts := newTestServerWith(t, hub)
	ep := &countingEndpoint{fakeEndpoint: &fakeEndpoint{snap: Snapshot{Hostname: "pc-17", OS: agentproto.OS{Platform: "windows", Name: "Windows 11 Pro", Version: "23H2", Build: "22631.4460"}}}}
	a := runWaitingAgent(t, ts, ep)
	checkIns := ts.checkInCount
	eventually(t, "the first check-in and the long poll", func() bool { return checkIns() == 1 && hub.Held() == 1 })
	snapshots := ep.count()

	for i := range 2 {
		id := ts.queue(a.AgentID(), device.CollectLogs, nil)
		if c := ts.waitCommand(id); c.State != device.Succeeded {
			t.Fatalf("command %d: %s %+v", i, c.State, c.Result)
		}
		eventually(t, "the long poll held again", func() bool { return hub.Held() == 1 })
	}
	if n := ep.count(); n != snapshots {
		t.Errorf("%d snapshots after the commands, want %d: a check-in woken by the long poll sends the last one again", n, snapshots)
	}
	// The first check-in may still be under way when the first command
	// is queued, and take it.
	if n := checkIns(); n > 3 {
		t.Errorf("%d check-ins, want at most 3: the first, then one per command", n)
	}
}

// A check-in the server refuses is not sent again at once when the long
// poll says, again at once, that the command is still queued: the agent
// waits for its interval, as without the long poll, rather than spin
// between the two requests until the command expires.
func TestRefusedCheckInWaitsForTheInterval(t *testing.T) {
	hub := wakeup.NewHub(0)
	ts := newTestServerWith(t, hub)
	ep := &fakeEndpoint{snap: Snapshot{Hostname: "pc-18", OS: agentproto.OS{Platform: "linux", Name: "Debian", Version: "12"}}}
	a := runWaitingAgent(t, ts, ep)
	checkIns := ts.checkInCount
	eventually(t, "the first check-in and the long poll", func() bool { return checkIns() == 1 && hub.Held() == 1 })
	ts.refuse.Store(true)
	ts.queue(a.AgentID(), device.CollectLogs, nil)
	eventually(t, "the check-in woken by the long poll", func() bool { return checkIns() >= 2 })
	time.Sleep(time.Second)
	if n := checkIns(); n != 2 {
		t.Errorf("%d check-ins a second after the command, want 2: the first, and the one the long poll woke, refused", n)
	}
}

// Against a server that holds no long polls, the agent gives them up and
// checks in on its interval.
func TestAgentWithoutLongPolls(t *testing.T) {
	ts := newTestServer(t)
	ep := &fakeEndpoint{snap: Snapshot{Hostname: "old-server", OS: agentproto.OS{Platform: "linux", Name: "Debian", Version: "12"}}}
	a, _, _ := startAgent(t, ts, NewMemoryState(), ep)
	id := ts.queue(a.AgentID(), device.CollectLogs, nil)
	if c := ts.waitCommand(id); c.State != device.Succeeded {
		t.Fatalf("command: %s %+v", c.State, c.Result)
	}
}
