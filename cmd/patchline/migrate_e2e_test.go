package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/catalog/postgres/pgtest"
)

// TestEndToEndMigratePostgres migrates a copy of the sample catalog that
// TestMain ingested into SQLite to PostgreSQL, serves it from there,
// migrates it back to a new SQLite file and serves that: all three answer
// the same.
func TestEndToEndMigratePostgres(t *testing.T) {
	e2e(t)
	t.Parallel()
	pg := pgtest.NewDatabase(t)
	data := t.TempDir()
	copyFile(t, sampleCatalog, filepath.Join(data, "catalog.db"))
	lite := "sqlite:" + filepath.Join(data, "catalog.db")

	res := runCLI(t, "", nil, "migrate", "--from", lite, "--to", pg)
	if res.Code != 0 {
		t.Fatalf("migrate to PostgreSQL: exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
	}
	if !strings.Contains(res.Stdout, "catalog copied from") || !strings.Contains(res.Stdout, "records: ") {
		t.Errorf("migrate printed:\n%s", res.Stdout)
	}
	t.Logf("migrate to PostgreSQL:\n%s", res.Stdout)

	// A second copy into the same, now full, catalog is refused.
	res = runCLI(t, "", nil, "migrate", "--from", lite, "--to", pg)
	if res.Code != 1 || !strings.Contains(res.Stderr, "not empty") {
		t.Errorf("migrate into a full catalog: exit %d\n%s", res.Code, res.Stderr)
	}

	back := "sqlite:" + filepath.Join(t.TempDir(), "back", "catalog.db")
	res = runCLI(t, "", nil, "migrate", "--from", pg, "--to", back)
	if res.Code != 0 {
		t.Fatalf("migrate back to SQLite: exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
	}

	want := startServe(t, "", nil, "--catalog-db", lite, "--rate-limit", "off")
	fromPG := startServe(t, "", nil, "--catalog-db", pg, "--rate-limit", "off")
	fromBack := startServe(t, "", nil, "--catalog-db", back, "--rate-limit", "off")
	for _, s := range []*server{fromPG, fromBack} {
		if strings.Contains(s.Log(), "loading the bundled sample") {
			t.Errorf("serve loaded the sample into the migrated catalog:\n%s", s.Log())
		}
	}

	paths := []string{
		"/api/v1/cve/CVE-2021-44228",
		"/api/v1/cve/CVE-2024-3094",
		"/api/v1/cve/CVE-2023-44487",
		"/api/v1/cve/CVE-2024-3400/osv",
		"/api/v1/cve?limit=25",
		"/api/v1/cve?sort=epss&dir=desc&limit=20",
		"/api/v1/cve?sort=cvss&severity=CRITICAL&fix=true&limit=10",
		"/api/v1/cve?kev=true&sort=kev&dir=asc&limit=15",
		"/api/v1/cve?year=2023&sort=cve&limit=30",
		"/api/v1/cve?q=log4j&limit=5",
		"/api/v1/cve?q=remote+code+exec&sort=epss&dir=desc&limit=7",
		"/api/v1/cve?q=CVE-2024-3&limit=50",
		"/api/v1/cve/bulk.jsonl",
		"/api/v1/cve/modified.csv",
		"/cve/CVE-2021-44228",
		"/api/v1/cve/CVE-1999-99999",
	}
	for _, p := range paths {
		wantStatus, wantBody := getNormalised(t, want, p)
		for name, s := range map[string]*server{"postgres": fromPG, "sqlite after a round trip": fromBack} {
			status, body := getNormalised(t, s, p)
			if status != wantStatus || body != wantBody {
				t.Errorf("GET %s from %s: %d\n%.600s\nwant %d\n%.600s", p, name, status, body, wantStatus, wantBody)
			}
		}
	}
	// Follow the cursors of a list to its end on both.
	next := "/api/v1/cve?sort=published&dir=desc&limit=100"
	pages := 0
	for next != "" {
		wantStatus, wantBody := getNormalised(t, want, next)
		status, body := getNormalised(t, fromPG, next)
		if status != 200 || status != wantStatus || body != wantBody {
			t.Fatalf("GET %s: %d, want %d; bodies differ: %v", next, status, wantStatus, body != wantBody)
		}
		var page struct {
			NextCursor *string `json:"nextCursor"`
		}
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			t.Fatal(err)
		}
		next = ""
		if page.NextCursor != nil {
			next = "/api/v1/cve?sort=published&dir=desc&limit=100&cursor=" + url.QueryEscape(*page.NextCursor)
		}
		pages++
	}
	if pages < 10 {
		t.Errorf("the list ended after %d pages of 100", pages)
	}
}

// getNormalised GETs path from s and returns the status and the body with
// the server's own address replaced, so that two servers can be compared.
func getNormalised(t *testing.T, s *server, path string) (int, string) {
	t.Helper()
	status, body, _ := get(t, s.LookupURL+path)
	host := strings.TrimPrefix(s.LookupURL, "http://")
	return status, strings.ReplaceAll(string(body), host, "HOST")
}

func TestEndToEndMigrateRefusals(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no flags", []string{"migrate"}, 2, "usage: patchline migrate"},
		{"no source", []string{"migrate", "--from", filepath.Join(dir, "missing.db"), "--to", filepath.Join(dir, "to.db")}, 1, "missing.db"},
		{"same store", []string{"migrate", "--from", "a.db", "--to", "a.db"}, 1, "same store"},
		{"unknown store", []string{"migrate", "--store", "agents", "--from", "a.db", "--to", "b.db"}, 1, "want catalog or control"},
		{"no control store", []string{"migrate", "--store", "control", "--from", "sqlite:" + filepath.Join(dir, "missing", "control.db"), "--to", filepath.Join(dir, "to.db")}, 1, "source control store"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runCLI(t, "", nil, tt.args...)
			if res.Code != tt.code || !strings.Contains(res.Stderr, tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", res.Code, res.Stderr, tt.code, tt.want)
			}
		})
	}
}

