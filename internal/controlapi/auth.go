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
)

// HeaderAPIKey is the header that carries the full API key.
const HeaderAPIKey = "X-API-Key"

// requestInfo is what the chains learn about a request, shared with the
// handlers through the context.
type requestInfo struct {
	key   *apikey.Key             // the authenticated API key
	agent *device.AgentCredential // the authenticated agent
	event audit.Event             // what the request did, for the audit log
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

// serveAPI is the /api chain: authenticate the key, run the route, record
// the request in the audit log, then answer. The response is held until
// its entry is appended, so that a client never sees an answer the audit
// log does not have; when the append fails the client gets a 500 instead.
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
	rec := &heldResponse{header: w.Header()}

	rec.Header().Set("Cache-Control", "no-store")
	keyID, reason, err := s.authenticateKey(r, ri)
	switch {
	case err != nil && reason == "":
		s.log.ErrorContext(r.Context(), "authenticate API key", "keyId", keyID, "err", err)
		httpx.WriteError(rec, err)
	case err != nil:
		rec.Header().Set("WWW-Authenticate", `APIKey realm="patchline", header="X-API-Key"`)
		httpx.WriteError(rec, err)
		ri.event = audit.APIAuthFailed{Reason: reason}
	default:
		s.api.ServeHTTP(rec, r)
	}

	e := &audit.Entry{
		Time:          start,
		Actor:         "anonymous",
		KeyID:         keyID,
		Method:        r.Method,
		Path:          r.URL.Path,
		Status:        rec.code(),
		ClientAddress: s.clientAddress(r),
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
	// The work is done: its entry must not be lost because the client
	// went away.
	if err := s.cfg.Audit.AppendAudit(context.WithoutCancel(r.Context()), e); err != nil {
		s.log.ErrorContext(r.Context(), "audit API request", "method", r.Method, "path", r.URL.Path, "keyId", keyID, "status", rec.code(), "err", err)
		for k := range w.Header() {
			delete(w.Header(), k)
		}
		httpx.WriteError(w, fmt.Errorf("audit %s %s: %w", r.Method, r.URL.Path, err))
		s.cfg.Metrics.observe(pattern, http.StatusInternalServerError, s.now().Sub(start))
		return
	}
	rec.flush(w)
	s.cfg.Metrics.observe(pattern, rec.code(), s.now().Sub(start))
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

// serveAgent is the /agent/v1 chain: API keys are refused outright, agent
// credentials are authenticated for the routes that need them.
func (s *Server) serveAgent(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	ri := &requestInfo{}
	r = r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, ri))
	rec := &statusRecorder{ResponseWriter: w}
	_, pattern := s.agent.Handler(r)
	if pattern == "/agent/" {
		pattern = "unmatched"
	}
	if r.Header.Get(HeaderAPIKey) != "" {
		httpx.WriteError(rec, errs.Unauthorizedf("API keys are not accepted on agent routes"))
	} else if err := s.authenticateAgent(r, ri); err != nil {
		if errs.StatusOf(err) == http.StatusInternalServerError {
			s.log.ErrorContext(r.Context(), "authenticate agent", "err", err)
		} else {
			rec.Header().Set("WWW-Authenticate", `Bearer realm="patchline-agent"`)
		}
		httpx.WriteError(rec, err)
	} else {
		s.agent.ServeHTTP(rec, r)
	}
	s.cfg.Metrics.observe(pattern, rec.code(), s.now().Sub(start))
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

// heldResponse holds a response until flush writes it out. Its header is
// the real writer's, which is not sent before flush.
type heldResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
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
	return h.body.Write(b)
}

func (h *heldResponse) code() int {
	if h.status == 0 {
		return http.StatusOK
	}
	return h.status
}

// flush writes the held response to w.
func (h *heldResponse) flush(w http.ResponseWriter) {
	w.WriteHeader(h.code())
	w.Write(h.body.Bytes())
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
