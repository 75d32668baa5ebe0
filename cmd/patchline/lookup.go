package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/patchline/patchline/internal/exposure"
	"github.com/patchline/patchline/internal/lookupapi"
	"github.com/patchline/patchline/internal/ratelimit"
	"github.com/patchline/patchline/internal/sources"
	"github.com/patchline/patchline/internal/upstream"
)

// openLookup opens the catalog and returns the handler of the lookup
// listener: the API under /api/v1, the human pages, /healthz and /metrics.
func (m *Main) openLookup(ctx context.Context) (http.Handler, error) {
	rate, err := ratelimit.Parse(m.Config.RateLimit)
	if err != nil {
		return nil, fmt.Errorf("--rate-limit: %w", err)
	}
	proxies, err := ratelimit.ParseProxies(m.Config.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("--trusted-proxies: %w", err)
	}
	db, err := m.openCatalog(ctx)
	if err != nil {
		return nil, err
	}
	m.catalog = db
	// Lists and walks wait for the summary index of the catalog as it is:
	// built now, it spares the first of them the wait.
	go func() {
		if err := db.Warm(ctx); err != nil && ctx.Err() == nil {
			m.Logger.Warn("catalog summary index not built", "err", err)
		}
	}()
	// One index of the catalog's fixes serves the package queries of this
	// listener and the exposure of the control service's agents, which
	// keeps it fresh (openControl).
	m.index = exposure.NewIndex()
	var limiter ratelimit.Limiter
	switch {
	case rate.N == 0:
		m.Logger.Info("lookup rate limit is off")
	case m.Config.Redis != "":
		rl, err := ratelimit.OpenRedis(ctx, m.Config.Redis, rate, ratelimit.RedisOptions{
			Prefix: "patchline:lookup:",
			Logger: m.Logger.With("service", "lookup"),
		})
		if err != nil {
			return nil, fmt.Errorf("--redis: %w", err)
		}
		m.onClose(rl.Close)
		limiter = rl
		m.Logger.Info("lookup rate limit", "rate", rate.String(), "store", "redis")
	default:
		limiter = ratelimit.NewLocal(rate)
		m.Logger.Info("lookup rate limit", "rate", rate.String(), "store", "local")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	if rl, ok := limiter.(*ratelimit.Redis); ok {
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "patchline_ratelimit_shared",
				Help: "1 while the rate limit is shared through Redis, 0 while this replica falls back to its local limit.",
			}, func() float64 {
				if rl.Shared() {
					return 1
				}
				return 0
			}),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "patchline_ratelimit_fallbacks_total",
				Help: "Times this replica fell back to its local rate limit because Redis could not be reached.",
			}, func() float64 { return float64(rl.Fallbacks()) }),
		)
	}
	statusOpt := upstream.StatusOptions{StaleAfter: max(3*m.Config.SyncEvery, 48*time.Hour), Logger: m.Logger}
	if m.Config.SyncEvery > 0 {
		// The sources the background sync follows are listed even before
		// their first sync, as stale.
		sources, err := parseSyncSources(splitList(m.Config.SyncSources))
		if err != nil {
			return nil, fmt.Errorf("--sync-sources: %w", err)
		}
		if len(sources) == 0 {
			sources = upstream.Defaults()
		}
		for _, src := range sources {
			statusOpt.Sources = append(statusOpt.Sources, src.Name)
		}
	}
	if m.syncMetrics, err = upstream.RegisterMetrics(reg, db, statusOpt); err != nil {
		return nil, err
	}
	reporter := sources.New(db, sources.Options{
		Feeds:      statusOpt.Sources,
		FreshFor:   max(2*m.Config.SyncEvery, 6*time.Hour),
		StaleAfter: statusOpt.StaleAfter,
	})
	if err := sources.RegisterMetrics(reg, reporter); err != nil {
		return nil, err
	}
	go func() {
		if err := reporter.Warm(ctx); err != nil && ctx.Err() == nil {
			m.Logger.Warn("count the catalog's sources", "err", err)
		}
	}()
	return lookupapi.New(lookupapi.Config{
		Catalog:    db,
		Logger:     m.Logger.With("service", "lookup"),
		PublicURL:  lookupPublicURL(m.Config.PublicURL, m.Config.CVEAddr, m.Config.TLS()),
		MaxStreams: m.Config.MaxStreams,
		Limiter:    limiter,
		Proxies:    proxies,
		Registry:   reg,
		Status:     upstream.StatusHandler(db, db, statusOpt),
		Sources:    reporter,
		Packages:   m.index,
	})
}

// lookupPublicURL is --public-url, or by default http://CVE-ADDR/api/v1
// (https:// when the listener serves TLS) when the address names a host
// and a port a client can use. For a wildcard host or port 0 it is empty:
// the links then use the Host header of each request.
func lookupPublicURL(publicURL, addr string, tls bool) string {
	if publicURL != "" {
		return publicURL
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "0" {
		return ""
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		return ""
	}
	scheme := "http://"
	if tls {
		scheme = "https://"
	}
	return scheme + net.JoinHostPort(host, port) + lookupapi.BasePath
}
