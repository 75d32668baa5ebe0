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
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/feed"
	"github.com/patchline/patchline/internal/feed/csaf"
	"github.com/patchline/patchline/internal/feed/cvelist"
	"github.com/patchline/patchline/internal/feed/debian"
	"github.com/patchline/patchline/internal/feed/eol"
	"github.com/patchline/patchline/internal/feed/epss"
	"github.com/patchline/patchline/internal/feed/kev"
	"github.com/patchline/patchline/internal/feed/msrc"
	"github.com/patchline/patchline/internal/feed/nvd"
	"github.com/patchline/patchline/internal/feed/osv"
	"github.com/patchline/patchline/internal/ingest"
)

// Store is the catalog a sync writes: records through ingest runs, and the
// state of each source.
type Store interface {
	catalog.Store
	catalog.SyncStates
}

// Source is one upstream to sync.
type Source struct {
	// Name is the ingest source name: cvelist, nvd, kev, epss, osv,
	// debian, msrc, eol.
	Name string
	// URL is the base URL of the upstream (DefaultURL), or of a mirror
	// that speaks the same protocol; or a local directory or file, a
	// mirror ingested whole when it changed.
	URL string
}

// order is the order in which sources are listed and synced.
var order = []string{"cvelist", "nvd", "kev", "epss", "osv", "debian", "msrc", "eol"}

// mirrorOnly are the sources without an upstream protocol of their own,
// synced only from a local mirror: vendor CSAF providers each publish
// their own tree.
var mirrorOnly = map[string]bool{"csaf": true}

// defaultURLs are the upstreams' own addresses. The eol URL is a template:
// {product} stands for each product.
var defaultURLs = map[string]string{
	"cvelist": "https://api.github.com/repos/CVEProject/cvelistV5/releases",
	"nvd":     "https://services.nvd.nist.gov/rest/json/cves/2.0",
	"kev":     "https://www.cisa.gov/sites/default/files/feeds/known_exploited_vulnerabilities.json",
	"epss":    "https://epss.empiricalsecurity.com/epss_scores-current.csv.gz",
	"osv":     "https://osv-vulnerabilities.storage.googleapis.com",
	"debian":  "https://security-tracker.debian.org/tracker/data/json",
	"msrc":    "https://api.msrc.microsoft.com/cvrf/v3.0",
	"eol":     "https://endoflife.date/api/v1/products/{product}/",
}

// DefaultOSVEcosystems are the OSV ecosystems synced unless configured
// otherwise: the package registries and distributions the catalog serves.
var DefaultOSVEcosystems = []string{
	"PyPI", "npm", "Go", "Maven", "crates.io", "RubyGems", "Packagist", "NuGet", "Hex", "Pub",
	"Debian", "Ubuntu", "AlmaLinux", "Rocky Linux", "Alpine",
}

// DefaultEOLProducts are the endoflife.date products synced unless
// configured otherwise: those whose releases the catalog's fixes name.
var DefaultEOLProducts = []string{"debian", "ubuntu", "alpine-linux", "almalinux", "rocky-linux", "rhel"}

// Names returns the names of the sources that can be synced, in sync
// order; csaf only from a local directory.
func Names() []string { return append(slices.Clone(order), "csaf") }

// DefaultURL returns the default upstream URL of a source.
func DefaultURL(name string) (string, bool) {
	u, ok := defaultURLs[name]
	return u, ok
}

// Defaults returns every source this build can sync, at its default URL.
// A source whose parser this build lacks is left out.
func Defaults() []Source {
	var out []Source
	for _, name := range order {
		if _, ok := parserFor(name); ok {
			out = append(out, Source{Name: name, URL: defaultURLs[name]})
		}
	}
	return out
}

