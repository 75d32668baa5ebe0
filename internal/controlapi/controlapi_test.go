package controlapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/httpx"
)

// TestOpenAPIMatchesRoutes checks that the document and the registered
// routes describe the same API: every route is documented, every
// documented operation is served, and the document marks the privileged
// and the unauthenticated ones as the routes do.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc, _ := spec(t)
	srv := New(Config{})
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	for _, rt := range srv.Routes() {
		item := doc.Paths.Find(rt.Path)
		if item == nil || item.GetOperation(rt.Method) == nil {
			t.Errorf("route %s is not in the OpenAPI document", rt.Pattern())
			continue
		}
		delete(documented, rt.Pattern())
		op := item.GetOperation(rt.Method)
		if priv, _ := op.Extensions["x-privileged"].(bool); priv != (rt.Access == Privileged) {
			t.Errorf("%s: x-privileged = %v, route access %s", rt.Pattern(), priv, rt.Access)
		}
		public := op.Security != nil && len(*op.Security) == 0
		if public != (rt.Access == Public || rt.Access == Enrollment) {
			t.Errorf("%s: documented without security = %v, route access %s", rt.Pattern(), public, rt.Access)
		}
	}
	for op := range documented {
		t.Errorf("documented operation %s is not served", op)
	}

	// The audit actions the document lists are the registry's.
	enum := doc.Components.Schemas["AuditEntry"].Value.Properties["action"].Value.Enum
	var got, want []string
	for _, v := range enum {
		got = append(got, v.(string))
	}
	for _, et := range audit.Events {
		want = append(want, et.Action)
	}
	sort.Strings(got)
	sort.Strings(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("AuditEntry.action enum (-registry +document):\n%s", diff)
	}
}

// TestEveryRouteAuthorizes walks every registered route: without
// credentials each one but the public ones answers 401, a non-privileged
// key gets 403 on the privileged ones, API keys never reach agent routes
// and agent credentials never reach API routes.
func TestEveryRouteAuthorizes(t *testing.T) {
	e := newEnv(t)
	a := e.enroll("authz-host", "linux")
	for _, rt := range e.srv.Routes() {
		path := fill(rt.Path, "x_unknown")
		t.Run(rt.Pattern(), func(t *testing.T) {
			switch rt.Access {
			case Public:
				rec := e.do(request{method: rt.Method, path: path})
				if rec.Code != http.StatusOK {
					t.Errorf("public route: status %d", rec.Code)
				}
				return
			case Enrollment:
				rec := e.do(request{method: rt.Method, path: path, body: `{"enrollSecret":"nope","capability":1,"hostname":"h","os":{"platform":"linux","name":"","version":"","build":""}}`})
				problem(t, rec, http.StatusUnauthorized)
				rec = e.do(request{method: rt.Method, path: path, apiKey: e.privKey, body: `{}`})
				problem(t, rec, http.StatusUnauthorized)
				return
			}

			rec := e.do(request{method: rt.Method, path: path, body: `{}`})
			problem(t, rec, http.StatusUnauthorized)

			switch rt.Access {
			case Key, Privileged:
				rec = e.do(request{method: rt.Method, path: path, bearer: a.credential, body: `{}`})
				problem(t, rec, http.StatusUnauthorized)
				if rt.Access == Privileged {
					rec = e.do(request{method: rt.Method, path: path, apiKey: e.key, body: `{}`})
					detail := problem(t, rec, http.StatusForbidden)
					if !strings.Contains(detail, "not privileged") || !strings.Contains(detail, e.keyID) {
						t.Errorf("403 detail %q does not say that key %s is not privileged", detail, e.keyID)
					}
					entry := e.lastAudit()
					if entry.KeyID != e.keyID || entry.Status != http.StatusForbidden || entry.Path != path {
						t.Errorf("audit entry of the 403 = %+v", entry)
					}
				}
			case Agent:
				rec = e.do(request{method: rt.Method, path: path, apiKey: e.privKey, body: `{}`})
				detail := problem(t, rec, http.StatusUnauthorized)
				if !strings.Contains(detail, "API keys are not accepted") {
					t.Errorf("agent route with an API key: %q", detail)
				}
				rec = e.do(request{method: rt.Method, path: path, apiKey: e.privKey, bearer: a.credential, body: `{}`})
				problem(t, rec, http.StatusUnauthorized)
			default:
				t.Fatalf("route %s has no access level", rt.Pattern())
			}
		})
	}
}

