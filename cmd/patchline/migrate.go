package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/control/sqlstore"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/pgdb"
	"github.com/patchline/patchline/internal/sqlitedb"
)

func init() {
	commands["migrate"] = command{
		usage: "--from DSN --to DSN [--store catalog|control]",
		run:   runMigrate,
	}
}

// storeMigrations copy one store from a backend to another, by --store
// name. Each copies into an empty store, in one transaction of the target,
// and checks the copy.
var storeMigrations = map[string]func(ctx context.Context, env *Env, from, to string) error{
	"catalog": migrateCatalog,
	"control": migrateControl,
}

func runMigrate(ctx context.Context, env *Env, args []string) error {
	fs := newFlags("migrate", env)
	var from, to, store string
	fs.StringVar(&from, "from", "", "DSN of the store to copy: a file path, sqlite:PATH or postgres://…")
	fs.StringVar(&to, "to", "", "DSN of the store to copy into, which must be empty (created when missing)")
	fs.StringVar(&store, "store", "catalog", "the store to copy: catalog or control")
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, "usage: patchline migrate %s\n\n", commands["migrate"].usage)
		fmt.Fprintln(env.Stderr, "Copies a store from one backend to another, SQLite to PostgreSQL or back.")
		fmt.Fprintln(env.Stderr, "Stop ingest and sync (catalog) or serve (control) on the source while it runs.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, env, args); err != nil {
		return err
	}
	if fs.NArg() > 0 || from == "" || to == "" {
		return errUsage
	}
	if from == to {
		return fmt.Errorf("--from and --to name the same store %s", redactDSN(from))
	}
	migrate, ok := storeMigrations[store]
	if !ok {
		return fmt.Errorf("--store %q: want catalog or control", store)
	}
	return migrate(ctx, env, from, to)
}

// migrateControl copies the control store at from into the empty control
// store at to (see sqlstore.Copy): every table, ids, digests, hashes and
// times as they are, in one transaction of the target, so that the audit
// chain verifies and keys and agent credentials authenticate on the copy.
func migrateControl(ctx context.Context, env *Env, from, to string) error {
	if path, ok := sqlitedb.PathOf(from); ok && !pgdb.IsDSN(from) {
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("source control store: %w", err)
		}
	}
	start := time.Now()
	src, err := openControlStore(ctx, from)
	if err != nil {
		return fmt.Errorf("open source control store: %w", err)
	}
	defer src.Close()
	dst, err := openControlStore(ctx, to)
	if err != nil {
		return fmt.Errorf("open target control store: %w", err)
	}
	defer dst.Close()
	counts, err := sqlstore.Copy(ctx, src, dst)
	if err != nil {
		return fmt.Errorf("target control store %s: %w", redactDSN(to), err)
	}
	fmt.Fprintf(env.Stdout, "control store copied from %s to %s in %.1fs\n", redactDSN(from), redactDSN(to), time.Since(start).Seconds())
	for _, c := range counts {
		fmt.Fprintf(env.Stdout, "%s: %d\n", c.Table, c.Rows)
	}
	fmt.Fprintln(env.Stdout, "audit log verified")
	return nil
}

// migrateCatalog copies the catalog at from into the empty catalog at to:
// facts, lifecycles, records as they are served (content hashes and
// modification times included), the ingest runs and the sync states. It
// writes everything but the sync states in one transaction, so that a
// failed copy leaves the target empty, and then compares the stats of both.
func migrateCatalog(ctx context.Context, env *Env, from, to string) error {
	if path, ok := sqlitedb.PathOf(from); ok && !pgdb.IsDSN(from) {
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("source catalog: %w", err)
		}
	}
	start := time.Now()
	src, err := openCatalogDSN(ctx, from)
	if err != nil {
		return fmt.Errorf("open source catalog: %w", err)
	}
	defer src.Close()
	dst, err := openCatalogDSN(ctx, to)
	if err != nil {
		return fmt.Errorf("open target catalog: %w", err)
	}
	defer dst.Close()
	if err := checkEmpty(ctx, dst); err != nil {
		return fmt.Errorf("target catalog %s: %w", redactDSN(to), err)
	}

	tx, err := dst.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	sink := &catalogCopy{tx: tx}
	if err := src.Dump(ctx, sink); err != nil {
		return fmt.Errorf("copy catalog: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("copy catalog: %w", err)
	}
	for _, s := range sink.states {
		if err := dst.PutSyncState(ctx, s); err != nil {
			return fmt.Errorf("copy catalog: %w", err)
		}
	}

	want, err := src.Stats(ctx)
	if err != nil {
		return err
	}
	got, err := dst.Stats(ctx)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("copy catalog: the copy holds %+v, the source %+v", got, want)
	}
	printCopy(env.Stdout, from, to, sink, time.Since(start))
	return nil
}

// checkEmpty fails unless the catalog holds nothing at all.
func checkEmpty(ctx context.Context, c catalogStore) error {
	stats, err := c.Stats(ctx)
	if err != nil {
		return err
	}
	states, err := c.ListSyncStates(ctx)
	if err != nil {
		return err
	}
	if stats.Records > 0 || stats.Facts > 0 || !stats.Updated.IsZero() || len(states) > 0 {
		return fmt.Errorf("not empty (%d records, %d facts, %d sync states): migrate copies into an empty catalog only",
			stats.Records, stats.Facts, len(states))
	}
	return nil
}

func printCopy(w io.Writer, from, to string, c *catalogCopy, d time.Duration) {
	fmt.Fprintf(w, "catalog copied from %s to %s in %.1fs\n", redactDSN(from), redactDSN(to), d.Seconds())
	fmt.Fprintf(w, "facts: %d\nlifecycles: %d\nrecords: %d\ningest runs: %d\nsync states: %d\n",
		c.facts, c.lifecycles, c.records, c.runs, len(c.states))
}

// catalogCopy writes the rows of a catalog dump into a write transaction of
// the target, counting them. Sync states wait for the transaction to end:
// on SQLite they would need the connection it holds.
type catalogCopy struct {
	tx                               catalog.Tx
	facts, lifecycles, records, runs int
	states                           []catalog.SyncState
}

var _ catalog.DumpTarget = (*catalogCopy)(nil)

// PutFacts implements catalog.DumpTarget.
func (c *catalogCopy) PutFacts(ctx context.Context, key int64, f *cve.Facts) (catalog.Change, error) {
	c.facts++
	return c.tx.PutFacts(ctx, key, f)
}

// PutLifecycle implements catalog.DumpTarget.
func (c *catalogCopy) PutLifecycle(ctx context.Context, l *cve.Lifecycle) (catalog.Change, error) {
	c.lifecycles++
	return c.tx.PutLifecycle(ctx, l)
}

// PutRecord implements catalog.DumpTarget.
func (c *catalogCopy) PutRecord(ctx context.Context, r *catalog.Row) error {
	c.records++
	return c.tx.PutRecord(ctx, r)
}

// LogRun implements catalog.DumpTarget.
func (c *catalogCopy) LogRun(ctx context.Context, run catalog.Run) error {
	c.runs++
	return c.tx.LogRun(ctx, run)
}

// PutSyncState implements catalog.DumpTarget.
func (c *catalogCopy) PutSyncState(ctx context.Context, s catalog.SyncState) error {
	c.states = append(c.states, s)
	return nil
}

// redactDSN returns dsn with the password of a URL replaced by xxxxx.
func redactDSN(dsn string) string {
	if !pgdb.IsDSN(dsn) {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://…"
	}
	return u.Redacted()
}
