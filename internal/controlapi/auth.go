package controlapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/httpx"
	"github.com/patchline/patchline/internal/ratelimit"
)

// HeaderAPIKey is the header that carries the full API key.
const HeaderAPIKey = "X-API-Key"

// requestInfo is what the chains learn about a request, shared with the
// handlers through the context.
type requestInfo struct {
	key   *apikey.Key             // the authenticated API key
	agent *device.AgentCredential // the authenticated agent
	event audit.Event             // what the request did, for the audit log
	// failKey is the failure throttle key of the client on the agent
	// chain.
	failKey string
}

type requestInfoKey struct{}

func requestInfoFrom(ctx context.Context) *requestInfo {
	ri, _ := ctx.Value(requestInfoKey{}).(*requestInfo)
	return ri
}

// setEvent records what the request did; the audit entry of the request
// carries it instead of a plain api.request.
func setEvent(r *http.Request, ev audit.Event) {
	if ri := requestInfoFrom(r.Context()); ri != nil {
		ri.event = ev
	}
}

// actor returns the audit actor of the request: the API key or the agent.
func actor(r *http.Request) string {
	ri := requestInfoFrom(r.Context())
	switch {
	case ri == nil:
		return "anonymous"
	case ri.key != nil:
		return "key:" + ri.key.ID
	case ri.agent != nil:
		return "agent:" + ri.agent.AgentID
	}
	return "anonymous"
}

// serveAPI is the /api chain: refuse an address that failed to
// authenticate too often, authenticate the key, run the route, record the
// request in the audit log, then answer. The response is held until its
// entry is appended, so that a client never sees an answer the audit log
// does not have; when the append fails the client gets a 500 instead. A
// response larger than heldLimit (a log bundle) is not held whole: its
// entry is appended when the held part overflows, and the rest streams.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	ri := &requestInfo{}
	r = r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, ri))
	_, pattern := s.api.Handler(r)
	if pattern == "/api/" {
		pattern = "unmatched"
	}
	if pattern == "GET /api/openapi.json" {
		// The one public route: no key to check, nothing to audit.
		rec := &statusRecorder{ResponseWriter: w}
		s.api.ServeHTTP(rec, r)
		s.cfg.Metrics.observe(pattern, rec.code(), s.now().Sub(start))
		return
	}
	rec := &heldResponse{header: w.Header(), w: w, limit: heldLimit}
	clientAddr := s.clientAddress(r)
	failKey := failureKey("api", clientAddr)
	var keyID string
	rec.commit = func() error {
		e := &audit.Entry{
			Time:          start,
			Actor:         "anonymous",
			KeyID:         keyID,
			Method:        r.Method,
			Path:          r.URL.Path,
			Status:        rec.code(),
			ClientAddress: clientAddr,
		}
		if ri.key != nil {
			e.Actor = "key:" + ri.key.ID
		}
		ev := ri.event
		if ev == nil {
			ev = audit.APIRequest{}
		}
		if err := e.SetEvent(ev); err != nil {
			s.log.ErrorContext(r.Context(), "audit API request", "err", err)
		}
		// The work is done: its entry must not be lost because the
		// client went away.
		if err := s.cfg.Audit.AppendAudit(context.WithoutCancel(r.Context()), e); err != nil {
			return fmt.Errorf("audit %s %s: %w", r.Method, r.URL.Path, err)
		}
		return nil
	}

	rec.Header().Set("Cache-Control", "no-store")
	if wait := s.authWait(start, failKey); wait > 0 {
		// Refused before the key is looked at, so that a right guess
		// looks like a wrong one while the address is locked.
		keyID = readKeyID(r)
		rec.Header().Set("Retry-After", ratelimit.RetryAfter(wait))
		httpx.WriteProblem(rec, http.StatusTooManyRequests, tooManyFailures(wait))
		ri.event = audit.APIAuthFailed{Reason: "throttled"}
	} else {
		var reason string
		var err error
		keyID, reason, err = s.authenticateKey(r, ri)
		switch {
		case err != nil && reason == "":
			s.log.ErrorContext(r.Context(), "authenticate API key", "keyId", keyID, "err", err)
			httpx.WriteError(rec, err)
		case err != nil:
			if guessed(reason) {
				s.authFailed(start, failKey)
			}
			rec.Header().Set("WWW-Authenticate", `APIKey realm="patchline", header="X-API-Key"`)
			httpx.WriteError(rec, err)
			ri.event = audit.APIAuthFailed{Reason: reason}
		default:
			s.api.ServeHTTP(rec, r)
		}
	}

	if err := rec.finish(); err != nil {
		s.log.ErrorContext(r.Context(), "audit API request", "method", r.Method, "path", r.URL.Path, "keyId", keyID, "status", rec.code(), "err", err)
		if !rec.sent {
			for k := range w.Header() {
				delete(w.Header(), k)
			}
			httpx.WriteError(w, err)
		}
		s.cfg.Metrics.observe(pattern, http.StatusInternalServerError, s.now().Sub(start))
		return
	}
	s.cfg.Metrics.observe(pattern, rec.code(), s.now().Sub(start))
}

