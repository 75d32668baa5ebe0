package controlapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/apikey"
)

// fixedClock makes the server read a time the test moves.
func (e *env) fixedClock() *time.Time {
	now := time.Now()
	e.srv.now = func() time.Time { return now }
	return &now
}

// doFrom is e.do from another client address, without the OpenAPI check.
func (e *env) doFrom(addr string, req request) *httptest.ResponseRecorder {
	e.t.Helper()
	var body []byte
	if req.body != nil {
		body, _ = json.Marshal(req.body)
	}
	r := httptest.NewRequest(req.method, "http://control.test"+req.path, bytes.NewReader(body))
	r.RemoteAddr = addr
	if req.apiKey != "" {
		r.Header.Set(HeaderAPIKey, req.apiKey)
	}
	if req.bearer != "" {
		r.Header.Set("Authorization", "Bearer "+req.bearer)
	}
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, r)
	return rec
}

func wantThrottled(t *testing.T, what string, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("%s: status %d, want 429: %s", what, rec.Code, rec.Body)
	}
	if s, err := strconv.Atoi(rec.Header().Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("%s: Retry-After %q", what, rec.Header().Get("Retry-After"))
	}
	detail := problem(t, rec, http.StatusTooManyRequests)
	if !strings.Contains(detail, "too many failed authentications") {
		t.Errorf("%s: detail %q", what, detail)
	}
}

func TestAPIKeyFailureThrottle(t *testing.T) {
	e := newEnv(t)
	now := e.fixedClock()
	id, _, _ := strings.Cut(e.key, ".")
	unknownFull, _, _ := apikey.New(apikey.Params{Name: "never stored", CreatedBy: "test"}, *now)
	_, otherSecret, _ := strings.Cut(unknownFull, ".")

	// A wrong secret and an unknown keyId read the same: nothing says
	// whether the keyId exists.
	wrong := problem(t, e.do(request{method: "GET", path: "/api/agents", apiKey: id + "." + otherSecret}), http.StatusUnauthorized)
	unknown := problem(t, e.do(request{method: "GET", path: "/api/agents", apiKey: unknownFull}), http.StatusUnauthorized)
	if wrong != unknown {
		t.Errorf("wrong secret %q, unknown keyId %q: the answers differ", wrong, unknown)
	}
	// A request without a key guesses nothing and is not counted.
	for range 20 {
		problem(t, e.do(request{method: "GET", path: "/api/agents"}), http.StatusUnauthorized)
	}
	for i := 2; i < authFreeFailures; i++ {
		problem(t, e.do(request{method: "GET", path: "/api/agents", apiKey: unknownFull}), http.StatusUnauthorized)
	}
	// Locked: even the right key is refused without being looked at, and
	// the refusal is audited.
	rec := e.do(request{method: "GET", path: "/api/agents", apiKey: e.key})
	wantThrottled(t, "right key from a locked address", rec)
	en := e.lastAudit()
	if en.Status != http.StatusTooManyRequests || en.KeyID != e.keyID || !strings.Contains(string(en.Details), "throttled") {
		t.Errorf("audit entry of the throttled request: %+v %s", en, en.Details)
	}
	// Other addresses, and the agent chain of the same address, are not
	// affected.
	if rec := e.doFrom("198.51.100.9:1", request{method: "GET", path: "/api/agents", apiKey: e.key}); rec.Code != http.StatusOK {
		t.Errorf("another address: %d %s", rec.Code, rec.Body)
	}
	a := e.enroll("laptop-1", "linux")
	e.checkIn(a, agentproto.CheckInRequest{})
	// An IPv6 client is counted per /64.
	for i := range authFreeFailures {
		e.doFrom("[2001:db8::"+strconv.Itoa(i+1)+"]:1", request{method: "GET", path: "/api/agents", apiKey: unknownFull})
	}
	wantThrottled(t, "another address of the /64", e.doFrom("[2001:db8::ffff]:1", request{method: "GET", path: "/api/agents", apiKey: e.key}))
	if rec := e.doFrom("[2001:db8:0:1::1]:1", request{method: "GET", path: "/api/agents", apiKey: e.key}); rec.Code != http.StatusOK {
		t.Errorf("another /64: %d %s", rec.Code, rec.Body)
	}

	// The lock lasts authLockout, then doubles with each failure.
	*now = now.Add(authLockout)
	decode[listJSON[agentJSON]](t, e.do(request{method: "GET", path: "/api/agents", apiKey: e.key}), http.StatusOK)
	problem(t, e.do(request{method: "GET", path: "/api/agents", apiKey: unknownFull}), http.StatusUnauthorized)
	*now = now.Add(authLockout)
	wantThrottled(t, "second lock", e.do(request{method: "GET", path: "/api/agents", apiKey: e.key}))
	*now = now.Add(authForget + authMaxLockout)
	decode[listJSON[agentJSON]](t, e.do(request{method: "GET", path: "/api/agents", apiKey: e.key}), http.StatusOK)
}

