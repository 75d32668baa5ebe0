package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/patchline/patchline/internal/sources"
	"github.com/patchline/patchline/internal/upstream"
)

func init() {
	commands["sync"] = command{
		usage: "[--once] [--data DIR] [--catalog-db DSN] [--nvd-api-key KEY] [--osv-ecosystems LIST] [--eol-products LIST] [SOURCE[=URL] ...]",
		run:   runSync,
	}
}

// SyncOptions are the options of the upstream sync shared by `patchline
// sync` and `patchline serve --sync-every`.
type SyncOptions struct {
	NVDAPIKey     string // raises the NVD rate limit from 5 to 50 requests per 30 s
	OSVEcosystems string // comma-separated OSV ecosystems; empty means the defaults
	EOLProducts   string // comma-separated endoflife.date products; empty means the defaults
}

// bindSyncFlags defines the flags of SyncOptions on fs.
func bindSyncFlags(fs *flag.FlagSet, o *SyncOptions) {
	fs.StringVar(&o.NVDAPIKey, "nvd-api-key", "", "NVD API key: 50 requests per 30 s instead of 5")
	fs.StringVar(&o.OSVEcosystems, "osv-ecosystems", "", "comma-separated OSV ecosystems to sync (default "+strings.Join(upstream.DefaultOSVEcosystems, ",")+")")
	fs.StringVar(&o.EOLProducts, "eol-products", "", "comma-separated endoflife.date products to sync (default "+strings.Join(upstream.DefaultEOLProducts, ",")+")")
}

// config returns the upstream configuration of the options.
func (o SyncOptions) config(store upstream.Store, sources []upstream.Source, logger *slog.Logger) upstream.Config {
	return upstream.Config{
		Store:         store,
		Sources:       sources,
		Logger:        logger,
		NVDAPIKey:     o.NVDAPIKey,
		OSVEcosystems: splitList(o.OSVEcosystems),
		EOLProducts:   splitList(o.EOLProducts),
	}
}

// splitList splits a comma-separated list; nil for an empty one.
func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// parseSyncSources parses SOURCE or SOURCE=URL arguments; none means every
// source at its default URL (nil).
func parseSyncSources(args []string) ([]upstream.Source, error) {
	var out []upstream.Source
	for _, a := range args {
		src, err := upstream.ParseSource(a)
		if err != nil {
			return nil, err
		}
		out = append(out, src)
	}
	return out, nil
}

func runSync(ctx context.Context, env *Env, args []string) error {
	fs := newFlags("sync", env)
	var (
		data, dsn, level string
		opts             SyncOptions
		once             bool
	)
	fs.BoolVar(&once, "once", true, "sync each source once and exit (what sync always does; serve --sync-every keeps syncing)")
	fs.StringVar(&data, "data", "./patchline-data", "directory of the embedded databases")
	fs.StringVar(&dsn, "catalog-db", "", "catalog store DSN (default DATA/catalog.db)")
	fs.StringVar(&level, "log-level", "warn", "debug, info, warn or error")
	bindSyncFlags(fs, &opts)
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, "usage: patchline sync %s\n\n", commands["sync"].usage)
		fmt.Fprintf(env.Stderr, "Syncs each SOURCE (all when none is named) from its upstream, fetching only\n"+
			"what changed since the last sync. SOURCE=URL syncs from a mirror of the upstream,\n"+
			"or from a local directory or file, ingested whole when it changed.\n\nsources: %s\n\nflags:\n",
			strings.Join(upstream.Names(), ", "))
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, env, args); err != nil {
		return err
	}
	if !once {
		return errors.New("--once=false: patchline sync syncs each source once; serve --sync-every DURATION keeps syncing")
	}
	syncSources, err := parseSyncSources(fs.Args())
	if err != nil {
		return err
	}
	if dsn == "" {
		dsn = "sqlite:" + filepath.Join(data, "catalog.db")
	}
	db, err := openCatalogDSN(ctx, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	s, err := upstream.New(opts.config(db, syncSources, newLogger(env.Stderr, level)))
	if err != nil {
		return err
	}
	results, err := s.SyncOnce(ctx)
	if err != nil {
		return err
	}
	failed := printSyncResults(env.Stdout, results)
	var names []string
	for _, r := range results {
		names = append(names, r.Source)
	}
	fmt.Fprintln(env.Stdout)
	if err := printSources(ctx, env.Stdout, sources.New(db, sources.Options{Feeds: names})); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d sources failed and kept their previous data", failed, len(results))
	}
	return nil
}

