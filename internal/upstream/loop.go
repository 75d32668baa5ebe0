package upstream

import (
	"context"
	"errors"
	"time"

	"github.com/patchline/patchline/internal/catalog"
)

// Loop syncs the configured sources until ctx is done, and then returns
// ctx's error. Each source is synced every `every` after its last attempt;
// a failed one sooner, after its backoff. The schedule is read from the
// stored states, and a round runs only while this replica holds the sync
// lease, so that of several replicas sharing a catalog one syncs at a time
// and another takes over when it stops.
func (s *Syncer) Loop(ctx context.Context, every time.Duration) error {
	if every <= 0 {
		return errors.New("sync loop: the interval must be positive")
	}
	s.cfg.Logger.Info("sync loop started", "every", every.String(), "holder", s.cfg.Holder)
	for {
		wait := s.round(ctx, every)
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// round syncs the sources that are due, if it can take the lease, and
// returns the wait until the next round.
func (s *Syncer) round(ctx context.Context, every time.Duration) time.Duration {
	retry := min(every, time.Minute)
	due, next, err := s.due(ctx, every)
	if err != nil {
		s.cfg.Logger.Warn("sync schedule not read", "err", err)
		return retry
	}
	if len(due) > 0 {
		release, err := s.lease(ctx)
		switch {
		case errors.Is(err, ErrLeaseHeld):
			s.cfg.Logger.Debug("sync skipped", "reason", err)
			return min(every, 5*time.Minute)
		case err != nil:
			s.cfg.Logger.Warn("sync lease not taken", "err", err)
			return retry
		}
		s.syncAll(ctx, due)
		release()
		if _, next, err = s.due(ctx, every); err != nil {
			return retry
		}
	}
	return max(next.Sub(s.cfg.Now()), time.Second)
}

// due returns the sources due now and the time the next one is due.
func (s *Syncer) due(ctx context.Context, every time.Duration) ([]Source, time.Time, error) {
	list, err := s.cfg.Store.ListSyncStates(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	states := map[string]catalog.SyncState{}
	for _, st := range list {
		states[st.Source] = st
	}
	now := s.cfg.Now()
	var (
		due  []Source
		next time.Time
	)
	for _, src := range s.cfg.Sources {
		at := dueAt(states[src.Name], every)
		if !at.After(now) {
			due = append(due, src)
			continue
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	if next.IsZero() {
		next = now.Add(every)
	}
	return due, next, nil
}

// dueAt is when a source is due: now when it never ran, `every` after its
// last attempt, or sooner after a failure, when its backoff ends.
func dueAt(st catalog.SyncState, every time.Duration) time.Time {
	if st.LastAttempt.IsZero() {
		return time.Time{}
	}
	at := st.LastAttempt.Add(every)
	if st.Failures > 0 && !st.NextAttempt.IsZero() && st.NextAttempt.Before(at) {
		at = st.NextAttempt
	}
	return at
}
