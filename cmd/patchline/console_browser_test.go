// The console in headless Chromium. This file is over 600 lines because
// TestConsoleBrowser is one session of the browser, whose steps follow
// each other (setup, sign-in, each page and action, sign-out), with the
// small driver over chromedp that only it uses.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/alert/alerttest"
)

// The console in a real browser: headless Chromium, driven through the
// DevTools protocol, against the real binary. It runs when
// PATCHLINE_TEST_CHROMIUM names a Chromium binary (CI sets it) and saves a
// screenshot of every page, at desktop and at phone width, to
// PATCHLINE_TEST_ARTIFACTS (a temporary directory by default).

const (
	browserAdmin    = "ops@example.com"
	browserPassword = "a long enough password"
	desktopWidth    = 1280
	desktopHeight   = 900
	phoneWidth      = 375
	phoneHeight     = 812
)

// pageCheck is run on every page: the basic accessibility rules and the
// contrast of every visible text (WCAG 2.1 relative luminance, 4.5:1). It
// returns the problems it found.
const pageCheck = `(() => {
  const problems = [];
  const visible = el => !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length);
  if (document.querySelectorAll('main').length !== 1) problems.push('a page needs exactly one <main>');
  if (document.querySelectorAll('h1').length < 1) problems.push('no <h1>');
  if (!document.documentElement.lang) problems.push('no lang on <html>');
  if (!document.title.trim()) problems.push('no <title>');
  for (const el of document.querySelectorAll('input, select, textarea')) {
    if (el.type === 'hidden') continue;
    const labelled = (el.labels && [...el.labels].some(l => l.textContent.trim())) ||
      el.getAttribute('aria-label') || el.getAttribute('aria-labelledby');
    if (!labelled) problems.push('no label for ' + el.tagName.toLowerCase() + ' ' + (el.id || el.name));
  }
  for (const img of document.querySelectorAll('img')) {
    if (!img.hasAttribute('alt')) problems.push('no alt on an image');
  }
  for (const b of document.querySelectorAll('button, [role=button], input[type=submit]')) {
    if (!((b.textContent || b.value || '').trim() || b.getAttribute('aria-label'))) problems.push('a button without a name');
  }
  for (const a of document.querySelectorAll('a[href]')) {
    if (!(a.textContent || '').trim() && !a.getAttribute('aria-label')) problems.push('a link without a name: ' + a.getAttribute('href'));
  }
  const ids = new Set();
  for (const el of document.querySelectorAll('[id]')) {
    if (ids.has(el.id)) problems.push('duplicate id ' + el.id);
    ids.add(el.id);
  }
  const rgb = c => {
    const m = c.match(/rgba?\(([^)]+)\)/);
    if (!m) return null;
    const p = m[1].split(/[ ,\/]+/).filter(Boolean).map(parseFloat);
    return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
  };
  const lum = c => {
    const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b);
  };
  const background = el => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c && c.a > 0.5) return c;
    }
    return {r: 255, g: 255, b: 255, a: 1};
  };
  const seen = new Set();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const text = walker.currentNode.textContent.trim();
    const el = walker.currentNode.parentElement;
    if (!text || !el || seen.has(el) || !visible(el)) continue;
    seen.add(el);
    const st = getComputedStyle(el);
    if (st.visibility === 'hidden' || st.clip === 'rect(0px, 0px, 0px, 0px)' || el.closest('option, script, style')) continue;
    const fg = rgb(st.color), bg = background(el);
    if (!fg) continue;
    const l1 = lum(fg), l2 = lum(bg);
    const ratio = (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05);
    if (ratio < 4.5) problems.push('contrast ' + ratio.toFixed(2) + ':1 for "' + text.slice(0, 40) + '"');
  }
  return problems;
})()`

// overflowCheck returns how far the page is wider than the window: at a
// phone's width nothing may need sideways scrolling but the tables, which
// scroll inside their own box.
const overflowCheck = `document.documentElement.scrollWidth - window.innerWidth`

// consoleBrowser drives one Chromium tab through the console.
type consoleBrowser struct {
	t         *testing.T
	ctx       context.Context
	base      string
	artifacts string
	shots     int
}

// do runs chromedp steps and fails the test on error.
func (b *consoleBrowser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *consoleBrowser, expr string, opts ...chromedp.EvaluateOption) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		b.t.Fatalf("evaluate %.60q: %v", expr, err)
	}
	return v
}