// printSyncResults prints one line per source, and the rejected records,
// and returns the number of sources that failed.
func printSyncResults(w io.Writer, results []upstream.Result) int {
	failed := 0
	for _, r := range results {
		transfer := fmt.Sprintf("%d requests, %s, %.1fs", r.Requests, byteSize(r.Bytes), r.Duration.Seconds())
		switch {
		case r.Err != nil:
			failed++
			fmt.Fprintf(w, "%s: failed: %v (%s)\n", r.Source, r.Err, transfer)
		case r.Ingest == nil:
			fmt.Fprintf(w, "%s: unchanged: %s (%s)\n", r.Source, r.Summary, transfer)
		default:
			fmt.Fprintf(w, "%s: %d records changed: %s (%s)\n", r.Source, r.RecordsChanged, r.Summary, transfer)
		}
		if r.Ingest == nil {
			continue
		}
		for _, c := range r.Ingest.Sources {
			fmt.Fprintf(w, "  %s: read %d, added %d, changed %d, unchanged %d, rejected %d\n",
				c.Source, c.Read, c.Added, c.Changed, c.Unchanged, c.Rejected)
		}
		for _, rej := range r.Ingest.Rejections {
			fmt.Fprintf(w, "  rejected %s %s: %v\n", rej.Source, rej.Name, rej.Err)
		}
	}
	return failed
}

// printSources prints the table of the catalog's sources: the same as the
// front page's and /api/v1/sources.
func printSources(ctx context.Context, w io.Writer, rep *sources.Reporter) error {
	now := rep.Now()
	list, err := rep.SourcesAt(ctx, now)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tRECORDS\tDATA\tUPSTREAM\tFRESHNESS\tLAST ERROR")
	for _, s := range list {
		records, upstream, lastErr := "-", cmp.Or(s.UpstreamText(now), "-"), "-"
		if s.Records != nil {
			records = strconv.Itoa(*s.Records)
		}
		if s.Error != nil {
			lastErr = *s.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, records, s.DataText(now), upstream, s.Freshness, lastErr)
	}
	return tw.Flush()
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f kB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// minSyncEvery is the shortest interval of the background sync: the
// upstreams publish hourly at most, and the NVD asks for no more than one
// sync every two hours.
const minSyncEvery = time.Minute

// validateSync checks the sync options of serve.
func (c *ServeConfig) validateSync() error {
	if c.SyncEvery < 0 || (c.SyncEvery > 0 && c.SyncEvery < minSyncEvery) {
		return fmt.Errorf("--sync-every %s: want 0 (off) or at least %s", c.SyncEvery, minSyncEvery)
	}
	if _, err := parseSyncSources(splitList(c.SyncSources)); err != nil {
		return fmt.Errorf("--sync-sources: %w", err)
	}
	return nil
}

// startSync starts the background sync of serve when --sync-every is set.
// The loop has a catalog handle of its own and stops at Close.
func (m *Main) startSync(ctx context.Context) error {
	if m.Config.SyncEvery <= 0 {
		return nil
	}
	sources, err := parseSyncSources(splitList(m.Config.SyncSources))
	if err != nil {
		return err
	}
	db, err := openCatalogDSN(ctx, m.Config.CatalogDB)
	if err != nil {
		return err
	}
	m.onClose(db.Close)
	logger := m.Logger.With("service", "sync")
	cfg := m.Config.Sync.config(db, sources, logger)
	cfg.Metrics = m.syncMetrics
	cfg.StaleAfter = m.syncStaleAfter()
	s, err := upstream.New(cfg)
	if err != nil {
		return err
	}
	loopCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Loop(loopCtx, m.Config.SyncEvery); !errors.Is(err, context.Canceled) {
			logger.Error("sync loop stopped", "err", err)
		}
	}()
	m.onClose(func() error {
		cancel()
		<-done
		return nil
	})
	return nil
}

// syncStaleAfter is the age of a source's last success beyond which the
// status calls it stale: three sync intervals, and never less than the
// default 48 hours of a catalog synced by cron.
func (m *Main) syncStaleAfter() time.Duration {
	return max(3*m.Config.SyncEvery, 48*time.Hour)
}
