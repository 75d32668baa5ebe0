package main

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// controlCLI runs the binary with the control store of the flags only.
func controlCLI(t *testing.T, stdin string, args ...string) cliResult {
	t.Helper()
	return runCLI(t, stdin, []string{"PATCHLINE_DATA=", "PATCHLINE_CONTROL_DB="}, args...)
}

// mustControlCLI runs the binary and fails the test unless it exits 0; it
// returns the trimmed stdout.
func mustControlCLI(t *testing.T, args ...string) string {
	t.Helper()
	r := controlCLI(t, "", args...)
	if r.Code != 0 {
		t.Fatalf("patchline %s: exit %d\n%s", strings.Join(args, " "), r.Code, r.Stderr)
	}
	return strings.TrimSpace(r.Stdout)
}

// controlSent is a request the test made, to be found in the audit log.
type controlSent struct {
	method, path string
	status       int
	keyID        string
}

// controlClient calls the control service and remembers every /api request.
type controlClient struct {
	t    *testing.T
	base string
	http *http.Client
	sent []controlSent
}

// call makes a request with the given X-API-Key (none when empty) and
// returns the status and body. keyID is the keyId the audit log should
// record for it.
func (c *controlClient) call(method, path, key, keyID string, body any) (int, []byte) {
	c.t.Helper()
	status, b := c.raw(method, path, key, "", body)
	if strings.HasPrefix(path, "/api/") {
		p, _, _ := strings.Cut(path, "?")
		c.sent = append(c.sent, controlSent{method, p, status, keyID})
	}
	return status, b
}

func (c *controlClient) raw(method, path, key, bearer string, body any) (int, []byte) {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// expect checks a status and decodes the body into v (when not nil).
func (c *controlClient) expect(what string, status int, body []byte, want int, v any) {
	c.t.Helper()
	if status != want {
		c.t.Fatalf("%s: status %d, want %d: %s", what, status, want, body)
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			c.t.Fatalf("%s: %v: %s", what, err, body)
		}
	}
}