// markPage marks the document the tab shows, so that waitPath can tell
// the next one from it.
func (b *consoleBrowser) markPage() {
	b.t.Helper()
	eval[chromedp.Void](b, `window.__patchlineOldPage = true`)
}

// waitPath waits until the tab shows a new document (not the one
// markPage marked) whose path and query start with prefix, loaded and
// with its <main>.
func (b *consoleBrowser) waitPath(prefix string) {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var loc string
	for time.Now().Before(deadline) {
		var err error
		loc, err = chromedp.Run(b.ctx, chromedp.Evaluate[string](`!window.__patchlineOldPage && document.readyState === 'complete' && document.querySelector('main') ? location.pathname + location.search : ''`))
		if err == nil && loc != "" && strings.HasPrefix(loc, prefix) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.t.Fatalf("waited for a page at %s, the browser shows %q", prefix, loc)
}

// open navigates to a console path and waits for the page.
func (b *consoleBrowser) open(path, wantPrefix string) {
	b.t.Helper()
	b.do("open "+path, chromedp.Navigate(b.base+path))
	b.waitPath(wantPrefix)
}

// submit clicks a button or link and waits for the page it leads to.
func (b *consoleBrowser) submit(selector, wantPrefix string) {
	b.t.Helper()
	b.markPage()
	b.do("click "+selector, chromedp.Click(chromedp.CSS(selector)))
	b.waitPath(wantPrefix)
}

// text returns the text of the first element matching selector.
func (b *consoleBrowser) text(selector string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(selector)))
	if err != nil {
		b.t.Fatalf("read %s: %v", selector, err)
	}
	return s
}

// mainText returns the text of the page's <main>.
func (b *consoleBrowser) mainText() string {
	b.t.Helper()
	return b.text("main")
}

// html returns the page source as the browser has it.
func (b *consoleBrowser) html() string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil {
		b.t.Fatalf("read the page: %v", err)
	}
	return s
}

// screenshot returns a PNG of the whole page.
func (b *consoleBrowser) screenshot() []byte {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	return png
}

