package upstream

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/httpx"
)

// SourceStatus is the sync status of one source, as GET /api/v1/status
// shows it.
type SourceStatus struct {
	Source string `json:"source"`
	// LastSuccess is when the last successful sync started: the data of
	// the source is as of then. Nil when it never succeeded.
	LastSuccess *time.Time `json:"lastSuccessAt"`
	// LastAttempt is when the last sync, successful or not, started.
	LastAttempt *time.Time `json:"lastAttemptAt"`
	// Stale is true when the source never synced, when its last attempt
	// failed, or when its last success is older than the stale age.
	Stale bool `json:"stale"`
	// Error is why the last attempt failed, nil when it succeeded.
	Error *string `json:"error"`
	// Failures counts the consecutive failed attempts; NextAttempt is when
	// the source is tried again after them.
	Failures    int        `json:"failures"`
	NextAttempt *time.Time `json:"nextAttemptAt"`
	// RecordsChanged counts the upstream records the last successful
	// sync added or changed.
	RecordsChanged int `json:"recordsChanged"`
}

// StatusOptions tune what the status says.
type StatusOptions struct {
	// Sources are listed even when they never synced (as stale); sources
	// with a stored state are listed anyway.
	Sources []string
	// StaleAfter is the age of the last success beyond which a source is
	// stale; 0 means 48 h.
	StaleAfter time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives internal errors of the handler; nil means none.
	Logger *slog.Logger
}

func (o StatusOptions) withDefaults() StatusOptions {
	if o.StaleAfter <= 0 {
		o.StaleAfter = 48 * time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// StatusOptions returns the status options that match the Syncer: its
// sources and stale age.
func (s *Syncer) StatusOptions() StatusOptions {
	names := make([]string, 0, len(s.cfg.Sources))
	for _, src := range s.cfg.Sources {
		names = append(names, src.Name)
	}
	return StatusOptions{Sources: names, StaleAfter: s.cfg.StaleAfter, Now: s.cfg.Now, Logger: s.cfg.Logger}
}

// Status returns the sync status of the Syncer's sources.
func (s *Syncer) Status(ctx context.Context) ([]SourceStatus, error) {
	return Status(ctx, s.cfg.Store, s.StatusOptions())
}

// Status returns the sync status of every source with a stored state and
// of every source of opt.Sources, in sync order.
func Status(ctx context.Context, states catalog.SyncStates, opt StatusOptions) ([]SourceStatus, error) {
	opt = opt.withDefaults()
	list, err := states.ListSyncStates(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string]catalog.SyncState{}
	for _, st := range list {
		byName[st.Source] = st
	}
	for _, n := range opt.Sources {
		if _, ok := byName[n]; !ok {
			byName[n] = catalog.SyncState{Source: n}
		}
	}
	now := opt.Now()
	out := make([]SourceStatus, 0, len(byName))
	for _, st := range byName {
		ss := SourceStatus{
			Source:         st.Source,
			LastSuccess:    timePtr(st.LastSuccess),
			LastAttempt:    timePtr(st.LastAttempt),
			Failures:       st.Failures,
			NextAttempt:    timePtr(st.NextAttempt),
			RecordsChanged: st.RecordsChanged,
			Stale:          st.LastSuccess.IsZero() || st.Error != "" || now.Sub(st.LastSuccess) > opt.StaleAfter,
		}
		if st.Error != "" {
			e := st.Error
			ss.Error = &e
		}
		out = append(out, ss)
	}
	slices.SortFunc(out, func(a, b SourceStatus) int {
		ia, ib := slices.Index(order, a.Source), slices.Index(order, b.Source)
		if ia < 0 {
			ia = len(order)
		}
		if ib < 0 {
			ib = len(order)
		}
		if ia != ib {
			return ia - ib
		}
		if a.Source < b.Source {
			return -1
		}
		if a.Source > b.Source {
			return 1
		}
		return 0
	})
	return out, nil
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// StatusDocument is the body of GET /api/v1/status.
type StatusDocument struct {
	// Stale is true when any source is stale.
	Stale   bool           `json:"stale"`
	Catalog CatalogStatus  `json:"catalog"`
	Sources []SourceStatus `json:"sources"`
}

// CatalogStatus counts the records the catalog serves.
type CatalogStatus struct {
	Records  int `json:"records"`
	Rejected int `json:"rejected"`
	// UpdatedAt is when an ingest or sync run last finished, nil for an
	// empty catalog.
	UpdatedAt *time.Time `json:"updatedAt"`
}

// StatusHandler serves GET /api/v1/status: the sync status of every
// source and the record counts of the catalog, as a StatusDocument. It is
// public and cacheable for a minute.
func StatusHandler(states catalog.SyncStates, cat cve.Catalog, opt StatusOptions) http.Handler {
	opt = opt.withDefaults()
	return httpx.Handle(opt.Logger, func(w http.ResponseWriter, r *http.Request) error {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			httpx.WriteProblem(w, http.StatusMethodNotAllowed, "use GET")
			return nil
		}
		doc, err := statusDocument(r.Context(), states, cat, opt)
		if err != nil {
			return err
		}
		w.Header().Set("Cache-Control", "public, max-age=60")
		return httpx.WriteJSON(w, http.StatusOK, doc)
	})
}

func statusDocument(ctx context.Context, states catalog.SyncStates, cat cve.Catalog, opt StatusOptions) (StatusDocument, error) {
	sources, err := Status(ctx, states, opt)
	if err != nil {
		return StatusDocument{}, err
	}
	stats, err := cat.Stats(ctx)
	if err != nil {
		return StatusDocument{}, fmt.Errorf("status: catalog stats: %w", err)
	}
	doc := StatusDocument{
		Catalog: CatalogStatus{Records: stats.Records, Rejected: stats.Rejected, UpdatedAt: timePtr(stats.Updated)},
		Sources: sources,
	}
	for _, s := range sources {
		doc.Stale = doc.Stale || s.Stale
	}
	return doc, nil
}
