package upstream

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/feed"
)

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
