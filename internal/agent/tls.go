package agent

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// Trust decides which certificates of the control service the agent
// accepts. Without a pin, the certificate must chain to the roots (the
// system's, or a private CA's) and name the server's host. With a pin (the
// SHA-256 of a SubjectPublicKeyInfo, as in HPKP and curl's
// --pinnedpubkey), the server's own certificate must hold that public key,
// or a certificate of its verified chain must; a pinned key of the
// server's own certificate is trusted by itself, so a self-signed
// certificate needs no CA. The pin can change while requests are under
// way (SetPin): every TLS handshake checks the pin of that moment.
type Trust struct {
	roots *x509.CertPool // nil: the system's
	now   func() time.Time

	mu  sync.RWMutex
	pin []byte
}

// NewTrust returns a Trust of roots (nil: the system's roots) without a
// pin.
func NewTrust(roots *x509.CertPool) *Trust {
	return &Trust{roots: roots, now: time.Now}
}

// SetPin sets the pin every later handshake checks; nil removes it.
func (t *Trust) SetPin(pin []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pin = bytes.Clone(pin)
}

// Pin returns the pin in force, nil when there is none.
func (t *Trust) Pin() []byte {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.pin
}

// TLSConfig returns the client configuration of connections to host.
func (t *Trust) TLSConfig(host string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: host,
		RootCAs:    t.roots,
		// The standard verification cannot take a pinned self-signed
		// certificate: VerifyConnection does all of it instead, on every
		// handshake, resumed ones included.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return t.verify(cs.PeerCertificates, host)
		},
	}
}

// Client returns an HTTP client of the control service at server whose
// connections t verifies. It has no overall timeout: the agent's Client
// bounds each request.
func (t *Trust) Client(server string) (*http.Client, error) {
	u, err := url.Parse(server)
	if err != nil {
		return nil, fmt.Errorf("server URL %q: %w", server, err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = t.TLSConfig(u.Hostname())
	tr.ResponseHeaderTimeout = 2 * time.Minute
	return &http.Client{Transport: tr}, nil
}

// CertificateError is a server certificate the agent refused.
type CertificateError struct {
	Host string
	// Pin is the pin in force, "" for none.
	Pin string
	// Got is the pin of the certificate the server presented.
	Got string
	// Err is why its chain did not verify, nil when it did.
	Err error
}

// Error says why the certificate was refused and what to do.
func (e *CertificateError) Error() string {
	if e.Pin != "" {
		return fmt.Sprintf("the certificate of %s has public key sha256 %s, which does not match the pin %s (a changed key, or someone in between)", e.Host, e.Got, e.Pin)
	}
	return fmt.Sprintf("the certificate of %s is not trusted: %v (give its CA with --ca-file, or pin its key with --pin-sha256 %s after checking it)", e.Host, e.Err, e.Got)
}

// Unwrap returns the verification error.
func (e *CertificateError) Unwrap() error { return e.Err }

func (t *Trust) verify(certs []*x509.Certificate, host string) error {
	if len(certs) == 0 {
		return errors.New("the server presented no certificate")
	}
	leaf := certs[0]
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	chains, verr := leaf.Verify(x509.VerifyOptions{
		DNSName:       host,
		Roots:         t.roots,
		Intermediates: inter,
		CurrentTime:   t.now(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	pin := t.Pin()
	got := PinOf(leaf)
	if pin == nil {
		if verr != nil {
			return &CertificateError{Host: host, Got: got, Err: verr}
		}
		return nil
	}
	want := FormatPin(pin)
	for _, chain := range chains {
		for _, c := range chain {
			if PinOf(c) == want {
				return nil
			}
		}
	}
	if got != want {
		return &CertificateError{Host: host, Pin: want, Got: got, Err: verr}
	}
	// The pinned key is the server's own: the pin, not a CA, vouches for
	// it, whatever names the certificate holds. It must still be within
	// its validity period.
	if now := t.now(); now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		return fmt.Errorf("the pinned certificate of %s is valid from %s to %s, not now", host,
			leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// PinOf returns the pin of a certificate: the base64 of the SHA-256 of its
// SubjectPublicKeyInfo.
func PinOf(c *x509.Certificate) string {
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return FormatPin(sum[:])
}

// FormatPin writes a pin as standard base64.
func FormatPin(pin []byte) string { return base64.StdEncoding.EncodeToString(pin) }

// ParsePin reads a pin: the SHA-256 of a SubjectPublicKeyInfo in base64
// (what `openssl x509 -pubkey -noout | openssl pkey -pubin -outform der |
// openssl dgst -sha256 -binary | base64` prints, with or without curl's
// "sha256//" prefix) or in hex (64 digits, colons allowed).
func ParsePin(s string) ([]byte, error) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "sha256//")
	if h := strings.ReplaceAll(s, ":", ""); len(h) == 2*sha256.Size {
		if b, err := hex.DecodeString(h); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == sha256.Size {
			return b, nil
		}
	}
	return nil, fmt.Errorf("pin %q: want the SHA-256 of the server's public key (SubjectPublicKeyInfo) in base64 or hex", s)
}

// LoadCAFile reads the PEM certificates of a private CA into a pool.
func LoadCAFile(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("CA file %s: %w", path, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("CA file %s: no PEM certificate in it", path)
	}
	return pool, nil
}

// CheckServerURL checks the URL of the control service: http or https
// with a host. Plain http:// is refused for a host other than a loopback
// one (localhost, 127.0.0.0/8, ::1) unless insecureHTTP: credentials and
// commands would cross the network in the clear.
func CheckServerURL(server string, insecureHTTP bool) error {
	u, err := url.Parse(server)
	if server == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--server %q: want the http(s) URL of the control service", server)
	}
	if u.Scheme == "http" && !insecureHTTP && !isLoopback(u.Hostname()) {
		return fmt.Errorf("--server %q: plain http:// would send the agent's credentials and commands in the clear; use https://, or --insecure-http on a network you trust", server)
	}
	return nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}