// ParseSource parses a SOURCE or SOURCE=URL argument: a source at its
// default URL, or at the given URL, directory or file.
func ParseSource(arg string) (Source, error) {
	name, loc, hasLoc := strings.Cut(arg, "=")
	def, ok := defaultURLs[name]
	if !ok && !mirrorOnly[name] {
		return Source{}, errs.Invalidf("unknown source %q: want one of %s", name, strings.Join(Names(), ", "))
	}
	if mirrorOnly[name] && (!hasLoc || !isLocal(loc)) {
		return Source{}, errs.Invalidf("source %s is synced only from a local directory: %s=DIR", name, name)
	}
	if _, ok := parserFor(name); !ok {
		return Source{}, errs.Invalidf("source %s: this build has no %s parser", name, name)
	}
	if !hasLoc {
		return Source{Name: name, URL: def}, nil
	}
	if loc == "" {
		return Source{}, errs.Invalidf("%q: want SOURCE or SOURCE=URL", arg)
	}
	return Source{Name: name, URL: loc}, nil
}

// builtin are the parsers sync uses when the ingest registry has none of
// that name.
var builtin = map[string]feed.Parser{
	cvelist.Parser.Name: cvelist.Parser,
	nvd.Parser.Name:     nvd.Parser,
	kev.Parser.Name:     kev.Parser,
	msrc.Parser.Name:    msrc.Parser,
	epss.Parser.Name:    epss.Parser,
	osv.Parser.Name:     osv.Parser,
	debian.Parser.Name:  debian.Parser,
	eol.Parser.Name:     eol.Parser,
	csaf.Parser.Name:    csaf.Parser,
}

// parserFor returns the parser of an ingest source: the ingest registry's,
// else one of the builtin ones.
func parserFor(name string) (feed.Parser, bool) {
	if p, ok := ingest.ParserFor(name); ok {
		return p, true
	}
	p, ok := builtin[name]
	return p, ok
}

// Retry tunes the retries of one HTTP request.
type Retry struct {
	// Attempts is the number of tries of a request; 0 means 4.
	Attempts int
	// Base is the wait after the first failure, doubled after each
	// further one; 0 means 2 s.
	Base time.Duration
	// MaxWait bounds any wait, Retry-After included; 0 means 2 min.
	MaxWait time.Duration
}

// Backoff tunes the retries of a failed source: the next attempt comes
// Base after the first failure, doubling with each further one up to Max.
type Backoff struct {
	Base time.Duration // 0 means 1 min
	Max  time.Duration // 0 means 6 h
}

// Config is what a Syncer needs.
type Config struct {
	// Store is the catalog.
	Store Store
	// Sources are the sources to sync; nil means Defaults().
	Sources []Source
	// Client fetches; nil means a client with sensible timeouts.
	Client *http.Client
	// Logger receives a line per sync; nil means no logging.
	Logger *slog.Logger
	// Metrics, when set, counts syncs, requests and bytes.
	Metrics *Metrics

	// NVDAPIKey is sent in the apiKey header of NVD requests; it raises
	// the rate limit from 5 to 50 requests per 30 s.
	NVDAPIKey string
	// NVDLimiter limits NVD requests; nil means the NVD's published
	// limit for the key (or its absence).
	NVDLimiter *TokenBucket
	// NVDPageSize is the resultsPerPage of NVD requests; 0 means 2000,
	// the API's maximum.
	NVDPageSize int
	// OSVEcosystems are the OSV ecosystems to sync; nil means
	// DefaultOSVEcosystems.
	OSVEcosystems []string
	// OSVMaxChanged is the number of changed records of an ecosystem
	// above which its all.zip is fetched instead; 0 means 5000.
	OSVMaxChanged int
	// EOLProducts are the endoflife.date products to sync; nil means
	// DefaultEOLProducts.
	EOLProducts []string
	// CVEListMaxDeltaAge is the age of the cursor beyond which the CVE
	// List's baseline is fetched rather than the deltas since; 0 means
	// 14 days.
	CVEListMaxDeltaAge time.Duration

	// IdleTimeout cuts a request that receives nothing for that long (and
	// tries it again); 0 means 2 min.
	IdleTimeout time.Duration
	// Retry tunes the retries of each request; Backoff those of a failed
	// source.
	Retry   Retry
	Backoff Backoff
	// Parallel is the number of sources fetched at once (their ingest
	// runs one at a time); 0 means 3.
	Parallel int
	// TempDir holds the fetched files until they are ingested; empty
	// means os.TempDir().
	TempDir string
	// Holder names this replica in the sync lease; empty means
	// hostname-pid-random.
	Holder string
	// LeaseTTL is how long the lease lasts unless renewed; 0 means 30 min.
	LeaseTTL time.Duration
	// StaleAfter is the age of the last success beyond which a source is
	// stale; 0 means 48 h.
	StaleAfter time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	// parsers, when set, replace the parsers of the sources they name.
	parsers map[string]feed.Parser
}

