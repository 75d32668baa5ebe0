// The console's routes, sign-in, sessions and pages. This file is over
// 600 lines because it holds a test for each page and guard of the
// console (authorization of every route, setup, throttling, keys, agents,
// rollouts, TOTP, the audit log), each on its own environment; the
// exposure pages have exposure_test.go.

package console

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/patchline/patchline/internal/admin"
	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/device"
)

// fill replaces the wildcards of a route path with a value.
func fill(path, v string) string {
	return regexp.MustCompile(`\{[a-z]+\}`).ReplaceAllString(strings.TrimSuffix(path, "{$}"), v)
}

// TestEveryRouteAuthorizes walks every registered route: signed out, a
// GET of a console page redirects to sign-in and a POST is refused with
// 403; signed in, a POST without the CSRF token, with another session's
// token or from another site is refused with 403. Every response carries
// the console's security headers.
func TestEveryRouteAuthorizes(t *testing.T) {
	e := newEnv(t)
	e.mustAdmin()
	signedIn := e.browser()
	signedIn.signIn()
	other := e.browser()
	other.signIn()
	otherToken := other.csrf

	routes := e.srv.Routes()
	if len(routes) < 30 {
		t.Fatalf("only %d routes registered", len(routes))
	}
	for _, rt := range routes {
		path := fill(rt.Path, "x_unknown")
		if rt.Access == Asset {
			path = "/static/console.css"
		}
		t.Run(rt.Pattern(), func(t *testing.T) {
			anon := e.browser()
			var r *response
			if rt.Method == "GET" {
				r = anon.get(path)
			} else {
				r = anon.post(path, url.Values{"csrf": {"forged"}})
			}
			if got := r.Header.Get("Content-Security-Policy"); got != contentSecurityPolicy {
				t.Errorf("Content-Security-Policy = %q", got)
			}
			if r.Header.Get("X-Content-Type-Options") != "nosniff" || r.Header.Get("X-Frame-Options") != "DENY" {
				t.Errorf("security headers missing: %v", r.Header)
			}
			switch rt.Access {
			case Asset:
				wantStatus(t, "asset", r, http.StatusOK)
				return
			case Public:
				if rt.Method == "POST" {
					wantStatus(t, "public POST with a forged token", r, http.StatusForbidden)
					r = anon.post(path, url.Values{"csrf": {""}})
					wantStatus(t, "public POST without a token", r, http.StatusForbidden)
				} else if r.Status != http.StatusOK && r.Status != http.StatusSeeOther {
					t.Errorf("public GET: status %d", r.Status)
				}
				return
			case Session, Fresh:
			default:
				t.Fatalf("route %s has no access level", rt.Pattern())
			}
			if rt.Method == "GET" {
				wantRedirect(t, "signed-out GET", r, "/sign-in?next=")
				return
			}
			wantStatus(t, "signed-out POST", r, http.StatusForbidden)
			for _, bad := range []string{"", "forged", otherToken} {
				r = signedIn.post(path, url.Values{"csrf": {bad}})
				wantStatus(t, "POST with token "+bad, r, http.StatusForbidden)
			}
			// The right token, but from another site.
			req, _ := http.NewRequest("POST", e.http.URL+path, strings.NewReader(url.Values{"csrf": {signedIn.csrf}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Sec-Fetch-Site", "cross-site")
			r = signedIn.do(req)
			wantStatus(t, "cross-site POST", r, http.StatusForbidden)
			req, _ = http.NewRequest("POST", e.http.URL+path, strings.NewReader(url.Values{"csrf": {signedIn.csrf}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", "https://evil.example")
			r = signedIn.do(req)
			wantStatus(t, "POST with a foreign Origin", r, http.StatusForbidden)
		})
	}
}

func TestSetupAndSignIn(t *testing.T) {
	e := newEnv(t)
	b := e.browser()

	wantRedirect(t, "console root", b.get("/"), "/sign-in?next=%2F")
	wantRedirect(t, "sign-in without administrators", b.get("/sign-in"), "/setup")
	r := b.get("/setup")
	wantStatus(t, "setup page", r, http.StatusOK)
	if b.cookie(presessionCookie) == "" {
		t.Fatal("the setup page set no pre-session cookie")
	}

	form := url.Values{"setup_code": {"AAAA-BBBB-CCCC"}, "email": {testEmail}, "password": {testPassword}, "password_confirm": {testPassword}}
	r = b.post("/setup", form)
	wantStatus(t, "setup with a wrong code", r, http.StatusUnprocessableEntity)
	if en := e.lastAudit("admin.login_failed"); !strings.Contains(string(en.Details), "wrong setup code") {
		t.Errorf("failed setup audited as %s", en.Details)
	}

	form.Set("setup_code", strings.ToLower(e.srv.setupCode))
	form.Set("password_confirm", "something else entirely")
	r = b.post("/setup", form)
	wantStatus(t, "setup with different passwords", r, http.StatusUnprocessableEntity)
	if !strings.Contains(r.Body, "not the same") || !strings.Contains(r.Body, `value="ops@example.com"`) {
		t.Errorf("setup error page does not say what is wrong or lost the email:\n%s", r.Body)
	}
	form.Set("password", "short")
	form.Set("password_confirm", "short")
	wantStatus(t, "setup with a short password", b.post("/setup", form), http.StatusUnprocessableEntity)

	form.Set("password", testPassword)
	form.Set("password_confirm", testPassword)
	wantRedirect(t, "setup", b.post("/setup", form), "/sign-in")
	wantRedirect(t, "console root after setup", b.get("/"), "/sign-in")
	if r := b.get("/sign-in"); !strings.Contains(r.Body, "created. Sign in") {
		t.Errorf("no message after setup:\n%s", r.Body)
	}
	if en := e.lastAudit("admin.created"); en.Actor != "anonymous" || !strings.Contains(string(en.Details), testEmail) {
		t.Errorf("admin.created entry = %+v %s", en, en.Details)
	}
	wantRedirect(t, "setup once an administrator exists", b.get("/setup"), "/sign-in")
	wantRedirect(t, "second setup", b.post("/setup", form), "/sign-in")
	admins, _ := e.store.FindAdmins(context.Background())
	if len(admins) != 1 {
		t.Fatalf("%d administrators after two setups", len(admins))
	}

	// Failed sign-ins say the same whether or not the account exists.
	r = b.get("/sign-in")
	wantStatus(t, "sign-in page", r, http.StatusOK)
	wrong := b.post("/sign-in", url.Values{"email": {testEmail}, "password": {"not the password at all"}})
	unknown := b.post("/sign-in", url.Values{"email": {"nobody@example.com"}, "password": {"not the password at all"}})
	wantStatus(t, "wrong password", wrong, http.StatusUnprocessableEntity)
	wantStatus(t, "unknown account", unknown, http.StatusUnprocessableEntity)
	if !strings.Contains(wrong.Body, signInFailed) || !strings.Contains(unknown.Body, signInFailed) {
		t.Errorf("failed sign-ins do not show the generic message")
	}
	if en := e.lastAudit("admin.login_failed"); !strings.Contains(string(en.Details), "unknown account") {
		t.Errorf("the audit log should say why: %s", en.Details)
	}

	// Sign in: a session cookie with the right attributes, stored hashed.
	b.get("/sign-in")
	req, _ := http.NewRequest("POST", e.http.URL+"/sign-in", strings.NewReader(url.Values{
		"csrf": {b.csrf}, "email": {testEmail}, "password": {testPassword}, "next": {"//evil.example/x"},
	}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/agents" {
		t.Fatalf("sign in with a foreign next: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var sessionSet string
	for _, v := range resp.Header.Values("Set-Cookie") {
		if strings.HasPrefix(v, sessionCookie+"=") {
			sessionSet = v
		}
	}
	for _, attr := range []string{"Path=/", "HttpOnly", "SameSite=Lax"} {
		if !strings.Contains(sessionSet, attr) {
			t.Errorf("session cookie %q lacks %s", sessionSet, attr)
		}
	}
	if strings.Contains(sessionSet, "Secure") || strings.Contains(sessionSet, "Max-Age") {
		t.Errorf("session cookie over plain HTTP: %q", sessionSet)
	}
	token := b.cookie(sessionCookie)
	sess, err := e.store.FindSession(context.Background(), admin.HashSessionToken(token))
	if err != nil || sess.AdminEmail != testEmail || sess.ReauthAt != nil {
		t.Fatalf("session of the cookie: %+v, %v", sess, err)
	}
	if en := e.lastAudit("admin.login"); en.Actor != "admin:"+testEmail || en.KeyID != "" {
		t.Errorf("admin.login entry = %+v", en)
	}
	wantStatus(t, "agents when signed in", b.get("/agents"), http.StatusOK)
	wantRedirect(t, "sign-in page when signed in", b.get("/sign-in?next=/audit"), "/audit")

	// Sign out ends the session on the server.
	b.get("/agents")
	wantRedirect(t, "sign out", b.post("/sign-out", nil), "/sign-in")
	if _, err := e.store.FindSession(context.Background(), admin.HashSessionToken(token)); err == nil {
		t.Error("the session survived sign-out")
	}
	wantRedirect(t, "agents after sign-out", b.get("/agents"), "/sign-in?next=%2Fagents")
	e.lastAudit("admin.logout")
}

func TestSignInThrottle(t *testing.T) {
	e := newEnv(t)
	e.mustAdmin()
	b := e.browser()
	b.get("/sign-in")
	for i := 0; i < freeFailures; i++ {
		wantStatus(t, "wrong password", b.post("/sign-in", url.Values{"email": {testEmail}, "password": {"wrong password here"}}), http.StatusUnprocessableEntity)
	}
	// Locked: even the right password is refused, and said so.
	r := b.post("/sign-in", url.Values{"email": {testEmail}, "password": {testPassword}})
	wantStatus(t, "throttled", r, http.StatusTooManyRequests)
	if r.Header.Get("Retry-After") == "" || !strings.Contains(r.Body, "Too many failed attempts") {
		t.Errorf("throttled answer: %v\n%s", r.Header, r.Body)
	}
	if en := e.lastAudit("admin.login_failed"); !strings.Contains(string(en.Details), "throttled") {
		t.Errorf("throttled attempt audited as %s", en.Details)
	}
	// An unknown account is throttled alike.
	for i := 0; i < freeFailures; i++ {
		b.post("/sign-in", url.Values{"email": {"ghost@example.com"}, "password": {"wrong password here"}})
	}
	e.clock.Add(maxLockout)
	b.signIn()
}

func TestThrottle(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	th := newThrottle()
	for i := 0; i < freeFailures-1; i++ {
		th.fail(now, "192.0.2.1", "a@example.com")
	}
	if d := th.wait(now, "192.0.2.1", "a@example.com"); d != 0 {
		t.Fatalf("locked after %d failures: %v", freeFailures-1, d)
	}
	th.fail(now, "192.0.2.1", "a@example.com")
	if d := th.wait(now, "192.0.2.9", "A@example.com "); d != baseLockout {
		t.Errorf("account lock from another address = %v, want %v", d, baseLockout)
	}
	if d := th.wait(now, "192.0.2.1", "b@example.com"); d != baseLockout {
		t.Errorf("address lock for another account = %v, want %v", d, baseLockout)
	}
	th.fail(now, "192.0.2.1", "a@example.com")
	if d := th.wait(now, "192.0.2.1", ""); d != 2*baseLockout {
		t.Errorf("second lock = %v, want doubled", d)
	}
	for i := 0; i < 40; i++ {
		th.fail(now, "192.0.2.1", "a@example.com")
	}
	if d := th.wait(now, "192.0.2.1", ""); d != maxLockout {
		t.Errorf("lock = %v, want the cap %v", d, maxLockout)
	}
	th.succeed("a@example.com")
	if d := th.wait(now, "192.0.2.7", "a@example.com"); d != 0 {
		t.Errorf("account still locked after a success: %v", d)
	}
	if d := th.wait(now.Add(maxLockout), "192.0.2.1", ""); d != 0 {
		t.Errorf("address locked past the cap: %v", d)
	}
}

func TestSessionExpiry(t *testing.T) {
	e := newEnv(t)
	e.mustAdmin()

	b := e.browser()
	b.signIn()
	e.clock.Add(IdleTimeout - time.Minute)
	wantStatus(t, "before the idle timeout", b.get("/agents"), http.StatusOK)
	e.clock.Add(IdleTimeout)
	wantRedirect(t, "after the idle timeout", b.get("/agents"), "/sign-in")
	if b.cookie(sessionCookie) != "" {
		t.Error("the expired session's cookie was not cleared")
	}

	b.signIn()
	end := e.clock.Now().Add(SessionLifetime)
	for e.clock.Now().Add(IdleTimeout / 2).Before(end) {
		e.clock.Add(IdleTimeout / 2)
		wantStatus(t, "active session", b.get("/agents"), http.StatusOK)
	}
	e.clock.Add(IdleTimeout / 2)
	wantRedirect(t, "past the absolute lifetime", b.get("/agents"), "/sign-in")
}

var fullKeyRE = regexp.MustCompile(`plk_[0-9A-Za-z]{16}\.plsk_[0-9A-Za-z]{46}`)

func TestKeys(t *testing.T) {
	e := newEnv(t)
	e.mustAdmin()
	b := e.browser()
	b.signIn()
	ctx := context.Background()

	r := b.get("/settings/api-keys")
	wantStatus(t, "keys page", r, http.StatusOK)
	if !strings.Contains(r.Body, "No keys yet") {
		t.Errorf("empty keys page:\n%s", r.Body)
	}
	wantStatus(t, "key without a name", b.post("/settings/api-keys", url.Values{"name": {" "}, "expiry": {"90d"}}), http.StatusUnprocessableEntity)
	b.get("/settings/api-keys")
	r = b.post("/settings/api-keys", url.Values{"name": {"root"}, "privileged": {"on"}, "expiry": {""}})
	wantStatus(t, "privileged key without expiry", r, http.StatusUnprocessableEntity)
	if !strings.Contains(r.Body, "needs an expiry") {
		t.Errorf("no expiry message:\n%s", r.Body)
	}

	// A key, shown once.
	r = b.post("/settings/api-keys", url.Values{"name": {"inventory export"}, "expiry": {""}})
	wantStatus(t, "generate key", r, http.StatusOK)
	full := fullKeyRE.FindString(r.Body)
	if full == "" || !strings.Contains(r.Body, "shown only this once") || r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("the key page does not show the key once:\n%s", r.Body)
	}
	keyID, secret, err := apikey.Parse(full)
	if err != nil {
		t.Fatal(err)
	}
	k, err := e.store.FindKeyByID(ctx, keyID)
	if err != nil || !apikey.Verify(k, secret) || k.Privileged || k.CreatedBy != testEmail {
		t.Fatalf("stored key %+v, %v", k, err)
	}
	if en := e.lastAudit("key.created"); en.Actor != "admin:"+testEmail || en.KeyID != "" || !strings.Contains(string(en.Details), keyID) {
		t.Errorf("key.created entry = %+v %s", en, en.Details)
	}
	for _, p := range []string{"/settings/api-keys", "/settings/api-keys/" + keyID} {
		r = b.get(p)
		wantStatus(t, p, r, http.StatusOK)
		if strings.Contains(r.Body, secret) || !strings.Contains(r.Body, keyID) {
			t.Errorf("%s shows the secret, or not the keyId", p)
		}
	}

	// Enabling privileged access asks for the password again.
	r = b.post("/settings/api-keys/"+keyID+"/privileged", url.Values{"expiry": {"30d"}})
	wantStatus(t, "enable privileged", r, http.StatusOK)
	if !strings.Contains(r.Body, "Confirm it’s you") || !strings.Contains(r.Body, `name="expiry" value="30d"`) || !strings.Contains(r.Body, "Enable privileged access for API key "+keyID) {
		t.Fatalf("no re-authentication step:\n%s", r.Body)
	}
	if k, _ := e.store.FindKeyByID(ctx, keyID); k.Privileged {
		t.Fatal("privileged before re-authentication")
	}
	r = b.post("/settings/api-keys/"+keyID+"/privileged", url.Values{"expiry": {"30d"}, "reauth_password": {"not my password"}})
	wantStatus(t, "wrong password", r, http.StatusUnprocessableEntity)
	if en := e.lastAudit("admin.login_failed"); !strings.Contains(string(en.Details), "re-authentication: wrong password") {
		t.Errorf("failed re-authentication audited as %s", en.Details)
	}
	r = b.post("/settings/api-keys/"+keyID+"/privileged", url.Values{"expiry": {"30d"}, "reauth_password": {testPassword}})
	wantRedirect(t, "enable privileged after re-authentication", r, "/settings/api-keys/"+keyID)
	k, _ = e.store.FindKeyByID(ctx, keyID)
	if !k.Privileged || k.ExpiresAt == nil || k.ExpiresAt.Sub(e.clock.Now()) != 30*24*time.Hour {
		t.Fatalf("key after enabling privileged access: %+v", k)
	}
	reauth := e.lastAudit("admin.reauthenticated")
	enabled := e.lastAudit("key.privileged_enabled")
	if reauth.ID >= enabled.ID || enabled.Actor != "admin:"+testEmail || !strings.Contains(string(enabled.Details), keyID) {
		t.Errorf("audit: %+v then %+v", reauth, enabled)
	}

	// Within the window, a privileged key is created without asking.
	e.clock.Add(ReauthWindow - time.Minute)
	b.get("/settings/api-keys")
	r = b.post("/settings/api-keys", url.Values{"name": {"patch night"}, "privileged": {"on"}, "expiry": {"7d"}})
	wantStatus(t, "privileged key within the window", r, http.StatusOK)
	if fullKeyRE.FindString(r.Body) == "" {
		t.Fatalf("no key shown:\n%s", r.Body)
	}
	// Past it, the console asks again, and the form survives the step.
	e.clock.Add(2 * time.Minute)
	r = b.post("/settings/api-keys", url.Values{"name": {"late night"}, "privileged": {"on"}, "expiry": {"7d"}})
	if !strings.Contains(r.Body, "Confirm it’s you") || !strings.Contains(r.Body, `value="late night"`) {
		t.Fatalf("no re-authentication past the window:\n%s", r.Body)
	}
	r = b.post("/settings/api-keys", url.Values{"name": {"late night"}, "privileged": {"on"}, "expiry": {"7d"}, "reauth_password": {testPassword}})
	wantStatus(t, "privileged key after re-authentication", r, http.StatusOK)
	if full := fullKeyRE.FindString(r.Body); full == "" {
		t.Fatal("no key after re-authentication")
	} else if id, _, _ := apikey.Parse(full); true {
		if k, err := e.store.FindKeyByID(ctx, id); err != nil || !k.Privileged || k.Name != "late night" {
			t.Errorf("privileged key = %+v, %v", k, err)
		}
	}

	// Revoke, after a confirmation page.
	r = b.get("/settings/api-keys/" + keyID + "/revoke")
	wantStatus(t, "revoke confirmation", r, http.StatusOK)
	if !strings.Contains(r.Body, "cannot be restored") {
		t.Errorf("the confirmation does not warn:\n%s", r.Body)
	}
	wantRedirect(t, "revoke", b.post("/settings/api-keys/"+keyID+"/revoke", nil), "/settings/api-keys")
	if k, _ := e.store.FindKeyByID(ctx, keyID); k.State(e.clock.Now()) != apikey.StateRevoked {
		t.Error("not revoked")
	}
	if en := e.lastAudit("key.revoked"); en.Actor != "admin:"+testEmail || !strings.Contains(string(en.Details), keyID) {
		t.Errorf("key.revoked entry = %+v", en)
	}
	r = b.get("/settings/api-keys")
	if !strings.Contains(r.Body, "is revoked: requests with it now get 401") {
		t.Errorf("no message after revoking:\n%s", r.Body)
	}
	wantRedirect(t, "revoke twice", b.post("/settings/api-keys/"+keyID+"/revoke", nil), "/settings/api-keys")
	wantRedirect(t, "revoke page of a revoked key", b.get("/settings/api-keys/"+keyID+"/revoke"), "/settings/api-keys/"+keyID)
	wantStatus(t, "unknown key", b.get("/settings/api-keys/plk_0000000000000000"), http.StatusNotFound)
}

func TestAgentActions(t *testing.T) {
	e := newEnv(t)
	e.mustAdmin()
	ctx := context.Background()
	a := e.enroll("laptop-0042", device.FeatureUpgrade{State: "ready", Target: "24H2"},
		device.Update{ID: "KB5036893", Title: "2024-04 Cumulative Update", Severity: "critical"},
		device.Update{ID: "KB5037768", Title: "Servicing stack"})
	for i := 0; i < agentsPerPage+3; i++ {
		e.enroll(fmt.Sprintf("zz-%03d", i), device.FeatureUpgrade{State: "none"})
	}
	if err := e.store.CreateRing(ctx, &device.Ring{Name: "pilot", Position: 10, CreatedAt: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signIn()

	// The list, filters and pages.
	r := b.get("/agents")
	wantStatus(t, "agents", r, http.StatusOK)
	if !strings.Contains(r.Body, "laptop-0042") || !strings.Contains(r.Body, "Next page") {
		t.Fatalf("first page:\n%s", r.Body)
	}
	next := regexp.MustCompile(`href="(/agents\?after=[^"]+)" rel="next"`).FindStringSubmatch(r.Body)
	if next == nil {
		t.Fatal("no next link")
	}
	r = b.get(strings.ReplaceAll(next[1], "&amp;", "&"))
	wantStatus(t, "second page", r, http.StatusOK)
	if strings.Contains(r.Body, "laptop-0042") || !strings.Contains(r.Body, "zz-052") || strings.Contains(r.Body, "rel=\"next\"") {
		t.Errorf("second page is wrong")
	}
	r = b.get("/agents?q=LAPTOP&featureUpgrade=ready")
	if !strings.Contains(r.Body, "laptop-0042") || strings.Contains(r.Body, "zz-000") {
		t.Errorf("filtered list is wrong")
	}
	wantStatus(t, "bad filter", b.get("/agents?status=sleeping"), http.StatusBadRequest)
	wantStatus(t, "bad cursor", b.get("/agents?after=xyz"), http.StatusBadRequest)

	// Detail, and an action that needs no re-authentication.
	r = b.get("/agents/" + a.ID)
	wantStatus(t, "agent", r, http.StatusOK)
	for _, want := range []string{"KB5036893", "7-Zip", "24H2", "Collect logs"} {
		if !strings.Contains(r.Body, want) {
			t.Errorf("agent page lacks %q", want)
		}
	}
	wantRedirect(t, "collect logs", b.post("/agents/"+a.ID+"/collect-logs", nil), "/agents/"+a.ID)
	cmds, _ := e.store.FindCommands(ctx, device.CommandFilter{AgentID: a.ID})
	if len(cmds) != 1 || cmds[0].Type != device.CollectLogs || cmds[0].CreatedBy != "admin:"+testEmail {
		t.Fatalf("commands = %+v", cmds)
	}
	if en := e.lastAudit("command.queued"); en.Actor != "admin:"+testEmail || en.KeyID != "" || !strings.Contains(string(en.Details), cmds[0].ID) {
		t.Errorf("command.queued entry = %+v %s", en, en.Details)
	}
	b.get("/agents/" + a.ID)
	wantRedirect(t, "move to ring", b.post("/agents/"+a.ID+"/ring", url.Values{"ring": {"pilot"}}), "/agents/"+a.ID)
	if got, _ := e.store.FindAgentByID(ctx, a.ID); got.Ring != "pilot" {
		t.Errorf("ring = %q", got.Ring)
	}
	e.lastAudit("agent.ring_changed")
	wantRedirect(t, "cancel", b.post("/commands/"+cmds[0].ID+"/cancel", nil), "/agents/"+a.ID)
	e.lastAudit("command.canceled")

	// Privileged actions ask for the password first, then go through.
	r = b.post("/agents/"+a.ID+"/reboot", url.Values{"delay": {"300"}})
	if !strings.Contains(r.Body, "Reboot agent "+a.ID) || !strings.Contains(r.Body, "reauth_password") {
		t.Fatalf("reboot without re-authentication:\n%s", r.Body)
	}
	wantRedirect(t, "reboot", b.post("/agents/"+a.ID+"/reboot", url.Values{"delay": {"300"}, "reauth_password": {testPassword}}), "/agents/"+a.ID)
	wantRedirect(t, "install updates", b.post("/agents/"+a.ID+"/install-updates", url.Values{"update": {"KB5036893"}}), "/agents/"+a.ID)
	wantRedirect(t, "finish feature upgrade", b.post("/agents/"+a.ID+"/finish-feature-upgrade", nil), "/agents/"+a.ID)
	cmds, _ = e.store.FindCommands(ctx, device.CommandFilter{AgentID: a.ID})
	byType := map[device.CommandType]*device.Command{}
	for _, c := range cmds {
		byType[c.Type] = c
	}
	if c := byType[device.Reboot]; c == nil || string(c.Params) != `{"delaySeconds":300}` {
		t.Errorf("reboot command = %+v", c)
	}
	if c := byType[device.InstallUpdates]; c == nil || string(c.Params) != `{"updates":["KB5036893"]}` {
		t.Errorf("install-updates command = %+v", c)
	}
	if byType[device.FinishFeatureUpgrade] == nil {
		t.Error("no finish-feature-upgrade command")
	}
	wantRedirect(t, "finish feature upgrades in bulk", b.post("/agents/finish-feature-upgrades", url.Values{"ring": {"pilot"}}), "/agents?ring=pilot")

	// Log bundles download and are recorded.
	c := device.NewCommand(a.ID, device.CollectLogs, nil, "test", e.clock.Now())
	if _, err := e.store.CreateCommands(ctx, []*device.Command{c}, false); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "bundle not uploaded", b.get("/commands/"+c.ID+"/log-bundle"), http.StatusNotFound)
	if err := e.store.SaveLogBundle(ctx, &device.LogBundle{CommandID: c.ID, AgentID: a.ID, ContentType: "application/gzip", Size: 5, SHA256: make([]byte, 32), Content: []byte("logs!"), CreatedAt: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	r = b.get("/commands/" + c.ID + "/log-bundle")
	if r.Status != http.StatusOK || r.Body != "logs!" || !strings.HasPrefix(r.Header.Get("Content-Disposition"), "attachment") {
		t.Errorf("bundle download: %d %v %q", r.Status, r.Header, r.Body)
	}
	e.lastAudit("log_bundle.downloaded")

	// Remove, after a confirmation page.
	wantStatus(t, "remove confirmation", b.get("/agents/"+a.ID+"/remove"), http.StatusOK)
	wantRedirect(t, "remove", b.post("/agents/"+a.ID+"/remove", nil), "/agents")
	wantStatus(t, "removed agent", b.get("/agents/"+a.ID), http.StatusNotFound)
	e.lastAudit("agent.removed")
}

func TestRolloutsAndPolicies(t *testing.T) {
	e := newEnv(t)
	e.mustAdmin()
	ctx := context.Background()
	b := e.browser()
	b.signIn()
	b.get("/rollouts")
	wantStatus(t, "bad ring", b.post("/rings", url.Values{"name": {"Pilot Ring"}, "position": {"x"}}), http.StatusUnprocessableEntity)
	wantRedirect(t, "ring", b.post("/rings", url.Values{"name": {"pilot"}, "position": {"10"}, "description": {"IT"}}), "/rollouts")
	wantRedirect(t, "ring", b.post("/rings", url.Values{"name": {"broad"}, "position": {"20"}}), "/rollouts")
	wantStatus(t, "duplicate ring", b.post("/rings", url.Values{"name": {"broad"}, "position": {"30"}}), http.StatusUnprocessableEntity)
	a := e.enroll("pc-1", device.FeatureUpgrade{State: "none"})
	if _, err := e.store.SetAgentRing(ctx, a.ID, "pilot"); err != nil {
		t.Fatal(err)
	}

	b.get("/policies")
	wantStatus(t, "bad settings", b.post("/policies", url.Values{"name": {"screen lock"}, "settings": {"[1]"}}), http.StatusUnprocessableEntity)
	r := b.post("/policies", url.Values{"name": {"screen lock"}, "settings": {"{\n \"lockAfterMinutes\": 5\n}"}})
	wantRedirect(t, "policy", r, "/policies/pol_")
	polURL := r.Header.Get("Location")
	policies, _ := e.store.FindPolicies(ctx)
	if len(policies) != 1 || string(policies[0].Settings) != `{"lockAfterMinutes":5}` || policies[0].CreatedBy != "admin:"+testEmail {
		t.Fatalf("policies = %+v", policies)
	}
	wantStatus(t, "policy page", b.get(polURL), http.StatusOK)
	wantRedirect(t, "new version", b.post(polURL, url.Values{"settings": {`{"lockAfterMinutes": 2}`}}), polURL)
	r = b.post(polURL+"/deploy", url.Values{"target": {"ring:pilot"}, "reauth_password": {testPassword}})
	wantRedirect(t, "deploy", r, polURL)
	if en := e.lastAudit("policy.deployed"); !strings.Contains(string(en.Details), `"version":2`) {
		t.Errorf("policy.deployed = %s", en.Details)
	}

	r = b.post("/rollouts", url.Values{"name": {"April"}, "kind": {"install-updates"}, "updates": {"KB5036893, KB5037768"}, "rings": {"pilot", "broad"}})
	wantRedirect(t, "rollout", r, "/rollouts/rol_")
	roURL := r.Header.Get("Location")
	r = b.get(roURL)
	if !strings.Contains(r.Body, "Start ring pilot") {
		t.Fatalf("rollout page:\n%s", r.Body)
	}
	wantRedirect(t, "advance", b.post(roURL+"/advance", url.Values{"fromRing": {""}}), roURL)
	r = b.get(roURL)
	if !strings.Contains(r.Body, "Ring pilot started: 1 command(s) queued.") || !strings.Contains(r.Body, "Start ring broad") {
		t.Errorf("after advancing:\n%s", r.Body)
	}
	// A retried advance from the same ring does not move the rollout.
	wantRedirect(t, "advance again", b.post(roURL+"/advance", url.Values{"fromRing": {""}}), roURL)
	if r := b.get(roURL); !strings.Contains(r.Body, "flash-error") {
		t.Errorf("a stale advance was not refused")
	}
	e.lastAudit("rollout.advanced")
	wantStatus(t, "rollouts page", b.get("/rollouts"), http.StatusOK)
}

func TestTOTP(t *testing.T) {
	e := newEnv(t)
	e.mustAdmin()
	b := e.browser()
	b.signIn()

	r := b.get("/account")
	wantStatus(t, "account", r, http.StatusOK)
	m := regexp.MustCompile(`name="secret" value="([A-Z2-7]+)"`).FindStringSubmatch(r.Body)
	if m == nil || !strings.Contains(r.Body, `src="data:image/png;base64,`) {
		t.Fatalf("no enrollment on the account page:\n%s", r.Body)
	}
	secret := m[1]
	code := func() string {
		c, err := totp.GenerateCodeCustom(secret, e.clock.Now(), totpOpts)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	r = b.post("/account/totp", url.Values{"secret": {secret}, "code": {"000000"}, "reauth_password": {testPassword}})
	wantStatus(t, "wrong code", r, http.StatusUnprocessableEntity)
	if !strings.Contains(r.Body, secret) {
		t.Error("a wrong code lost the secret being enrolled")
	}
	wantRedirect(t, "enroll", b.post("/account/totp", url.Values{"secret": {secret}, "code": {code()}}), "/account")
	e.lastAudit("admin.totp_enabled")

	// Sign-in now needs a code, and a code works once.
	b.get("/agents")
	b.post("/sign-out", nil)
	b.get("/sign-in")
	wantStatus(t, "no code", b.post("/sign-in", url.Values{"email": {testEmail}, "password": {testPassword}}), http.StatusUnprocessableEntity)
	wantStatus(t, "replayed code", b.post("/sign-in", url.Values{"email": {testEmail}, "password": {testPassword}, "code": {code()}}), http.StatusUnprocessableEntity)
	if en := e.lastAudit("admin.login_failed"); !strings.Contains(string(en.Details), "reused code") {
		t.Errorf("replay audited as %s", en.Details)
	}
	e.clock.Add(totpPeriod * time.Second)
	wantRedirect(t, "sign in with a code", b.post("/sign-in", url.Values{"email": {testEmail}, "password": {testPassword}, "code": {code()}}), "/agents")

	// Re-authentication asks for a code too.
	b.get("/account")
	r = b.post("/account/totp/remove", nil)
	if !strings.Contains(r.Body, "reauth_code") {
		t.Fatalf("re-authentication does not ask for a code:\n%s", r.Body)
	}
	wantStatus(t, "password only", b.post("/account/totp/remove", url.Values{"reauth_password": {testPassword}}), http.StatusUnprocessableEntity)
	e.clock.Add(totpPeriod * time.Second)
	wantRedirect(t, "turn off", b.post("/account/totp/remove", url.Values{"reauth_password": {testPassword}, "reauth_code": {code()}}), "/account")
	e.lastAudit("admin.totp_disabled")
}

func TestAuditPage(t *testing.T) {
	e := newEnv(t)
	e.mustAdmin()
	ctx := context.Background()
	// Some history: an old entry, then a key made by the console and used
	// on the API.
	old := &audit.Entry{Time: e.clock.Now().Add(-48 * time.Hour), Actor: "cli:root", Action: "admin.created", Details: json.RawMessage(`{"email":"old@example.com"}`)}
	if err := e.store.AppendAudit(ctx, old); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signIn()
	b.get("/settings/api-keys")
	r := b.post("/settings/api-keys", url.Values{"name": {"ci"}, "expiry": {"30d"}})
	keyID, _, _ := apikey.Parse(fullKeyRE.FindString(r.Body))
	for i := 0; i < 3; i++ {
		en := &audit.Entry{Time: e.clock.Now(), Actor: "key:" + keyID, KeyID: keyID, Action: "api.request", Method: "GET", Path: "/api/agents", Status: 200, ClientAddress: "192.0.2.5"}
		if err := e.store.AppendAudit(ctx, en); err != nil {
			t.Fatal(err)
		}
	}

	rows := func(body string) int { return strings.Count(body, "<tr>") - 1 }
	r = b.get("/audit")
	wantStatus(t, "audit", r, http.StatusOK)
	if !strings.Contains(r.Body, "key.created") || !strings.Contains(r.Body, "admin.login") {
		t.Errorf("audit page:\n%s", r.Body)
	}
	// By keyId: its requests and its lifecycle, which carries the keyId in
	// its details.
	r = b.get("/audit?keyId=" + keyID)
	if n := rows(r.Body); n != 4 || !strings.Contains(r.Body, "key.created") {
		t.Errorf("by keyId: %d rows\n%s", n, r.Body)
	}
	if n := rows(b.get("/audit?keyId=" + keyID + "&action=key.created").Body); n != 1 {
		t.Errorf("by keyId and action: %d rows", n)
	}
	if n := rows(b.get("/audit?actor=CLI:").Body); n != 1 {
		t.Errorf("by actor: %d rows", n)
	}
	until := e.clock.Now().Add(-24 * time.Hour).Format("2006-01-02T15:04")
	if r := b.get("/audit?until=" + until); rows(r.Body) != 1 || !strings.Contains(r.Body, "old@example.com") {
		t.Errorf("until %s: %d rows", until, rows(r.Body))
	}
	since := e.clock.Now().Add(-time.Hour).Format("2006-01-02T15:04")
	if r := b.get("/audit?since=" + since); strings.Contains(r.Body, "old@example.com") || rows(r.Body) < 5 {
		t.Errorf("since %s: %d rows", since, rows(r.Body))
	}
	for _, bad := range []string{"keyId=nope", "action=no.such", "since=yesterday"} {
		wantStatus(t, bad, b.get("/audit?"+bad), http.StatusBadRequest)
	}

	// Paging through every entry.
	for i := 0; i < 2*auditPerPage; i++ {
		en := &audit.Entry{Time: e.clock.Now(), Actor: "anonymous", Action: "api.auth_failed", Method: "GET", Path: "/api/agents", Status: 401}
		if err := e.store.AppendAudit(ctx, en); err != nil {
			t.Fatal(err)
		}
	}
	total := len(e.auditEntries())
	seen := 0
	path := "/audit"
	for pages := 0; path != ""; pages++ {
		r := b.get(path)
		seen += rows(r.Body)
		m := regexp.MustCompile(`href="([^"]+)" rel="next"`).FindStringSubmatch(r.Body)
		path = ""
		if m != nil {
			path = strings.ReplaceAll(m[1], "&amp;", "&")
		}
		if pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if seen != total {
		t.Errorf("paging showed %d entries of %d", seen, total)
	}

	// CSV export, recorded.
	r = b.get("/audit/export.csv?keyId=" + keyID)
	wantStatus(t, "export", r, http.StatusOK)
	recs, err := csv.NewReader(strings.NewReader(r.Body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 5 || recs[0][0] != "id" || recs[0][3] != "keyId" || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/csv") {
		t.Errorf("export: %d records %v", len(recs), recs)
	}
	if en := e.lastAudit("audit.exported"); en.Actor != "admin:"+testEmail || !strings.Contains(string(en.Details), keyID) {
		t.Errorf("audit.exported = %+v", en)
	}
}

func TestSafeNext(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/agents", "/agents"},
		{"/audit?keyId=plk_x", "/audit?keyId=plk_x"},
		{"", ""},
		{"//evil.example", ""},
		{"/\\evil.example", ""},
		{"https://evil.example/", ""},
		{"agents", ""},
		{"/sign-in?next=/x", ""},
		{"/static/console.css", ""},
		{"/x\r\nSet-Cookie: a=b", ""},
	}
	for _, tt := range tests {
		if got := safeNext(tt.in); got != tt.want {
			t.Errorf("safeNext(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestNotFound(t *testing.T) {
	e := newEnv(t)
	e.mustAdmin()
	b := e.browser()
	r := b.get("/no/such/page")
	wantStatus(t, "unknown page", r, http.StatusNotFound)
	if !strings.Contains(r.Body, "<main") || r.Header.Get("Content-Security-Policy") != contentSecurityPolicy {
		t.Errorf("404 page:\n%s", r.Body)
	}
	b.signIn()
	req, _ := http.NewRequest("DELETE", e.http.URL+"/agents", nil)
	r = b.do(req)
	if r.Status != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "GET" {
		t.Errorf("DELETE /agents: %d, Allow %q", r.Status, r.Header.Get("Allow"))
	}
	if r := b.get("/static/console.js?v=1"); !strings.Contains(r.Header.Get("Cache-Control"), "immutable") || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/javascript") {
		t.Errorf("static asset headers: %v", r.Header)
	}
}
