package exposure

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/cve"
)

// statsCatalog counts the calls of Stats, the first thing a refresh of the
// index asks; the rest of cve.Catalog is not expected to be called.
type statsCatalog struct {
	cve.Catalog
	calls atomic.Int32
}

func (c *statsCatalog) Stats(context.Context) (cve.Stats, error) {
	c.calls.Add(1)
	return cve.Stats{}, context.Canceled
}

// fleetStore is a Store whose fleet is empty until has is set.
type fleetStore struct {
	Store
	has atomic.Bool
}

func (s *fleetStore) HasAgents(context.Context) (bool, error) { return s.has.Load(), nil }

// TestServiceWaitsForAgents runs the service without agents: it does not
// touch the catalog until the fleet has one.
func TestServiceWaitsForAgents(t *testing.T) {
	cat, store := &statsCatalog{}, &fleetStore{}
	s := NewService(cat, store, nil)
	s.Poll = 5 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	time.Sleep(50 * time.Millisecond)
	if n := cat.calls.Load(); n != 0 {
		t.Fatalf("the catalog was read %d times with no agent", n)
	}
	store.has.Store(true)
	deadline := time.Now().Add(5 * time.Second)
	for cat.calls.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the service did not read the catalog once the fleet had an agent")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestServiceBuildsWhenWanted runs the service without agents: a reader
// that wants the index (a package query) makes it read the catalog.
func TestServiceBuildsWhenWanted(t *testing.T) {
	cat, store := &statsCatalog{}, &fleetStore{}
	s := NewService(cat, store, nil)
	s.Poll = 5 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	time.Sleep(50 * time.Millisecond)
	if n := cat.calls.Load(); n != 0 {
		t.Fatalf("the catalog was read %d times with no agent and no reader", n)
	}
	s.Index.Want()
	deadline := time.Now().Add(5 * time.Second)
	for cat.calls.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the service did not read the catalog once the index was wanted")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