// guessed reports whether an authentication failure of reason may be a
// guess, which the failure throttle counts: a key that is malformed,
// unknown or has the wrong secret. A missing key guesses nothing, and a
// revoked or expired key came with its right secret.
func guessed(reason string) bool {
	switch reason {
	case "malformed key", "unknown key", "wrong secret":
		return true
	}
	return false
}

// readKeyID returns the keyId of the request's X-API-Key header, for the
// audit log of a request refused before the key is looked up.
func readKeyID(r *http.Request) string {
	values := r.Header.Values(HeaderAPIKey)
	if len(values) != 1 {
		return ""
	}
	id, _, _ := apikey.Parse(strings.TrimSpace(values[0]))
	return id
}

// authenticateKey checks the X-API-Key header and, when it holds a usable
// key, sets ri.key. It returns the keyId when one could be read, and on
// failure a reason for the audit log with an ErrUnauthorized error for the
// client; an error without a reason is internal.
func (s *Server) authenticateKey(r *http.Request, ri *requestInfo) (keyID, reason string, err error) {
	values := r.Header.Values(HeaderAPIKey)
	switch {
	case len(values) == 0 || values[0] == "":
		return "", "missing key", errs.Unauthorizedf("missing %s header: send the full API key, keyId.secretKey", HeaderAPIKey)
	case len(values) > 1:
		return "", "malformed key", errs.Unauthorizedf("send one %s header", HeaderAPIKey)
	}
	id, secret, err := apikey.Parse(strings.TrimSpace(values[0]))
	if err != nil {
		return id, "malformed key", errs.Unauthorizedf("malformed API key: expected keyId.secretKey as shown when the key was created")
	}
	k, err := s.cfg.Keys.FindKeyByID(r.Context(), id)
	if errors.Is(err, errs.ErrNotFound) {
		return id, "unknown key", errs.Unauthorizedf("invalid API key")
	}
	if err != nil {
		return id, "", err
	}
	if !apikey.Verify(k, secret) {
		return id, "wrong secret", errs.Unauthorizedf("invalid API key")
	}
	now := s.now()
	switch k.State(now) {
	case apikey.StateRevoked:
		return id, "revoked key", errs.Unauthorizedf("API key %s has been revoked", id)
	case apikey.StateExpired:
		return id, "expired key", errs.Unauthorizedf("API key %s has expired", id)
	}
	if k.LastUsedAt == nil || now.Sub(*k.LastUsedAt) >= apikey.LastUsedResolution {
		if err := s.cfg.Keys.TouchKey(r.Context(), id, now); err != nil {
			s.log.WarnContext(r.Context(), "record key use", "keyId", id, "err", err)
		} else {
			t := now.UTC()
			k.LastUsedAt = &t
		}
	}
	ri.key = k
	return id, "", nil
}