// TestEndToEndServePostgresReplicas starts two replicas at once on an empty
// PostgreSQL catalog: both apply the migrations and load the sample without
// getting in each other's way, and both serve the same catalog.
func TestEndToEndServePostgresReplicas(t *testing.T) {
	e2e(t)
	pg := pgtest.NewDatabase(t)
	servers := make(chan *server, 2)
	for range 2 {
		go func() {
			// startServe ends this goroutine when the server does not
			// start; the deferred send still reports it.
			var s *server
			defer func() { servers <- s }()
			s = startServe(t, "", nil, "--catalog-db", pg, "--rate-limit", "off")
		}()
	}
	a, b := <-servers, <-servers
	if a == nil || b == nil {
		t.Fatal("a replica did not start")
	}
	if !strings.Contains(a.Log()+b.Log(), "loading the bundled sample catalog") {
		t.Errorf("neither replica loaded the sample:\n%s\n%s", a.Log(), b.Log())
	}
	for _, p := range []string{"/api/v1/cve/CVE-2021-44228", "/api/v1/cve?sort=epss&dir=desc&limit=20", "/api/v1/cve?q=openssh&limit=5"} {
		sa, ba := getNormalised(t, a, p)
		sb, bb := getNormalised(t, b, p)
		if sa != 200 || sa != sb || ba != bb {
			t.Errorf("GET %s: replicas answer %d and %d\n%.300s\n%.300s", p, sa, sb, ba, bb)
		}
	}
	rec := fetchRecord(t, a, "CVE-2021-44228")
	if rec.KEV == nil || rec.EPSS == nil || !rec.Remediation.Available {
		t.Errorf("record from PostgreSQL = %+v", rec)
	}
}

