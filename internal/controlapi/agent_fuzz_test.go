package controlapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/control/sqlstore"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/httpx"
)

// agentFuzzEnv is a server on a real store with one enrolled agent and a
// collect-logs command delivered to it.
type agentFuzzEnv struct {
	srv          *Server
	enrollSecret string
	credential   string
	commandID    string
}

func newAgentFuzzEnv(tb testing.TB) *agentFuzzEnv {
	tb.Helper()
	ctx := context.Background()
	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(tb.TempDir(), "control.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	e := &agentFuzzEnv{srv: New(Config{
		Agents: store, Commands: store, Rings: store, Rollouts: store, Policies: store,
		Keys: store, Audit: store, EnrollSecrets: store,
	})}
	now := time.Now()
	key, k, _ := apikey.New(apikey.Params{Name: "fuzz", CreatedBy: "test"}, now)
	if err := store.CreateKey(ctx, k); err != nil {
		tb.Fatal(err)
	}
	e.enrollSecret = apikey.NewSecret(device.EnrollSecretPrefix)
	if err := store.CreateEnrollSecret(ctx, &device.EnrollSecret{
		ID: device.NewID(device.EnrollSecretIDPrefix), SecretHash: apikey.HashSecret(e.enrollSecret), CreatedBy: "test", CreatedAt: now,
	}); err != nil {
		tb.Fatal(err)
	}
	call := func(method, path, header, value string, body any, want int) []byte {
		b, _ := json.Marshal(body)
		r := httptest.NewRequest(method, "http://control.test"+path, bytes.NewReader(b))
		r.Header.Set("Content-Type", "application/json")
		if header != "" {
			r.Header.Set(header, value)
		}
		rec := httptest.NewRecorder()
		e.srv.ServeHTTP(rec, r)
		if rec.Code != want {
			tb.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
		return rec.Body.Bytes()
	}
	var enrolled agentproto.EnrollResponse
	json.Unmarshal(call("POST", agentproto.PathEnroll, "", "", agentproto.EnrollRequest{
		EnrollSecret: e.enrollSecret, Capability: agentproto.CapabilityVersion, Hostname: "fuzz-host",
		OS: agentproto.OS{Platform: "linux", Name: "Debian GNU/Linux", Version: "12", Build: "6.1.0"}, Arch: "amd64", AgentVersion: "1.0.0",
	}, http.StatusCreated), &enrolled)
	e.credential = enrolled.Credential
	var cmd struct{ ID string }
	json.Unmarshal(call("POST", "/api/agents/"+enrolled.AgentID+"/collect-logs", HeaderAPIKey, key, nil, http.StatusAccepted), &cmd)
	e.commandID = cmd.ID
	call("POST", agentproto.PathCheckIn, "Authorization", "Bearer "+e.credential, agentproto.CheckInRequest{
		Capability: agentproto.CapabilityVersion, Hostname: "fuzz-host",
		OS: agentproto.OS{Platform: "linux", Name: "Debian GNU/Linux", Version: "12", Build: "6.1.0"},
	}, http.StatusOK)
	return e
}

// FuzzAgentRoutes sends fuzzed bodies to every route of the agent
// protocol (enrollment, check-in, command reports, log bundle uploads)
// of a server on a real store: no body is a server error, and every
// refusal is a problem document.
func FuzzAgentRoutes(f *testing.F) {
	e := newAgentFuzzEnv(f)
	enroll := `{"enrollSecret":"` + e.enrollSecret + `","capability":2,"hostname":"laptop-0042","os":{"platform":"windows","name":"Windows 11 Pro","version":"23H2","build":"22631.3447"},"arch":"amd64","agentVersion":"1.0.0"}`
	seeds := []struct {
		route       uint8
		contentType string
		body        string
	}{
		{0, "application/json", enroll},
		{0, "application/json", strings.Replace(enroll, `"capability":2`, `"capability":0`, 1)},
		{0, "application/json", strings.Replace(enroll, `laptop-0042`, `a\r\nb`, 1)},
		{1, "application/json", `{"capability":2,"hostname":"fuzz-host","os":{"platform":"linux","name":"Debian GNU/Linux","version":"12","build":"6.1.0"},"ips":["10.0.4.17"],"inventory":{"software":[{"name":"openssl","version":"3.0.11-1~deb12u2","ecosystem":"Debian:12","arch":"amd64","source":"openssl"}],"pendingUpdates":[]},"featureUpgrade":{"state":"none"},"appliedPolicies":[],"rebootPending":false}`},
		{1, "application/json", `{"capability":2,"hostname":"fuzz-host","os":{"platform":"linux"},"inventoryDelta":{"base":"x","hash":"y"}}`},
		{1, "application/json", `{"capability":2,"hostname":"fuzz-host","os":{"platform":"linux"},"featureUpgrade":{"state":"sideways"}}`},
		{1, "application/json", "{\"capability\":2,\"hostname\":\"h\xff\",\"os\":{\"platform\":\"linux\"}}"},
		{1, "application/json", `{"capability":99999999999999999999}`},
		{1, "application/json", `{"capability":2,"hostname":"fuzz-host","os":{"platform":"linux"},"arch":"pdp11","ips":["10.0.0.1","::1%eth0","evil.example"]}`},
		{1, "application/json", `{"capability":2,"hostname":"fuzz-host\u0085","os":{"platform":"linux","name":"\u001b[2J"},"agentVersion":"1\n2"}`},
		{1, "application/json", strings.Repeat("[", 200)},
		{2, "application/json", `{"state":"running"}`},
		{2, "application/json", `{"state":"failed","result":{"message":"not allowed by this endpoint's local policy","exitCode":1,"data":{"a":1}}}`},
		{2, "application/json", `{"state":"succeeded","result":{"message":"","data":[1]}}`},
		{2, "application/json", `{"state":"exploded"}`},
		{3, "application/gzip", "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00"},
		{3, "application/octet-stream", ""},
		{3, "text/html; charset=utf-8", "<script>"},
		{3, "application/zip; x=\"\r\n\"", "PK"},
		{4, "", ""},
	}
	for _, s := range seeds {
		f.Add(s.route, s.contentType, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, route uint8, contentType string, body []byte) {
		var method, path string
		auth := "Bearer " + e.credential
		switch route % 5 {
		case 0:
			method, path, auth = "POST", agentproto.PathEnroll, ""
		case 1:
			method, path = "POST", agentproto.PathCheckIn
		case 2:
			method, path = "POST", "/agent/v1/commands/"+e.commandID+"/report"
		case 3:
			method, path = "PUT", "/agent/v1/commands/"+e.commandID+"/log-bundle"
		case 4:
			method, path = "PUT", agentproto.PathCheckIn
		}
		r := httptest.NewRequest(method, "http://control.test"+path, bytes.NewReader(body))
		r.RemoteAddr = "192.0.2.7:4711"
		r.Header.Set("Content-Type", contentType)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		e.srv.ServeHTTP(rec, r)
		what := method + " " + path
		if rec.Code >= 500 {
			t.Fatalf("%s with %q: status %d: %s", what, body, rec.Code, rec.Body)
		}
		if rec.Code < 400 {
			return
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
			t.Fatalf("%s: status %d with Content-Type %q", what, rec.Code, ct)
		}
		var p httpx.Problem
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Status != rec.Code || !utf8.ValidString(p.Detail) {
			t.Fatalf("%s: problem %s (%v)", what, rec.Body, err)
		}
	})
}
