package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/patchline/patchline/internal/ingest"
)

func init() {
	commands["ingest"] = command{
		usage: "[--data DIR] [--catalog-db DSN] [--sample] SOURCE=LOCATION ...",
		run:   runIngest,
	}
}

func runIngest(ctx context.Context, env *Env, args []string) error {
	fs := newFlags("ingest", env)
	var (
		data, dsn  string
		withSample bool
	)
	fs.StringVar(&data, "data", "./patchline-data", "directory of the embedded databases")
	fs.StringVar(&dsn, "catalog-db", "", "catalog store DSN (default DATA/catalog.db)")
	fs.BoolVar(&withSample, "sample", false, "load the bundled sample catalog")
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, "usage: patchline ingest %s\n\nsources: %v\n\nflags:\n", commands["ingest"].usage, ingest.Names())
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, env, args); err != nil {
		return err
	}
	if dsn == "" {
		dsn = "sqlite:" + filepath.Join(data, "catalog.db")
	}
	var sources []ingest.Source
	if withSample {
		sources = append(sources, ingest.SampleSources()...)
	}
	for _, arg := range fs.Args() {
		src, err := ingest.ParseSource(arg)
		if err != nil {
			return err
		}
		sources = append(sources, src)
	}
	if len(sources) == 0 {
		return errUsage
	}
	db, err := openCatalogDSN(ctx, dsn)
	if err != nil {
		return err
	}
	defer db.Close()

	tuneGC()
	opt := ingest.Options{Rebuild: true}
	if isTerminal(env.Stderr) {
		opt.Progress = progressPrinter(env.Stderr)
	}
	res, err := ingest.Run(ctx, db, sources, opt)
	if opt.Progress != nil {
		fmt.Fprint(env.Stderr, "\r\033[K")
	}
	for _, c := range res.Sources {
		fmt.Fprintf(env.Stdout, "%s: read %d, added %d, changed %d, unchanged %d, rejected %d, %.1fs\n",
			c.Source, c.Read, c.Added, c.Changed, c.Unchanged, c.Rejected, c.Seconds)
	}
	for _, r := range res.Rejections {
		fmt.Fprintf(env.Stdout, "rejected %s %s: %v\n", r.Source, r.Name, r.Err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "catalog: %d records merged, %d added or changed, %d removed\n", res.Merged, res.Changed, res.Removed)
	return nil
}

// tuneGC trades memory for collector time during an ingest, which
// allocates a great deal and keeps little (about 130 MB live at most for
// the 300,000 CVEs of make bench): the heap may grow to five times what is
// live, up to a soft limit of 320 MiB, unless GOGC or GOMEMLIMIT say
// otherwise. With the catalog's page cache, allocated outside it, a new
// catalog's ingest stays under 512 MB; a limit of 1 GiB saved a tenth of
// the time for twice the memory (bench/RESULTS.md, 2026-11-24).
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(320 << 20)
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// progressPrinter returns an ingest progress callback that rewrites one
// terminal line at most a few times a second.
func progressPrinter(w io.Writer) func(string, int) {
	var mu sync.Mutex
	var last time.Time
	return func(source string, read int) {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) < 200*time.Millisecond {
			return
		}
		last = time.Now()
		fmt.Fprintf(w, "\r\033[K%s: %d records read", source, read)
	}
}
