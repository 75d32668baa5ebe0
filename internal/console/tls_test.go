package console

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/patchline/patchline/internal/ratelimit"
)

func TestTLSHeadersAndCookies(t *testing.T) {
	e := newEnv(t)
	e.mustAdmin()
	trusted, err := ratelimit.ParseProxies("10.0.0.5/32")
	if err != nil {
		t.Fatal(err)
	}
	e.srv.cfg.TrustedProxies = trusted
	for _, tc := range []struct {
		name   string
		tls    bool
		secure bool   // Config.SecureCookies
		peer   string // RemoteAddr
		proto  string // X-Forwarded-Proto
		want   bool
	}{
		{"plain HTTP", false, false, "192.0.2.1:1234", "", false},
		{"TLS", true, false, "192.0.2.1:1234", "", true},
		{"TLS at a proxy, by configuration", false, true, "192.0.2.1:1234", "", true},
		{"TLS at a trusted proxy that says so", false, false, "10.0.0.5:1234", "https", true},
		{"plain HTTP through a trusted proxy", false, false, "10.0.0.5:1234", "http", false},
		{"an untrusted peer claiming TLS", false, false, "192.0.2.1:1234", "https", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.srv.cfg.SecureCookies = tc.secure
			r := httptest.NewRequest("GET", "https://console.test/sign-in", nil)
			r.RemoteAddr = tc.peer
			if tc.proto != "" {
				r.Header.Set("X-Forwarded-Proto", tc.proto)
			}
			if tc.tls {
				r.TLS = &tls.ConnectionState{HandshakeComplete: true}
			} else {
				r.TLS = nil
			}
			rec := httptest.NewRecorder()
			e.srv.ServeHTTP(rec, r)
			if rec.Code != http.StatusOK {
				t.Fatalf("GET /sign-in: %d", rec.Code)
			}
			hsts := rec.Header().Get("Strict-Transport-Security")
			if (hsts != "") != tc.want || (tc.want && !strings.HasPrefix(hsts, "max-age=")) {
				t.Errorf("Strict-Transport-Security = %q", hsts)
			}
			cookies := rec.Header().Values("Set-Cookie")
			if len(cookies) == 0 {
				t.Fatal("the sign-in page set no cookie")
			}
			for _, c := range cookies {
				if strings.Contains(c, "; Secure") != tc.want {
					t.Errorf("cookie %q: Secure should be %v", c, tc.want)
				}
			}
		})
	}
	e.srv.cfg.SecureCookies = false
}
