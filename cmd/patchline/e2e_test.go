package main

// The end-to-end tests of this package build the real binary once and run
// it as a user would: `patchline serve` on 127.0.0.1:0, the command-line
// tools, curl-like requests. The longest of them (PostgreSQL replicas and
// migration, Wine, Chromium, exposure) call t.Parallel: each owns its
// directories, databases, ports and Wine prefix, and they mostly wait on
// the processes they started, so they run two at a time after the others.

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// binary is the path of the patchline binary built by TestMain.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// No binary: the tests that run it skip (see e2e).
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "patchline-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "patchline")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build patchline:", err)
		os.Exit(1)
	}
	// Loading the bundled sample takes a while: do it once, and start
	// each server on a copy (see startServe).
	sampleCatalog = filepath.Join(dir, "sample", "catalog.db")
	load := exec.Command(binary, "ingest", "--sample", "--data", filepath.Dir(sampleCatalog))
	load.Env = append(os.Environ(), "PATCHLINE_CATALOG_DB=")
	if out, err := load.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "load the sample catalog: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// sampleCatalog is a catalog file holding the bundled sample, made by
// TestMain.
var sampleCatalog string

// e2e skips t under -short, where TestMain builds no binary. The
// end-to-end tests run the binary in processes of their own, which the
// race detector does not see into: make test runs them in its pass
// without -race and skips them in the race pass, which is -short.
func e2e(t *testing.T) {
	t.Helper()
	if binary == "" {
		t.Skip("runs the patchline binary: skipped with -short")
	}
}

// cliResult is what one run of the binary printed.
type cliResult struct {
	Stdout, Stderr string
	Code           int
}

// runCLI runs the binary with args and stdin, in the environment of the
// test plus env ("KEY=VALUE").
func runCLI(t testing.TB, stdin string, env []string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("run patchline %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return cliResult{Stdout: out.String(), Stderr: errOut.String(), Code: code}
}

// server is a running `patchline serve`.
type server struct {
	Data       string // its --data directory
	LookupURL  string // http://127.0.0.1:PORT
	ControlURL string
	cmd        *exec.Cmd
	mu         sync.Mutex
	log        bytes.Buffer
	done       chan struct{}
}

// Log returns what the server logged so far.
func (s *server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

var listeningRE = regexp.MustCompile(`msg=listening service=(\w+) addr=(\S+)`)

// startServe runs `patchline serve` on free ports with a fresh data
// directory (unless data names one) and waits until both listeners answer.
// A data directory without a catalog gets a copy of the sample catalog
// (unless --catalog-db names another), which is what serve would load into
// it, only faster. The server is stopped at the end of the test.
func startServe(t testing.TB, data string, env []string, args ...string) *server {
	t.Helper()
	if data == "" {
		data = t.TempDir()
	}
	dst := filepath.Join(data, "catalog.db")
	if _, err := os.Stat(dst); os.IsNotExist(err) && !slices.Contains(args, "--catalog-db") {
		copyFile(t, sampleCatalog, dst)
	}
	return startServeFresh(t, data, env, args...)
}

// startServeFresh is startServe without the copy of the sample catalog: on
// an empty data directory serve loads the bundled sample itself.
func startServeFresh(t testing.TB, data string, env []string, args ...string) *server {
	t.Helper()
	return startServeWith(t, http.DefaultClient, "http", data, env, args...)
}

// startServeWith starts serve and waits until both listeners answer
// client's GET /healthz over scheme (http, or https with --tls-cert).
func startServeWith(t testing.TB, client *http.Client, scheme, data string, env []string, args ...string) *server {
	t.Helper()
	if data == "" {
		data = t.TempDir()
	}
	s := &server{Data: data, done: make(chan struct{})}
	all := append([]string{"serve", "--data", data, "--cve-addr", "127.0.0.1:0", "--control-addr", "127.0.0.1:0"}, args...)
	s.cmd = exec.Command(binary, all...)
	s.cmd.Env = append(os.Environ(), env...)
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addrs := make(chan [2]string, 2)
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.log.WriteString(line + "\n")
			s.mu.Unlock()
			if m := listeningRE.FindStringSubmatch(line); m != nil {
				addrs <- [2]string{m[1], m[2]}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	t.Cleanup(func() { s.Stop(t) })
	deadline := time.After(2 * time.Minute)
	for s.LookupURL == "" || s.ControlURL == "" {
		select {
		case a := <-addrs:
			switch a[0] {
			case "lookup":
				s.LookupURL = scheme + "://" + a[1]
			case "control":
				s.ControlURL = scheme + "://" + a[1]
			}
		case <-s.done:
			t.Fatalf("serve exited before listening:\n%s", s.Log())
		case <-deadline:
			t.Fatalf("serve did not listen within 2 minutes:\n%s", s.Log())
		}
	}
	for _, u := range []string{s.LookupURL, s.ControlURL} {
		resp, err := client.Get(u + "/healthz")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s/healthz: %v %v\n%s", u, resp, err, s.Log())
		}
		resp.Body.Close()
	}
	return s
}

// Stop stops the server with SIGTERM and waits for it to exit.
func (s *server) Stop(t testing.TB) {
	if s.cmd.ProcessState != nil {
		return
	}
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd.Wait()
}

// getJSON GETs url and returns the status and body.
func get(t testing.TB, url string) (int, []byte, http.Header) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body, resp.Header
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