func TestAgentFailureThrottle(t *testing.T) {
	e := newEnv(t)
	e.fixedClock()
	a := e.enroll("laptop-1", "linux")
	other := e.enroll("laptop-2", "linux")
	_, secret, _ := strings.Cut(a.credential, ".")
	_, otherSecret, _ := strings.Cut(other.credential, ".")

	// A wrong credential of a real agent and the credential of an agent
	// that does not exist read the same.
	wrong := problem(t, e.do(request{method: "POST", path: agentproto.PathCheckIn, bearer: a.id + "." + otherSecret, body: agentproto.CheckInRequest{}}), http.StatusUnauthorized)
	unknown := problem(t, e.do(request{method: "POST", path: agentproto.PathCheckIn, bearer: "agt_0000000000000000000000000." + secret, body: agentproto.CheckInRequest{}}), http.StatusUnauthorized)
	if wrong != unknown {
		t.Errorf("wrong credential %q, unknown agent %q: the answers differ", wrong, unknown)
	}
	// Wrong enrollment secrets count too.
	bad := agentproto.EnrollRequest{EnrollSecret: "ples_nope", Capability: agentproto.CapabilityVersion, Hostname: "h", OS: agentproto.OS{Platform: "linux"}}
	problem(t, e.do(request{method: "POST", path: agentproto.PathEnroll, body: bad}), http.StatusUnauthorized)
	bad.EnrollSecret = apikey.NewSecret("ples_")
	problem(t, e.do(request{method: "POST", path: agentproto.PathEnroll, body: bad}), http.StatusUnauthorized)
	for i := 4; i < authFreeFailures; i++ {
		problem(t, e.do(request{method: "POST", path: agentproto.PathCheckIn, bearer: a.id + "." + otherSecret, body: agentproto.CheckInRequest{}}), http.StatusUnauthorized)
	}
	rec := e.doFrom("192.0.2.7:4711", request{method: "POST", path: agentproto.PathCheckIn, bearer: a.credential,
		body: agentproto.CheckInRequest{Capability: agentproto.CapabilityVersion, Hostname: "h", OS: agentproto.OS{Platform: "linux"}}})
	wantThrottled(t, "right credential from a locked address", rec)
	// The API chain of the same address is not affected.
	decode[listJSON[agentJSON]](t, e.do(request{method: "GET", path: "/api/agents", apiKey: e.key}), http.StatusOK)
	if rec := e.doFrom("198.51.100.9:1", request{method: "POST", path: agentproto.PathCheckIn, bearer: a.credential,
		body: agentproto.CheckInRequest{Capability: agentproto.CapabilityVersion, Hostname: "h", OS: agentproto.OS{Platform: "linux"}}}); rec.Code != http.StatusOK {
		t.Errorf("another address: %d %s", rec.Code, rec.Body)
	}
}

