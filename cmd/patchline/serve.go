package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/exposure"
	"github.com/patchline/patchline/internal/lookupapi"
	"github.com/patchline/patchline/internal/upstream"
	"github.com/patchline/patchline/internal/wakeup"
)

func init() {
	commands["serve"] = command{
		usage: "[--data DIR] [--catalog-db DSN] [--control-db DSN] [--cve-addr HOST:PORT] [--control-addr HOST:PORT] [--tls-cert FILE --tls-key FILE] [--rate-limit N/DURATION|off] [--redis URL] [--public-url URL] [--max-streams N] [--memory-limit SIZE|off] [--sync-every DURATION] [--nvd-api-key KEY]",
		run:   runServe,
	}
}

// ServeConfig is the typed configuration of `patchline serve`.
type ServeConfig struct {
	Data        string // directory of the SQLite files
	CatalogDB   string // DSN of the catalog store; default sqlite:<Data>/catalog.db
	ControlDB   string // DSN of the control store; default sqlite:<Data>/control.db
	CVEAddr     string // listener of the lookup API
	ControlAddr string // listener of the control service and console
	RateLimit   string // N/DURATION or off
	Redis       string // redis:// URL of a shared rate limit
	PublicURL   string // base URL of the lookup service as clients see it
	// TrustedProxies are the addresses (CIDRs) whose X-Forwarded-For is
	// believed when finding a client's address.
	TrustedProxies string
	LogLevel       string
	// SyncEvery is the interval of the background sync of the upstream
	// feeds; 0 turns it off.
	SyncEvery time.Duration
	// SyncSources lists the sources synced, SOURCE or SOURCE=URL,
	// comma-separated; empty means every source at its default URL.
	SyncSources string
	// Sync are the options of the sync.
	Sync SyncOptions
	// TLSCert and TLSKey are PEM files of the certificate (chain first,
	// then intermediates) and private key both listeners serve TLS with;
	// both empty means plain HTTP.
	TLSCert, TLSKey string
	// MaxStreams bounds the bulk streams the lookup API serves at once;
	// 0 means lookupapi.DefaultMaxStreams.
	MaxStreams int
	// MemoryLimit is the soft limit of the Go runtime's memory: a size
	// ("256MiB", "1GiB", bytes without unit) or "off". GOMEMLIMIT, when
	// set, wins over it.
	MemoryLimit string

	// memoryLimit is MemoryLimit in bytes, 0 for off, as Validate read it.
	memoryLimit int64

	// tlsCert is the certificate Validate loaded.
	tlsCert *tls.Certificate
}

// TLS reports whether the listeners serve TLS.
func (c *ServeConfig) TLS() bool { return c.tlsCert != nil }