// serveAgent is the /agent/v1 chain: API keys are refused outright, an
// address that presented wrong agent credentials or enrollment secrets too
// often is refused for a while, and agent credentials are authenticated
// for the routes that need them.
func (s *Server) serveAgent(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	ri := &requestInfo{failKey: failureKey("agent", s.clientAddress(r))}
	r = r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, ri))
	rec := &statusRecorder{ResponseWriter: w}
	_, pattern := s.agent.Handler(r)
	if pattern == "/agent/" {
		pattern = "unmatched"
	}
	if r.Header.Get(HeaderAPIKey) != "" {
		httpx.WriteError(rec, errs.Unauthorizedf("API keys are not accepted on agent routes"))
	} else if wait := s.authWait(start, ri.failKey); wait > 0 {
		rec.Header().Set("Retry-After", ratelimit.RetryAfter(wait))
		httpx.WriteProblem(rec, http.StatusTooManyRequests, tooManyFailures(wait))
	} else if err := s.authenticateAgent(r, ri); err != nil {
		if errs.StatusOf(err) == http.StatusInternalServerError {
			s.log.ErrorContext(r.Context(), "authenticate agent", "err", err)
		} else {
			s.authFailed(start, ri.failKey)
			rec.Header().Set("WWW-Authenticate", `Bearer realm="patchline-agent"`)
		}
		httpx.WriteError(rec, err)
	} else {
		s.agent.ServeHTTP(rec, r)
	}
	s.cfg.Metrics.observe(pattern, rec.code(), s.now().Sub(start))
}

// failedSecret counts a wrong enrollment secret against the address of r.
func (s *Server) failedSecret(r *http.Request) {
	if ri := requestInfoFrom(r.Context()); ri != nil {
		s.authFailed(s.now(), ri.failKey)
	}
}

// Throttling of failed authentication, per client address (per /64 for
// IPv6): after authFreeFailures failures, each further one locks the
// address out of that chain for a delay that starts at authLockout and
// doubles, up to authMaxLockout; a count is forgotten authForget after
// its last failure. Credentials are 238 random bits, so this is not what
// keeps them safe: it keeps floods of guesses from costing store lookups.
const (
	authFreeFailures = 10
	authLockout      = time.Second
	authMaxLockout   = 15 * time.Minute
	authForget       = 15 * time.Minute
)

func newFailureThrottle() *ratelimit.Failures {
	return ratelimit.NewFailures(ratelimit.FailurePolicy{
		Free: authFreeFailures, Lockout: authLockout, MaxLockout: authMaxLockout, Forget: authForget,
	})
}

// failureKey is the throttle key of a client address on a chain, "" for
// a loopback address, which is not throttled: it is this machine, or a
// reverse proxy on it left out of the trusted proxies, and locking that
// out would lock out every client behind it.
func failureKey(chain, addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return chain + ":" + addr
	}
	if a = a.Unmap(); a.IsLoopback() {
		return ""
	}
	return chain + ":" + ratelimit.Key(a)
}

// authWait returns how long the client of key must wait before its
// credentials are looked at again, 0 when they may be.
func (s *Server) authWait(now time.Time, key string) time.Duration {
	if key == "" {
		return 0
	}
	return s.fails.Wait(now, key)
}

// authFailed counts a failed authentication of the client of key.
func (s *Server) authFailed(now time.Time, key string) {
	if key != "" {
		s.fails.Fail(now, key)
	}
}

// tooManyFailures is the detail of a throttled request. It says nothing
// of the credential, which was not even looked at.
func tooManyFailures(wait time.Duration) string {
	n := ratelimit.RetryAfter(wait)
	if n == "1" {
		return "too many failed authentications from this address; retry in 1 second"
	}
	return "too many failed authentications from this address; retry in " + n + " seconds"
}