// TestEndToEndKilledIngestKeepsPostgresCatalog kills ingests into a
// PostgreSQL catalog mid-run: the catalog stays as it was, and the next
// ingest is not held up by the killed one's lock.
func TestEndToEndKilledIngestKeepsPostgresCatalog(t *testing.T) {
	e2e(t)
	pg := pgtest.NewDatabase(t)
	if res := runCLI(t, "", nil, "ingest", "--catalog-db", pg, "--sample"); res.Code != 0 {
		t.Fatalf("ingest --sample: %s%s", res.Stdout, res.Stderr)
	}
	big := filepath.Join(t.TempDir(), "epss.csv")
	var b strings.Builder
	b.WriteString("#model_version:v2025.03.14,score_date:2026-11-20T00:00:00+0000\ncve,epss,percentile\n")
	for i := 0; i < 400_000; i++ {
		fmt.Fprintf(&b, "CVE-2099-%d,0.5,0.5\n", 10000+i)
	}
	fmt.Fprintf(&b, "CVE-2021-44228,0.00001,0.001\n")
	if err := os.WriteFile(big, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, delay := range []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond} {
		cmd := exec.Command(binary, "ingest", "--catalog-db", pg, "epss="+big)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if cmd.ProcessState.Success() {
			t.Skip("the ingest finished before it could be killed")
		}
	}
	small := filepath.Join(t.TempDir(), "epss-small.csv")
	os.WriteFile(small, []byte("cve,epss,percentile\nCVE-2024-3094,0.75,0.9\n"), 0o644)
	start := time.Now()
	if res := runCLI(t, "", nil, "ingest", "--catalog-db", pg, "epss="+small); res.Code != 0 {
		t.Fatalf("ingest after the killed ones: %s%s", res.Stdout, res.Stderr)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the ingest after the killed ones took %v", d)
	}
	s := startServe(t, "", nil, "--catalog-db", pg)
	rec := fetchRecord(t, s, "CVE-2021-44228")
	if rec.EPSS == nil || rec.EPSS.Score == 0.00001 {
		t.Errorf("EPSS after a killed run = %+v, want the sample's score", rec.EPSS)
	}
	if rec := fetchRecord(t, s, "CVE-2024-3094"); rec.EPSS == nil || rec.EPSS.Score != 0.75 {
		t.Errorf("EPSS of the ingest after the killed ones = %+v, want 0.75", rec.EPSS)
	}
	if strings.Contains(s.Log(), "loading the bundled sample") {
		t.Error("the catalog looked empty after a killed run")
	}
}