func TestAgentInputValidation(t *testing.T) {
	e := newEnv(t)
	a := e.enroll("laptop-1", "linux")
	goodOS := agentproto.OS{Platform: "linux", Name: "Debian GNU/Linux", Version: "12", Build: "6.1.0"}
	long := strings.Repeat("x", 300)
	tests := []struct {
		name   string
		change func(*agentproto.CheckInRequest)
		want   string // in the problem's detail; "" for a success
	}{
		{"valid", func(r *agentproto.CheckInRequest) {}, ""},
		{"IPv6 and IPv4 addresses", func(r *agentproto.CheckInRequest) { r.IPs = []string{"10.0.0.7", "2001:db8::7"} }, ""},
		{"no arch", func(r *agentproto.CheckInRequest) { r.Arch = "" }, ""},
		{"newer agent", func(r *agentproto.CheckInRequest) { r.Capability = agentproto.CapabilityVersion + 5 }, ""},
		{"capability 0", func(r *agentproto.CheckInRequest) { r.Capability = 0 }, "capability 0 is not supported"},
		{"negative capability", func(r *agentproto.CheckInRequest) { r.Capability = -3 }, "is not supported"},
		{"not an IP", func(r *agentproto.CheckInRequest) { r.IPs = []string{"10.0.0.7", "example.com"} }, `ips[1] "example.com" is not an IP address`},
		{"IP with a port", func(r *agentproto.CheckInRequest) { r.IPs = []string{"10.0.0.7:22"} }, "is not an IP address"},
		{"IP with CR/LF", func(r *agentproto.CheckInRequest) { r.IPs = []string{"10.0.0.7\r\n"} }, "is not an IP address"},
		{"too many IPs", func(r *agentproto.CheckInRequest) {
			r.IPs = make([]string, agentproto.MaxIPs+1)
			for i := range r.IPs {
				r.IPs[i] = "10.0.0.1"
			}
		}, "at most 256 addresses"},
		{"unknown arch", func(r *agentproto.CheckInRequest) { r.Arch = "pdp11" }, `arch "pdp11" is not a known architecture`},
		{"arch with a newline", func(r *agentproto.CheckInRequest) { r.Arch = "amd64\n" }, "is not a known architecture"},
		{"hostname with a control character", func(r *agentproto.CheckInRequest) { r.Hostname = "host\x1b[2J" }, "hostname must have 1 to 255 printable characters"},
		{"hostname with a C1 control", func(r *agentproto.CheckInRequest) { r.Hostname = "host\u009b2J" }, "hostname must not contain control characters"},
		{"hostname too long", func(r *agentproto.CheckInRequest) { r.Hostname = long }, "hostname must have 1 to 255"},
		{"os name with an escape", func(r *agentproto.CheckInRequest) { r.OS.Name = "Debian\x1b]0;pwned\x07" }, "os.name must not contain control characters"},
		{"os version with a C1 control", func(r *agentproto.CheckInRequest) { r.OS.Version = "12\u0085" }, "os.version must not contain control characters"},
		{"os build too long", func(r *agentproto.CheckInRequest) { r.OS.Build = long }, "os.build must have at most 200 bytes"},
		{"unknown platform", func(r *agentproto.CheckInRequest) { r.OS.Platform = "plan9" }, "os.platform must be windows, macos or linux"},
		{"agent version with a newline", func(r *agentproto.CheckInRequest) { r.AgentVersion = "1.0\nlevel=ERROR" }, "agentVersion must not contain control characters"},
		{"agent version too long", func(r *agentproto.CheckInRequest) { r.AgentVersion = long }, "agentVersion must have at most 64 bytes"},
		{"feature upgrade target with a tab", func(r *agentproto.CheckInRequest) { r.FeatureUpgrade.Target = "24H2\t" }, "featureUpgrade.target must not contain control characters"},
	}
	for _, tc := range tests {
		t.Run("check-in/"+tc.name, func(t *testing.T) {
			req := agentproto.CheckInRequest{Capability: agentproto.CapabilityVersion, Hostname: "laptop-1", OS: goodOS, Arch: "amd64", AgentVersion: "1.2.3", IPs: []string{"10.0.0.7"}}
			tc.change(&req)
			rec := e.do(request{method: "POST", path: agentproto.PathCheckIn, bearer: a.credential, body: req})
			if tc.want == "" {
				decode[agentproto.CheckInResponse](t, rec, http.StatusOK)
				return
			}
			if detail := problem(t, rec, http.StatusBadRequest); !strings.Contains(detail, tc.want) {
				t.Errorf("detail %q, want %q", detail, tc.want)
			}
		})
		t.Run("enroll/"+tc.name, func(t *testing.T) {
			c := agentproto.CheckInRequest{Capability: agentproto.CapabilityVersion, Hostname: "laptop-9", OS: goodOS, Arch: "amd64", AgentVersion: "1.2.3"}
			tc.change(&c)
			if len(c.IPs) > 0 || c.FeatureUpgrade.Target != "" {
				t.Skip("enrollment carries no addresses nor feature upgrade")
			}
			req := agentproto.EnrollRequest{EnrollSecret: e.enrollSecret, Capability: c.Capability, Hostname: c.Hostname, OS: c.OS, Arch: c.Arch, AgentVersion: c.AgentVersion}
			rec := e.do(request{method: "POST", path: agentproto.PathEnroll, body: req})
			if tc.want == "" {
				decode[agentproto.EnrollResponse](t, rec, http.StatusCreated)
				return
			}
			if detail := problem(t, rec, http.StatusBadRequest); !strings.Contains(detail, tc.want) {
				t.Errorf("detail %q, want %q", detail, tc.want)
			}
		})
	}
}