// Syncer syncs the sources of a Config.
type Syncer struct {
	cfg      Config
	ingestMu sync.Mutex // one ingest run at a time
}

// New returns a Syncer for cfg, filling in the defaults.
func New(cfg Config) (*Syncer, error) {
	if cfg.Store == nil {
		return nil, errors.New("sync: no store")
	}
	if cfg.Sources == nil {
		cfg.Sources = Defaults()
	}
	seen := map[string]bool{}
	for _, src := range cfg.Sources {
		if _, ok := defaultURLs[src.Name]; !ok && !(mirrorOnly[src.Name] && isLocal(src.URL)) {
			return nil, errs.Invalidf("sync: unknown source %q, or one synced only from a local directory", src.Name)
		}
		_, override := cfg.parsers[src.Name]
		if _, ok := parserFor(src.Name); !ok && !override {
			return nil, errs.Invalidf("sync: this build has no %s parser", src.Name)
		}
		if seen[src.Name] {
			return nil, errs.Invalidf("sync: source %s given twice", src.Name)
		}
		seen[src.Name] = true
	}
	if cfg.Client == nil {
		cfg.Client = defaultClient()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NVDLimiter == nil {
		cfg.NVDLimiter = NVDLimiter(cfg.NVDAPIKey != "")
	}
	if cfg.NVDPageSize <= 0 {
		cfg.NVDPageSize = 2000
	}
	if cfg.OSVEcosystems == nil {
		cfg.OSVEcosystems = DefaultOSVEcosystems
	}
	if cfg.OSVMaxChanged <= 0 {
		cfg.OSVMaxChanged = 5000
	}
	if cfg.EOLProducts == nil {
		cfg.EOLProducts = DefaultEOLProducts
	}
	if cfg.CVEListMaxDeltaAge <= 0 {
		cfg.CVEListMaxDeltaAge = 14 * 24 * time.Hour
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 2 * time.Minute
	}
	if cfg.Retry.Attempts <= 0 {
		cfg.Retry.Attempts = 4
	}
	if cfg.Retry.Base <= 0 {
		cfg.Retry.Base = 2 * time.Second
	}
	if cfg.Retry.MaxWait <= 0 {
		cfg.Retry.MaxWait = 2 * time.Minute
	}
	if cfg.Backoff.Base <= 0 {
		cfg.Backoff.Base = time.Minute
	}
	if cfg.Backoff.Max <= 0 {
		cfg.Backoff.Max = 6 * time.Hour
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 3
	}
	if cfg.Holder == "" {
		cfg.Holder = defaultHolder()
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 30 * time.Minute
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = 48 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Syncer{cfg: cfg}, nil
}

func defaultClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = 2 * time.Minute
	// No overall timeout: the CVE List's baseline is hundreds of
	// megabytes. A request is bounded by its context instead.
	return &http.Client{Transport: tr}
}

func defaultHolder() string {
	host, _ := os.Hostname()
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Sources returns the configured sources.
func (s *Syncer) Sources() []Source { return slices.Clone(s.cfg.Sources) }

// Holder returns the name of this replica in the sync lease.
func (s *Syncer) Holder() string { return s.cfg.Holder }

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
