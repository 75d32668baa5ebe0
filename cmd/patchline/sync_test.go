package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// syncSampleData is the repository's copy of the real feed files.
const syncSampleData = "../../internal/sample/data"

// fakeEPSS serves FIRST's daily EPSS file of the sample at
// /epss_scores-current.csv with an ETag, 304 to a matching If-None-Match,
// and 404 elsewhere.
func fakeEPSS(t *testing.T) *httptest.Server {
	t.Helper()
	body, err := os.ReadFile(filepath.Join(syncSampleData, "epss", "epss_public_ids.csv"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:8]) + `"`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/epss_scores-current.csv" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// runInProcess runs a subcommand in this process and returns its exit code
// and output.
func runInProcess(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
	code := run(ctx, env, args)
	return code, stdout.String(), stderr.String()
}

func TestSyncCommand(t *testing.T) {
	srv := fakeEPSS(t)
	data := t.TempDir()
	mirror := filepath.Join(syncSampleData, "debian")
	args := []string{"sync", "--once", "--data", data, "epss=" + srv.URL + "/epss_scores-current.csv", "debian=" + mirror}

	code, out, errOut := runInProcess(t, args...)
	if code != 0 {
		t.Fatalf("first sync: exit %d\n%s%s", code, out, errOut)
	}
	// One line per source, then the table of the catalog's sources.
	for _, want := range []string{`(?m)^epss: 65 records changed: fetched epss_scores-current.csv`, `(?m)^debian: \d+ records changed: mirror changed`,
		`(?m)^SOURCE +RECORDS +DATA +UPSTREAM +FRESHNESS +LAST ERROR$`,
		`(?m)^debian +[1-9]\d* +synced just now +- +fresh +-$`,
		// EPSS alone makes no record: its scores wait for another source.
		`(?m)^epss +0 +synced just now +(-|changed [^ ]+ [a-z]+ ago) +fresh +-$`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("first sync output does not match %q:\n%s", want, out)
		}
	}
	code, out, errOut = runInProcess(t, args...)
	if code != 0 {
		t.Fatalf("second sync: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"epss: unchanged: not modified (1 requests, 0 B", "debian: unchanged: mirror unchanged"} {
		if !strings.Contains(out, want) {
			t.Errorf("second sync output lacks %q:\n%s", want, out)
		}
	}
}

func TestSyncCommandErrors(t *testing.T) {
	srv := fakeEPSS(t)
	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   string
		stderrRE string
	}{
		{"unknown source", []string{"nope"}, 1, "", `unknown source "nope"`},
		{"upstream fails", []string{"epss=" + srv.URL + "/missing.csv"}, 1, "epss: failed: ", `1 of 1 sources failed and kept their previous data`},
		{"unreadable mirror", []string{"kev=" + filepath.Join(t.TempDir(), "absent")}, 1, "kev: failed: ", `1 of 1 sources failed`},
		{"failure in the table", []string{"epss=" + srv.URL + "/missing.csv"}, 1, "never taken in  -         stale      sync epss: ", `1 of 1 sources failed`},
		{"not once", []string{"--once=false", "kev"}, 1, "", `--once=false: patchline sync syncs each source once`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"sync", "--data", t.TempDir()}, tt.args...)
			code, out, errOut := runInProcess(t, args...)
			if code != tt.code || !strings.Contains(out, tt.stdout) || !regexp.MustCompile(tt.stderrRE).MatchString(errOut) {
				t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
		})
	}
}

func TestServeSyncEveryValidation(t *testing.T) {
	for _, every := range []string{"10s", "-1h"} {
		code, _, errOut := runInProcess(t, "serve", "--data", t.TempDir(), "--sync-every", every)
		if code == 0 || !strings.Contains(errOut, "--sync-every") {
			t.Errorf("--sync-every %s: exit %d, %s", every, code, errOut)
		}
	}
	code, _, errOut := runInProcess(t, "serve", "--data", t.TempDir(), "--sync-every", "1h", "--sync-sources", "kev,nope")
	if code == 0 || !strings.Contains(errOut, "--sync-sources") {
		t.Errorf("--sync-sources with an unknown source: exit %d, %s", code, errOut)
	}
}

// TestServeSyncEndToEnd runs the binary with the background sync on: it
// syncs at start and says so in its log.
func TestServeSyncEndToEnd(t *testing.T) {
	e2e(t)
	srv := fakeEPSS(t)
	s := startServe(t, "", nil, "--sync-every", "1h", "--sync-sources", "epss="+srv.URL+"/epss_scores-current.csv")
	re := regexp.MustCompile(`msg=synced service=sync source=epss`)
	deadline := time.Now().Add(time.Minute)
	for !re.MatchString(s.Log()) {
		if time.Now().After(deadline) {
			t.Fatalf("no sync logged within a minute:\n%s", s.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.Stop(t)
	if !strings.Contains(s.Log(), "shutting down") {
		t.Errorf("serve did not shut down cleanly:\n%s", s.Log())
	}
}
