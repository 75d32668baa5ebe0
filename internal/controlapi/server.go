// Package controlapi serves the HTTP API of the control service: the /api
// routes that API keys (X-API-Key: <keyId>.<secretKey>) call, and the
// /agent/v1 routes of the agent protocol (internal/agentproto), which
// agents call with their own credentials.
//
// The two live on separate handler chains. The /api chain authenticates the
// key, records every request in the System Audit log (failed
// authentication included, attributed to the keyId when it can be read),
// and each route authorizes before its handler runs: Key, Privileged or
// Public, declared where the route is registered. The /agent/v1 chain
// never looks at API keys and refuses requests that carry one.
package controlapi

import (
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/alert"
	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/exposure"
	"github.com/patchline/patchline/internal/httpx"
	"github.com/patchline/patchline/internal/ratelimit"
	"github.com/patchline/patchline/internal/wakeup"
)

// Config is what the server needs. Every store must be set; one value may
// implement several of them.
type Config struct {
	Logger        *slog.Logger
	Agents        device.AgentStore
	Commands      device.CommandStore
	Rings         device.RingStore
	Rollouts      device.RolloutStore
	Policies      device.PolicyStore
	Keys          apikey.KeyStore
	Audit         audit.Log
	EnrollSecrets device.EnrollSecretStore
	// Exposure, when set, serves the vulnerability routes; without it
	// they answer 404.
	Exposure exposure.Store
	// Wakeup, when set, holds the agents' long polls (POST
	// /agent/v1/wait), which the Commands store rings when it queues
	// commands (wakeup.Store); without it the route answers 404 and
	// agents check in on their interval alone.
	Wakeup *wakeup.Hub
	// Catalog, with Exposure, serves the KEV compliance routes: the KEV
	// entries (due dates) of the CVEs are in its records.
	Catalog exposure.RecordReader
	// Alerts, when set, serves the alert rules and alerts; without it
	// they answer 404.
	Alerts alert.Store

	// TrustedProxies are the networks whose X-Forwarded-For is believed
	// when finding the client address.
	TrustedProxies []netip.Prefix

	// Metrics, when set, counts requests by route.
	Metrics *Metrics

	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Access is the authorization a route requires.
type Access int

// The access levels of routes.
const (
	// Public routes need no credentials (the OpenAPI document).
	Public Access = iota + 1
	// Key routes need a valid API key.
	Key
	// Privileged routes need a valid privileged API key; other keys get
	// 403.
	Privileged
	// Enrollment routes need an enrollment secret in the request body.
	Enrollment
	// Agent routes need an agent credential.
	Agent
)

// String names the access level.
func (a Access) String() string {
	switch a {
	case Public:
		return "public"
	case Key:
		return "key"
	case Privileged:
		return "privileged"
	case Enrollment:
		return "enrollment"
	case Agent:
		return "agent"
	}
	return "unset"
}

// Route is one registered route.
type Route struct {
	Method  string
	Path    string // a net/http pattern path: /api/agents/{id}
	Access  Access
	handler httpx.HandlerFunc
}

// Pattern returns the net/http pattern of the route.
func (rt Route) Pattern() string { return rt.Method + " " + rt.Path }

// Server serves the control API and the agent protocol.
type Server struct {
	cfg    Config
	log    *slog.Logger
	now    func() time.Time
	routes []Route
	fails  *ratelimit.Failures // failed authentications per client address
	api    *http.ServeMux
	agent  *http.ServeMux
}

// New returns a server for c.
func New(c Config) *Server {
	s := &Server{cfg: c, log: c.Logger, now: c.Now, fails: newFailureThrottle()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.api = http.NewServeMux()
	s.agent = http.NewServeMux()
	s.registerRoutes()
	return s
}

// registerRoutes lists every route of both chains, with the access it
// requires.
func (s *Server) registerRoutes() {
	s.handle("GET /api/openapi.json", Public, s.getOpenAPI)
	s.handle("GET /api/key", Key, s.getKey)

	s.handle("GET /api/agents", Key, s.listAgents)
	s.handle("GET /api/agents/{id}", Key, s.getAgent)
	s.handle("PATCH /api/agents/{id}", Key, s.patchAgent)
	s.handle("GET /api/agents/{id}/commands", Key, s.listAgentCommands)
	s.handle("POST /api/agents/{id}/collect-logs", Key, s.collectLogs)
	s.handle("POST /api/agents/{id}/install-updates", Privileged, s.installUpdates)
	s.handle("POST /api/agents/{id}/reboot", Privileged, s.reboot)
	s.handle("DELETE /api/agents/{id}", Privileged, s.removeAgent)
	s.handle("POST /api/feature-upgrades/finish", Privileged, s.finishFeatureUpgrades)

	s.handle("GET /api/commands/{id}", Key, s.getCommand)
	s.handle("POST /api/commands/{id}/cancel", Key, s.cancelCommand)
	s.handle("GET /api/commands/{id}/log-bundle", Key, s.getLogBundle)

	s.handle("GET /api/rings", Key, s.listRings)
	s.handle("POST /api/rings", Key, s.createRing)
	s.handle("GET /api/rings/{name}", Key, s.getRing)
	s.handle("PATCH /api/rings/{name}", Key, s.patchRing)
	s.handle("GET /api/rollouts", Key, s.listRollouts)
	s.handle("POST /api/rollouts", Key, s.createRollout)
	s.handle("GET /api/rollouts/{id}", Key, s.getRollout)
	s.handle("POST /api/rollouts/{id}/advance", Privileged, s.advanceRollout)

	s.handle("GET /api/policies", Key, s.listPolicies)
	s.handle("POST /api/policies", Key, s.createPolicy)
	s.handle("GET /api/policies/{id}", Key, s.getPolicy)
	s.handle("PUT /api/policies/{id}", Key, s.updatePolicy)
	s.handle("POST /api/policies/{id}/deploy", Privileged, s.deployPolicy)
	s.handle("GET /api/policies/{id}/agents", Key, s.listPolicyAgents)

	s.handle("GET /api/agents/{id}/vulnerabilities", Key, s.listAgentVulnerabilities)
	s.handle("GET /api/vulnerabilities", Key, s.listVulnerabilities)
	s.handle("GET /api/vulnerabilities/{cveId}/agents", Key, s.listVulnerabilityAgents)
	s.handle("POST /api/vulnerabilities/{cveId}/install-fix", Privileged, s.installFix)
	s.handle("GET /api/compliance/kev", Key, s.kevReport)
	s.handle("GET /api/compliance/kev.csv", Key, s.kevReportCSV)
	s.handle("GET /api/agents/{id}/compliance/kev", Key, s.agentKEV)

	s.handle("GET /api/alert-rules", Key, s.listAlertRules)
	s.handle("POST /api/alert-rules", Privileged, s.createAlertRule)
	s.handle("GET /api/alert-rules/{id}", Key, s.getAlertRule)
	s.handle("DELETE /api/alert-rules/{id}", Privileged, s.deleteAlertRule)
	s.handle("GET /api/alerts", Key, s.listAlerts)
	s.handle("GET /api/alerts/{id}", Key, s.getAlert)

	s.handle("GET /api/audit-log", Privileged, s.listAudit)

	s.handle("POST /agent/v1/enroll", Enrollment, s.enroll)
	s.handle("POST /agent/v1/checkin", Agent, s.checkIn)
	s.handle("POST /agent/v1/wait", Agent, s.waitForCommands)
	s.handle("POST /agent/v1/commands/{id}/report", Agent, s.reportCommand)
	s.handle("PUT /agent/v1/commands/{id}/log-bundle", Agent, s.uploadLogBundle)

	// Anything else under either prefix is a problem+json 404 or 405,
	// after authentication like any other route.
	s.api.Handle("/api/", httpx.Handle(s.log, s.authorize(Key, s.noRoute(s.api))))
	s.agent.Handle("/agent/", httpx.Handle(s.log, s.noRoute(s.agent)))
}

// handle registers a route on the chain its path belongs to. Every handler
// is wrapped in authorize, so no route exists without an access check.
func (s *Server) handle(pattern string, access Access, h httpx.HandlerFunc) {
	method, path, _ := strings.Cut(pattern, " ")
	rt := Route{Method: method, Path: path, Access: access, handler: h}
	s.routes = append(s.routes, rt)
	mux := s.api
	if strings.HasPrefix(path, "/agent/") {
		mux = s.agent
	}
	mux.Handle(pattern, httpx.Handle(s.log, s.authorize(access, h)))
}

// Routes returns every registered route.
func (s *Server) Routes() []Route {
	return append([]Route(nil), s.routes...)
}

// authorize checks the credentials that the chain authenticated against
// the access the route requires, before h runs.
func (s *Server) authorize(access Access, h httpx.HandlerFunc) httpx.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		ri := requestInfoFrom(r.Context())
		switch access {
		case Public, Enrollment:
			// The enrollment handler checks the secret in the body.
		case Key, Privileged:
			if ri == nil || ri.key == nil {
				return errs.Unauthorizedf("this route needs an API key in the X-API-Key header")
			}
			if access == Privileged && !ri.key.Privileged {
				return errs.Forbiddenf("API key %s is not privileged: %s %s needs a privileged key", ri.key.ID, r.Method, r.URL.Path)
			}
		case Agent:
			if ri == nil || ri.agent == nil {
				return errs.Unauthorizedf("this route needs an agent credential")
			}
		default:
			return errs.Forbiddenf("route has no access level")
		}
		return h(w, r)
	}
}

// noRoute answers a request that no route matches: 405 when the path has
// routes for other methods, 404 otherwise.
func (s *Server) noRoute(mux *http.ServeMux) httpx.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var allow []string
		for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/api/" && pattern != "/agent/" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			httpx.WriteProblem(w, http.StatusMethodNotAllowed, "method "+r.Method+" is not allowed here; allowed: "+strings.Join(allow, ", "))
			return nil
		}
		return errs.NotFoundf("no route %s %s", r.Method, r.URL.Path)
	}
}

// ServeHTTP dispatches to the /api and /agent/v1 chains.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/api" || strings.HasPrefix(r.URL.Path, "/api/"):
		s.serveAPI(w, r)
	case strings.HasPrefix(r.URL.Path, "/agent/"):
		s.serveAgent(w, r)
	default:
		httpx.WriteError(w, errs.NotFoundf("no route %s %s", r.Method, r.URL.Path))
	}
}
