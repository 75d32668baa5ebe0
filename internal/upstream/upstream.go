// Package upstream keeps the catalog current: it syncs each upstream source
// incrementally, fetching only what changed since the last successful sync
// with that upstream's own mechanism, and feeds what it fetched through
// ingest.Run, one run (one transaction) per source. A source that fails
// keeps its previous data, is retried with backoff and shows as stale in the
// status; it never blocks the others.
//
// The mechanisms, by source:
//
//   - cvelist: the GitHub releases of CVEProject/cvelistV5. Each day's delta
//     zips are cumulative since midnight UTC, so a sync fetches, for each day
//     since the cursor, the newest delta of that day (the end-of-day one for a
//     finished day); the daily baseline zip when there is no cursor, when the
//     cursor is older than the deltas listed or than MaxDeltaAge.
//   - nvd: the NVD API 2.0 in lastModStartDate/lastModEndDate windows of at
//     most 120 days since the cursor, each paged with startIndex; the whole
//     listing on the first sync. Requests go through a token bucket (5 per
//     30 s without an API key, 50 with one) and honour Retry-After.
//   - kev, epss, debian: one document each, fetched with a conditional
//     request (If-None-Match, If-Modified-Since); 304 means nothing changed.
//   - osv: per ecosystem, modified_id.csv (conditional), then the records
//     modified since the cursor, or all.zip on the first sync.
//   - eol: endoflife.date's document of each product (conditional).
//   - msrc: the MSRC update index (conditional), then every monthly
//     document whose CurrentReleaseDate is newer than the cursor.
//
// A source whose URL is a local directory or file is a mirror: it is
// ingested whole when its files changed.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/feed"
	"github.com/patchline/patchline/internal/ingest"
)

// Result is what one sync of one source did.
type Result struct {
	Source string
	URL    string
	// Started is when the sync started; Duration how long it took.
	Started  time.Time
	Duration time.Duration
	// Requests and Bytes count what was transferred.
	Requests int
	Bytes    int64
	// Summary says what was fetched, in a few words.
	Summary string
	// Ingest is the result of the ingest run, nil when nothing changed
	// upstream and no run was needed.
	Ingest *ingest.Result
	// RecordsChanged counts the upstream records added or changed.
	RecordsChanged int
	// Err is why the sync failed; the source then kept its data.
	Err error
}

// ErrLeaseHeld is returned when another replica holds the sync lease.
var ErrLeaseHeld = errors.New("another replica is syncing")

// SyncOnce takes the sync lease, syncs the named sources (every configured
// source when names is empty) whatever their backoff, and gives the lease
// back. It returns ErrLeaseHeld, wrapped with the holder's name, when
// another replica holds the lease. The error of each source is in its
// Result.
func (s *Syncer) SyncOnce(ctx context.Context, names ...string) ([]Result, error) {
	srcs, err := s.pick(names)
	if err != nil {
		return nil, err
	}
	release, err := s.lease(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	return s.syncAll(ctx, srcs), nil
}

func (s *Syncer) pick(names []string) ([]Source, error) {
	if len(names) == 0 {
		return s.cfg.Sources, nil
	}
	var out []Source
	for _, n := range names {
		i := slices.IndexFunc(s.cfg.Sources, func(src Source) bool { return src.Name == n })
		if i < 0 {
			return nil, errs.Invalidf("source %q is not configured", n)
		}
		out = append(out, s.cfg.Sources[i])
	}
	return out, nil
}

// lease takes the sync lease and keeps renewing it until the returned
// function is called, which gives it back.
func (s *Syncer) lease(ctx context.Context) (func(), error) {
	ok, cur, err := s.cfg.Store.AcquireSyncLease(ctx, s.cfg.Holder, s.cfg.Now(), s.cfg.LeaseTTL)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s holds the lease until %s", ErrLeaseHeld, cur.Holder, cur.Expires.Format(time.RFC3339))
	}
	renewCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(s.cfg.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-renewCtx.Done():
				return
			case <-t.C:
				if ok, cur, err := s.cfg.Store.AcquireSyncLease(renewCtx, s.cfg.Holder, s.cfg.Now(), s.cfg.LeaseTTL); err != nil || !ok {
					s.cfg.Logger.Warn("sync lease not renewed", "holder", cur.Holder, "err", err)
				}
			}
		}
	}()
	return func() {
		stop()
		<-done
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := s.cfg.Store.ReleaseSyncLease(rctx, s.cfg.Holder); err != nil {
			s.cfg.Logger.Warn("sync lease not released", "err", err)
		}
	}, nil
}