// bindServeFlags defines the flags of serve on fs.
func bindServeFlags(fs *flag.FlagSet, c *ServeConfig) {
	fs.StringVar(&c.Data, "data", "./patchline-data", "directory of the embedded databases")
	fs.StringVar(&c.CatalogDB, "catalog-db", "", "catalog store DSN: a file path, sqlite:PATH or postgres://… (default DATA/catalog.db)")
	fs.StringVar(&c.ControlDB, "control-db", "", "control store DSN (default DATA/control.db)")
	fs.StringVar(&c.CVEAddr, "cve-addr", "127.0.0.1:8080", "listen address of the CVE lookup API")
	fs.StringVar(&c.ControlAddr, "control-addr", "127.0.0.1:8081", "listen address of the control service and console")
	fs.StringVar(&c.RateLimit, "rate-limit", "600/1m", "lookup API rate limit per client: N/DURATION, or off")
	fs.StringVar(&c.Redis, "redis", "", "redis:// URL for a rate limit shared by all replicas")
	fs.StringVar(&c.PublicURL, "public-url", "", "base URL of the lookup service as clients see it (default http://CVE-ADDR/api/v1)")
	fs.StringVar(&c.TrustedProxies, "trusted-proxies", "", "comma-separated CIDRs of reverse proxies whose X-Forwarded-For is trusted")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "PEM certificate (with its intermediates) to serve both listeners over TLS; needs --tls-key")
	fs.StringVar(&c.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.IntVar(&c.MaxStreams, "max-streams", lookupapi.DefaultMaxStreams, "bulk streams of the lookup API served at once per replica; more get 503")
	fs.StringVar(&c.MemoryLimit, "memory-limit", defaultMemoryLimit, "soft limit of the Go heap, such as 256MiB or 1GiB, or off (GOMEMLIMIT wins when set)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&c.SyncEvery, "sync-every", 0, "sync the catalog from the upstream feeds at this interval (0: off)")
	fs.StringVar(&c.SyncSources, "sync-sources", "", "comma-separated SOURCE or SOURCE=URL to sync (default all, at their upstream URLs)")
	bindSyncFlags(fs, &c.Sync)
}

// Validate checks the configuration and fills in derived defaults.
func (c *ServeConfig) Validate() error {
	if c.CatalogDB == "" {
		c.CatalogDB = "sqlite:" + filepath.Join(c.Data, "catalog.db")
	}
	if c.ControlDB == "" {
		c.ControlDB = "sqlite:" + filepath.Join(c.Data, "control.db")
	}
	for _, a := range []struct{ name, addr string }{{"--cve-addr", c.CVEAddr}, {"--control-addr", c.ControlAddr}} {
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			return fmt.Errorf("%s %q: %v", a.name, a.addr, err)
		}
	}
	if c.PublicURL != "" && !strings.HasPrefix(c.PublicURL, "http://") && !strings.HasPrefix(c.PublicURL, "https://") {
		return fmt.Errorf("--public-url %q: want an http(s) URL", c.PublicURL)
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	switch {
	case c.MaxStreams < 0:
		return fmt.Errorf("--max-streams %d: want at least 1", c.MaxStreams)
	case c.MaxStreams == 0:
		c.MaxStreams = lookupapi.DefaultMaxStreams
	}
	if c.MemoryLimit == "" {
		c.MemoryLimit = defaultMemoryLimit
	}
	limit, err := parseSize(c.MemoryLimit)
	if err != nil {
		return fmt.Errorf("--memory-limit %q: %v", c.MemoryLimit, err)
	}
	c.memoryLimit = limit
	if err := c.loadTLS(); err != nil {
		return err
	}
	return c.validateSync()
}

// loadTLS loads the certificate and key of --tls-cert and --tls-key.
func (c *ServeConfig) loadTLS() error {
	switch {
	case c.TLSCert == "" && c.TLSKey == "":
		c.tlsCert = nil
		return nil
	case c.TLSCert == "":
		return errors.New("--tls-key needs --tls-cert: give both to serve TLS, or neither")
	case c.TLSKey == "":
		return errors.New("--tls-cert needs --tls-key: give both to serve TLS, or neither")
	}
	cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
	if err != nil {
		return fmt.Errorf("--tls-cert %s, --tls-key %s: %w", c.TLSCert, c.TLSKey, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return fmt.Errorf("--tls-cert %s: %w", c.TLSCert, err)
		}
	}
	c.tlsCert = &cert
	return nil
}

// serverTLSConfig is the TLS configuration of both listeners: TLS 1.2 at
// least and, for 1.2, only ECDHE key exchange with AEAD ciphers (TLS 1.3
// has nothing else).
func serverTLSConfig(cert *tls.Certificate) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{*cert},
		MinVersion:   tls.VersionTLS12,
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
			tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
	}
}

