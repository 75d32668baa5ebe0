package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/patchline/patchline/internal/alert"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/console"
	"github.com/patchline/patchline/internal/control"
	"github.com/patchline/patchline/internal/control/sqlstore"
	"github.com/patchline/patchline/internal/controlapi"
	"github.com/patchline/patchline/internal/exposure"
	"github.com/patchline/patchline/internal/httpx"
	"github.com/patchline/patchline/internal/pgdb"
	"github.com/patchline/patchline/internal/ratelimit"
	"github.com/patchline/patchline/internal/sqlitedb"
	"github.com/patchline/patchline/internal/wakeup"
)

// openControl opens the control store and returns the handler of the
// control listener: the control API, the agent protocol and the console.
func (m *Main) openControl(ctx context.Context) (http.Handler, error) {
	db, err := openControlStore(ctx, m.Config.ControlDB)
	if err != nil {
		return nil, err
	}
	m.onClose(db.Close)
	// Commands reach online agents through their long polls: the store
	// rings the agents of each command it queues, on this replica's hub
	// or, on PostgreSQL, on every replica's.
	m.wakeup = wakeup.NewHub(0)
	var bell wakeup.Bell = m.wakeup
	if pgdb.IsDSN(m.Config.ControlDB) {
		pb, err := wakeup.NewPGBell(ctx, m.Config.ControlDB, m.wakeup, m.Logger.With("service", "control"))
		if err != nil {
			return nil, err
		}
		m.onClose(func() error { pb.Close(); return nil })
		go pb.Run(ctx)
		bell = pb
	}
	var store control.Store = wakeup.Store{Store: db, Bell: bell}
	trusted, err := ratelimit.ParseProxies(m.Config.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("--trusted-proxies: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "patchline_agent_long_polls",
			Help: "Agents' long polls for commands held by this replica."}, func() float64 { return float64(m.wakeup.Held()) }))
	logger := m.Logger.With("service", "control")
	var exp *exposure.Service
	if m.catalog != nil {
		exp = exposure.NewService(m.catalog, store, logger.With("component", "exposure"))
		if m.index != nil {
			// The lookup listener's package queries read the index too: it
			// is built at their first request (or the fleet's first
			// agent), and follows the catalog within seconds.
			exp.Index, exp.CatalogPoll = m.index, 5*time.Second
		}
		go exp.Run(ctx)
	}
	go alert.NewService(store, store, m.catalog, logger.With("component", "alerts")).Run(ctx)
	api := controlapi.New(controlapi.Config{
		Logger:         logger,
		Agents:         store,
		Commands:       store,
		Rings:          store,
		Rollouts:       store,
		Policies:       store,
		Keys:           store,
		Audit:          store,
		EnrollSecrets:  store,
		Exposure:       store,
		Wakeup:         m.wakeup,
		Catalog:        m.catalog,
		Alerts:         store,
		TrustedProxies: []netip.Prefix(trusted),
		Metrics:        controlapi.NewMetrics(reg),
	})
	// The console: its own handler chain (sessions, CSRF, CSP) on every
	// path that is not the API's, the agents' or the probes'.
	con, err := console.New(ctx, console.Config{
		Logger:         logger.With("component", "console"),
		Admins:         store,
		FirstAdmin:     store,
		Sessions:       store,
		TOTP:           store,
		Keys:           store,
		Audit:          store,
		Agents:         store,
		Commands:       store,
		Rings:          store,
		Rollouts:       store,
		Policies:       store,
		Exposure:       store,
		Catalog:        m.catalog,
		Alerts:         store,
		TrustedProxies: trusted,
	})
	if err != nil {
		return nil, err
	}
	go expireCommands(ctx, store, logger)

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := store.Ping(r.Context()); err != nil {
			logger.Error("health check", "err", err)
			http.Error(w, "control store unavailable", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.Handle("/api/", api)
	mux.Handle("/agent/", api)
	mux.Handle("/", con)
	// A path with "." or ".." segments is refused rather than redirected
	// to a route the client did not name.
	return httpx.RejectUncleanPaths(mux, "/api/", "/agent/"), nil
}

// expireCommands moves commands past their expiry to expired, every
// minute, until ctx is done.
func expireCommands(ctx context.Context, store control.Store, logger *slog.Logger) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := store.ExpireCommands(ctx, time.Now())
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Warn("expire commands", "err", err)
		case n > 0:
			logger.Info("expired commands", "count", n)
		}
	}
}