// bundleEnv enrolls an agent, queues collect-logs and uploads a bundle of
// n bytes; it returns the command id and the bundle.
func bundleEnv(t *testing.T, e *env, n int) (string, []byte) {
	t.Helper()
	a := e.enroll("laptop-1", "linux")
	cmd := decode[commandJSON](t, e.do(request{method: "POST", path: "/api/agents/" + a.id + "/collect-logs", apiKey: e.key}), http.StatusAccepted)
	e.checkIn(a, agentproto.CheckInRequest{})
	bundle := bytes.Repeat([]byte("log line\n"), n/9+1)[:n]
	rec := e.do(request{method: "PUT", path: "/agent/v1/commands/" + cmd.ID + "/log-bundle", bearer: a.credential, body: bundle, contentType: "application/gzip"})
	decode[agentproto.LogBundleResponse](t, rec, http.StatusCreated)
	return cmd.ID, bundle
}

// firstWrite records the status and body a handler wrote, and whether
// the audit entry existed when the first byte left.
type firstWrite struct {
	*httptest.ResponseRecorder
	before  func() bool
	audited *bool
}

func (w *firstWrite) Write(b []byte) (int, error) {
	if w.audited == nil {
		v := w.before()
		w.audited = &v
	}
	return w.ResponseRecorder.Write(b)
}

func TestLargeDownloadStreamsAndIsAudited(t *testing.T) {
	e := newEnv(t)
	id, bundle := bundleEnv(t, e, 3*heldLimit+17)
	path := "/api/commands/" + id + "/log-bundle"
	r := httptest.NewRequest("GET", "http://control.test"+path, nil)
	r.RemoteAddr = "192.0.2.7:4711"
	r.Header.Set(HeaderAPIKey, e.key)
	w := &firstWrite{ResponseRecorder: httptest.NewRecorder(), before: func() bool {
		en := e.lastAudit()
		return en.Path == path && en.Status == http.StatusOK
	}}
	e.srv.ServeHTTP(w, r)
	if w.Code != http.StatusOK || !bytes.Equal(w.Body.Bytes(), bundle) {
		t.Fatalf("status %d, %d bytes of %d", w.Code, w.Body.Len(), len(bundle))
	}
	if w.audited == nil || !*w.audited {
		t.Error("the bundle left before its audit entry was written")
	}
	if w.Header().Get("Content-Length") != strconv.Itoa(len(bundle)) {
		t.Errorf("Content-Length %q", w.Header().Get("Content-Length"))
	}
}

