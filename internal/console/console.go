// Package console serves the admin console of the control service:
// server-rendered pages (html/template, embedded, a small stylesheet and
// script, no build step) for first-run setup, sign-in, Settings > API Keys,
// agents, deployment rings, rollouts, policy objects and the System Audit
// log.
//
// The console has its own handler chain, separate from the API's
// (internal/controlapi): security headers (Content-Security-Policy,
// nosniff, no framing) on every response; a cross-origin check
// (Sec-Fetch-Site, Origin) and a per-session CSRF token on every POST;
// then each route authorizes before its handler runs, at the Access level
// declared where the route is registered. API keys mean nothing here, and
// console sessions mean nothing on /api.
//
// Administrators sign in with a password (argon2id, see internal/admin)
// and, once enrolled, a TOTP code. Sessions live in the control store,
// keyed by the SHA-256 of a random token kept in an HttpOnly cookie, with
// an idle and an absolute expiry. Privileged actions (enabling privileged
// API keys, and the actions that need a privileged key on the API) need a
// re-authentication within the last ReauthWindow; signing in does not
// count.
//
// Actions that the API offers too go through the same store methods and
// record the same audit events; their actor is "admin:<email>" and they
// carry no keyId.
package console

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/admin"
	"github.com/patchline/patchline/internal/alert"
	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/exposure"
	"github.com/patchline/patchline/internal/ratelimit"
)

// Session and re-authentication lifetimes.
const (
	// IdleTimeout ends a session after this long without a request.
	IdleTimeout = 30 * time.Minute
	// SessionLifetime ends a session this long after sign-in, however
	// active.
	SessionLifetime = 12 * time.Hour
	// ReauthWindow is how long a re-authentication allows privileged
	// actions.
	ReauthWindow = 5 * time.Minute
	// touchInterval bounds how often a session's activity is written.
	touchInterval = time.Minute
)

