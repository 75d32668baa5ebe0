package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/patchline/patchline/internal/cve"
)

// The summary index of a catalog on either engine, kept for as long as the
// catalog keeps the version it was read at: the engine names its version,
// how to read the list columns in one snapshot and its full-text search;
// the index (summaryindex.go) does the rest.

// SummarySource is what an engine gives its summary index.
type SummarySource struct {
	// Version returns the catalog's version: a number that changes with
	// every commit that changes its records, whichever process makes it.
	Version func(ctx context.Context) (int64, error)
	// Begin begins a read transaction that sees one snapshot.
	Begin func(ctx context.Context) (*sql.Tx, error)
	// Rows selects the key, severity, cvss, cvss_version, epss, is_kev,
	// has_fix, published and modified of every record in key order, and
	// Listed the keys of the records a list shows, in order, each with the
	// engine's planner hints.
	Rows, Listed string
	// SearchKeys returns the keys of the records that match a query of
	// the engine's full-text search (ListDialect.Search).
	SearchKeys func(ctx context.Context, match string) ([]int64, error)
}

// Summaries keeps the summary index of a catalog, building a new one in
// the background when the catalog has changed since the last.
type Summaries struct {
	src    SummarySource
	ctx    context.Context // of the builds; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	cur      *summaryIndex
	building bool
	retry    time.Time // no build before, after a failed one
}

// retryBuild is how long a failed build waits before the next.
const retryBuild = 30 * time.Second

// NewSummaries returns the summary index of the catalog of src, which it
// builds when a list or a walk first asks.
func NewSummaries(src SummarySource) *Summaries {
	ctx, cancel := context.WithCancel(context.Background())
	return &Summaries{src: src, ctx: ctx, cancel: cancel}
}

// Ways of keeping the summary index (tests choose).
const (
	IndexInBackground = iota // build after a change, read the database meanwhile
	IndexInline              // build after a change before answering
	IndexOff                 // always read the database
)

// SummaryIndexMode is how every catalog keeps its summary index.
var SummaryIndexMode = IndexInBackground

// current returns the index if it holds the catalog as it is now, nil
// otherwise; then it starts building one, unless a build is under way.
func (s *Summaries) current(ctx context.Context) (*summaryIndex, error) {
	if SummaryIndexMode == IndexOff {
		return nil, nil
	}
	version, err := s.src.Version(ctx)
	if err != nil {
		return nil, fmt.Errorf("catalog version: %w", err)
	}
	if SummaryIndexMode == IndexInline {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.cur == nil || s.cur.version != version {
			x, err := buildSummaryIndex(ctx, &s.src, version)
			if err != nil {
				return nil, err
			}
			s.cur = x
		}
		return s.cur, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.cur.version == version {
		return s.cur, nil
	}
	if s.building || time.Now().Before(s.retry) || s.ctx.Err() != nil {
		return nil, nil
	}
	s.building = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		start := time.Now()
		// The version is taken again: a commit may have come since.
		x, err := func() (*summaryIndex, error) {
			v, err := s.src.Version(s.ctx)
			if err != nil {
				return nil, err
			}
			return buildSummaryIndex(s.ctx, &s.src, v)
		}()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.building = false
		if err != nil {
			if s.ctx.Err() == nil {
				slog.Warn("catalog summary index: build failed; lists are read from the database", "err", err)
				s.retry = time.Now().Add(retryBuild)
			}
			return
		}
		s.cur = x
		slog.Debug("catalog summary index built", "records", len(x.rows), "took", time.Since(start))
	}()
	return nil, nil
}

// Warm builds the summary index of the catalog as it is now, unless it is
// built, and returns once it is: the lists and walks that follow answer
// from memory. Benchmarks call it; serve builds the index in the
// background instead, the database answering meanwhile.
func (s *Summaries) Warm(ctx context.Context) error {
	v, err := s.src.Version(ctx)
	if err != nil {
		return fmt.Errorf("catalog version: %w", err)
	}
	s.mu.Lock()
	built := s.cur != nil && s.cur.version == v
	s.mu.Unlock()
	if built {
		return nil
	}
	x, err := buildSummaryIndex(ctx, &s.src, v)
	if err != nil {
		return fmt.Errorf("build the summary index: %w", err)
	}
	s.mu.Lock()
	s.cur = x
	s.mu.Unlock()
	return nil
}

// List answers a list of plan p from the summary index, when it holds the
// catalog as it is now; ok is false when it does not, and the engine
// reads the database.
func (s *Summaries) List(ctx context.Context, p *ListPlan, q cve.ListQuery) (page cve.Page, ok bool, err error) {
	if q.After != nil && math.IsNaN(q.After.Value) {
		return page, false, nil // what the database makes of it is its own
	}
	x, err := s.current(ctx)
	if x == nil || err != nil {
		return page, false, err
	}
	var matched *searchSet
	if p.Match != "" {
		matched, err = x.search(p.Match, func() ([]int64, error) {
			keys, err := s.src.SearchKeys(ctx, p.Match)
			if err != nil {
				return nil, fmt.Errorf("list records: search: %w", err)
			}
			// The search must have read the catalog the index holds.
			v, err := s.src.Version(ctx)
			if err != nil {
				return nil, err
			}
			if v != x.version {
				return nil, errStale
			}
			return keys, nil
		})
		if errors.Is(err, errStale) {
			return page, false, nil
		}
		if err != nil {
			return page, false, err
		}
	}
	return x.list(p, &q, matched), true, nil
}

// errStale says that the catalog changed while the summary index was read.
var errStale = errors.New("the catalog changed")

// Walk calls fn for every record after the key from, in key order, from
// the summary index when it holds the catalog as it is now; ok is false
// when it does not, and the engine reads the database.
func (s *Summaries) Walk(ctx context.Context, from int64, fn func(cve.Summary) error) (ok bool, err error) {
	x, err := s.current(ctx)
	if x == nil || err != nil {
		return false, err
	}
	return true, x.walk(ctx, from, fn)
}

// Close stops a build under way and waits for it.
func (s *Summaries) Close() {
	s.cancel()
	s.wg.Wait()
}
