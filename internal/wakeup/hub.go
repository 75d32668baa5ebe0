// Package wakeup delivers commands to online agents in about a second
// instead of at their next check-in.
//
// An online agent holds a long poll (POST /agent/v1/wait) that the control
// service answers as soon as a command is queued for it; the agent then
// checks in at once and takes its commands the usual way, so commands are
// still delivered by the check-in alone, and an agent whose long poll is
// cut (a proxy's timeout, a restart of serve) loses nothing: it checks in
// on its interval as before.
//
// A Hub holds the waiting requests of one replica. A ring is only a hint:
// the waiting handler asks the store whether a command is queued before it
// answers, so a ring that comes twice, late or for a command another
// replica already delivered costs one query, never a wrong answer. Across
// replicas the ring travels through the database they share: PostgreSQL's
// LISTEN/NOTIFY (PGBell), or nothing more than the Hub itself on a single
// SQLite server.
package wakeup

import (
	"errors"
	"sync"
)

// ErrFull is returned by Hub.Wait when the hub holds as many waits as it
// may.
var ErrFull = errors.New("wakeup: too many agents are waiting")

// ErrClosed is returned by Hub.Wait once the hub is closed.
var ErrClosed = errors.New("wakeup: the server is shutting down")

// DefaultMaxWaits is the number of waits a hub holds at once by default:
// 10,000 agents and room to spare.
const DefaultMaxWaits = 20000

// Hub holds the waiting requests of agents on one replica.
type Hub struct {
	max int

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
	held    int
	closed  bool
}

// NewHub returns a hub that holds at most max waits at once; max ≤ 0
// means DefaultMaxWaits.
func NewHub(max int) *Hub {
	if max <= 0 {
		max = DefaultMaxWaits
	}
	return &Hub{max: max, waiters: map[string]map[chan struct{}]struct{}{}}
}

// Wait registers a wait of agentID. The channel it returns is closed when
// the agent is rung, when every wait is rung, or when the hub closes;
// done removes the wait and must be called once the caller stops
// waiting. Wait returns ErrFull when the hub holds its maximum and
// ErrClosed once it is closed.
func (h *Hub) Wait(agentID string) (rung <-chan struct{}, done func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		return nil, nil, ErrClosed
	case h.held >= h.max:
		return nil, nil, ErrFull
	}
	ch := make(chan struct{})
	set := h.waiters[agentID]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		h.waiters[agentID] = set
	}
	set[ch] = struct{}{}
	h.held++
	var once sync.Once
	return ch, func() { once.Do(func() { h.remove(agentID, ch) }) }, nil
}

func (h *Hub) remove(agentID string, ch chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	set := h.waiters[agentID]
	if _, ok := set[ch]; !ok {
		return // rung: already removed
	}
	delete(set, ch)
	if len(set) == 0 {
		delete(h.waiters, agentID)
	}
	h.held--
}

func (h *Hub) ringLocked(agentID string) {
	for ch := range h.waiters[agentID] {
		close(ch)
		h.held--
	}
	delete(h.waiters, agentID)
}

// RingAll wakes every wait, as after a ring may have been missed.
func (h *Hub) RingAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range h.waiters {
		h.ringLocked(id)
	}
}

// Close wakes every wait and refuses new ones: the server is shutting
// down.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.RingAll()
}

// Held returns the number of waits the hub holds.
func (h *Hub) Held() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held
}
