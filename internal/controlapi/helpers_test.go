package controlapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/control/sqlstore"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/httpx"
)

var (
	specOnce   sync.Once
	specDoc    *openapi3.T
	specRouter routers.Router
	specErr    error
)

// spec loads and checks the OpenAPI document once.
func spec(tb testing.TB) (*openapi3.T, routers.Router) {
	tb.Helper()
	specOnce.Do(func() {
		loader := openapi3.NewLoader()
		specDoc, specErr = loader.LoadFromData(OpenAPI)
		if specErr != nil {
			return
		}
		if specErr = specDoc.Validate(context.Background()); specErr != nil {
			return
		}
		// The document's server is the listener's root, "/": the router
		// matches the absolute URLs of the tests' requests.
		specDoc.Servers = openapi3.Servers{{URL: "http://control.test"}}
		specRouter, specErr = legacy.NewRouter(specDoc)
	})
	if specErr != nil {
		tb.Fatalf("OpenAPI document: %v", specErr)
	}
	return specDoc, specRouter
}

// env is a server on a fresh store with an API key of each kind and an
// enrollment secret.
type env struct {
	t            *testing.T
	store        *sqlstore.Store
	srv          *Server
	key          string // full non-privileged key
	keyID        string
	privKey      string // full privileged key
	privKeyID    string
	enrollSecret string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "control.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	e := &env{t: t, store: store}
	e.srv = New(Config{
		Agents: store, Commands: store, Rings: store, Rollouts: store, Policies: store,
		Keys: store, Audit: store, EnrollSecrets: store,
	})
	now := time.Now()
	exp := now.Add(24 * time.Hour)
	var k *apikey.Key
	e.key, k, _ = apikey.New(apikey.Params{Name: "ci", CreatedBy: "test"}, now)
	e.keyID = k.ID
	if err := store.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	e.privKey, k, _ = apikey.New(apikey.Params{Name: "ops", CreatedBy: "test", Privileged: true, ExpiresAt: &exp}, now)
	e.privKeyID = k.ID
	if err := store.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	e.enrollSecret = apikey.NewSecret(device.EnrollSecretPrefix)
	if err := store.CreateEnrollSecret(ctx, &device.EnrollSecret{
		ID: device.NewID(device.EnrollSecretIDPrefix), SecretHash: apikey.HashSecret(e.enrollSecret), CreatedBy: "test", CreatedAt: now,
	}); err != nil {
		t.Fatal(err)
	}
	return e
}

// request is one request of a test.
type request struct {
	method, path string
	apiKey       string // X-API-Key
	bearer       string // Authorization: Bearer
	body         any    // JSON-encoded unless []byte
	contentType  string
}

// do serves req and checks the response against the OpenAPI document:
// its status must be documented for the operation and its body must match.
func (e *env) do(req request) *httptest.ResponseRecorder {
	e.t.Helper()
	var body io.Reader
	switch b := req.body.(type) {
	case nil:
	case []byte:
		body = bytes.NewReader(b)
	case string:
		body = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		body = bytes.NewReader(j)
	}
	r := httptest.NewRequest(req.method, "http://control.test"+req.path, body)
	r.RemoteAddr = "192.0.2.7:4711"
	if req.apiKey != "" {
		r.Header.Set(HeaderAPIKey, req.apiKey)
	}
	if req.bearer != "" {
		r.Header.Set("Authorization", "Bearer "+req.bearer)
	}
	if req.contentType != "" {
		r.Header.Set("Content-Type", req.contentType)
	} else if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, r)
	validateResponse(e.t, r, rec)
	return rec
}

// validateResponse checks a response against the OpenAPI document. 404s
// and 405s of paths the document does not have are checked for
// problem+json only.
func validateResponse(t *testing.T, r *http.Request, rec *httptest.ResponseRecorder) {
	t.Helper()
	_, router := spec(t)
	probe := r.Clone(context.Background())
	probe.Body = http.NoBody
	route, params, err := router.FindRoute(probe)
	if err != nil {
		if rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed && rec.Code != http.StatusUnauthorized {
			t.Errorf("%s %s: no route in the OpenAPI document (%v) yet status %d", r.Method, r.URL.Path, err, rec.Code)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("%s %s: undocumented route answered %q", r.Method, r.URL.Path, ct)
		}
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: probe, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status:  rec.Code,
		Header:  rec.Header(),
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	in.SetBodyBytes(rec.Body.Bytes())
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s %s: response %d does not match the OpenAPI document: %v\nbody: %s", r.Method, r.URL.Path, rec.Code, err, rec.Body.String())
	}
}

// decode decodes a JSON response after checking its status.
func decode[T any](t *testing.T, rec *httptest.ResponseRecorder, status int) T {
	t.Helper()
	var v T
	if rec.Code != status {
		t.Fatalf("status = %d, want %d; body: %s", rec.Code, status, rec.Body.String())
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("decode %T: %v; body: %s", v, err, rec.Body.String())
	}
	return v
}

// problem checks that rec is a problem+json with the given status and
// returns its detail.
func problem(t *testing.T, rec *httptest.ResponseRecorder, status int) string {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	p := decode[httpx.Problem](t, rec, status)
	if p.Status != status || p.Detail == "" {
		t.Errorf("problem = %+v", p)
	}
	return p.Detail
}

// agent is an enrolled test agent.
type agent struct {
	id, credential string
}

func (e *env) enroll(hostname, platform string) agent {
	e.t.Helper()
	rec := e.do(request{method: "POST", path: agentproto.PathEnroll, body: agentproto.EnrollRequest{
		EnrollSecret: e.enrollSecret, Capability: agentproto.CapabilityVersion, Hostname: hostname,
		OS: agentproto.OS{Platform: platform, Name: platform, Version: "1", Build: "1"}, Arch: "amd64", AgentVersion: "0.1.0",
	}})
	resp := decode[agentproto.EnrollResponse](e.t, rec, http.StatusCreated)
	return agent{id: resp.AgentID, credential: resp.Credential}
}

func (e *env) checkIn(a agent, req agentproto.CheckInRequest) agentproto.CheckInResponse {
	e.t.Helper()
	if req.Hostname == "" {
		req.Hostname = "host"
		req.OS = agentproto.OS{Platform: "linux", Name: "Debian", Version: "12", Build: "6.1"}
	}
	req.Capability = agentproto.CapabilityVersion
	rec := e.do(request{method: "POST", path: agentproto.PathCheckIn, bearer: a.credential, body: req})
	return decode[agentproto.CheckInResponse](e.t, rec, http.StatusOK)
}

func (e *env) report(a agent, cmdID, state, message string) {
	e.t.Helper()
	rec := e.do(request{method: "POST", path: "/agent/v1/commands/" + cmdID + "/report", bearer: a.credential,
		body: agentproto.Report{State: state, Result: &agentproto.Result{Message: message}}})
	decode[agentproto.ReportResponse](e.t, rec, http.StatusOK)
}

// lastAudit returns the newest audit entry.
func (e *env) lastAudit() *audit.Entry {
	e.t.Helper()
	entries, err := e.store.FindAuditEntries(context.Background(), audit.Filter{Limit: 1})
	if err != nil || len(entries) == 0 {
		e.t.Fatalf("no audit entry: %v", err)
	}
	return entries[0]
}

// fill replaces the wildcard ({id}, {name}) of a route path.
func fill(path, id string) string {
	return strings.NewReplacer("{id}", id, "{name}", id).Replace(path)
}

func mustPrefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}
