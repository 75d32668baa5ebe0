package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and localhost
// and its key as PEM files in dir; it returns their paths, the certificate
// and the pin of its public key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, cert *x509.Certificate, pin string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "patchline e2e"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return certFile, keyFile, cert, base64.StdEncoding.EncodeToString(sum[:])
}

// startServeTLS is startServe with --tls-cert and --tls-key: it waits for
// both listeners over TLS, trusting only cert.
func startServeTLS(t *testing.T, data string, env []string, client *http.Client, args ...string) *server {
	t.Helper()
	copyFile(t, sampleCatalog, filepath.Join(data, "catalog.db"))
	return startServeWith(t, client, "https", data, env, args...)
}

func TestTLSEndToEnd(t *testing.T) {
	e2e(t)
	data := t.TempDir()
	d := []string{"--data", data}
	certFile, keyFile, cert, pin := selfSigned(t, t.TempDir())
	_, _, _, otherPin := selfSigned(t, t.TempDir())

	// Only one of the pair, or files that do not load, are clear errors.
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"cert without key", []string{"--tls-cert", certFile}, "--tls-cert needs --tls-key"},
		{"key without cert", []string{"--tls-key", keyFile}, "--tls-key needs --tls-cert"},
		{"key that is a certificate", []string{"--tls-cert", certFile, "--tls-key", certFile}, "--tls-key " + certFile},
		{"missing file", []string{"--tls-cert", filepath.Join(data, "nope.pem"), "--tls-key", keyFile}, "nope.pem"},
	} {
		r := runCLI(t, "", []string{"PATCHLINE_TLS_CERT=", "PATCHLINE_TLS_KEY="}, append([]string{"serve", "--data", t.TempDir()}, tc.args...)...)
		if r.Code == 0 || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want a failure naming %q", tc.name, r.Code, r.Stderr, tc.want)
		}
	}

	key := mustControlCLI(t, append([]string{"keys", "create", "--name", "tls"}, d...)...)
	secret := mustControlCLI(t, append([]string{"enroll", "create", "--expires", "1h"}, d...)...)
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	// The files come from the environment, as every flag may.
	srv := startServeTLS(t, data, []string{"PATCHLINE_CONTROL_DB=", "PATCHLINE_CATALOG_DB=", "PATCHLINE_TLS_CERT=" + certFile, "PATCHLINE_TLS_KEY=" + keyFile}, client)
	if !strings.Contains(srv.Log(), "pin_sha256="+pin) && !strings.Contains(srv.Log(), `pin_sha256="`+pin+`"`) {
		t.Errorf("serve did not log the pin %s:\n%s", pin, srv.Log())
	}

	// A client that trusts the certificate reads both listeners.
	resp, err := client.Get(srv.LookupURL + "/api/v1/cve/CVE-2021-44228")
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Links struct{ Self string } `json:"_links"`
	}
	json.NewDecoder(resp.Body).Decode(&rec)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(rec.Links.Self, "https://") {
		t.Errorf("lookup over TLS: %d, self link %q", resp.StatusCode, rec.Links.Self)
	}
	if resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
		t.Errorf("connection state %+v", resp.TLS)
	}
	// The console says to use nothing but TLS, and its cookies are Secure.
	resp, err = client.Get(srv.ControlURL + "/sign-in")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if hsts := resp.Header.Get("Strict-Transport-Security"); !strings.HasPrefix(hsts, "max-age=") {
		t.Errorf("console over TLS: Strict-Transport-Security %q", hsts)
	}
	for _, c := range resp.Cookies() {
		if !c.Secure {
			t.Errorf("console cookie %s is not Secure", c.Name)
		}
	}
	// A client that does not trust it, plain HTTP and TLS 1.1 are refused.
	if _, err := http.Get(srv.ControlURL + "/healthz"); err == nil {
		t.Error("a client without the certificate's CA was served")
	}
	if r, err := http.Get(strings.Replace(srv.ControlURL, "https://", "http://", 1) + "/healthz"); err == nil {
		if r.StatusCode == http.StatusOK {
			t.Error("plain HTTP was served on the TLS listener")
		}
		r.Body.Close()
	}
	if c, err := tls.Dial("tcp", strings.TrimPrefix(srv.ControlURL, "https://"), &tls.Config{RootCAs: roots, MaxVersion: tls.VersionTLS11}); err == nil {
		c.Close()
		t.Error("a TLS 1.1 handshake succeeded")
	}

	// Agents refuse plain HTTP to another machine, and a certificate they
	// cannot verify.
	if r := runCLI(t, "", nil, "agent", "--server", "http://patchline.example:8081", "--enroll-secret", secret, "--state", t.TempDir()); r.Code == 0 || !strings.Contains(r.Stderr, "--insecure-http") {
		t.Errorf("agent over plain HTTP: exit %d: %s", r.Code, r.Stderr)
	}

	// An agent with the pin enrolls and checks in; the pin is kept in its
	// state.
	c := &controlClient{t: t, base: srv.ControlURL, http: client}
	state := filepath.Join(t.TempDir(), "agent-state")
	agentArgs := func(state string, extra ...string) []string {
		return append([]string{"agent", "--server", srv.ControlURL, "--enroll-secret", secret, "--state", state, "--interval", "500ms"}, extra...)
	}
	pinned := startProcess(t, []string{"PATCHLINE_ALLOW="}, agentArgs(state, "--pin-sha256", pin)...)
	var first fleetAgent
	waitFor(t, "the pinned agent's check-in", 2*time.Minute, func() bool {
		list := c.agents(key, "")
		if len(list) != 1 || len(list[0].Inventory.Software) == 0 {
			return false
		}
		first = list[0]
		return true
	})
	pinned.Stop()
	b, err := os.ReadFile(filepath.Join(state, "agent.json"))
	if err != nil || !strings.Contains(string(b), `"pinSha256": "`+pin+`"`) {
		t.Errorf("agent state %s (%v): no pin", b, err)
	}
	// Without --pin-sha256 it goes on with the stored pin.
	lastSeen := func() string {
		status, body := c.raw("GET", "/api/agents/"+first.ID, key, "", nil)
		var a struct{ LastSeenAt string }
		c.expect("agent", status, body, http.StatusOK, &a)
		return a.LastSeenAt
	}
	before := lastSeen()
	again := startProcess(t, []string{"PATCHLINE_ALLOW="}, agentArgs(state)...)
	waitFor(t, "a check-in with the stored pin", time.Minute, func() bool { return lastSeen() != before })
	again.Stop()
	if strings.Contains(again.Log(), "enrolled") {
		t.Errorf("the agent enrolled again instead of using its state:\n%s", again.Log())
	}

	// An agent with a wrong pin is refused before it sends anything.
	wrong := startProcess(t, []string{"PATCHLINE_ALLOW="}, agentArgs(filepath.Join(t.TempDir(), "s"), "--pin-sha256", otherPin)...)
	waitFor(t, "the wrong pin's refusal", time.Minute, func() bool {
		return strings.Contains(wrong.Log(), "does not match the pin "+otherPin)
	})
	// So is one that has neither the pin nor the CA.
	untrusted := startProcess(t, []string{"PATCHLINE_ALLOW="}, agentArgs(filepath.Join(t.TempDir(), "s"))...)
	waitFor(t, "the untrusted certificate's refusal", time.Minute, func() bool {
		return strings.Contains(untrusted.Log(), "is not trusted")
	})
	wrong.Stop()
	untrusted.Stop()
	// An agent given the CA instead of a pin enrolls too.
	withCA := startProcess(t, []string{"PATCHLINE_ALLOW="}, agentArgs(filepath.Join(t.TempDir(), "s"), "--ca-file", certFile)...)
	waitFor(t, "the agent with the CA", 2*time.Minute, func() bool { return len(c.agents(key, "")) == 2 })
	withCA.Stop()
	if n := len(c.agents(key, "")); n != 2 {
		t.Errorf("%d agents enrolled, want the pinned one and the one with the CA", n)
	}
}