func TestAuthentication(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	now := time.Now()

	// An expired key: created valid, then the clock moves past it.
	past := now.Add(time.Hour)
	expiredFull, expired, _ := apikey.New(apikey.Params{Name: "old", CreatedBy: "test", ExpiresAt: &past}, now)
	if err := e.store.CreateKey(ctx, expired); err != nil {
		t.Fatal(err)
	}
	revokedFull, revoked, _ := apikey.New(apikey.Params{Name: "gone", CreatedBy: "test"}, now)
	if err := e.store.CreateKey(ctx, revoked); err != nil {
		t.Fatal(err)
	}
	id, secret, _ := strings.Cut(e.key, ".")
	unknownFull, _, _ := apikey.New(apikey.Params{Name: "never stored", CreatedBy: "test"}, now)
	_, otherSecret, _ := strings.Cut(unknownFull, ".")

	// The revoked key works until it is revoked, then fails at once.
	rec := e.do(request{method: "GET", path: "/api/agents", apiKey: revokedFull})
	decode[listJSON[agentJSON]](t, rec, http.StatusOK)
	if _, err := e.store.RevokeKey(ctx, revoked.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	e.srv.now = func() time.Time { return now.Add(2 * time.Hour) }

	tests := []struct {
		name       string
		key        string
		wantStatus int
		wantKeyID  string
		wantReason string
	}{
		{"no key", "", 401, "", "missing key"},
		{"malformed", "not-a-key", 401, "", "malformed key"},
		{"malformed secret", id + ".plsk_short", 401, id, "malformed key"},
		{"unknown keyId", unknownFull, 401, strings.Split(unknownFull, ".")[0], "unknown key"},
		{"wrong secret", id + "." + otherSecret, 401, id, "wrong secret"},
		{"expired", expiredFull, 401, expired.ID, "expired key"},
		{"revoked", revokedFull, 401, revoked.ID, "revoked key"},
		{"good", id + "." + secret, 200, id, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := e.do(request{method: "GET", path: "/api/agents", apiKey: tt.key})
			if rec.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d: %s", rec.Code, tt.wantStatus, rec.Body)
			}
			if tt.wantStatus == 401 {
				problem(t, rec, 401)
				if rec.Header().Get("WWW-Authenticate") == "" {
					t.Error("401 without WWW-Authenticate")
				}
			}
			entry := e.lastAudit()
			if entry.KeyID != tt.wantKeyID || entry.Status != tt.wantStatus || entry.Method != "GET" || entry.Path != "/api/agents" || entry.ClientAddress != "192.0.2.7" {
				t.Errorf("audit entry = %+v", entry)
			}
			if tt.wantReason != "" {
				var d audit.APIAuthFailed
				json.Unmarshal(entry.Details, &d)
				if entry.Action != "api.auth_failed" || d.Reason != tt.wantReason {
					t.Errorf("audit action %s, details %s; want reason %q", entry.Action, entry.Details, tt.wantReason)
				}
			} else if entry.Action != "api.request" || entry.Actor != "key:"+id {
				t.Errorf("audit entry of a good request = %+v", entry)
			}
		})
	}

	// A key's last use is recorded.
	k, err := e.store.FindKeyByID(ctx, id)
	if err != nil || k.LastUsedAt == nil {
		t.Errorf("last use of the good key = %v, %v", k, err)
	}
	// The key describes itself.
	rec = e.do(request{method: "GET", path: "/api/key", apiKey: e.privKey})
	got := decode[keyJSON](t, rec, http.StatusOK)
	if got.KeyID != e.privKeyID || !got.Privileged || got.ExpiresAt == nil || got.LastUsedAt == nil {
		t.Errorf("GET /api/key = %+v", got)
	}
}

func TestTrustedProxies(t *testing.T) {
	e := newEnv(t)
	e.srv.cfg.TrustedProxies = nil
	r, _ := http.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.2:1234"
	r.Header.Set("X-Forwarded-For", "198.51.100.9, 10.0.0.3")
	if got := e.srv.clientAddress(r); got != "10.0.0.2" {
		t.Errorf("untrusted peer: %s", got)
	}
	e.srv.cfg.TrustedProxies = mustPrefixes("10.0.0.0/8")
	if got := e.srv.clientAddress(r); got != "198.51.100.9" {
		t.Errorf("trusted proxies: %s", got)
	}
}

