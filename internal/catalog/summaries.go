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
	"github.com/patchline/patchline/internal/errs"
)

// The summary index of a catalog on either engine is the one way its
// lists and walks are answered: the engine names its version, how to read
// the list columns in one snapshot and its full-text search; the index
// (summaryindex.go) does the rest. A list or walk that finds the catalog
// changed since the index was built waits for the next build, so that it
// sees every commit that came before it, as a read of the database would;
// once an index is built, the catalog is watched and each change built
// within a second, before a list asks.

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
	// Search turns the words of a search into the engine's full-text
	// query: "" when nothing can match, errs.ErrInvalid for too many
	// words.
	Search func(text string) (string, error)
	// SearchKeys returns the keys of the records that match a query
	// Search made; those of rejected records may be left out.
	SearchKeys func(ctx context.Context, match string) ([]int64, error)
}

// Summaries keeps the summary index of a catalog and answers its lists and
// walks (cve.Catalog's List and Walk) from it.
type Summaries struct {
	src    SummarySource
	ctx    context.Context // of the builds; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	cur      *summaryIndex
	building *summaryBuild // nil when no build is under way
	watching bool          // watch runs
}

// summaryBuild is a build of the index that callers wait for.
type summaryBuild struct {
	done chan struct{} // closed when x or err is set
	x    *summaryIndex
	err  error
}

// NewSummaries returns the summary index of the catalog of src, which it
// builds when a list or a walk first asks, or Warm.
func NewSummaries(src SummarySource) *Summaries {
	ctx, cancel := context.WithCancel(context.Background())
	return &Summaries{src: src, ctx: ctx, cancel: cancel}
}

// index returns the index of the catalog as it is now. When the catalog
// has changed since the last build, it starts a build (one at a time:
// callers that come meanwhile wait for the same one) and waits for it.
// The build runs on the Summaries' context, so that a caller that gives up
// does not end it for the others.
func (s *Summaries) index(ctx context.Context) (*summaryIndex, error) {
	for {
		version, err := s.src.Version(ctx)
		if err != nil {
			return nil, fmt.Errorf("catalog version: %w", err)
		}
		s.mu.Lock()
		if x := s.cur; x != nil && x.version == version {
			s.mu.Unlock()
			return x, nil
		}
		b := s.building
		if b == nil {
			if err := s.ctx.Err(); err != nil {
				s.mu.Unlock()
				return nil, errClosed
			}
			b = &summaryBuild{done: make(chan struct{})}
			s.building = b
			s.wg.Add(1)
			go s.build(b)
			if !s.watching {
				s.watching = true
				s.wg.Add(1)
				go s.watch()
			}
		}
		s.mu.Unlock()
		select {
		case <-b.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if b.err != nil {
			return nil, fmt.Errorf("build the summary index: %w", b.err)
		}
		// The build read the catalog at a version taken when it began,
		// which a commit may have passed since: ask again.
	}
}

// build builds the index of the catalog at the version it sees first.
func (s *Summaries) build(b *summaryBuild) {
	defer s.wg.Done()
	start := time.Now()
	version, err := s.src.Version(s.ctx)
	if err == nil {
		b.x, b.err = buildSummaryIndex(s.ctx, &s.src, version)
	} else {
		b.err = err
	}
	s.mu.Lock()
	s.building = nil
	if b.err == nil {
		s.cur = b.x
	}
	s.mu.Unlock()
	close(b.done)
	if b.err == nil {
		slog.Debug("catalog summary index built", "records", len(b.x.rows), "took", time.Since(start))
	}
}

// watchEvery is how often a catalog that has built its summary index asks
// whether the catalog has changed, to build the next index before a list
// asks for it. Tests change it.
var watchEvery = time.Second

// watch builds the index of each new version of the catalog, until Close:
// a list waits for a build only when it comes within watchEvery and a
// build of a change.
func (s *Summaries) watch() {
	defer s.wg.Done()
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if _, err := s.index(s.ctx); err != nil && s.ctx.Err() == nil {
			slog.Debug("catalog summary index not brought up to date", "err", err)
		}
	}
}

// Warm builds the summary index of the catalog as it is now, unless it is
// built, and returns once it is. serve calls it at start, so that its
// first list need not wait.
func (s *Summaries) Warm(ctx context.Context) error {
	_, err := s.index(ctx)
	return err
}

// List implements cve.Catalog. Rejected records are left out. Rows are
// ordered by the sort column, then by CVE id, both in the direction of q;
// missing values sort lowest. It returns errs.ErrInvalid for a sort key,
// severity or limit it does not know and for a search of too many words.
func (s *Summaries) List(ctx context.Context, q cve.ListQuery) (cve.Page, error) {
	p, err := newListPlan(q, s.src.Search)
	if err != nil {
		return cve.Page{}, err
	}
	if p.Empty || q.After != nil && math.IsNaN(q.After.Value) {
		return cve.Page{}, nil // no row matches; no row follows NaN
	}
	for attempt := 1; ; attempt++ {
		x, err := s.index(ctx)
		if err != nil {
			return cve.Page{}, fmt.Errorf("list records: %w", err)
		}
		var matched *searchSet
		if p.Match != "" {
			matched, err = x.search(p.Match, func() ([]int64, error) {
				keys, err := s.src.SearchKeys(ctx, p.Match)
				if err != nil {
					return nil, err
				}
				// The search should have read the catalog the index
				// holds; after a few tries with a catalog that changes
				// between the two, the index keeps the keys it holds.
				v, err := s.src.Version(ctx)
				if err == nil && v != x.version && attempt < maxStaleSearches {
					err = errStale
				}
				return keys, err
			})
			if errors.Is(err, errStale) {
				continue
			}
			if err != nil {
				return cve.Page{}, fmt.Errorf("list records: search: %w", err)
			}
		}
		return x.list(p, &q, matched), nil
	}
}

// maxStaleSearches bounds the tries of a search whose catalog changes
// while it runs.
const maxStaleSearches = 3

// errStale says that the catalog changed while the summary index was read.
var errStale = errors.New("the catalog changed")

// Walk implements cve.Catalog: it calls fn for every record after the CVE
// id after ("" for all), in key order.
func (s *Summaries) Walk(ctx context.Context, after string, fn func(cve.Summary) error) error {
	from := int64(-1) // the whole catalog
	if after != "" {
		k, ok := cve.Key(after)
		if !ok {
			return errs.Invalidf("after: %q is not a CVE id", after)
		}
		from = k
	}
	x, err := s.index(ctx)
	if err != nil {
		return fmt.Errorf("walk records: %w", err)
	}
	return x.walk(ctx, from, fn)
}

// errClosed says that the catalog is closed.
var errClosed = errors.New("the catalog is closed")

// Close stops a build under way and waits for it; no build starts after.
func (s *Summaries) Close() {
	s.mu.Lock()
	s.cancel()
	s.mu.Unlock()
	s.wg.Wait()
}