func runServe(ctx context.Context, env *Env, args []string) error {
	var c ServeConfig
	fs := newFlags("serve", env)
	bindServeFlags(fs, &c)
	if err := parseFlags(fs, env, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errUsage
	}
	if err := c.Validate(); err != nil {
		return err
	}
	m := NewMain(c, newLogger(env.Stderr, c.LogLevel))
	defer m.Close()
	if env.Getenv("GOMEMLIMIT") == "" && c.memoryLimit > 0 {
		debug.SetMemoryLimit(c.memoryLimit)
		m.Logger.Info("memory limit", "bytes", c.memoryLimit)
	}
	return m.Run(ctx)
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

// Main is the serve program: both services on their listeners.
type Main struct {
	Config ServeConfig
	Logger *slog.Logger

	// syncMetrics, when set before the sync starts, counts the syncs of
	// the background loop (see upstream.RegisterMetrics).
	syncMetrics *upstream.Metrics

	// catalog is the catalog openLookup opened, which the control
	// service reads for endpoint exposure.
	catalog cve.Catalog
	// index is the package index of the catalog, which the lookup API's
	// package queries read and the exposure service refreshes.
	index *exposure.Index

	// wakeup holds the agents' long polls of the control listener.
	wakeup *wakeup.Hub

	closers []func() error
}

// NewMain returns a Main for c.
func NewMain(c ServeConfig, logger *slog.Logger) *Main {
	return &Main{Config: c, Logger: logger}
}

// onClose registers fn to run at Close, in reverse order of registration.
func (m *Main) onClose(fn func() error) { m.closers = append(m.closers, fn) }

// Run opens the stores, starts both listeners and serves until ctx is done,
// then shuts the servers down gracefully.
func (m *Main) Run(ctx context.Context) error {
	lookup, err := m.openLookup(ctx)
	if err != nil {
		return err
	}
	control, err := m.openControl(ctx)
	if err != nil {
		return err
	}
	if err := m.startSync(ctx); err != nil {
		return err
	}
	servers := []*namedServer{
		{name: "lookup", addr: m.Config.CVEAddr, handler: lookup},
		{name: "control", addr: m.Config.ControlAddr, handler: control},
	}
	if c := m.Config.tlsCert; c != nil {
		sum := sha256.Sum256(c.Leaf.RawSubjectPublicKeyInfo)
		// The pin is what agents take in --pin-sha256.
		m.Logger.Info("serving TLS", "subject", c.Leaf.Subject.String(), "not_after", c.Leaf.NotAfter.UTC().Format(time.RFC3339),
			"pin_sha256", base64.StdEncoding.EncodeToString(sum[:]))
		if time.Now().After(c.Leaf.NotAfter) {
			m.Logger.Warn("the TLS certificate has expired", "not_after", c.Leaf.NotAfter.UTC().Format(time.RFC3339))
		}
		for _, s := range servers {
			s.tls = serverTLSConfig(c)
		}
	}
	errc := make(chan error, len(servers))
	for _, s := range servers {
		if err := s.listen(); err != nil {
			return err
		}
		m.Logger.Info("listening", "service", s.name, "addr", s.ln.Addr().String(), "tls", s.tls != nil)
		go func() { errc <- s.serve() }()
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	m.Logger.Info("shutting down")
	if m.wakeup != nil {
		// Held long polls end at once rather than hold the shutdown.
		m.wakeup.Close()
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, s := range servers {
		if err := s.srv.Shutdown(shutdownCtx); err != nil {
			m.Logger.Warn("shutdown", "service", s.name, "err", err)
		}
	}
	return nil
}

// Close releases what Run opened.
func (m *Main) Close() error {
	var errsOut []error
	for i := len(m.closers) - 1; i >= 0; i-- {
		errsOut = append(errsOut, m.closers[i]())
	}
	m.closers = nil
	return errors.Join(errsOut...)
}

type namedServer struct {
	name, addr string
	handler    http.Handler
	tls        *tls.Config // nil: plain HTTP
	ln         net.Listener
	srv        *http.Server
}

func (s *namedServer) listen() error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("%s listener: %w", s.name, err)
	}
	s.ln = ln
	s.srv = &http.Server{
		Handler:           s.handler,
		TLSConfig:         s.tls,
		ReadHeaderTimeout: 10 * time.Second,
		// A request is read within a minute; the one route that takes
		// longer (an agent's log bundle, 32 MiB over a slow link) moves
		// its own deadline (controlapi.LogBundleReadTimeout).
		ReadTimeout:    60 * time.Second,
		WriteTimeout:   10 * time.Minute, // bulk streams of the whole catalog
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
	}
	return nil
}

func (s *namedServer) serve() error {
	var err error
	if s.tls != nil {
		// The certificate is in the TLSConfig; ServeTLS adds HTTP/2.
		err = s.srv.ServeTLS(s.ln, "", "")
	} else {
		err = s.srv.Serve(s.ln)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	return nil
}