type controlProblem struct {
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

type controlAuditEntry struct {
	ID       int64   `json:"id"`
	KeyID    *string `json:"keyId"`
	Action   string  `json:"action"`
	Method   *string `json:"method"`
	Path     *string `json:"path"`
	Status   *int    `json:"status"`
	Hash     string  `json:"hash"`
	PrevHash string  `json:"prevHash"`
}

// printable reports whether s can travel in a header value.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

func controlKeyID(full string) string { id, _, _ := strings.Cut(full, "."); return id }

func TestControlEndToEnd(t *testing.T) {
	e2e(t)
	data := t.TempDir()
	d := []string{"--data", data}

	// Bootstrap on the command line: an administrator, keys, an
	// enrollment secret.
	if r := controlCLI(t, "a long enough password\n", append([]string{"admin", "create", "--email", "ops@example.com", "--password-stdin"}, d...)...); r.Code != 0 {
		t.Fatalf("admin create: exit %d: %s", r.Code, r.Stderr)
	}
	if r := controlCLI(t, "", append([]string{"keys", "create", "--name", "root", "--privileged"}, d...)...); r.Code != 1 || !strings.Contains(r.Stderr, "--expires") {
		t.Errorf("privileged key without --expires: exit %d: %s", r.Code, r.Stderr)
	}
	if r := controlCLI(t, "", append([]string{"keys", "create", "--name", "root", "--privileged", "--expires", "91d"}, d...)...); r.Code != 1 || !strings.Contains(r.Stderr, "90 days") {
		t.Errorf("privileged key past the cap: exit %d: %s", r.Code, r.Stderr)
	}
	plain := mustControlCLI(t, append([]string{"keys", "create", "--name", "ci"}, d...)...)
	priv := mustControlCLI(t, append([]string{"keys", "create", "--name", "ops", "--privileged", "--expires", "720h"}, d...)...)
	doomed := mustControlCLI(t, append([]string{"keys", "create", "--name", "to revoke"}, d...)...)
	expiring := mustControlCLI(t, append([]string{"keys", "create", "--name", "short-lived", "--expires", "1s"}, d...)...)
	expiredAt := time.Now().Add(1500 * time.Millisecond)
	enrollSecret := mustControlCLI(t, append([]string{"enroll", "create", "--expires", "1h"}, d...)...)
	for _, k := range []string{plain, priv, doomed, expiring} {
		if !regexp.MustCompile(`^plk_[0-9A-Za-z]{16}\.plsk_[0-9A-Za-z]{46}$`).MatchString(k) {
			t.Fatalf("key %q does not have the documented format", k)
		}
	}
	if !strings.HasPrefix(enrollSecret, "ples_") {
		t.Fatalf("enrollment secret %q", enrollSecret)
	}
	list := mustControlCLI(t, append([]string{"keys", "list"}, d...)...)
	for _, k := range []string{plain, priv, doomed} {
		if !strings.Contains(list, controlKeyID(k)) || strings.Contains(list, strings.Split(k, ".")[1]) {
			t.Errorf("keys list shows %s wrongly:\n%s", controlKeyID(k), list)
		}
	}

	srv := startServe(t, data, []string{"PATCHLINE_CONTROL_DB=", "PATCHLINE_CATALOG_DB="})
	c := &controlClient{t: t, base: srv.ControlURL, http: &http.Client{Timeout: 30 * time.Second}}

	// Enroll agents through the agent protocol.
	type enrolled struct{ AgentID, Credential string }
	var agents []enrolled
	for i := 0; i < 7; i++ {
		status, body := c.raw("POST", "/agent/v1/enroll", "", "", map[string]any{
			"enrollSecret": enrollSecret, "capability": 1, "hostname": fmt.Sprintf("e2e-%02d", i),
			"os": map[string]string{"platform": "windows", "name": "Windows 11 Pro", "version": "23H2", "build": "22631"},
		})
		var a enrolled
		c.expect("enroll", status, body, http.StatusCreated, &a)
		agents = append(agents, a)
		status, body = c.raw("POST", "/agent/v1/checkin", "", a.Credential, map[string]any{
			"capability": 1, "hostname": fmt.Sprintf("e2e-%02d", i),
			"os":             map[string]string{"platform": "windows", "name": "Windows 11 Pro", "version": "23H2", "build": "22631"},
			"inventory":      map[string]any{"software": []any{}, "pendingUpdates": []any{map[string]string{"id": "KB5036893", "title": "Cumulative update"}}},
			"featureUpgrade": map[string]string{"state": "ready", "target": "24H2"},
		})
		c.expect("check in", status, body, http.StatusOK, nil)
	}
	// API keys never reach agent routes.
	status, body := c.raw("POST", "/agent/v1/checkin", priv, "", map[string]any{})
	c.expect("API key on an agent route", status, body, http.StatusUnauthorized, nil)

	// Authentication failures: 401, each attributed in the audit log.
	time.Sleep(time.Until(expiredAt))
	plainID, privID := controlKeyID(plain), controlKeyID(priv)
	_, plainSecret, _ := strings.Cut(plain, ".")
	_, privSecret, _ := strings.Cut(priv, ".")
	unknownID := "plk_0000000000000000"
	authCases := []struct {
		name, key, keyID string
	}{
		{"no key", "", ""},
		{"malformed key", "this-is-not-a-key", ""},
		{"malformed secret", plainID + ".plsk_x", plainID},
		{"unknown keyId", unknownID + "." + plainSecret, unknownID},
		{"wrong secret", plainID + "." + privSecret, plainID},
		{"expired", expiring, controlKeyID(expiring)},
	}
	for _, tc := range authCases {
		status, body := c.call("GET", "/api/agents", tc.key, tc.keyID, nil)
		var p controlProblem
		c.expect(tc.name, status, body, http.StatusUnauthorized, &p)
		if p.Detail == "" {
			t.Errorf("%s: 401 without a message", tc.name)
		}
	}

	// Revocation takes effect on the very next request.
	status, body = c.call("GET", "/api/agents?limit=1", doomed, controlKeyID(doomed), nil)
	c.expect("key before revocation", status, body, http.StatusOK, nil)
	mustControlCLI(t, append([]string{"keys", "revoke", controlKeyID(doomed)}, d...)...)
	status, body = c.call("GET", "/api/agents?limit=1", doomed, controlKeyID(doomed), nil)
	var p controlProblem
	c.expect("key after revocation", status, body, http.StatusUnauthorized, &p)
	if !strings.Contains(p.Detail, "revoked") {
		t.Errorf("revoked key: %q", p.Detail)
	}
	if r := controlCLI(t, "", append([]string{"keys", "revoke", controlKeyID(doomed)}, d...)...); r.Code == 0 {
		t.Errorf("revoking twice succeeded: %s%s", r.Stdout, r.Stderr)
	}

	// Pagination to the end.
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		path := "/api/agents?limit=3"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		var page struct {
			Results []struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"results"`
			NextCursor *string `json:"nextCursor"`
		}
		status, body := c.call("GET", path, plain, plainID, nil)
		c.expect("list agents", status, body, http.StatusOK, &page)
		for _, a := range page.Results {
			if seen[a.ID] {
				t.Fatalf("agent %s on two pages", a.ID)
			}
			seen[a.ID] = true
		}
		if page.NextCursor == nil {
			if pages != 2 {
				t.Errorf("7 agents in pages of 3 took %d pages", pages+1)
			}
			break
		}
		cursor = *page.NextCursor
	}
	if len(seen) != len(agents) {
		t.Errorf("pagination saw %d agents, want %d", len(seen), len(agents))
	}

	// An unknown agent.
	status, body = c.call("GET", "/api/agents/agt_doesnotexist", plain, plainID, nil)
	c.expect("unknown agent", status, body, http.StatusNotFound, &p)
	status, body = c.call("GET", "/api/agents/"+agents[0].AgentID, plain, plainID, nil)
	c.expect("known agent", status, body, http.StatusOK, nil)
	status, body = c.call("POST", "/api/agents/"+agents[0].AgentID+"/collect-logs", plain, plainID, nil)
	var cmd struct{ ID, State, Type string }
	c.expect("collect logs", status, body, http.StatusAccepted, &cmd)
	status, body = c.call("GET", "/api/commands/"+cmd.ID, plain, plainID, nil)
	c.expect("command status", status, body, http.StatusOK, &cmd)
	if cmd.State != "queued" || cmd.Type != "collect-logs" {
		t.Errorf("command = %+v", cmd)
	}

	// What the privileged routes act on: a ring, a rollout, a policy.
	status, body = c.call("POST", "/api/rings", plain, plainID, map[string]any{"name": "pilot", "position": 1})
	c.expect("create ring", status, body, http.StatusCreated, nil)
	status, body = c.call("PATCH", "/api/agents/"+agents[1].AgentID, plain, plainID, map[string]any{"ring": "pilot"})
	c.expect("assign ring", status, body, http.StatusOK, nil)
	var rollout, policy struct{ ID string }
	status, body = c.call("POST", "/api/rollouts", plain, plainID, map[string]any{"name": "April", "kind": "install-updates"})
	c.expect("create rollout", status, body, http.StatusCreated, &rollout)
	status, body = c.call("POST", "/api/policies", plain, plainID, map[string]any{"name": "screen lock", "settings": map[string]int{"lockAfterMinutes": 5}})
	c.expect("create policy", status, body, http.StatusCreated, &policy)

	privileged := []struct {
		method, path string
		body         any
		want         int
	}{
		{"POST", "/api/agents/" + agents[0].AgentID + "/install-updates", map[string]any{"updates": []string{"KB5036893"}}, http.StatusAccepted},
		{"POST", "/api/agents/" + agents[0].AgentID + "/reboot", nil, http.StatusAccepted},
		{"POST", "/api/feature-upgrades/finish", map[string]any{"agentIds": []string{agents[2].AgentID, agents[3].AgentID}}, http.StatusAccepted},
		{"POST", "/api/rollouts/" + rollout.ID + "/advance", map[string]any{}, http.StatusAccepted},
		{"POST", "/api/policies/" + policy.ID + "/deploy", map[string]any{"agentIds": []string{agents[4].AgentID}}, http.StatusAccepted},
		{"GET", "/api/audit-log?limit=5", nil, http.StatusOK},
		{"DELETE", "/api/agents/" + agents[6].AgentID, nil, http.StatusAccepted},
	}
	for _, op := range privileged {
		status, body := c.call(op.method, op.path, plain, plainID, op.body)
		var p controlProblem
		c.expect("non-privileged "+op.method+" "+op.path, status, body, http.StatusForbidden, &p)
		if !strings.Contains(p.Detail, "not privileged") {
			t.Errorf("%s %s: 403 detail %q does not say the key is not privileged", op.method, op.path, p.Detail)
		}
		status, body = c.call(op.method, op.path, priv, privID, op.body)
		c.expect("privileged "+op.method+" "+op.path, status, body, op.want, nil)
	}
	status, body = c.call("GET", "/api/agents/"+agents[6].AgentID, plain, plainID, nil)
	c.expect("removed agent", status, body, http.StatusNotFound, nil)

	// The keys table holds nothing that authenticates.
	db, err := sql.Open("sqlite", filepath.Join(data, "control.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT * FROM api_keys`)
	if err != nil {
		t.Fatal(err)
	}
	cols, _ := rows.Columns()
	secrets := map[string]string{}
	for _, k := range []string{plain, priv, doomed, expiring} {
		id, secret, _ := strings.Cut(k, ".")
		secrets[id] = secret
	}
	type row struct {
		id     string
		values []string
	}
	var stored []row
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var r row
		for i, v := range vals {
			var s string
			switch v := v.(type) {
			case []byte:
				s = string(v)
				r.values = append(r.values, hex.EncodeToString(v), base64.StdEncoding.EncodeToString(v), base64.RawURLEncoding.EncodeToString(v))
			case nil:
				continue
			default:
				s = fmt.Sprint(v)
			}
			r.values = append(r.values, s)
			if cols[i] == "id" {
				r.id = s
			}
		}
		stored = append(stored, r)
	}
	rows.Close()
	if len(stored) != len(secrets) {
		t.Fatalf("api_keys has %d rows, want %d", len(stored), len(secrets))
	}
	for _, r := range stored {
		secret := secrets[r.id]
		sum := sha256.Sum256([]byte(secret))
		hashed := false
		for _, v := range r.values {
			if strings.Contains(v, secret) || strings.Contains(v, secret[5:]) {
				t.Errorf("key %s: the table holds its secret", r.id)
			}
			hashed = hashed || v == hex.EncodeToString(sum[:])
			// No stored value, however encoded, works as the secret.
			if len(v) > 20 && printable(v) {
				status, _ := c.raw("GET", "/api/key", r.id+"."+v, "", nil)
				if status != http.StatusUnauthorized {
					t.Errorf("key %s: a stored value authenticates (status %d)", r.id, status)
				}
				c.sent = append(c.sent, controlSent{"GET", "/api/key", status, r.id})
			}
		}
		if !hashed {
			t.Errorf("key %s: no SHA-256 digest of the secret in its row", r.id)
		}
	}

	// Every request above is in the audit log, in order, with its keyId.
	var entries []controlAuditEntry
	cursor = ""
	for {
		path := "/api/audit-log?limit=100"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		var page struct {
			Results    []controlAuditEntry `json:"results"`
			NextCursor *string             `json:"nextCursor"`
		}
		status, body := c.raw("GET", path, priv, "", nil)
		c.expect("audit log", status, body, http.StatusOK, &page)
		entries = append(entries, page.Results...)
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	var apiEntries []controlAuditEntry
	for i := len(entries) - 1; i >= 0; i-- { // oldest first
		e := entries[i]
		if e.Path != nil && strings.HasPrefix(*e.Path, "/api/") {
			apiEntries = append(apiEntries, e)
		}
	}
	if len(apiEntries) < len(c.sent) {
		t.Fatalf("%d API requests in the audit log, want at least %d", len(apiEntries), len(c.sent))
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	for i, want := range c.sent {
		e := apiEntries[i]
		if str(e.Method) != want.method || str(e.Path) != want.path || e.Status == nil || *e.Status != want.status || str(e.KeyID) != want.keyID {
			t.Errorf("audit entry %d = %s %s %v key %q, want %s %s %d key %q",
				e.ID, str(e.Method), str(e.Path), e.Status, str(e.KeyID), want.method, want.path, want.status, want.keyID)
		}
	}
	t.Logf("%d requests found in the audit log with their keyId and status; %d entries in all", len(c.sent), len(entries))
	actions := map[string]bool{}
	for _, e := range entries {
		actions[e.Action] = true
	}
	for _, a := range []string{"key.created", "key.revoked", "admin.created", "enroll_secret.created", "agent.enrolled", "api.auth_failed", "command.queued", "agent.removed", "rollout.advanced", "policy.deployed"} {
		if !actions[a] {
			t.Errorf("no %s entry in the audit log", a)
		}
	}
	var tamperID int64
	for _, e := range apiEntries {
		if e.Status != nil && *e.Status == http.StatusUnauthorized && str(e.KeyID) == controlKeyID(doomed) {
			tamperID = e.ID // the refused request of the revoked key
			break
		}
	}

	srv.Stop(t)

	// The chain verifies, and tampering with one row is found.
	out := mustControlCLI(t, append([]string{"audit", "verify"}, d...)...)
	if !strings.Contains(out, "chain intact") {
		t.Errorf("audit verify: %s", out)
	}
	if _, err := db.Exec(`UPDATE audit_log SET status = 200 WHERE id = ?`, tamperID); err == nil {
		t.Error("the database let an audit row change")
	}
	if _, err := db.Exec(`DROP TRIGGER audit_log_no_update`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE audit_log SET status = 200 WHERE id = ?`, tamperID); err != nil {
		t.Fatal(err)
	}
	r := controlCLI(t, "", append([]string{"audit", "verify"}, d...)...)
	if r.Code != 1 || !strings.Contains(r.Stderr, fmt.Sprintf("entry %d:", tamperID)) {
		t.Errorf("audit verify after tampering with entry %d: exit %d\n%s%s", tamperID, r.Code, r.Stdout, r.Stderr)
	}
}
