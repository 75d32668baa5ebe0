package admin

import (
	"errors"
	"strings"
	"testing"

	"github.com/patchline/patchline/internal/errs"
)

func TestPasswordHash(t *testing.T) {
	h := HashPassword("correct horse battery staple")
	if !strings.HasPrefix(h, "$argon2id$v=19$m=65536,t=3,p=2$") {
		t.Fatalf("hash = %q", h)
	}
	if !VerifyPassword(h, "correct horse battery staple") {
		t.Error("the password does not verify")
	}
	if VerifyPassword(h, "correct horse battery stapler") {
		t.Error("a wrong password verifies")
	}
	if h == HashPassword("correct horse battery staple") {
		t.Error("two hashes of one password are equal: no salt")
	}
	for _, bad := range []string{"", "$argon2i$v=19$m=65536,t=3,p=2$c2FsdA$aGFzaA", "$argon2id$v=19$m=0,t=3,p=2$c2FsdA$aGFzaA", "plain"} {
		if VerifyPassword(bad, "x") {
			t.Errorf("malformed hash %q verifies", bad)
		}
	}
}

func TestChecks(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"short password", CheckPassword("short"), errs.ErrInvalid},
		{"good password", CheckPassword("long enough password"), nil},
		{"huge password", CheckPassword(strings.Repeat("x", MaxPasswordBytes+1)), errs.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.want) || (tt.want == nil) != (tt.err == nil) {
				t.Errorf("error = %v, want %v", tt.err, tt.want)
			}
		})
	}
	for _, e := range []string{"ops@example.com", " ops@example.com "} {
		if got, err := CheckEmail(e); err != nil || got != "ops@example.com" {
			t.Errorf("CheckEmail(%q) = %q, %v", e, got, err)
		}
	}
	for _, e := range []string{"", "ops", "Ops <ops@example.com>"} {
		if _, err := CheckEmail(e); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("CheckEmail(%q) error = %v", e, err)
		}
	}
}
