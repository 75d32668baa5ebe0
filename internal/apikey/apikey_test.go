package apikey

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/errs"
)

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func ptr(t time.Time) *time.Time { return &t }

func TestNew(t *testing.T) {
	tests := []struct {
		name string
		p    Params
		want error
	}{
		{"plain", Params{Name: "ci", CreatedBy: "cli:root"}, nil},
		{"plain with expiry", Params{Name: "ci", CreatedBy: "cli:root", ExpiresAt: ptr(now.Add(time.Hour))}, nil},
		{"privileged", Params{Name: "ops", CreatedBy: "cli:root", Privileged: true, ExpiresAt: ptr(now.Add(30 * 24 * time.Hour))}, nil},
		{"privileged at the cap", Params{Name: "ops", CreatedBy: "cli:root", Privileged: true, ExpiresAt: ptr(now.Add(MaxPrivilegedLifetime))}, nil},
		{"privileged without expiry", Params{Name: "ops", CreatedBy: "cli:root", Privileged: true}, errs.ErrInvalid},
		{"privileged past the cap", Params{Name: "ops", CreatedBy: "cli:root", Privileged: true, ExpiresAt: ptr(now.Add(MaxPrivilegedLifetime + time.Second))}, errs.ErrInvalid},
		{"expiry in the past", Params{Name: "ci", CreatedBy: "cli:root", ExpiresAt: ptr(now.Add(-time.Second))}, errs.ErrInvalid},
		{"no name", Params{Name: "  ", CreatedBy: "cli:root"}, errs.ErrInvalid},
		{"long name", Params{Name: strings.Repeat("x", MaxNameLen+1), CreatedBy: "cli:root"}, errs.ErrInvalid},
		{"control characters", Params{Name: "a\nb", CreatedBy: "cli:root"}, errs.ErrInvalid},
		{"no creator", Params{Name: "ci"}, errs.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			full, k, err := New(tt.p, now)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("New error = %v, want %v", err, tt.want)
			}
			if err != nil {
				return
			}
			id, secret, err := Parse(full)
			if err != nil {
				t.Fatalf("Parse(New()) = %v", err)
			}
			if id != k.ID || !Verify(k, secret) {
				t.Errorf("the full key does not verify against its Key")
			}
			if strings.Contains(string(k.SecretHash), secret) || len(k.SecretHash) != 32 {
				t.Errorf("SecretHash is not a 32-byte digest")
			}
			if k.State(now) != StateActive {
				t.Errorf("new key state = %s", k.State(now))
			}
		})
	}
}

func TestParse(t *testing.T) {
	full, _, err := New(Params{Name: "ci", CreatedBy: "t"}, now)
	if err != nil {
		t.Fatal(err)
	}
	id, secret, _ := strings.Cut(full, ".")
	flipped := []byte(secret)
	flipped[len(SecretPrefix)+3] ^= 1 // still base62: a digit or letter with its low bit flipped
	tests := []struct {
		name   string
		in     string
		wantID string
		ok     bool
	}{
		{"full key", full, id, true},
		{"empty", "", "", false},
		{"garbage", "hello", "", false},
		{"id only", id, id, false},
		{"id and dot", id + ".", id, false},
		{"wrong secret prefix", id + ".plzz_" + secret[len(SecretPrefix):], id, false},
		{"bad checksum", id + "." + string(flipped), id, false},
		{"short secret", id + "." + secret[:len(secret)-1], id, false},
		{"bad id", "plk_short." + secret, "", false},
		{"agent credential", "agt_x.plat_" + secret[len(SecretPrefix):], "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotID, gotSecret, err := Parse(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("Parse(%q) error = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Errorf("error = %v, want ErrMalformed", err)
			}
			if gotID != tt.wantID {
				t.Errorf("keyId = %q, want %q", gotID, tt.wantID)
			}
			if tt.ok && gotSecret != secret {
				t.Errorf("secret = %q", gotSecret)
			}
		})
	}
}

func TestSecretFormat(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 200; i++ {
		s := NewSecret("test_")
		if !CheckSecret("test_", s) {
			t.Fatalf("CheckSecret(%q) = false", s)
		}
		if CheckSecret("other_", s) {
			t.Fatalf("CheckSecret accepts another prefix")
		}
		if seen[s] {
			t.Fatalf("duplicate secret %q", s)
		}
		seen[s] = true
	}
}

func TestKeyState(t *testing.T) {
	k := &Key{ExpiresAt: ptr(now)}
	if got := k.State(now.Add(-time.Nanosecond)); got != StateActive {
		t.Errorf("before expiry: %s", got)
	}
	if got := k.State(now); got != StateExpired {
		t.Errorf("at expiry: %s", got)
	}
	k.RevokedAt = ptr(now.Add(-time.Hour))
	if got := k.State(now.Add(-2 * time.Hour)); got != StateRevoked {
		t.Errorf("revoked: %s", got)
	}
}