func TestHeldResponse(t *testing.T) {
	t.Run("small response waits for the commit", func(t *testing.T) {
		rec := httptest.NewRecorder()
		commits := 0
		h := &heldResponse{header: rec.Header(), w: rec, limit: 10, commit: func() error { commits++; return nil }}
		h.WriteHeader(http.StatusCreated)
		h.Write([]byte("12345"))
		if rec.Body.Len() != 0 || commits != 0 {
			t.Fatalf("sent %q after %d commits before finish", rec.Body, commits)
		}
		if err := h.finish(); err != nil || rec.Code != http.StatusCreated || rec.Body.String() != "12345" || commits != 1 {
			t.Fatalf("finish: %v, %d %q, %d commits", err, rec.Code, rec.Body, commits)
		}
	})
	t.Run("large response commits once and streams", func(t *testing.T) {
		rec := httptest.NewRecorder()
		commits := 0
		h := &heldResponse{header: rec.Header(), w: rec, limit: 10, commit: func() error { commits++; return nil }}
		h.Write([]byte("1234567"))
		h.Write([]byte("89abcdef"))
		if commits != 1 || rec.Body.String() != "123456789abcdef" {
			t.Fatalf("%d commits, sent %q", commits, rec.Body)
		}
		h.Write([]byte("!"))
		if err := h.finish(); err != nil || commits != 1 || rec.Body.String() != "123456789abcdef!" {
			t.Fatalf("finish: %v, %d commits, sent %q", err, commits, rec.Body)
		}
	})
	t.Run("failed commit sends nothing", func(t *testing.T) {
		rec := httptest.NewRecorder()
		boom := errors.New("disk full")
		h := &heldResponse{header: rec.Header(), w: rec, limit: 10, commit: func() error { return boom }}
		if _, err := h.Write([]byte("0123456789abc")); err == nil {
			t.Fatal("write after a failed commit succeeded")
		}
		if _, err := h.Write([]byte("x")); err == nil {
			t.Fatal("second write after a failed commit succeeded")
		}
		if err := h.finish(); !errors.Is(err, boom) || h.sent || rec.Body.Len() != 0 {
			t.Fatalf("finish: %v, sent %v %q", err, h.sent, rec.Body)
		}
	})
}

func TestLargeDownloadAuditFailure(t *testing.T) {
	e := newEnv(t)
	id, _ := bundleEnv(t, e, 2*heldLimit)
	fa := &fakeAudit{err: errors.New("disk full")}
	e.srv.cfg.Audit = fa
	r := httptest.NewRequest("GET", "http://control.test/api/commands/"+id+"/log-bundle", nil)
	r.Header.Set(HeaderAPIKey, e.key)
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, r)
	if rec.Code != http.StatusInternalServerError || strings.Contains(rec.Body.String(), "log line") {
		t.Fatalf("status %d, body %.200q", rec.Code, rec.Body)
	}
	if rec.Header().Get("Content-Disposition") != "" {
		t.Errorf("the 500 kept the bundle's headers: %v", rec.Header())
	}
}