// check runs the accessibility checks on the page and saves screenshots
// at desktop and phone width; at phone width nothing may overflow.
func (b *consoleBrowser) check(name string) {
	b.t.Helper()
	for _, p := range eval[[]string](b, pageCheck) {
		b.t.Errorf("page %s: %s", name, p)
	}
	b.shots++
	desktop := b.screenshot()
	b.do("phone width", chromedp.EmulateViewport(phoneWidth, phoneHeight, chromedp.EmulateMobile), chromedp.Sleep(150*time.Millisecond))
	if overflow := eval[int](b, overflowCheck); overflow > 0 {
		b.t.Errorf("page %s is %dpx wider than a %dpx phone screen", name, overflow, phoneWidth)
	}
	for _, p := range eval[[]string](b, pageCheck) {
		b.t.Errorf("page %s at phone width: %s", name, p)
	}
	phone := b.screenshot()
	b.do("desktop width", chromedp.EmulateReset(), chromedp.EmulateViewport(desktopWidth, desktopHeight))
	for suffix, png := range map[string][]byte{"desktop": desktop, "phone": phone} {
		p := filepath.Join(b.artifacts, fmt.Sprintf("%02d-%s-%s.png", b.shots, name, suffix))
		if err := os.WriteFile(p, png, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
}

// tabTo presses Tab from the top of the page until the focus is on an
// element matching selector, and fails the test if it is not reached in
// max presses.
func (b *consoleBrowser) tabTo(selector string, max int) {
	b.t.Helper()
	eval[chromedp.Void](b, `document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0)`)
	for i := 0; i < max; i++ {
		b.do("press Tab", chromedp.KeyEvent(kb.Tab))
		if eval[bool](b, fmt.Sprintf(`!!document.activeElement && document.activeElement.matches(%q)`, selector)) {
			return
		}
	}
	b.t.Fatalf("%d presses of Tab did not reach %s", max, selector)
}

// fetch fetches a console path from the page, with its cookies, and
// returns the status and body.
func (b *consoleBrowser) fetch(path string) (int, string) {
	b.t.Helper()
	type result struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	}
	js := fmt.Sprintf(`fetch(%q).then(r => r.text().then(body => ({status: r.status, body})))`, path)
	res := eval[result](b, js, chromedp.EvalAwaitPromise)
	return res.Status, res.Body
}

// apiCall calls the control API with an API key and returns the status
// and body.
func apiCall(t *testing.T, base, method, path, key string, body any) (int, string) {
	t.Helper()
	h := http.Header{}
	if key != "" {
		h.Set("X-API-Key", key)
	}
	return controlCall(t, method, base+path, h, body)
}

// agentCall calls the agent protocol with an agent credential.
func agentCall(t *testing.T, base, method, path, credential string, body any) (int, string) {
	t.Helper()
	h := http.Header{}
	if credential != "" {
		h.Set("Authorization", "Bearer "+credential)
	}
	return controlCall(t, method, base+path, h, body)
}

// controlCall makes a request: a []byte body is sent as a gzip file,
// anything else as JSON.
func controlCall(t *testing.T, method, url string, h http.Header, body any) (int, string) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
		h.Set("Content-Type", "application/gzip")
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(j)
		h.Set("Content-Type", "application/json")
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// browserTest returns the Chromium binary of PATCHLINE_TEST_CHROMIUM and
// the directory of the screenshots of a test of what (below
// PATCHLINE_TEST_ARTIFACTS, or a temporary one), or skips the test.
func browserTest(t *testing.T, what string) (chromium, artifacts string) {
	t.Helper()
	chromium = os.Getenv("PATCHLINE_TEST_CHROMIUM")
	if chromium == "" {
		t.Skipf("PATCHLINE_TEST_CHROMIUM is unset: set it to a Chromium binary (such as /usr/bin/chromium) to test the %s in a real browser", what)
	}
	artifacts = os.Getenv("PATCHLINE_TEST_ARTIFACTS")
	if artifacts == "" {
		return chromium, t.TempDir()
	}
	artifacts = filepath.Join(artifacts, strings.ReplaceAll(what, " ", "-"))
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	return chromium, artifacts
}

// startBrowser starts headless Chromium on base, with nothing that
// reaches for the network, for at most timeout; it stops when the test
// ends.
func startBrowser(t *testing.T, chromium, artifacts, base string, timeout time.Duration) *consoleBrowser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(desktopWidth, desktopHeight),
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tabCtx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancelTab(); cancelAlloc(); cancel() })
	b := &consoleBrowser{t: t, ctx: tabCtx, base: base, artifacts: artifacts}
	b.do("start chromium", chromedp.EmulateViewport(desktopWidth, desktopHeight))
	return b
}