// Config is what the console needs. Every store must be set; one value
// may implement several of them.
type Config struct {
	Logger     *slog.Logger
	Admins     admin.Store
	FirstAdmin admin.FirstAdminCreator
	Sessions   admin.SessionStore
	TOTP       admin.TOTPStore
	Keys       apikey.KeyStore
	Audit      audit.Log
	Agents     device.AgentStore
	Commands   device.CommandStore
	Rings      device.RingStore
	Rollouts   device.RolloutStore
	Policies   device.PolicyStore
	// Exposure, when set, serves the fleet risk pages.
	Exposure exposure.Store
	// Catalog, with Exposure, serves the KEV due dates page: the KEV
	// entries of the CVEs are in its records.
	Catalog exposure.RecordReader
	// Alerts, when set, serves Settings › Alerts.
	Alerts alert.Store

	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client, for the audit log and sign-in throttling.
	TrustedProxies ratelimit.Proxies

	// SecureCookies marks cookies Secure even on plain HTTP requests, and
	// sends Strict-Transport-Security, for a console behind a proxy that
	// terminates TLS. Requests that arrive over TLS always get both.
	SecureCookies bool

	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Access is the authorization a route requires.
type Access int

// The access levels of console routes.
const (
	// Asset routes serve the embedded stylesheet and script to anyone.
	Asset Access = iota + 1
	// Public routes need no session: first-run setup and sign-in. Their
	// POSTs carry a CSRF token bound to a pre-session cookie.
	Public
	// Session routes need a signed-in administrator.
	Session
	// Fresh routes need a signed-in administrator who re-authenticated
	// within ReauthWindow; otherwise the console asks for the password
	// (and TOTP code) first and then carries on with the request.
	Fresh
)

// String names the access level.
func (a Access) String() string {
	switch a {
	case Asset:
		return "asset"
	case Public:
		return "public"
	case Session:
		return "session"
	case Fresh:
		return "fresh"
	}
	return "unset"
}

// Route is one registered route.
type Route struct {
	Method string
	Path   string // a net/http pattern path: /agents/{id}
	Access Access
}

// Pattern returns the net/http pattern of the route.
func (rt Route) Pattern() string { return rt.Method + " " + rt.Path }

// Server serves the console.
type Server struct {
	cfg       Config
	log       *slog.Logger
	now       func() time.Time
	mux       *http.ServeMux
	routes    []Route
	pages     *pages
	cross     *http.CrossOriginProtection
	throttle  *throttle
	setupCode string // asked by first-run setup, shown in the server log
}

// New returns a console for c. When no administrator exists it logs the
// setup code that first-run setup asks for.
func New(ctx context.Context, c Config) (*Server, error) {
	s := &Server{cfg: c, log: c.Logger, now: c.Now}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	p, err := newPages()
	if err != nil {
		return nil, err
	}
	s.pages = p
	s.throttle = newThrottle()
	s.cross = http.NewCrossOriginProtection()
	s.setupCode = newSetupCode()
	s.mux = http.NewServeMux()
	s.registerRoutes()
	if c.Admins != nil {
		admins, err := c.Admins.FindAdmins(ctx)
		if err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
		if len(admins) == 0 {
			s.log.Warn("no administrator yet: open the console's first-run setup and enter the setup code, or run patchline admin create",
				"path", "/setup", "setupCode", s.setupCode)
		}
	}
	return s, nil
}

// registerRoutes lists every route of the console with the access it
// requires.
func (s *Server) registerRoutes() {
	s.handle("GET /static/{file}", Asset, s.static)

	s.handle("GET /setup", Public, s.setupPage)
	s.handle("POST /setup", Public, s.setup)
	s.handle("GET /sign-in", Public, s.signInPage)
	s.handle("POST /sign-in", Public, s.signIn)
	s.handle("POST /sign-out", Session, s.signOut)

	s.handle("GET /{$}", Session, s.home)
	s.handle("GET /account", Session, s.accountPage)
	s.handle("POST /account/totp", Fresh, s.enableTOTP)
	s.handle("POST /account/totp/remove", Fresh, s.removeTOTP)

	s.handle("GET /settings/api-keys", Session, s.keysPage)
	// Creating a privileged key needs a fresh re-authentication, which
	// the handler asks for when the form asks for privileged access.
	s.handle("POST /settings/api-keys", Session, s.createKey)
	s.handle("GET /settings/api-keys/{id}", Session, s.keyPage)
	s.handle("POST /settings/api-keys/{id}/privileged", Fresh, s.enablePrivileged)
	s.handle("GET /settings/api-keys/{id}/revoke", Session, s.revokeKeyPage)
	s.handle("POST /settings/api-keys/{id}/revoke", Session, s.revokeKey)

	s.handle("GET /agents", Session, s.agentsPage)
	s.handle("POST /agents/finish-feature-upgrades", Fresh, s.finishFeatureUpgrades)
	s.handle("GET /agents/{id}", Session, s.agentPage)
	s.handle("POST /agents/{id}/ring", Session, s.setAgentRing)
	s.handle("POST /agents/{id}/collect-logs", Session, s.collectLogs)
	s.handle("POST /agents/{id}/install-updates", Fresh, s.installUpdates)
	s.handle("POST /agents/{id}/reboot", Fresh, s.reboot)
	s.handle("POST /agents/{id}/finish-feature-upgrade", Fresh, s.finishFeatureUpgrade)
	s.handle("GET /agents/{id}/remove", Session, s.removeAgentPage)
	s.handle("POST /agents/{id}/remove", Fresh, s.removeAgent)
	s.handle("POST /commands/{id}/cancel", Session, s.cancelCommand)
	s.handle("GET /commands/{id}/log-bundle", Session, s.logBundle)

	s.handle("GET /rollouts", Session, s.rolloutsPage)
	s.handle("POST /rings", Session, s.createRing)
	s.handle("POST /rollouts", Session, s.createRollout)
	s.handle("GET /rollouts/{id}", Session, s.rolloutPage)
	s.handle("POST /rollouts/{id}/advance", Fresh, s.advanceRollout)

	s.handle("GET /policies", Session, s.policiesPage)
	s.handle("POST /policies", Session, s.createPolicy)
	s.handle("GET /policies/{id}", Session, s.policyPage)
	s.handle("POST /policies/{id}", Session, s.updatePolicy)
	s.handle("POST /policies/{id}/deploy", Fresh, s.deployPolicy)

	s.handle("GET /vulnerabilities", Session, s.vulnerabilitiesPage)
	s.handle("GET /vulnerabilities/{cveId}", Session, s.vulnerabilityPage)
	s.handle("POST /vulnerabilities/{cveId}/install-fix", Fresh, s.installFix)
	s.handle("GET /agents/{id}/vulnerabilities", Session, s.agentVulnerabilitiesPage)
	s.handle("GET /kev", Session, s.kevPage)
	s.handle("GET /kev.csv", Session, s.kevExport)

	s.handle("GET /settings/alerts", Session, s.alertsPage)
	s.handle("POST /settings/alerts", Fresh, s.createAlertRule)
	s.handle("POST /settings/alerts/{id}/delete", Fresh, s.deleteAlertRule)
	s.handle("GET /alerts/{id}", Session, s.alertPage)

	s.handle("GET /audit", Session, s.auditPage)
	s.handle("GET /audit/export.csv", Session, s.auditExport)

	// Anything else is a 404 or 405 page.
	s.mux.Handle("/", s.notFound())
}

// handle registers a route. Every handler is wrapped in authorize, so no
// route exists without an access check.
func (s *Server) handle(pattern string, access Access, h handlerFunc) {
	method, path, _ := strings.Cut(pattern, " ")
	s.routes = append(s.routes, Route{Method: method, Path: path, Access: access})
	s.mux.Handle(pattern, s.wrap(access, h))
}

// Routes returns every registered route.
func (s *Server) Routes() []Route {
	return append([]Route(nil), s.routes...)
}

// ServeHTTP is the console chain: security headers, the cross-origin
// check of unsafe methods, then the route (which reads the session,
// checks the CSRF token and authorizes).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w.Header())
	if s.overTLS(r) {
		// Over TLS (or behind a proxy that terminates it), browsers are
		// told to use nothing else for this host from now on.
		w.Header().Set("Strict-Transport-Security", strictTransportSecurity)
	}
	if err := s.cross.Check(r); err != nil {
		c := s.newReqCtx(r)
		s.writeError(w, r, c, errs.Forbiddenf("This request came from another site, so it was refused. Open the console directly and try again."))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// contentSecurityPolicy allows the console's own script, stylesheet and
// images (and data: images, for the TOTP QR code) and nothing else.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// strictTransportSecurity is the Strict-Transport-Security of a console
// served over TLS: one year. It names no subdomains and asks for no
// preloading, which are decisions about the whole domain.
const strictTransportSecurity = "max-age=31536000"

// securityHeaders sets the headers of every console response.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
}

// noRoute answers a request that no route matches: 405 when the path has
// routes for other methods, 404 otherwise.
func (s *Server) noRoute(r *http.Request) error {
	var allow []string
	for _, m := range []string{"GET", "POST"} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		return &statusError{status: http.StatusMethodNotAllowed, msg: "This page does not take " + r.Method + " requests.", allow: strings.Join(allow, ", ")}
	}
	return errs.NotFoundf("There is no page at %s.", r.URL.Path)
}

// newSetupCode returns a random code of 12 characters from an alphabet
// without look-alikes, in groups of four.
func newSetupCode() string {
	const alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789" // 32 symbols
	b := make([]byte, 12)
	rand.Read(b) // never fails (crypto/rand)
	var sb strings.Builder
	for i, v := range b {
		if i > 0 && i%4 == 0 {
			sb.WriteByte('-')
		}
		sb.WriteByte(alphabet[v%32])
	}
	return sb.String()
}