// openControlStore opens the control store of a DSN: PostgreSQL for a
// postgres:// or postgresql:// URL, else SQLite for a file path or
// sqlite:PATH.
func openControlStore(ctx context.Context, dsn string) (*sqlstore.Store, error) {
	if pgdb.IsDSN(dsn) {
		s, err := sqlstore.OpenPostgres(ctx, dsn)
		if err != nil {
			return nil, fmt.Errorf("control store %s: %w", redactDSN(dsn), err)
		}
		return s, nil
	}
	path, ok := sqlitedb.PathOf(dsn)
	if !ok {
		return nil, fmt.Errorf("control store DSN %q: want a file path, sqlite:PATH or postgres://…", dsn)
	}
	return sqlstore.OpenSQLite(ctx, path)
}

// controlFlags are the flags of the subcommands that work on the control
// store: the same --data and --control-db as serve.
type controlFlags struct {
	data, controlDB string
}

func bindControlFlags(fs *flag.FlagSet, c *controlFlags) {
	fs.StringVar(&c.data, "data", "./patchline-data", "directory of the embedded databases")
	fs.StringVar(&c.controlDB, "control-db", "", "control store DSN: a file path, sqlite:PATH or postgres://… (default DATA/control.db)")
}

// open opens the control store the flags name, by default the one serve
// opens in the data directory.
func (c *controlFlags) open(ctx context.Context) (control.Store, error) {
	dsn := c.controlDB
	if dsn == "" {
		dsn = "sqlite:" + filepath.Join(c.data, "control.db")
	}
	return openControlStore(ctx, dsn)
}

// controlCommand is a subcommand of keys, enroll, admin or audit: it
// parses the control flags and its own, opens the control store and runs.
type controlCommand struct {
	name string // "keys revoke"
	// args is how many positional arguments it takes.
	args int
	// flags binds its own flags, when it has some.
	flags func(fs *flag.FlagSet)
	// check, when set, checks the flags before the store is opened.
	check func(env *Env) error
	run   func(ctx context.Context, env *Env, store control.Store, pos []string) error
}

// exec parses args and runs c on the control store they name.
func (c controlCommand) exec(ctx context.Context, env *Env, args []string) error {
	var cf controlFlags
	fs := newFlags(c.name, env)
	bindControlFlags(fs, &cf)
	if c.flags != nil {
		c.flags(fs)
	}
	pos, err := parseArgs(fs, env, args)
	if err != nil {
		return err
	}
	if len(pos) != c.args {
		return errUsage
	}
	if c.check != nil {
		if err := c.check(env); err != nil {
			return err
		}
	}
	store, err := cf.open(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	return c.run(ctx, env, store, pos)
}

// runControlCommand runs the subcommand args[0] of cmds.
func runControlCommand(ctx context.Context, env *Env, args []string, cmds ...controlCommand) error {
	if len(args) == 0 {
		return errUsage
	}
	for _, c := range cmds {
		if _, sub, _ := strings.Cut(c.name, " "); sub == args[0] {
			return c.exec(ctx, env, args[1:])
		}
	}
	return errUsage
}

// parseArgs parses flags and positional arguments in any order: flags may
// follow the positional arguments (`keys revoke KEYID --data DIR`).
func parseArgs(fs *flag.FlagSet, env *Env, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, env, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// cliActor names the user running the command line in the audit log.
func cliActor(env *Env) string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	if u := env.Getenv("USER"); u != "" {
		return "cli:" + u
	}
	return "cli"
}

// appendAdminAudit records an action of the command line.
func appendAdminAudit(ctx context.Context, log audit.Log, env *Env, ev audit.Event) error {
	e := &audit.Entry{Time: time.Now(), Actor: cliActor(env), ClientAddress: "local"}
	if err := e.SetEvent(ev); err != nil {
		return err
	}
	return log.AppendAudit(ctx, e)
}

// parseLifetime parses a Go duration (720h, 90m) or a number of days (30d).
func parseLifetime(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%q: want a duration such as 720h or 30d", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q: want a positive duration such as 720h or 30d", s)
	}
	return d, nil
}

// formatOptionalTime writes t for a table, "-" for none.
func formatOptionalTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
