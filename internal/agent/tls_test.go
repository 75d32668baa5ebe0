package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/agentproto"
)

// testCert is a certificate and its key.
type testCert struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func (c *testCert) tls(chain ...*testCert) tls.Certificate {
	out := tls.Certificate{Certificate: [][]byte{c.cert.Raw}, PrivateKey: c.key, Leaf: c.cert}
	for _, ch := range chain {
		out.Certificate = append(out.Certificate, ch.cert.Raw)
	}
	return out
}

// newCert makes a certificate for hosts (a CA when hosts is empty),
// signed by parent, or self-signed when parent is nil.
func newCert(t *testing.T, parent *testCert, notAfter time.Time, hosts ...string) *testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "patchline test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if len(hosts) == 0 {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		tmpl.ExtKeyUsage = nil
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCert{cert: cert, key: key}
}

func pool(certs ...*testCert) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c.cert)
	}
	return p
}

func mustPin(t *testing.T, c *testCert) []byte {
	t.Helper()
	pin, err := ParsePin(PinOf(c.cert))
	if err != nil {
		t.Fatal(err)
	}
	return pin
}

func TestTrustVerify(t *testing.T) {
	year := time.Now().Add(365 * 24 * time.Hour)
	ca := newCert(t, nil, year)
	leaf := newCert(t, ca, year, "control.example", "127.0.0.1")
	selfSigned := newCert(t, nil, year, "control.example")
	expired := newCert(t, nil, time.Now().Add(-time.Minute), "control.example")
	other := newCert(t, nil, year, "control.example")
	tests := []struct {
		name  string
		roots *x509.CertPool
		pin   []byte
		chain []*x509.Certificate
		host  string
		want  string // in the error; "" for accepted
	}{
		{"CA-signed, CA given", pool(ca), nil, []*x509.Certificate{leaf.cert}, "control.example", ""},
		{"CA-signed, by IP", pool(ca), nil, []*x509.Certificate{leaf.cert}, "127.0.0.1", ""},
		{"CA-signed, system roots", nil, nil, []*x509.Certificate{leaf.cert}, "control.example", "is not trusted"},
		{"CA-signed, another name", pool(ca), nil, []*x509.Certificate{leaf.cert}, "evil.example", "is not trusted"},
		{"self-signed, no pin", nil, nil, []*x509.Certificate{selfSigned.cert}, "control.example", "--pin-sha256"},
		{"self-signed, pinned", nil, mustPin(t, selfSigned), []*x509.Certificate{selfSigned.cert}, "control.example", ""},
		{"self-signed, pinned, any name", nil, mustPin(t, selfSigned), []*x509.Certificate{selfSigned.cert}, "10.0.0.1", ""},
		{"self-signed, wrong pin", nil, mustPin(t, other), []*x509.Certificate{selfSigned.cert}, "control.example", "does not match the pin"},
		{"CA-signed, wrong pin", pool(ca), mustPin(t, other), []*x509.Certificate{leaf.cert}, "control.example", "does not match the pin"},
		{"CA-signed, leaf pinned", pool(ca), mustPin(t, leaf), []*x509.Certificate{leaf.cert}, "control.example", ""},
		{"CA-signed, CA pinned", pool(ca), mustPin(t, ca), []*x509.Certificate{leaf.cert}, "control.example", ""},
		// A pinned CA vouches only through a verified chain: presenting
		// the CA's certificate beside another leaf proves nothing.
		{"CA pinned, forged chain", nil, mustPin(t, ca), []*x509.Certificate{other.cert, ca.cert}, "control.example", "does not match the pin"},
		{"pinned but expired", nil, mustPin(t, expired), []*x509.Certificate{expired.cert}, "control.example", "not now"},
		{"no certificate", nil, nil, nil, "control.example", "no certificate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTrust(tc.roots)
			tr.SetPin(tc.pin)
			err := tr.verify(tc.chain, tc.host)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestParsePin(t *testing.T) {
	c := newCert(t, nil, time.Now().Add(time.Hour), "x")
	want := PinOf(c.cert)
	raw, _ := ParsePin(want)
	for _, in := range []string{want, "sha256//" + want, strings.TrimRight(want, "="), hex.EncodeToString(raw), strings.ToUpper(hex.EncodeToString(raw)), " " + want + "\n"} {
		got, err := ParsePin(in)
		if err != nil || FormatPin(got) != want {
			t.Errorf("ParsePin(%q) = %x, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "abc", want[:20], strings.Repeat("zz", 32), "sha1//" + want} {
		if _, err := ParsePin(in); err == nil {
			t.Errorf("ParsePin(%q) accepted", in)
		}
	}
}

func TestCheckServerURL(t *testing.T) {
	for _, tc := range []struct {
		url      string
		insecure bool
		ok       bool
	}{
		{"https://patchline.example:8081", false, true},
		{"http://127.0.0.1:8081", false, true},
		{"http://127.8.9.10:8081", false, true},
		{"http://[::1]:8081", false, true},
		{"http://localhost:8081", false, true},
		{"http://patchline.example:8081", false, false},
		{"http://10.0.0.5:8081", false, false},
		{"http://[::ffff:10.0.0.5]:8081", false, false},
		{"http://localhost.evil.example:8081", false, false},
		{"http://patchline.example:8081", true, true},
		{"ftp://patchline.example", true, false},
		{"patchline.example:8081", true, false},
		{"", true, false},
	} {
		err := CheckServerURL(tc.url, tc.insecure)
		if (err == nil) != tc.ok {
			t.Errorf("CheckServerURL(%q, %v) = %v", tc.url, tc.insecure, err)
		}
	}
}

func TestLoadCAFile(t *testing.T) {
	dir := t.TempDir()
	ca := newCert(t, nil, time.Now().Add(time.Hour))
	good := filepath.Join(dir, "ca.pem")
	os.WriteFile(good, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}), 0o600)
	if p, err := LoadCAFile(good); err != nil || p == nil {
		t.Errorf("LoadCAFile: %v", err)
	}
	empty := filepath.Join(dir, "empty.pem")
	os.WriteFile(empty, []byte("not a certificate\n"), 0o600)
	if _, err := LoadCAFile(empty); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("LoadCAFile of a file without certificates: %v", err)
	}
	if _, err := LoadCAFile(filepath.Join(dir, "missing.pem")); err == nil {
		t.Error("LoadCAFile of a missing file succeeded")
	}
}

// TestAgentPinsAtEnrollment enrolls over TLS with a pin, then checks that
// the pin stored with the identity is checked on later connections even
// when the configuration no longer names it.
func TestAgentPinsAtEnrollment(t *testing.T) {
	ts := newTestServer(t)
	year := time.Now().Add(365 * 24 * time.Hour)
	first := newCert(t, nil, year, "127.0.0.1")
	second := newCert(t, nil, year, "127.0.0.1")
	var current atomic.Pointer[tls.Certificate]
	c := first.tls()
	current.Store(&c)
	// The real control service, behind TLS with a certificate the test
	// can change.
	backend, _ := url.Parse(ts.url)
	srv := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(backend))
	srv.TLS = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return &tls.Config{Certificates: []tls.Certificate{*current.Load()}}, nil
	}}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	state := NewMemoryState()
	ep := &fakeEndpoint{snap: Snapshot{Hostname: "pinned-1", OS: agentproto.OS{Platform: "linux", Name: "Debian", Version: "12", Build: "6.1"}, Arch: "amd64"}}
	newAgent := func(pin []byte) *Agent {
		cfg := Config{Server: srv.URL, EnrollSecret: ts.secret, State: state, Endpoint: ep, Pin: pin, Interval: time.Hour}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		return New(cfg)
	}
	ctx := context.Background()

	// Without a pin, a self-signed certificate is refused.
	a := newAgent(nil)
	if err := a.enroll(ctx); !isCertErr(err) {
		t.Fatalf("enroll without a pin: %v, want a certificate error", err)
	}
	// A wrong pin is refused.
	a = newAgent(mustPin(t, second))
	if err := a.enroll(ctx); !isCertErr(err) || !strings.Contains(err.Error(), "does not match the pin") {
		t.Fatalf("enroll with a wrong pin: %v", err)
	}
	// The right pin enrolls, and is stored with the identity.
	a = newAgent(mustPin(t, first))
	if err := a.enroll(ctx); err != nil {
		t.Fatalf("enroll with the pin: %v", err)
	}
	id, _ := state.Identity()
	if id == nil || id.PinSHA256 != PinOf(first.cert) {
		t.Fatalf("identity after enrollment: %+v", id)
	}
	// A later run without --pin-sha256 still checks the stored pin.
	a = newAgent(nil)
	if err := a.ensureEnrolled(ctx, a.backoff()); err != nil {
		t.Fatal(err)
	}
	snap, _ := ep.Snapshot(ctx)
	if _, err := a.checkIn(ctx, snap); err != nil {
		t.Fatalf("check-in with the stored pin: %v", err)
	}
	c2 := second.tls()
	current.Store(&c2)
	a.client.HTTP.CloseIdleConnections()
	if _, err := a.checkIn(ctx, snap); !isCertErr(err) {
		t.Fatalf("check-in to a server with another key: %v, want a certificate error", err)
	}
	// A new pin on the command line replaces the stored one.
	a = newAgent(mustPin(t, second))
	if err := a.ensureEnrolled(ctx, a.backoff()); err != nil {
		t.Fatal(err)
	}
	if id, _ := state.Identity(); id.PinSHA256 != PinOf(second.cert) {
		t.Errorf("stored pin %s after a new --pin-sha256", id.PinSHA256)
	}
	if _, err := a.checkIn(ctx, snap); err != nil {
		t.Fatalf("check-in with the new pin: %v", err)
	}
}

func isCertErr(err error) bool {
	var ce *CertificateError
	return errors.As(err, &ce)
}

func TestConfigValidatePin(t *testing.T) {
	pin := make([]byte, 32)
	base := Config{Server: "https://control.example", State: NewMemoryState(), Endpoint: &fakeEndpoint{}}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		ok   bool
	}{
		{"pin", func(c *Config) { c.Pin = pin }, true},
		{"pin over http", func(c *Config) { c.Pin, c.Server = pin, "http://127.0.0.1:8081" }, false},
		{"short pin", func(c *Config) { c.Pin = pin[:5] }, false},
		{"pin with a given client", func(c *Config) { c.Pin, c.HTTP = pin, &http.Client{} }, false},
	} {
		c := base
		tc.edit(&c)
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate = %v", tc.name, err)
		}
	}
}