// syncAll syncs srcs, Parallel at a time, and returns their results in
// the order of srcs.
func (s *Syncer) syncAll(ctx context.Context, srcs []Source) []Result {
	results := make([]Result, len(srcs))
	sem := make(chan struct{}, s.cfg.Parallel)
	var wg sync.WaitGroup
	for i, src := range srcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				results[i] = Result{Source: src.Name, URL: src.URL, Err: ctx.Err()}
				return
			}
			defer func() { <-sem }()
			results[i] = s.syncOne(ctx, src)
		}()
	}
	wg.Wait()
	return results
}

// syncOne syncs one source: fetch what changed into a temporary directory,
// ingest it in one run, then record the new state. A failure records the
// error and the time of the next attempt, and leaves the cursor where it
// was, so that the next sync fetches the same changes again.
func (s *Syncer) syncOne(ctx context.Context, src Source) Result {
	start, began := s.cfg.Now(), time.Now()
	res := Result{Source: src.Name, URL: src.URL, Started: start}
	log := s.cfg.Logger.With("source", src.Name)
	prev, err := s.cfg.Store.SyncState(ctx, src.Name)
	if err != nil && !errors.Is(err, errs.ErrNotFound) {
		res.Err = err
		return res
	}
	prev.Source = src.Name
	j := &job{s: s, src: src, prev: prev, next: prev, log: log}
	err = s.run(ctx, j, &res)
	res.Duration = time.Since(began)
	res.Requests, res.Bytes = j.requests, j.bytes
	res.Summary = strings.Join(j.notes, "; ")
	if ctx.Err() != nil {
		// Interrupted (shutdown): not a failure of the upstream.
		res.Err = ctx.Err()
		return res
	}
	st := prev
	st.LastAttempt = start
	if err != nil {
		res.Err = err
		st.Error = shorten(err.Error())
		st.Failures++
		st.NextAttempt = start.Add(s.backoff(st.Failures))
		log.Warn("sync failed", "err", err, "failures", st.Failures, "retry_at", st.NextAttempt.Format(time.RFC3339))
	} else {
		st = j.next
		st.LastAttempt, st.LastSuccess = start, start
		st.Error, st.Failures, st.NextAttempt = "", 0, time.Time{}
		st.RecordsChanged = res.RecordsChanged
		log.Info("synced", "summary", res.Summary, "requests", res.Requests, "bytes", res.Bytes,
			"records_changed", res.RecordsChanged, "seconds", res.Duration.Seconds())
	}
	if err := s.cfg.Store.PutSyncState(ctx, st); err != nil {
		log.Error("sync state not stored", "err", err)
		if res.Err == nil {
			res.Err = err
		}
	}
	s.cfg.Metrics.observe(res)
	return res
}