func TestConsoleBrowser(t *testing.T) {
	e2e(t)
	t.Parallel()
	chromium, artifacts := browserTest(t, "console")
	t.Logf("screenshots of the console go to %s", artifacts)

	data := t.TempDir()
	srv := startServe(t, data, []string{"PATCHLINE_CONTROL_DB=", "PATCHLINE_CATALOG_DB="})
	m := regexp.MustCompile(`setupCode=(\S+)`).FindStringSubmatch(srv.Log())
	if m == nil {
		t.Fatalf("the server did not log a setup code:\n%s", srv.Log())
	}
	setupCode := m[1]

	// Agents for the agent pages, enrolled through the agent protocol.
	enrollSecret := mustControlCLI(t, "enroll", "create", "--expires", "1h", "--data", data)
	type agent struct{ id, credential string }
	var agents []agent
	for i, host := range []string{"laptop-0042", "build-07", "kiosk-lobby"} {
		osInfo := agentproto.OS{Platform: "windows", Name: "Windows 11 Pro", Version: "23H2", Build: "22631.3447"}
		if i == 1 {
			osInfo = agentproto.OS{Platform: "linux", Name: "Debian GNU/Linux", Version: "12", Build: "6.1.0-18-amd64"}
		}
		status, body := agentCall(t, srv.ControlURL, "POST", "/agent/v1/enroll", "", agentproto.EnrollRequest{
			EnrollSecret: enrollSecret, Capability: agentproto.CapabilityVersion, Hostname: host, OS: osInfo, Arch: "amd64", AgentVersion: "1.0.0",
		})
		var enrolled agentproto.EnrollResponse
		if status != http.StatusCreated || json.Unmarshal([]byte(body), &enrolled) != nil {
			t.Fatalf("enroll %s: %d %s", host, status, body)
		}
		status, body = agentCall(t, srv.ControlURL, "POST", "/agent/v1/checkin", enrolled.Credential, agentproto.CheckInRequest{
			Capability: agentproto.CapabilityVersion, Hostname: host, OS: osInfo, Arch: "amd64", AgentVersion: "1.0.0", IPs: []string{fmt.Sprintf("10.0.4.%d", 17+i)},
			Inventory: &agentproto.Inventory{
				Software: []agentproto.Software{{Name: "7-Zip", Version: "23.01", Ecosystem: "Desktop"}, {Name: "Mozilla Firefox", Version: "124.0.1", Ecosystem: "Desktop"}},
				PendingUpdates: []agentproto.Update{
					{ID: "KB5036893", Title: "2024-04 Cumulative Update for Windows 11", Severity: "critical"},
					{ID: "KB5037768", Title: "Servicing stack update", Severity: "important"},
				},
			},
			FeatureUpgrade: agentproto.FeatureUpgrade{State: "ready", Target: "24H2"},
		})
		if status != http.StatusOK {
			t.Fatalf("check in %s: %d %s", host, status, body)
		}
		agents = append(agents, agent{enrolled.AgentID, enrolled.Credential})
	}

	b := startBrowser(t, chromium, artifacts, srv.ControlURL, 5*time.Minute)

	// First-run setup: the console sends a fresh install there.
	b.open("/", "/setup")
	b.check("setup")
	b.do("fill in setup",
		chromedp.SendKeys(chromedp.ID("setup_code"), setupCode),
		chromedp.SendKeys(chromedp.ID("email"), browserAdmin),
		chromedp.SendKeys(chromedp.ID("password"), browserPassword),
		chromedp.SendKeys(chromedp.ID("password_confirm"), browserPassword),
	)
	b.submit(`form[action="/setup"] button[type=submit]`, "/sign-in")
	if txt := b.mainText(); !strings.Contains(txt, "Administrator "+browserAdmin+" created") {
		t.Errorf("sign-in page after setup: %s", txt)
	}
	b.check("sign-in")

	// Sign in with the keyboard alone.
	b.tabTo("#email", 10)
	b.markPage()
	b.do("sign in", chromedp.KeyEvent(browserAdmin), chromedp.KeyEvent(kb.Tab), chromedp.KeyEvent(browserPassword), chromedp.KeyEvent(kb.Enter))
	b.waitPath("/agents")
	if txt := b.mainText(); !strings.Contains(txt, "laptop-0042") || !strings.Contains(txt, "kiosk-lobby") {
		t.Errorf("agents page: %s", txt)
	}
	b.check("agents")
	b.open("/agents?os=linux", "/agents?os=linux")
	if txt := b.mainText(); !strings.Contains(txt, "build-07") || strings.Contains(txt, "laptop-0042") {
		t.Errorf("filtered agents: %s", txt)
	}

	// An agent: collect logs, the agent uploads them, download the bundle.
	b.open("/agents/"+agents[0].id, "/agents/"+agents[0].id)
	b.tabTo(`form[action$="/collect-logs"] button`, 20)
	b.submit(`form[action$="/collect-logs"] button`, "/agents/"+agents[0].id)
	if txt := b.mainText(); !strings.Contains(txt, "Log collection queued") {
		t.Fatalf("after collect logs: %s", txt)
	}
	status, body := agentCall(t, srv.ControlURL, "POST", "/agent/v1/checkin", agents[0].credential, agentproto.CheckInRequest{
		Capability: agentproto.CapabilityVersion, Hostname: "laptop-0042",
		OS: agentproto.OS{Platform: "windows", Name: "Windows 11 Pro", Version: "23H2", Build: "22631.3447"}, Arch: "amd64", AgentVersion: "1.0.0",
		FeatureUpgrade: agentproto.FeatureUpgrade{State: "ready", Target: "24H2"},
	})
	var checkin agentproto.CheckInResponse
	if status != http.StatusOK || json.Unmarshal([]byte(body), &checkin) != nil || len(checkin.Commands) != 1 {
		t.Fatalf("check-in after collect logs: %d %s", status, body)
	}
	cmdID := checkin.Commands[0].ID
	bundle := []byte("log bundle of laptop-0042: 14 files")
	for _, step := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/agent/v1/commands/" + cmdID + "/report", agentproto.Report{State: "running"}},
		{"PUT", "/agent/v1/commands/" + cmdID + "/log-bundle", bundle},
		{"POST", "/agent/v1/commands/" + cmdID + "/report", agentproto.Report{State: "succeeded", Result: &agentproto.Result{Message: "collected 14 log files"}}},
	} {
		if status, body := agentCall(t, srv.ControlURL, step.method, step.path, agents[0].credential, step.body); status >= 300 {
			t.Fatalf("%s %s: %d %s", step.method, step.path, status, body)
		}
	}
	b.open("/agents/"+agents[0].id, "/agents/"+agents[0].id)
	if txt := b.mainText(); !strings.Contains(txt, "collected 14 log files") || !strings.Contains(txt, "Download bundle") {
		t.Errorf("agent page after the upload: %s", txt)
	}
	b.check("agent")
	b.submit(`a[href$="/remove"]`, "/agents/"+agents[0].id+"/remove")
	b.check("agent-remove")
	b.submit(`main a.button:not(.danger)`, "/agents/"+agents[0].id)
	if status, got := b.fetch("/commands/" + cmdID + "/log-bundle"); status != http.StatusOK || got != string(bundle) {
		t.Errorf("download the bundle: %d %q", status, got)
	}

	// Settings > API Keys: generate a key and read it, once.
	b.submit(`nav a[href="/settings/api-keys"]`, "/settings/api-keys")
	b.check("api-keys")
	b.tabTo(`#generate-form button[type=submit]`, 30)
	b.do("fill in the key", chromedp.SendKeys(chromedp.ID("key-name"), "browser e2e"), chromedp.SetValue(chromedp.ID("key-expiry"), "30d"))
	b.submit(`#generate-form button[type=submit]`, "/settings/api-keys")
	fullKey, err := chromedp.Run(b.ctx, chromedp.Value(chromedp.ID("full-key")))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^plk_[0-9A-Za-z]{16}\.plsk_[0-9A-Za-z]{46}$`).MatchString(fullKey) {
		t.Fatalf("the page shows %q as the key", fullKey)
	}
	keyID := controlKeyID(fullKey)
	secret := strings.TrimPrefix(fullKey, keyID+".")
	if txt := b.mainText(); !strings.Contains(txt, "shown only this once") {
		t.Errorf("no warning with the key: %s", txt)
	}
	b.do("copy", chromedp.Click(chromedp.CSS(`button[data-copy="full-key"]`)), chromedp.Sleep(300*time.Millisecond))
	if copied := b.text(".copy-status"); copied == "" {
		t.Error("the copy button said nothing")
	}
	b.check("key-created")
	b.open("/settings/api-keys", "/settings/api-keys")
	if h := b.html(); strings.Contains(h, secret) || !strings.Contains(h, keyID) {
		t.Error("the keys list shows the secret, or not the keyId")
	}

	// Use it with the API; privileged operations are refused.
	if status, body := apiCall(t, srv.ControlURL, "GET", "/api/agents", fullKey, nil); status != http.StatusOK || !strings.Contains(body, "laptop-0042") {
		t.Fatalf("GET /api/agents with the new key: %d %s", status, body)
	}
	rebootPath := "/api/agents/" + agents[1].id + "/reboot"
	if status, body := apiCall(t, srv.ControlURL, "POST", rebootPath, fullKey, nil); status != http.StatusForbidden || !strings.Contains(body, "not privileged") {
		t.Fatalf("privileged operation with a plain key: %d %s", status, body)
	}

	// Enable privileged access: the console asks for the password first.
	b.submit(`a[href="/settings/api-keys/`+keyID+`"]`, "/settings/api-keys/"+keyID)
	b.check("api-key")
	b.do("choose the expiry", chromedp.SetValue(chromedp.ID("priv-expiry"), "7d"))
	b.submit(`form[action$="/privileged"] button`, "/settings/api-keys/"+keyID+"/privileged")
	if h1 := b.text("h1"); h1 != "Confirm it’s you" {
		t.Fatalf("enabling privileged access did not ask to re-authenticate: %q\n%s", h1, b.mainText())
	}
	b.check("re-authenticate")
	b.do("type the password", chromedp.SendKeys(chromedp.ID("reauth_password"), browserPassword))
	b.submit(`main form button[type=submit]`, "/settings/api-keys/"+keyID)
	if txt := b.mainText(); !strings.Contains(txt, "is now privileged") {
		t.Fatalf("after re-authenticating: %s", txt)
	}
	b.check("api-key-privileged")

	// The same key may now run a privileged operation, and read the log.
	if status, body := apiCall(t, srv.ControlURL, "POST", rebootPath, fullKey, map[string]int{"delaySeconds": 60}); status != http.StatusAccepted {
		t.Fatalf("privileged operation with the privileged key: %d %s", status, body)
	}
	if status, body := apiCall(t, srv.ControlURL, "GET", "/api/audit-log?limit=5", fullKey, nil); status != http.StatusOK {
		t.Fatalf("audit log with the privileged key: %d %s", status, body)
	}
	// Within five minutes, privileged actions in the console go through.
	b.open("/agents/"+agents[2].id, "/agents/"+agents[2].id)
	b.submit(`form[action$="/finish-feature-upgrade"] button`, "/agents/"+agents[2].id)
	if txt := b.mainText(); !strings.Contains(txt, "Finishing the feature upgrade to 24H2") {
		t.Errorf("privileged console action within the window: %s", txt)
	}

	// Revoke, with a confirmation step; the API answers 401 at once.
	b.open("/settings/api-keys", "/settings/api-keys")
	b.submit(`a[href="/settings/api-keys/`+keyID+`/revoke"]`, "/settings/api-keys/"+keyID+"/revoke")
	b.check("revoke-key")
	b.submit(`main form button.danger`, "/settings/api-keys")
	if txt := b.mainText(); !strings.Contains(txt, "is revoked: requests with it now get 401") || !strings.Contains(txt, "revoked") {
		t.Errorf("after revoking: %s", txt)
	}
	b.check("api-keys-revoked")
	if status, body := apiCall(t, srv.ControlURL, "GET", "/api/agents", fullKey, nil); status != http.StatusUnauthorized || !strings.Contains(body, "revoked") {
		t.Fatalf("the revoked key: %d %s", status, body)
	}

	// Everything above is in the System Audit log.
	b.open("/audit?keyId="+keyID, "/audit?keyId=")
	txt := b.mainText()
	for _, want := range []string{"key.created", "key.privileged_enabled", "key.revoked", "api.request", "command.queued", "api.auth_failed"} {
		if !strings.Contains(txt, want) {
			t.Errorf("the audit log of %s lacks %s", keyID, want)
		}
	}
	b.check("audit-by-key")
	for _, action := range []string{"admin.created", "admin.login", "admin.reauthenticated", "log_bundle.downloaded"} {
		b.open("/audit?action="+action, "/audit?action=")
		if txt := b.mainText(); !strings.Contains(txt, action) || strings.Contains(txt, "No entry matches") {
			t.Errorf("no %s in the audit log: %s", action, txt)
		}
	}
	b.open("/audit", "/audit")
	b.check("audit")
	status, csvBody := b.fetch("/audit/export.csv?keyId=" + keyID)
	if status != http.StatusOK || !strings.HasPrefix(csvBody, "id,time,actor,keyId,action") || strings.Count(csvBody, "\n") < 6 {
		t.Errorf("CSV export: %d\n%s", status, csvBody)
	}

	// Fleet risk, once the exposure service has matched the agents'
	// inventories against the bundled sample catalog.
	waitFor(t, "the fleet risk page to list a CVE", time.Minute, func() bool {
		b.open("/vulnerabilities", "/vulnerabilities")
		return strings.Contains(b.html(), `href="/vulnerabilities/CVE-`)
	})
	b.check("vulnerabilities")

	// KEV due dates: Firefox 124.0.1 on the agents has CVE-2024-9680, in
	// CISA's KEV catalog.
	b.open("/kev", "/kev")
	if txt := b.mainText(); !strings.Contains(txt, "CVE-2024-9680") || !strings.Contains(txt, "overdue by") {
		t.Errorf("KEV due dates page: %s", txt)
	}
	b.check("kev")

	// An alert rule (privileged actions go through within five minutes of
	// the re-authentication above), whose webhook hears of the KEV CVEs.
	hook := alerttest.NewReceiver(t)
	b.open("/settings/alerts", "/settings/alerts")
	b.check("alerts")
	b.do("new alert rule", chromedp.SendKeys(chromedp.ID("rule-name"), "KEV on endpoints"), chromedp.SendKeys(chromedp.ID("rule-url"), hook.URL))
	b.submit(`form[action="/settings/alerts"] button[type=submit]`, "/settings/alerts")
	ruleSecret := eval[string](b, `document.getElementById('rule-secret').value`)
	if !strings.HasPrefix(ruleSecret, "plwh_") {
		t.Fatalf("the new rule's secret: %q\n%s", ruleSecret, b.mainText())
	}
	hook.SetSecret(ruleSecret)
	b.check("alert-rule-created")
	var alertID string
	waitFor(t, "the webhook's alert of CVE-2024-9680", time.Minute, func() bool {
		for _, p := range hook.Payloads() {
			if p.CVEID == "CVE-2024-9680" {
				alertID = p.AlertID
				return len(p.Agents) == len(agents) // each reports Firefox 124.0.1
			}
		}
		return false
	})
	waitFor(t, "the delivered alert in the console", 30*time.Second, func() bool {
		b.open("/alerts/"+alertID, "/alerts/"+alertID)
		return strings.Contains(b.mainText(), "delivered")
	})
	b.check("alert")

	// The other pages: rings and rollouts, policies, the account.
	b.open("/rollouts", "/rollouts")
	b.do("new ring", chromedp.SendKeys(chromedp.ID("ring-name"), "pilot"), chromedp.SendKeys(chromedp.ID("ring-position"), "10"),
		chromedp.SendKeys(chromedp.ID("ring-description"), "IT and volunteers"))
	b.submit(`form[action="/rings"] button`, "/rollouts")
	b.do("new rollout", chromedp.SendKeys(chromedp.ID("rollout-name"), "April Patch Tuesday"), chromedp.SendKeys(chromedp.ID("rollout-updates"), "KB5036893"))
	b.submit(`form[action="/rollouts"] button`, "/rollouts/rol_")
	b.check("rollout")
	b.open("/rollouts", "/rollouts")
	b.check("rollouts")
	b.open("/policies", "/policies")
	b.do("new policy", chromedp.SendKeys(chromedp.ID("policy-name"), "screen lock"),
		chromedp.SetValue(chromedp.ID("policy-settings"), `{"lockAfterMinutes": 5}`))
	b.submit(`form[action="/policies"] button`, "/policies/pol_")
	b.check("policy")
	b.open("/policies", "/policies")
	b.check("policies")
	b.open("/account", "/account")
	b.check("account")

	// Sign out; the console is closed again.
	b.submit(`form[action="/sign-out"] button`, "/sign-in")
	if txt := b.mainText(); !strings.Contains(txt, "You are signed out") {
		t.Errorf("after signing out: %s", txt)
	}
	b.open("/agents", "/sign-in?next=%2Fagents")
	b.open("/no-such-page", "/no-such-page")
	b.check("not-found")

	// The Content-Security-Policy holds in the browser: an inline style
	// attribute does not apply, nor does an inline script run.
	eval[chromedp.Void](b, `document.querySelector('main').insertAdjacentHTML('beforeend',
		'<p id="probe-text" style="color:#aaaaaa">faint text</p><img src="x" alt="" onerror="window.__inlineRan = true">')`)
	b.do("let the probes load", chromedp.Sleep(300*time.Millisecond))
	if color := eval[string](b, `getComputedStyle(document.getElementById('probe-text')).color`); color == "rgb(170, 170, 170)" {
		t.Error("an inline style attribute applied: the Content-Security-Policy does not hold")
	}
	if ran := eval[bool](b, `window.__inlineRan === true`); ran {
		t.Error("an inline event handler ran: the Content-Security-Policy does not hold")
	}
	// The page check finds what it looks for.
	eval[chromedp.Void](b, `document.getElementById('probe-text').style.color = '#aaaaaa';
		document.querySelector('main').insertAdjacentHTML('beforeend', '<input id="probe-input"><img src="data:,">')`)
	found := strings.Join(eval[[]string](b, pageCheck), "\n")
	for _, want := range []string{"no label for input probe-input", `:1 for "faint text"`, "no alt on an image"} {
		if !strings.Contains(found, want) {
			t.Errorf("the page check missed %q; it found:\n%s", want, found)
		}
	}
	t.Logf("%d pages checked, %d screenshots in %s", b.shots, 2*b.shots, artifacts)
}