// authenticateAgent checks an Authorization: Bearer <agentId>.<credential>
// header when there is one; routes that need an agent refuse requests
// without.
func (s *Server) authenticateAgent(r *http.Request, ri *requestInfo) error {
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil
	}
	token, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return errs.Unauthorizedf("malformed Authorization header: expected Bearer agentId.credential")
	}
	id, secret, ok := strings.Cut(strings.TrimSpace(token), ".")
	if !ok || !strings.HasPrefix(id, device.AgentIDPrefix) || !apikey.CheckSecret(device.AgentCredentialPrefix, secret) {
		return errs.Unauthorizedf("malformed agent credential")
	}
	c, err := s.cfg.Agents.FindAgentCredential(r.Context(), id)
	if errors.Is(err, errs.ErrNotFound) {
		return errs.Unauthorizedf("invalid agent credential")
	}
	if err != nil {
		return err
	}
	if !apikey.EqualHash(apikey.HashSecret(secret), c.Hash) {
		return errs.Unauthorizedf("invalid agent credential")
	}
	ri.agent = c
	return nil
}

// clientAddress returns the address of the client: the peer, or, when the
// peer is a trusted proxy, the last address in X-Forwarded-For that is not
// one.
func (s *Server) clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil || !s.trusted(addr) {
		return host
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		for _, h := range strings.Split(v, ",") {
			hops = append(hops, strings.TrimSpace(h))
		}
	}
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(hops[i])
		if err != nil {
			break
		}
		if !s.trusted(a) {
			return a.String()
		}
	}
	return host
}

func (s *Server) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// heldLimit is how much of a response heldResponse holds before it
// commits: every answer of the API but a log bundle fits.
const heldLimit = 256 << 10

// errCommitted is what writes to a heldResponse return after its commit
// failed.
var errCommitted = errors.New("the response was refused: its audit entry could not be written")

// heldResponse holds a response until finish writes it out, after commit
// (the audit entry) succeeded. A response that outgrows limit commits
// early and streams from then on. Its header is the real writer's, which
// is not sent before the commit.
type heldResponse struct {
	header http.Header
	w      http.ResponseWriter
	limit  int
	commit func() error

	status    int
	body      bytes.Buffer
	committed bool  // commit ran
	commitErr error // what it returned
	sent      bool  // the status line went to w
}

// Header implements http.ResponseWriter.
func (h *heldResponse) Header() http.Header { return h.header }

// WriteHeader implements http.ResponseWriter.
func (h *heldResponse) WriteHeader(code int) {
	if h.status == 0 {
		h.status = code
	}
}

// Write implements http.ResponseWriter.
func (h *heldResponse) Write(b []byte) (int, error) {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	switch {
	case h.commitErr != nil:
		return 0, errCommitted
	case h.sent:
		return h.w.Write(b)
	case h.body.Len()+len(b) <= h.limit:
		return h.body.Write(b)
	}
	if err := h.send(); err != nil {
		return 0, err
	}
	return h.w.Write(b)
}

// send commits and writes what is held to the real writer.
func (h *heldResponse) send() error {
	if !h.committed {
		h.committed = true
		h.commitErr = h.commit()
	}
	if h.commitErr != nil {
		return h.commitErr
	}
	if !h.sent {
		h.sent = true
		h.w.WriteHeader(h.code())
		if _, err := h.w.Write(h.body.Bytes()); err != nil {
			return err
		}
		h.body = bytes.Buffer{}
	}
	return nil
}

// finish commits a response that did not commit yet and writes out what
// is held. It returns the error of the commit: the caller answers 500
// when nothing was sent yet.
func (h *heldResponse) finish() error {
	if err := h.send(); err != nil && h.commitErr != nil {
		return h.commitErr
	}
	return nil
}

func (h *heldResponse) code() int {
	if h.status == 0 {
		return http.StatusOK
	}
	return h.status
}

// statusRecorder remembers the status written through it.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

// WriteHeader records the first status written.
func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200.
func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusRecorder) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// checkInterval is the check-in interval agents are told, in seconds.
var checkInterval = int(device.CheckInInterval / time.Second)

// capability is the protocol version the server speaks.
const capability = agentproto.CapabilityVersion
