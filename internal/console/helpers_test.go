package console

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/admin"
	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/control/sqlstore"
	"github.com/patchline/patchline/internal/device"
)

const (
	testEmail    = "ops@example.com"
	testPassword = "correct horse battery staple"
)

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// env is a console on a fresh store, served over HTTP.
type env struct {
	t     *testing.T
	store *sqlstore.Store
	srv   *Server
	http  *httptest.Server
	clock *clock
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "control.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clk := &clock{t: time.Now().UTC().Truncate(time.Second)}
	srv, err := New(ctx, Config{
		Admins: store, FirstAdmin: store, Sessions: store, TOTP: store, Keys: store, Audit: store,
		Agents: store, Commands: store, Rings: store, Rollouts: store, Policies: store,
		Now: clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &env{t: t, store: store, srv: srv, http: hs, clock: clk}
}

// reconfigure serves e's console anew with its configuration changed by
// change.
func (e *env) reconfigure(change func(*Config)) {
	e.t.Helper()
	cfg := e.srv.cfg
	change(&cfg)
	srv, err := New(context.Background(), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	e.t.Cleanup(hs.Close)
	e.srv, e.http = srv, hs
}

// mustAdmin creates the administrator of the tests on the store.
func (e *env) mustAdmin() *admin.Admin {
	e.t.Helper()
	a := &admin.Admin{ID: admin.NewID(), Email: testEmail, PasswordHash: admin.HashPassword(testPassword), CreatedAt: e.clock.Now()}
	if err := e.store.CreateAdmin(context.Background(), a); err != nil {
		e.t.Fatal(err)
	}
	return a
}

// browser is a client with cookies that does not follow redirects and
// remembers the CSRF token of the last page.
type browser struct {
	e      *env
	client *http.Client
	csrf   string
	header http.Header // extra request headers
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{e: e, header: http.Header{}, client: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// response is what one request got.
type response struct {
	Status int
	Header http.Header
	Body   string
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]*)"`)

func (b *browser) do(req *http.Request) *response {
	b.e.t.Helper()
	for k, v := range b.header {
		req.Header[k] = v
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.e.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	r := &response{Status: resp.StatusCode, Header: resp.Header, Body: string(body)}
	if m := csrfField.FindStringSubmatch(r.Body); m != nil {
		b.csrf = m[1]
	}
	return r
}

func (b *browser) get(path string) *response {
	b.e.t.Helper()
	req, err := http.NewRequest("GET", b.e.http.URL+path, nil)
	if err != nil {
		b.e.t.Fatal(err)
	}
	return b.do(req)
}

// post submits a form with the CSRF token of the last page unless the
// form carries one.
func (b *browser) post(path string, form url.Values) *response {
	b.e.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if !form.Has("csrf") {
		form.Set("csrf", b.csrf)
	}
	req, err := http.NewRequest("POST", b.e.http.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

// cookie returns the value of a cookie the browser holds.
func (b *browser) cookie(name string) string {
	u, _ := url.Parse(b.e.http.URL)
	for _, c := range b.client.Jar.Cookies(u) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// signIn signs the browser in as the test administrator.
func (b *browser) signIn() {
	b.e.t.Helper()
	b.get("/sign-in")
	r := b.post("/sign-in", url.Values{"email": {testEmail}, "password": {testPassword}})
	if r.Status != http.StatusSeeOther {
		b.e.t.Fatalf("sign in: status %d\n%s", r.Status, r.Body)
	}
}

// wantStatus fails the test unless r has the status.
func wantStatus(t *testing.T, what string, r *response, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s: status %d, want %d\n%s", what, r.Status, status, r.Body)
	}
}

// wantRedirect fails the test unless r redirects to a location with the
// given prefix.
func wantRedirect(t *testing.T, what string, r *response, prefix string) {
	t.Helper()
	if r.Status != http.StatusSeeOther || !strings.HasPrefix(r.Header.Get("Location"), prefix) {
		t.Fatalf("%s: status %d to %q, want 303 to %s…\n%s", what, r.Status, r.Header.Get("Location"), prefix, r.Body)
	}
}

// auditEntries returns the whole audit log, oldest first.
func (e *env) auditEntries() []*audit.Entry {
	e.t.Helper()
	var out []*audit.Entry
	if err := e.store.WalkAudit(context.Background(), func(en *audit.Entry) error {
		out = append(out, en)
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// lastAudit returns the newest entry with the given action.
func (e *env) lastAudit(action string) *audit.Entry {
	e.t.Helper()
	es, err := e.store.FindAuditEntries(context.Background(), audit.Filter{Action: action, Limit: 1})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(es) == 0 {
		e.t.Fatalf("no %s entry in the audit log", action)
	}
	return es[0]
}

// enroll enrolls an agent on the store.
func (e *env) enroll(hostname string, fu device.FeatureUpgrade, updates ...device.Update) *device.Agent {
	e.t.Helper()
	ctx := context.Background()
	secret := apikey.NewSecret(device.EnrollSecretPrefix)
	now := e.clock.Now()
	if err := e.store.CreateEnrollSecret(ctx, &device.EnrollSecret{ID: device.NewID(device.EnrollSecretIDPrefix), SecretHash: apikey.HashSecret(secret), CreatedBy: "test", CreatedAt: now}); err != nil {
		e.t.Fatal(err)
	}
	a := &device.Agent{
		ID: device.NewID(device.AgentIDPrefix), Hostname: hostname,
		OS:   device.OS{Platform: "windows", Name: "Windows 11 Pro", Version: "23H2", Build: "22631.3447"},
		Arch: "amd64", AgentVersion: "1.0.0", Capability: 1, IPs: []string{"10.0.4.17"},
		EnrolledAt: now, LastSeenAt: now,
		Inventory:      device.Inventory{Software: []device.Software{{Name: "7-Zip", Version: "23.01", Ecosystem: "Desktop"}}, PendingUpdates: updates},
		FeatureUpgrade: fu, CredentialHash: apikey.HashSecret(apikey.NewSecret(device.AgentCredentialPrefix)),
	}
	if err := e.store.EnrollAgent(ctx, apikey.HashSecret(secret), a); err != nil {
		e.t.Fatal(err)
	}
	got, err := e.store.FindAgentByID(ctx, a.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}