// TestEndToEndMigrateControlPostgres fills a SQLite control store through
// the command line and the control service, copies it to PostgreSQL and
// back to a new SQLite file, and serves each copy: the audit chain verifies,
// the API key and the agent credential authenticate, and the queued
// command is delivered once.
func TestEndToEndMigrateControlPostgres(t *testing.T) {
	e2e(t)
	pg := pgtest.NewDatabase(t)
	data := t.TempDir()
	d := []string{"--data", data}
	if r := controlCLI(t, "a long enough password\n", append([]string{"admin", "create", "--email", "ops@example.com", "--password-stdin"}, d...)...); r.Code != 0 {
		t.Fatalf("admin create: exit %d: %s", r.Code, r.Stderr)
	}
	key := mustControlCLI(t, append([]string{"keys", "create", "--name", "ci"}, d...)...)
	revoked := mustControlCLI(t, append([]string{"keys", "create", "--name", "gone"}, d...)...)
	mustControlCLI(t, append([]string{"keys", "revoke", controlKeyID(revoked)}, d...)...)
	secret := mustControlCLI(t, append([]string{"enroll", "create", "--expires", "1h"}, d...)...)

	env := []string{"PATCHLINE_CONTROL_DB=", "PATCHLINE_CATALOG_DB="}
	srv := startServe(t, data, env)
	c := &controlClient{t: t, base: srv.ControlURL, http: &http.Client{Timeout: 30 * time.Second}}
	checkIn := map[string]any{
		"capability": 1, "hostname": "mig-01",
		"os": map[string]string{"platform": "windows", "name": "Windows 11 Pro", "version": "23H2", "build": "22631"},
	}
	enroll := map[string]any{"enrollSecret": secret}
	for k, v := range checkIn {
		enroll[k] = v
	}
	status, body := c.raw("POST", "/agent/v1/enroll", "", "", enroll)
	var agent struct{ AgentID, Credential string }
	c.expect("enroll", status, body, http.StatusCreated, &agent)
	status, body = c.raw("POST", "/agent/v1/checkin", "", agent.Credential, checkIn)
	c.expect("check in", status, body, http.StatusOK, nil)
	status, body = c.call("POST", "/api/agents/"+agent.AgentID+"/collect-logs", key, controlKeyID(key), nil)
	var cmd struct{ ID string }
	c.expect("collect logs", status, body, http.StatusAccepted, &cmd)
	srv.Stop(t)
	lite := "sqlite:" + filepath.Join(data, "control.db")

	res := runCLI(t, "", nil, "migrate", "--store", "control", "--from", lite, "--to", pg)
	if res.Code != 0 {
		t.Fatalf("migrate to PostgreSQL: exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
	}
	for _, want := range []string{"control store copied from", "agents: 1", "api_keys: 2", "audit log verified"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("migrate printed no %q:\n%s", want, res.Stdout)
		}
	}
	res = runCLI(t, "", nil, "migrate", "--store", "control", "--from", lite, "--to", pg)
	if res.Code != 1 || !strings.Contains(res.Stderr, "not empty") {
		t.Errorf("migrate into a full control store: exit %d\n%s", res.Code, res.Stderr)
	}
	back := "sqlite:" + filepath.Join(t.TempDir(), "back", "control.db")
	res = runCLI(t, "", nil, "migrate", "--store", "control", "--from", pg, "--to", back)
	if res.Code != 0 {
		t.Fatalf("migrate back to SQLite: exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
	}

	for _, dsn := range []string{pg, back} {
		if out := mustControlCLI(t, "audit", "verify", "--control-db", dsn); !strings.Contains(out, "chain intact") {
			t.Errorf("audit verify of %s: %s", dsn, out)
		}
		s := startServe(t, "", env, "--control-db", dsn)
		c := &controlClient{t: t, base: s.ControlURL, http: &http.Client{Timeout: 30 * time.Second}}
		status, body := c.call("GET", "/api/agents/"+agent.AgentID, key, controlKeyID(key), nil)
		c.expect("the agent through the copied key", status, body, http.StatusOK, nil)
		status, body = c.call("GET", "/api/agents", revoked, controlKeyID(revoked), nil)
		c.expect("the revoked key", status, body, http.StatusUnauthorized, nil)
		status, body = c.raw("POST", "/agent/v1/checkin", "", agent.Credential, checkIn)
		var got struct {
			Commands []struct{ ID string } `json:"commands"`
		}
		c.expect("check in with the copied credential", status, body, http.StatusOK, &got)
		if len(got.Commands) != 1 || got.Commands[0].ID != cmd.ID {
			t.Errorf("check-in on %s delivered %+v, want command %s", dsn, got.Commands, cmd.ID)
		}
		status, body = c.raw("POST", "/agent/v1/checkin", "", agent.Credential, checkIn)
		got.Commands = nil
		c.expect("second check-in", status, body, http.StatusOK, &got)
		if len(got.Commands) != 0 {
			t.Errorf("the second check-in on %s delivered %+v again", dsn, got.Commands)
		}
		s.Stop(t)
		if out := mustControlCLI(t, "audit", "verify", "--control-db", dsn); !strings.Contains(out, "chain intact") {
			t.Errorf("audit verify of %s after serving: %s", dsn, out)
		}
	}
}