func TestFailureKey(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"192.0.2.1", "api:192.0.2.1"},
		{"::ffff:192.0.2.1", "api:192.0.2.1"},
		{"2001:db8::1", "api:2001:db8::/64"},
		{"not an address", "api:not an address"},
		{"127.0.0.1", ""},
		{"::1", ""},
		{"::ffff:127.0.0.2", ""},
	} {
		if got := failureKey("api", tc.addr); got != tc.want {
			t.Errorf("failureKey(%q) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

func TestLoopbackIsNotThrottled(t *testing.T) {
	e := newEnv(t)
	e.fixedClock()
	for range 3 * authFreeFailures {
		if rec := e.doFrom("127.0.0.1:5000", request{method: "GET", path: "/api/agents", apiKey: "plk_0000000000000000.plsk_x"}); rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong key from loopback: %d", rec.Code)
		}
	}
	if rec := e.doFrom("127.0.0.1:5000", request{method: "GET", path: "/api/agents", apiKey: e.key}); rec.Code != http.StatusOK {
		t.Errorf("right key from loopback after failures: %d %s", rec.Code, rec.Body)
	}
}

// slowReader gives n chunks of size bytes, pausing before each.
type slowReader struct {
	n, size int
	pause   time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.n == 0 {
		return 0, io.EOF
	}
	time.Sleep(s.pause)
	s.n--
	return copy(p, bytes.Repeat([]byte("z"), min(len(p), s.size))), nil
}

// TestLogBundleOutlastsReadTimeout uploads a bundle more slowly than the
// listener's read timeout allows other requests.
func TestLogBundleOutlastsReadTimeout(t *testing.T) {
	e := newEnv(t)
	a := e.enroll("laptop-1", "linux")
	cmd := decode[commandJSON](t, e.do(request{method: "POST", path: "/api/agents/" + a.id + "/collect-logs", apiKey: e.key}), http.StatusAccepted)
	e.checkIn(a, agentproto.CheckInRequest{})
	srv := httptest.NewUnstartedServer(e.srv)
	srv.Config.ReadTimeout = 300 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)

	send := func(path string, body io.Reader) (int, string) {
		req, _ := http.NewRequest("PUT", srv.URL+path, body)
		req.Header.Set("Authorization", "Bearer "+a.credential)
		req.Header.Set("Content-Type", "application/gzip")
		resp, err := srv.Client().Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, body := send("/agent/v1/commands/"+cmd.ID+"/log-bundle", &slowReader{n: 8, size: 4096, pause: 100 * time.Millisecond})
	if status != http.StatusCreated {
		t.Fatalf("slow upload: %d %s", status, body)
	}
	// Other requests keep the listener's timeout.
	status, _ = send(agentproto.PathCheckIn, &slowReader{n: 8, size: 1, pause: 100 * time.Millisecond})
	if status == http.StatusOK {
		t.Error("a slow check-in outlasted the read timeout")
	}
}

// TestEnrollmentID: an enrollment sent again with its enrollmentId
// answers the same agent, with a credential that replaces the first; a
// malformed id is a 400, and one whose agent has checked in a 409.
func TestEnrollmentID(t *testing.T) {
	e := newEnv(t)
	req := agentproto.EnrollRequest{EnrollSecret: e.enrollSecret, Capability: agentproto.CapabilityVersion, Hostname: "laptop-7",
		OS: agentproto.OS{Platform: "linux", Name: "Debian GNU/Linux", Version: "12"}, Arch: "amd64", EnrollmentID: "QZ7M4XJ2KD5WB3NRTF6HY8CEPA"}
	enroll := func() agentproto.EnrollResponse {
		t.Helper()
		return decode[agentproto.EnrollResponse](t, e.do(request{method: "POST", path: agentproto.PathEnroll, body: req}), http.StatusCreated)
	}
	first, again := enroll(), enroll()
	if again.AgentID != first.AgentID || again.Credential == first.Credential {
		t.Fatalf("sent again: agent %s, want %s with a new credential", again.AgentID, first.AgentID)
	}
	checkIn := agentproto.CheckInRequest{Capability: agentproto.CapabilityVersion, Hostname: "laptop-7", OS: req.OS}
	problem(t, e.do(request{method: "POST", path: agentproto.PathCheckIn, bearer: first.Credential, body: checkIn}), http.StatusUnauthorized)
	decode[agentproto.CheckInResponse](t, e.do(request{method: "POST", path: agentproto.PathCheckIn, bearer: again.Credential, body: checkIn}), http.StatusOK)
	if detail := problem(t, e.do(request{method: "POST", path: agentproto.PathEnroll, body: req}), http.StatusConflict); !strings.Contains(detail, "already been answered") {
		t.Errorf("a spent enrollment id: %q", detail)
	}
	for _, id := range []string{"short", strings.Repeat("A", 65), "QZ7M4XJ2KD5WB3NRTF6HY8CEP\n"} {
		req.EnrollmentID = id
		if detail := problem(t, e.do(request{method: "POST", path: agentproto.PathEnroll, body: req}), http.StatusBadRequest); !strings.Contains(detail, "enrollmentId must be") {
			t.Errorf("enrollmentId %q: %q", id, detail)
		}
	}
}
