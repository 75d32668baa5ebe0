// Package admin defines the administrators of the control service: their
// accounts, their password hashes (argon2id) and the Store that keeps them.
package admin

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"fmt"
	"net/mail"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"

	"github.com/patchline/patchline/internal/errs"
)

// Admin is an administrator account.
type Admin struct {
	ID           string // adm_…
	Email        string // unique, compared case-insensitively
	PasswordHash string // PHC string of argon2id, see HashPassword
	CreatedAt    time.Time
	LastLoginAt  *time.Time
}

// NewID returns a new random administrator id, "adm_" and 24 characters.
func NewID() string {
	b := make([]byte, 15)
	rand.Read(b) // never fails (crypto/rand)
	return "adm_" + strings.ToLower(base32.StdEncoding.EncodeToString(b))
}

// Password length bounds, in characters and bytes.
const (
	MinPasswordLen   = 12
	MaxPasswordBytes = 1024
)

// The argon2id parameters of new hashes: the second recommended option of
// RFC 9106 (64 MiB, 3 passes) with the parallelism of a small server.
// Verification reads the parameters from the stored hash, so they can be
// raised later without invalidating existing hashes.
const (
	argonTime    = 3
	argonMemory  = 64 * 1024 // KiB
	argonThreads = 2
	argonKeyLen  = 32
	argonSaltLen = 16
)

// CheckEmail normalises an email address: trimmed, and it must be a bare
// address.
func CheckEmail(email string) (string, error) {
	email = strings.TrimSpace(email)
	a, err := mail.ParseAddress(email)
	if err != nil || a.Address != email || a.Name != "" {
		return "", errs.Invalidf("%q is not an email address", email)
	}
	return email, nil
}

// CheckPassword returns errs.ErrInvalid for a password too short or too
// long to accept.
func CheckPassword(password string) error {
	switch {
	case utf8.RuneCountInString(password) < MinPasswordLen:
		return errs.Invalidf("the password must have at least %d characters", MinPasswordLen)
	case len(password) > MaxPasswordBytes:
		return errs.Invalidf("the password must have at most %d bytes", MaxPasswordBytes)
	}
	return nil
}

// HashPassword returns the argon2id hash of password as a PHC string:
//
//	$argon2id$v=19$m=65536,t=3,p=2$<salt>$<hash>
func HashPassword(password string) string {
	salt := make([]byte, argonSaltLen)
	rand.Read(salt) // never fails (crypto/rand)
	sum := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, argonMemory, argonTime, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(sum))
}

// VerifyPassword reports whether password matches the PHC string hash,
// comparing in constant time. A malformed hash matches nothing.
func VerifyPassword(hash, password string) bool {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false
	}
	var memory, passes uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &passes, &threads); err != nil {
		return false
	}
	if memory == 0 || memory > 1<<22 || passes == 0 || passes > 64 || threads == 0 {
		return false
	}
	b64 := base64.RawStdEncoding
	salt, err := b64.DecodeString(parts[4])
	if err != nil {
		return false
	}
	want, err := b64.DecodeString(parts[5])
	if err != nil || len(want) == 0 || len(want) > 128 {
		return false
	}
	got := argon2.IDKey([]byte(password), salt, passes, memory, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}

// Store keeps administrator accounts.
type Store interface {
	// CreateAdmin stores a new administrator. It returns errs.ErrConflict
	// when the email is taken.
	CreateAdmin(ctx context.Context, a *Admin) error

	// FindAdminByEmail returns the administrator with the given email,
	// compared case-insensitively. It returns errs.ErrNotFound for none.
	FindAdminByEmail(ctx context.Context, email string) (*Admin, error)

	// FindAdmins returns every administrator, oldest first.
	FindAdmins(ctx context.Context) ([]*Admin, error)

	// RecordAdminLogin sets the last sign-in time of an administrator. It
	// returns errs.ErrNotFound for an unknown id.
	RecordAdminLogin(ctx context.Context, id string, at time.Time) error
}