func TestServeConfigTLSAndStreams(t *testing.T) {
	certFile, keyFile, _, _ := selfSigned(t, t.TempDir())
	parse := func(env map[string]string, args ...string) (ServeConfig, error) {
		var c ServeConfig
		e := &Env{Stderr: io.Discard, Getenv: func(k string) string { return env[k] }}
		fs := newFlags("serve", e)
		bindServeFlags(fs, &c)
		if err := parseFlags(fs, e, args); err != nil {
			return c, err
		}
		return c, c.Validate()
	}
	c, err := parse(nil)
	if err != nil || c.TLS() || c.MaxStreams != 4 {
		t.Errorf("defaults: TLS %v, max streams %d, %v", c.TLS(), c.MaxStreams, err)
	}
	c, err = parse(map[string]string{"PATCHLINE_TLS_CERT": certFile, "PATCHLINE_TLS_KEY": keyFile, "PATCHLINE_MAX_STREAMS": "9"})
	if err != nil || !c.TLS() || c.MaxStreams != 9 {
		t.Errorf("from the environment: TLS %v, max streams %d, %v", c.TLS(), c.MaxStreams, err)
	}
	if _, err := parse(nil, "--max-streams", "-1"); err == nil {
		t.Error("--max-streams -1 accepted")
	}
	if got := lookupPublicURL("", "127.0.0.1:8080", true); got != "https://127.0.0.1:8080/api/v1" {
		t.Errorf("public URL over TLS: %q", got)
	}
	cfg := serverTLSConfig(c.tlsCert)
	if cfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("MinVersion %x", cfg.MinVersion)
	}
	for _, id := range cfg.CipherSuites {
		for _, bad := range tls.InsecureCipherSuites() {
			if id == bad.ID {
				t.Errorf("insecure cipher suite %s", bad.Name)
			}
		}
	}
}