func TestListAgents(t *testing.T) {
	e := newEnv(t)
	var ids []string
	for i := 0; i < 12; i++ {
		a := e.enroll(fmt.Sprintf("host-%02d", i), device.Platforms[i%3])
		ids = append(ids, a.id)
	}
	var seen []string
	cursor := ""
	pages := 0
	for {
		q := url.Values{"limit": {"5"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		rec := e.do(request{method: "GET", path: "/api/agents?" + q.Encode(), apiKey: e.key})
		page := decode[listJSON[agentJSON]](t, rec, http.StatusOK)
		pages++
		for _, a := range page.Results {
			seen = append(seen, a.ID)
			if a.Status != device.StatusOnline || a.Hostname == "" {
				t.Errorf("agent %+v", a)
			}
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	if pages != 3 || len(seen) != 12 {
		t.Errorf("%d pages, %d agents", pages, len(seen))
	}
	sort.Strings(seen)
	sort.Strings(ids)
	if diff := cmp.Diff(ids, seen); diff != "" {
		t.Errorf("paged agents (-want +got):\n%s", diff)
	}

	rec := e.do(request{method: "GET", path: "/api/agents?os=macos", apiKey: e.key})
	if page := decode[listJSON[agentJSON]](t, rec, http.StatusOK); len(page.Results) != 4 {
		t.Errorf("os=macos: %d agents", len(page.Results))
	}
	rec = e.do(request{method: "GET", path: "/api/agents?q=HOST-1", apiKey: e.key})
	if page := decode[listJSON[agentJSON]](t, rec, http.StatusOK); len(page.Results) != 2 {
		t.Errorf("q=HOST-1: %d agents", len(page.Results))
	}

	rec = e.do(request{method: "GET", path: "/api/agents?limit=2", apiKey: e.key})
	first := decode[listJSON[agentJSON]](t, rec, http.StatusOK)
	bad := []string{
		"limit=0", "limit=101", "limit=x", "status=sleeping", "os=plan9", "featureUpgrade=maybe",
		"cursor=garbage", "cursor=" + *first.NextCursor + "&os=linux", "colour=blue", "limit=1&limit=2",
	}
	for _, q := range bad {
		rec := e.do(request{method: "GET", path: "/api/agents?" + q, apiKey: e.key})
		problem(t, rec, http.StatusBadRequest)
	}

	rec = e.do(request{method: "GET", path: "/api/agents/" + ids[0], apiKey: e.key})
	if a := decode[agentJSON](t, rec, http.StatusOK); a.ID != ids[0] {
		t.Errorf("GET agent = %+v", a)
	}
	rec = e.do(request{method: "GET", path: "/api/agents/agt_unknown", apiKey: e.key})
	problem(t, rec, http.StatusNotFound)
	rec = e.do(request{method: "POST", path: "/api/agents/agt_unknown/collect-logs", apiKey: e.key})
	problem(t, rec, http.StatusNotFound)
}

func TestCommandFlow(t *testing.T) {
	e := newEnv(t)
	a := e.enroll("laptop-7", "windows")
	e.checkIn(a, agentproto.CheckInRequest{
		Hostname: "laptop-7", OS: agentproto.OS{Platform: "windows", Name: "Windows 11 Pro", Version: "23H2", Build: "22631.3447"},
		Inventory: &agentproto.Inventory{
			Software:       []agentproto.Software{{Name: "7-Zip", Version: "23.01", Ecosystem: "Desktop"}},
			PendingUpdates: []agentproto.Update{{ID: "KB5036893", Title: "2024-04 Cumulative Update", Severity: "critical"}},
		},
		FeatureUpgrade: agentproto.FeatureUpgrade{State: "ready", Target: "24H2"},
	})
	rec := e.do(request{method: "GET", path: "/api/agents/" + a.id, apiKey: e.key})
	got := decode[agentJSON](t, rec, http.StatusOK)
	if got.OS.Name != "Windows 11 Pro" || len(got.Inventory.PendingUpdates) != 1 || got.FeatureUpgrade.State != "ready" {
		t.Errorf("agent after check-in = %+v", got)
	}

	rec = e.do(request{method: "POST", path: "/api/agents/" + a.id + "/collect-logs", apiKey: e.key})
	cmd := decode[commandJSON](t, rec, http.StatusAccepted)
	if cmd.Type != "collect-logs" || cmd.State != "queued" || cmd.AgentID != a.id || cmd.CreatedBy != "key:"+e.keyID {
		t.Errorf("collect-logs = %+v", cmd)
	}
	if entry := e.lastAudit(); entry.Action != "command.queued" || !strings.Contains(string(entry.Details), cmd.ID) {
		t.Errorf("audit of collect-logs = %+v", entry)
	}
	resp := e.checkIn(a, agentproto.CheckInRequest{})
	if len(resp.Commands) != 1 || resp.Commands[0].ID != cmd.ID {
		t.Fatalf("check-in commands = %+v", resp.Commands)
	}
	e.report(a, cmd.ID, "running", "collecting")

	// Bundles are size-bounded and belong to their agent.
	other := e.enroll("other", "linux")
	rec = e.do(request{method: "PUT", path: "/agent/v1/commands/" + cmd.ID + "/log-bundle", bearer: other.credential, body: []byte("x"), contentType: "application/gzip"})
	problem(t, rec, http.StatusNotFound)
	rec = e.do(request{method: "PUT", path: "/agent/v1/commands/" + cmd.ID + "/log-bundle", bearer: a.credential, body: make([]byte, agentproto.MaxLogBundleBytes+1), contentType: "application/gzip"})
	problem(t, rec, http.StatusRequestEntityTooLarge)
	rec = e.do(request{method: "PUT", path: "/agent/v1/commands/" + cmd.ID + "/log-bundle", bearer: a.credential, body: []byte("x"), contentType: "text/html"})
	problem(t, rec, http.StatusBadRequest)
	rec = e.do(request{method: "PUT", path: "/agent/v1/commands/" + cmd.ID + "/log-bundle", bearer: a.credential, body: []byte("log lines"), contentType: "application/gzip"})
	up := decode[agentproto.LogBundleResponse](t, rec, http.StatusCreated)
	if up.Size != 9 {
		t.Errorf("upload = %+v", up)
	}
	e.report(a, cmd.ID, "succeeded", "collected")

	rec = e.do(request{method: "GET", path: "/api/commands/" + cmd.ID, apiKey: e.key})
	done := decode[commandJSON](t, rec, http.StatusOK)
	if done.State != "succeeded" || done.Result == nil || done.Result.Message != "collected" {
		t.Errorf("command = %+v", done)
	}
	rec = e.do(request{method: "GET", path: "/api/commands/" + cmd.ID + "/log-bundle", apiKey: e.key})
	if rec.Code != 200 || rec.Body.String() != "log lines" || rec.Header().Get("Repr-Digest") == "" {
		t.Errorf("log bundle = %d %q", rec.Code, rec.Body)
	}
	rec = e.do(request{method: "GET", path: "/api/commands/cmd_unknown", apiKey: e.key})
	problem(t, rec, http.StatusNotFound)

	// A report that cannot follow the state conflicts; a failure needs a
	// reason.
	rec = e.do(request{method: "POST", path: "/agent/v1/commands/" + cmd.ID + "/report", bearer: a.credential, body: agentproto.Report{State: "running"}})
	problem(t, rec, http.StatusConflict)
	rec = e.do(request{method: "POST", path: "/agent/v1/commands/" + cmd.ID + "/report", bearer: a.credential, body: agentproto.Report{State: "failed"}})
	problem(t, rec, http.StatusBadRequest)

	// Cancel a queued command.
	rec = e.do(request{method: "POST", path: "/api/agents/" + a.id + "/collect-logs", apiKey: e.key})
	queued := decode[commandJSON](t, rec, http.StatusAccepted)
	rec = e.do(request{method: "POST", path: "/api/commands/" + queued.ID + "/cancel", apiKey: e.key})
	if c := decode[commandJSON](t, rec, http.StatusOK); c.State != "canceled" {
		t.Errorf("canceled = %+v", c)
	}
	rec = e.do(request{method: "POST", path: "/api/commands/" + queued.ID + "/cancel", apiKey: e.key})
	problem(t, rec, http.StatusConflict)

	rec = e.do(request{method: "GET", path: "/api/agents/" + a.id + "/commands?state=canceled", apiKey: e.key})
	if list := decode[listJSON[commandJSON]](t, rec, http.StatusOK); len(list.Results) != 1 || list.Results[0].ID != queued.ID {
		t.Errorf("canceled commands = %+v", list)
	}
}

func TestPrivilegedOperations(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i, ring := range []string{"pilot", "broad"} {
		rec := e.do(request{method: "POST", path: "/api/rings", apiKey: e.key, body: map[string]any{"name": ring, "position": (i + 1) * 10}})
		decode[ringJSON](t, rec, http.StatusCreated)
	}
	rec := e.do(request{method: "POST", path: "/api/rings", apiKey: e.key, body: map[string]any{"name": "pilot", "position": 99}})
	problem(t, rec, http.StatusConflict)
	rec = e.do(request{method: "GET", path: "/api/rings?limit=1", apiKey: e.key})
	rings := decode[listJSON[ringJSON]](t, rec, http.StatusOK)
	rec = e.do(request{method: "GET", path: "/api/rings?limit=1&cursor=" + *rings.NextCursor, apiKey: e.key})
	more := decode[listJSON[ringJSON]](t, rec, http.StatusOK)
	if rings.Results[0].Name != "pilot" || more.Results[0].Name != "broad" || more.NextCursor != nil {
		t.Errorf("rings in pages of one = %+v, %+v", rings, more)
	}

	win := e.enroll("win-1", "windows")
	mac := e.enroll("mac-1", "macos")
	lin := e.enroll("lin-1", "linux")
	for _, a := range []agent{win, mac} {
		e.checkIn(a, agentproto.CheckInRequest{Hostname: "h", OS: agentproto.OS{Platform: "windows"}, FeatureUpgrade: agentproto.FeatureUpgrade{State: "ready"}})
	}
	for a, ring := range map[agent]string{win: "pilot", mac: "broad", lin: "broad"} {
		rec := e.do(request{method: "PATCH", path: "/api/agents/" + a.id, apiKey: e.key, body: map[string]any{"ring": ring}})
		if got := decode[agentJSON](t, rec, http.StatusOK); got.Ring == nil || *got.Ring != ring {
			t.Errorf("PATCH ring = %+v", got.Ring)
		}
	}
	rec = e.do(request{method: "PATCH", path: "/api/agents/" + lin.id, apiKey: e.key, body: map[string]any{"ring": "nope"}})
	problem(t, rec, http.StatusBadRequest)

	rec = e.do(request{method: "POST", path: "/api/agents/" + win.id + "/install-updates", apiKey: e.privKey, body: map[string]any{"updates": []string{"KB5036893"}}})
	c := decode[commandJSON](t, rec, http.StatusAccepted)
	if c.Type != "install-updates" || string(c.Params) != `{"updates":["KB5036893"]}` {
		t.Errorf("install-updates = %+v", c)
	}
	rec = e.do(request{method: "POST", path: "/api/agents/" + win.id + "/reboot", apiKey: e.privKey, body: map[string]any{"delaySeconds": 300}})
	if c := decode[commandJSON](t, rec, http.StatusAccepted); c.Type != "reboot" {
		t.Errorf("reboot = %+v", c)
	}
	rec = e.do(request{method: "POST", path: "/api/agents/" + win.id + "/reboot", apiKey: e.privKey, body: map[string]any{"delaySeconds": -1}})
	problem(t, rec, http.StatusBadRequest)

	// Bulk: by ids, and by filter (which selects ready agents only).
	rec = e.do(request{method: "POST", path: "/api/feature-upgrades/finish", apiKey: e.privKey, body: map[string]any{"agentIds": []string{win.id, lin.id, "agt_unknown"}}})
	bulk := decode[bulkJSON](t, rec, http.StatusAccepted)
	if len(bulk.Commands) != 1 || bulk.Commands[0].AgentID != win.id || len(bulk.Skipped) != 2 {
		t.Errorf("finish by ids = %+v", bulk)
	}
	rec = e.do(request{method: "POST", path: "/api/feature-upgrades/finish", apiKey: e.privKey, body: map[string]any{"filter": map[string]any{}}})
	bulk = decode[bulkJSON](t, rec, http.StatusAccepted)
	if len(bulk.Commands) != 1 || bulk.Commands[0].AgentID != mac.id || len(bulk.Skipped) != 1 || bulk.Skipped[0].AgentID != win.id {
		t.Errorf("finish by filter = %+v", bulk)
	}
	rec = e.do(request{method: "POST", path: "/api/feature-upgrades/finish", apiKey: e.privKey, body: map[string]any{}})
	problem(t, rec, http.StatusBadRequest)

	// Policies: create (not privileged), new version, deploy (privileged).
	rec = e.do(request{method: "POST", path: "/api/policies", apiKey: e.key, body: map[string]any{"name": "screen lock", "settings": map[string]any{"lockAfterMinutes": 5}}})
	pol := decode[policyJSON](t, rec, http.StatusCreated)
	rec = e.do(request{method: "POST", path: "/api/policies", apiKey: e.key, body: map[string]any{"name": "bad", "settings": []int{1}}})
	problem(t, rec, http.StatusBadRequest)
	rec = e.do(request{method: "PUT", path: "/api/policies/" + pol.ID, apiKey: e.key, body: map[string]any{"settings": map[string]any{"lockAfterMinutes": 2}}})
	if p := decode[policyJSON](t, rec, http.StatusOK); p.Version != 2 {
		t.Errorf("updated policy = %+v", p)
	}
	rec = e.do(request{method: "POST", path: "/api/policies/" + pol.ID + "/deploy", apiKey: e.privKey, body: map[string]any{"filter": map[string]any{"ring": "broad"}}})
	dep := decode[struct {
		Policy   policyJSON    `json:"policy"`
		Commands []commandJSON `json:"commands"`
	}](t, rec, http.StatusAccepted)
	if len(dep.Commands) != 2 || dep.Policy.Version != 2 || !strings.Contains(string(dep.Commands[0].Params), `"version":2`) {
		t.Errorf("deploy = %+v", dep)
	}
	if entry := e.lastAudit(); entry.Action != "policy.deployed" || entry.KeyID != e.privKeyID {
		t.Errorf("audit of deploy = %+v", entry)
	}
	rec = e.do(request{method: "POST", path: "/api/policies/pol_unknown/deploy", apiKey: e.privKey, body: map[string]any{"agentIds": []string{win.id}}})
	problem(t, rec, http.StatusNotFound)

	// Rollouts: ring by ring, never skipping.
	rec = e.do(request{method: "POST", path: "/api/rollouts", apiKey: e.key, body: map[string]any{"name": "April", "kind": "install-updates", "updates": []string{"KB5036893"}}})
	ro := decode[rolloutJSON](t, rec, http.StatusCreated)
	if ro.State != "pending" || ro.CurrentRing != nil || *ro.NextRing != "pilot" {
		t.Errorf("new rollout = %+v", ro)
	}
	advance := func(body any, status int) *rolloutJSON {
		t.Helper()
		rec := e.do(request{method: "POST", path: "/api/rollouts/" + ro.ID + "/advance", apiKey: e.privKey, body: body})
		if status != http.StatusAccepted {
			problem(t, rec, status)
			return nil
		}
		got := decode[struct {
			Rollout  rolloutJSON   `json:"rollout"`
			Commands []commandJSON `json:"commands"`
		}](t, rec, status)
		return &got.Rollout
	}
	if got := advance(nil, http.StatusAccepted); *got.CurrentRing != "pilot" || got.State != "in-progress" {
		t.Errorf("after the first advance = %+v", got)
	}
	advance(map[string]any{"fromRing": "pilot"}, http.StatusConflict) // pilot still busy
	for _, c := range e.checkIn(win, agentproto.CheckInRequest{}).Commands {
		e.report(win, c.ID, "succeeded", "done")
	}
	advance(map[string]any{"fromRing": "broad"}, http.StatusConflict)
	if got := advance(map[string]any{"fromRing": "pilot"}, http.StatusAccepted); *got.CurrentRing != "broad" || got.State != "in-progress" || len(got.Progress) != 2 || got.NextRing != nil {
		t.Errorf("after the second advance = %+v", got)
	}
	advance(nil, http.StatusConflict) // no ring left
	for _, a := range []agent{mac, lin} {
		for _, c := range e.checkIn(a, agentproto.CheckInRequest{}).Commands {
			if c.Type == "install-updates" {
				e.report(a, c.ID, "succeeded", "installed")
			}
		}
	}
	rec = e.do(request{method: "GET", path: "/api/rollouts/" + ro.ID, apiKey: e.key})
	if got := decode[rolloutJSON](t, rec, http.StatusOK); got.State != "completed" || got.Progress[0].States["succeeded"] != 1 || got.Progress[1].States["succeeded"] != 2 {
		t.Errorf("rollout after its last ring = %s %+v", got.State, got.Progress)
	}
	rec = e.do(request{method: "GET", path: "/api/rollouts?state=completed", apiKey: e.key})
	if list := decode[listJSON[rolloutJSON]](t, rec, http.StatusOK); len(list.Results) != 1 {
		t.Errorf("completed rollouts = %+v", list)
	}

	// Remove: 202 with the remove command, then the agent is gone.
	rec = e.do(request{method: "DELETE", path: "/api/agents/" + lin.id, apiKey: e.privKey})
	rm := decode[commandJSON](t, rec, http.StatusAccepted)
	if rm.Type != "remove" {
		t.Errorf("remove = %+v", rm)
	}
	rec = e.do(request{method: "GET", path: "/api/agents/" + lin.id, apiKey: e.key})
	problem(t, rec, http.StatusNotFound)
	rec = e.do(request{method: "DELETE", path: "/api/agents/" + lin.id, apiKey: e.privKey})
	problem(t, rec, http.StatusNotFound)
	resp := e.checkIn(lin, agentproto.CheckInRequest{})
	if len(resp.Commands) != 1 || resp.Commands[0].Type != "remove" {
		t.Errorf("removed agent's check-in = %+v", resp)
	}
	e.report(lin, rm.ID, "succeeded", "uninstalled")
	rec = e.do(request{method: "POST", path: agentproto.PathCheckIn, bearer: lin.credential, body: agentproto.CheckInRequest{Capability: 1, Hostname: "h", OS: agentproto.OS{Platform: "linux"}}})
	problem(t, rec, http.StatusUnauthorized)

	// The audit log pages to its end, newest first, and the chain holds.
	var entries []auditEntryJSON
	cursor := ""
	for {
		path := "/api/audit-log?limit=7"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		rec := e.do(request{method: "GET", path: path, apiKey: e.privKey})
		page := decode[listJSON[auditEntryJSON]](t, rec, http.StatusOK)
		entries = append(entries, page.Results...)
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	for i := 1; i < len(entries); i++ {
		if entries[i].ID != entries[i-1].ID-1 || entries[i].Hash != entries[i-1].PrevHash {
			t.Fatalf("audit page order broken at %d: %d after %d", i, entries[i].ID, entries[i-1].ID)
		}
	}
	if entries[len(entries)-1].ID != 1 {
		t.Errorf("the audit log did not page to its first entry")
	}
	rec = e.do(request{method: "GET", path: "/api/audit-log?action=rollout.advanced&keyId=" + e.privKeyID, apiKey: e.privKey})
	if page := decode[listJSON[auditEntryJSON]](t, rec, http.StatusOK); len(page.Results) != 2 {
		t.Errorf("rollout.advanced entries = %d", len(page.Results))
	}
	rec = e.do(request{method: "GET", path: "/api/audit-log?action=nope", apiKey: e.privKey})
	problem(t, rec, http.StatusBadRequest)
	res, err := audit.Verify(ctx, e.store)
	if err != nil || res.Broken != nil {
		t.Errorf("Verify = %+v, %v", res, err)
	}
}

func TestUnknownRoutes(t *testing.T) {
	e := newEnv(t)
	rec := e.do(request{method: "GET", path: "/api/nothing", apiKey: e.key})
	problem(t, rec, http.StatusNotFound)
	rec = e.do(request{method: "PUT", path: "/api/agents", apiKey: e.key})
	problem(t, rec, http.StatusMethodNotAllowed)
	if rec.Header().Get("Allow") != "GET" {
		t.Errorf("Allow = %q", rec.Header().Get("Allow"))
	}
	rec = e.do(request{method: "GET", path: "/api/nothing"})
	problem(t, rec, http.StatusUnauthorized)
	rec = e.do(request{method: "GET", path: "/api/openapi.json"})
	if rec.Code != 200 || !json.Valid(rec.Body.Bytes()) {
		t.Errorf("openapi.json: %d", rec.Code)
	}
}

// TestNoCommandsAnswer checks that the answer to a check-in without
// commands, encoded once, is what encoding it each time gave.
func TestNoCommandsAnswer(t *testing.T) {
	rec := httptest.NewRecorder()
	err := httpx.WriteJSON(rec, http.StatusOK, agentproto.CheckInResponse{
		Capability: agentproto.CapabilityVersion, CheckInIntervalSeconds: int(device.CheckInInterval / time.Second), Commands: []agentproto.Command{},
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rec.Body.String(), string(noCommands())); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
}