// run fetches what changed and ingests it.
func (s *Syncer) run(ctx context.Context, j *job, res *Result) error {
	dir, err := os.MkdirTemp(s.cfg.TempDir, "patchline-sync-"+j.src.Name+"-")
	if err != nil {
		return fmt.Errorf("sync %s: %w", j.src.Name, err)
	}
	defer os.RemoveAll(dir)
	j.dir = dir
	fetch := protocols[j.src.Name]
	if isLocal(j.src.URL) {
		fetch = syncMirror
	}
	if err := fetch(ctx, j); err != nil {
		return fmt.Errorf("sync %s: %w", j.src.Name, err)
	}
	if len(j.inputs) == 0 {
		return nil
	}
	for i := range j.inputs {
		// The data is as of this sync: the records it changes carry its
		// start, which becomes the source's last success.
		j.inputs[i].AsOf = res.Started
		j.inputs[i].Label = catalog.SyncLabel + j.src.URL
	}
	s.ingestMu.Lock()
	r, err := ingest.Run(ctx, s.cfg.Store, j.inputs, ingest.Options{Client: s.cfg.Client, Now: s.cfg.Now})
	s.ingestMu.Unlock()
	res.Ingest = &r
	if err != nil {
		return fmt.Errorf("sync %s: %w", j.src.Name, err)
	}
	for _, c := range r.Sources {
		res.RecordsChanged += c.Added + c.Changed
	}
	return nil
}

// backoff is the wait before the next attempt after n consecutive
// failures.
func (s *Syncer) backoff(n int) time.Duration {
	d := s.cfg.Backoff.Base
	for i := 1; i < n && d < s.cfg.Backoff.Max; i++ {
		d *= 2
	}
	return min(d, s.cfg.Backoff.Max)
}

// protocols fetch what changed upstream for each source.
var protocols = map[string]func(context.Context, *job) error{
	"cvelist": syncCVEList,
	"nvd":     syncNVD,
	"kev":     syncFile,
	"epss":    syncFile,
	"debian":  syncFile,
	"osv":     syncOSV,
	"msrc":    syncMSRC,
	"eol":     syncEOL,
}

// job is one sync of one source in progress.
type job struct {
	s    *Syncer
	src  Source
	log  *slog.Logger
	prev catalog.SyncState
	// next is the state stored when the sync succeeds: the protocol sets
	// its cursor and validators.
	next catalog.SyncState
	// dir holds the fetched files; inputs are the ingest sources that read
	// them.
	dir    string
	inputs []ingest.Source

	mu       sync.Mutex
	requests int
	bytes    int64
	notes    []string
}

// path returns the path of a fetched file under the job's directory,
// creating its parent directories.
func (j *job) path(rel ...string) (string, error) {
	p := filepath.Join(append([]string{j.dir}, rel...)...)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", err
	}
	return p, nil
}

// ingestDir makes the directory sub of the job (relative to its dir) an
// input of the ingest run, read by p.
func (j *job) ingestDir(p feed.Parser, sub string) {
	j.inputs = append(j.inputs, ingest.Source{Parser: p, Location: sub, FS: os.DirFS(j.dir)})
}

func (j *job) note(format string, args ...any) {
	j.notes = append(j.notes, fmt.Sprintf(format, args...))
}

func (j *job) parser() feed.Parser {
	if p, ok := j.s.cfg.parsers[j.src.Name]; ok {
		return p
	}
	p, _ := parserFor(j.src.Name)
	return p
}

// strict makes a parser fail the run on a file that cannot be parsed as a
// whole. For a source that is one document (KEV, EPSS, an NVD page, an
// MSRC month), such a file is a bad transfer rather than a bad record,
// and ingesting around it would move the cursor past data never read.
func strict(p feed.Parser) feed.Parser {
	parse := p.Parse
	p.Parse = func(ctx context.Context, name string, r io.Reader, sink feed.Sink) error {
		err := parse(ctx, name, r, sink)
		if err != nil && ctx.Err() == nil && !errors.Is(err, feed.ErrUnreadable) {
			return fmt.Errorf("%w: %s: %v", feed.ErrUnreadable, name, err)
		}
		return err
	}
	return p
}

// shorten bounds an error message kept in the state.
func shorten(s string) string {
	const max = 500
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

// isLocal reports whether a source URL is a local path rather than a URL.
func isLocal(u string) bool {
	return !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://")
}
