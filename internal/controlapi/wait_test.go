package controlapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/wakeup"
)

// withWakeup gives e's server a hub of max waits, rung by its command
// store.
func (e *env) withWakeup(max int) *wakeup.Hub {
	h := wakeup.NewHub(max)
	e.srv.cfg.Wakeup = h
	ringing := wakeup.Store{Store: e.store, Bell: h}
	e.srv.cfg.Commands, e.srv.cfg.Agents, e.srv.cfg.Rollouts = ringing, ringing, ringing
	return h
}

// waitAsync sends a's long poll and returns the channel of its answer.
func (e *env) waitAsync(a agent, timeoutSeconds int) <-chan *httptest.ResponseRecorder {
	out := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		out <- e.do(request{method: "POST", path: agentproto.PathWait, bearer: a.credential,
			body: agentproto.WaitRequest{TimeoutSeconds: timeoutSeconds}})
	}()
	return out
}

func TestWaitAnswersWhenACommandIsQueued(t *testing.T) {
	e := newEnv(t)
	hub := e.withWakeup(0)
	a := e.enroll("laptop-1", "windows")
	other := e.enroll("laptop-2", "windows")

	answer := e.waitAsync(a, 60)
	otherAnswer := e.waitAsync(other, 60)
	for hub.Held() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	rec := e.do(request{method: "POST", path: fill("/api/agents/{id}/collect-logs", a.id), apiKey: e.key})
	if rec.Code != http.StatusAccepted {
		t.Fatalf("collect-logs: %d %s", rec.Code, rec.Body)
	}
	select {
	case rec := <-answer:
		if got := decode[agentproto.WaitResponse](t, rec, http.StatusOK); !got.Commands {
			t.Errorf("wait = %+v, want commands", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the long poll did not answer the queued command")
	}
	select {
	case rec := <-otherAnswer:
		t.Fatalf("the other agent's long poll answered: %d %s", rec.Code, rec.Body)
	default:
	}

	// A command already queued is answered at once; once the check-in
	// took it, the long poll is held again.
	rec = e.do(request{method: "POST", path: agentproto.PathWait, bearer: a.credential, body: agentproto.WaitRequest{TimeoutSeconds: 60}})
	if got := decode[agentproto.WaitResponse](t, rec, http.StatusOK); !got.Commands {
		t.Errorf("wait with a command queued = %+v", got)
	}
	if got := e.checkIn(a, agentproto.CheckInRequest{}); len(got.Commands) != 1 {
		t.Fatalf("check-in took %d commands, want 1", len(got.Commands))
	}
	rec = e.do(request{method: "POST", path: agentproto.PathWait, bearer: a.credential, body: agentproto.WaitRequest{TimeoutSeconds: 1}})
	if got := decode[agentproto.WaitResponse](t, rec, http.StatusOK); got.Commands {
		t.Errorf("wait after the check-in took the command = %+v, want none", got)
	}

	// The removal of an agent reaches it the same way.
	answer = e.waitAsync(other, 60)
	for hub.Held() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	rec = e.do(request{method: "DELETE", path: "/api/agents/" + other.id, apiKey: e.privKey})
	if rec.Code != http.StatusAccepted {
		t.Fatalf("remove: %d %s", rec.Code, rec.Body)
	}
	select {
	case rec := <-otherAnswer:
		if got := decode[agentproto.WaitResponse](t, rec, http.StatusOK); !got.Commands {
			t.Errorf("wait of a removed agent = %+v", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the removal did not answer the long poll")
	}
	<-answer
}

func TestWaitRefusals(t *testing.T) {
	e := newEnv(t)
	a := e.enroll("laptop-1", "linux")
	wait := func(body any) *httptest.ResponseRecorder {
		return e.do(request{method: "POST", path: agentproto.PathWait, bearer: a.credential, body: body})
	}
	if d := problem(t, wait(agentproto.WaitRequest{TimeoutSeconds: 5}), http.StatusNotFound); !strings.Contains(d, "interval") {
		t.Errorf("a server without a hub: %q", d)
	}
	hub := e.withWakeup(1)
	for _, tc := range []struct {
		name string
		body any
	}{
		{"negative", agentproto.WaitRequest{TimeoutSeconds: -1}},
		{"too long", agentproto.WaitRequest{TimeoutSeconds: agentproto.MaxWaitSeconds + 1}},
		{"not JSON", "{"},
	} {
		t.Run(tc.name, func(t *testing.T) { problem(t, wait(tc.body), http.StatusBadRequest) })
	}
	if rec := e.do(request{method: "POST", path: agentproto.PathWait, body: agentproto.WaitRequest{}}); rec.Code != http.StatusUnauthorized {
		t.Errorf("a wait without credential: %d", rec.Code)
	}

	// A full hub, and one that is shutting down (also to the waits it
	// held), answer 503 with Retry-After.
	b := e.enroll("laptop-2", "linux")
	held := e.waitAsync(b, 60)
	for hub.Held() < 1 {
		time.Sleep(5 * time.Millisecond)
	}
	rec := wait(agentproto.WaitRequest{TimeoutSeconds: 5})
	problem(t, rec, http.StatusServiceUnavailable)
	if rec.Header().Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	hub.Close()
	select {
	case rec := <-held:
		problem(t, rec, http.StatusServiceUnavailable)
	case <-time.After(30 * time.Second):
		t.Fatal("closing the hub did not end the held wait")
	}
	problem(t, wait(agentproto.WaitRequest{TimeoutSeconds: 5}), http.StatusServiceUnavailable)
}
