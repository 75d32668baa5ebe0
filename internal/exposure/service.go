package exposure

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/patchline/patchline/internal/cve"
)

// Service keeps the stored exposure of every agent current: it evaluates
// the agents the store has queued (check-ins queue an agent when its
// inventory changes) and, when the catalog changes, refreshes the index
// and queues only the agents holding a product whose atoms changed.
type Service struct {
	Catalog cve.Catalog
	Store   Store
	Index   *Index
	Logger  *slog.Logger
	// Poll is how often the queue is looked at; CatalogPoll how often
	// the catalog is asked whether it changed.
	Poll, CatalogPoll time.Duration
	// Batch is how many agents are evaluated per round.
	Batch int

	mu          sync.Mutex
	lastCatalog cve.Stats
	ready       bool
}

// NewService returns a service with the default intervals.
func NewService(cat cve.Catalog, store Store, logger *slog.Logger) *Service {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Service{Catalog: cat, Store: store, Index: NewIndex(), Logger: logger,
		Poll: time.Second, CatalogPoll: time.Minute, Batch: 200}
}

// Run evaluates until ctx is done. Errors are logged and retried on the
// next round.
func (s *Service) Run(ctx context.Context) {
	poll := time.NewTicker(s.Poll)
	defer poll.Stop()
	var nextCatalog time.Time
	for {
		// The index of the catalog costs memory and a pass over the whole
		// catalog: it is built once the fleet has an agent to evaluate or
		// a package query wants it.
		if !s.isReady() {
			has := s.Index.Wanted()
			if !has {
				var err error
				if has, err = s.Store.HasAgents(ctx); err != nil && ctx.Err() == nil {
					s.Logger.Warn("exposure: look for agents", "err", err)
				}
			}
			if !has {
				select {
				case <-ctx.Done():
					return
				case <-poll.C:
				}
				continue
			}
		}
		if now := time.Now(); !now.Before(nextCatalog) {
			if err := s.RefreshCatalog(ctx); err != nil && ctx.Err() == nil {
				s.Logger.Warn("exposure: refresh from the catalog", "err", err)
			}
			nextCatalog = now.Add(s.CatalogPoll)
		}
		if s.isReady() {
			if _, err := s.Drain(ctx); err != nil && ctx.Err() == nil {
				s.Logger.Warn("exposure: evaluate agents", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		}
	}
}

func (s *Service) isReady() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready
}

// RefreshCatalog refreshes the index when the catalog changed since the
// last refresh (its Stats moved, or at the first call), stores
// the risks that changed and queues the agents that hold a changed
// product.
func (s *Service) RefreshCatalog(ctx context.Context) error {
	st, err := s.Catalog.Stats(ctx)
	if err != nil {
		return fmt.Errorf("exposure: catalog stats: %w", err)
	}
	s.mu.Lock()
	// Updated has whole seconds: two ingests within one second differ in
	// their counts.
	same := s.ready && st.Updated.Equal(s.lastCatalog.Updated) && st.Records == s.lastCatalog.Records &&
		st.Facts == s.lastCatalog.Facts && st.Rejected == s.lastCatalog.Rejected
	s.mu.Unlock()
	if same {
		return nil
	}
	start := time.Now()
	up, err := s.Index.RefreshTo(ctx, s.Catalog, func(risks []Risk, scoresOnly bool) error {
		if scoresOnly {
			if err := s.Store.PutScores(ctx, risks); err != nil {
				return fmt.Errorf("exposure: store scores: %w", err)
			}
			return nil
		}
		if err := s.Store.PutRisks(ctx, risks); err != nil {
			return fmt.Errorf("exposure: store risks: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	queued, err := s.Store.QueueExposure(ctx, up.Keys)
	if err != nil {
		return fmt.Errorf("exposure: queue agents: %w", err)
	}
	s.mu.Lock()
	s.lastCatalog, s.ready = st, true
	s.mu.Unlock()
	s.Logger.Info("exposure index refreshed", "cves", s.Index.Len(), "recordsRead", up.Records,
		"changedProducts", len(up.Keys), "agentsQueued", queued, "seconds", time.Since(start).Seconds())
	return nil
}

// Drain evaluates queued agents until the queue is empty and returns how
// many it evaluated.
func (s *Service) Drain(ctx context.Context) (int, error) {
	n := 0
	for {
		pending, err := s.Store.PendingExposure(ctx, s.Batch)
		if err != nil {
			return n, fmt.Errorf("exposure: pending agents: %w", err)
		}
		if len(pending) == 0 {
			return n, nil
		}
		for _, p := range pending {
			findings, keys := s.Index.Match(p.Inventory)
			if err := s.Store.PutExposure(ctx, p.AgentID, p.Token, keys, findings); err != nil {
				return n, fmt.Errorf("exposure: store agent %s: %w", p.AgentID, err)
			}
			n++
		}
		if len(pending) < s.Batch {
			return n, nil
		}
	}
}
