// Package apikey defines the API keys of the control service: their format,
// generation and verification, and the KeyStore that keeps them.
//
// A full key is "<keyId>.<secretKey>":
//
//	plk_7Qm2XbT9cR1sLw4Z.plsk_<40 base62 characters><6 base62 characters>
//
// The keyId is public: it names the key in the audit log and on the settings
// page, and the store finds the key by it. The secret carries the plsk_
// prefix and a CRC-32 checksum (see NewSecret) so that secret scanners can
// find leaked keys. Only the SHA-256 digest of the secret is stored; the
// full key is shown once, at creation, and cannot be recovered.
package apikey

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/patchline/patchline/internal/errs"
)

// Prefixes of the two halves of a full key.
const (
	IDPrefix     = "plk_"
	SecretPrefix = "plsk_"
	idRandomLen  = 16 // ≈ 95 bits: unique without coordination
)

// MaxPrivilegedLifetime caps the expiry of a privileged key.
const MaxPrivilegedLifetime = 90 * 24 * time.Hour

// LastUsedResolution is how stale Key.LastUsedAt may be: it is written at
// most once per key in this interval, so that reads stay reads.
const LastUsedResolution = time.Minute

// MaxNameLen bounds the name of a key, in characters.
const MaxNameLen = 100

// Key is an API key as stored: everything but the secret, of which only the
// digest is kept.
type Key struct {
	ID         string     // keyId, the public half, IDPrefix + 16 base62 characters
	Name       string     // what the key is for
	SecretHash []byte     // HashSecret of the secret half
	Privileged bool       // may perform the privileged operations
	CreatedBy  string     // who created it: an administrator's email or cli:USER
	CreatedAt  time.Time  //
	LastUsedAt *time.Time // last authenticated request, LastUsedResolution precise
	ExpiresAt  *time.Time // nil: does not expire (never nil for a privileged key)
	RevokedAt  *time.Time // set once, never cleared
}

// State is the lifecycle state of a key at some instant.
type State string

// The states of a key. Revoked and expired are final.
const (
	StateActive  State = "active"
	StateExpired State = "expired"
	StateRevoked State = "revoked"
)

// State returns the state of k at now.
func (k *Key) State(now time.Time) State {
	switch {
	case k.RevokedAt != nil:
		return StateRevoked
	case k.ExpiresAt != nil && !now.Before(*k.ExpiresAt):
		return StateExpired
	}
	return StateActive
}

// Params are what an administrator chooses when creating a key.
type Params struct {
	Name       string
	CreatedBy  string
	Privileged bool
	// ExpiresAt is required for a privileged key, at most
	// MaxPrivilegedLifetime after creation.
	ExpiresAt *time.Time
}

// New validates p and generates a key: the returned full key
// "<keyId>.<secretKey>" is to be shown once and then forgotten; the returned
// Key is what the store keeps. It returns errs.ErrInvalid for bad params.
func New(p Params, now time.Time) (full string, k *Key, err error) {
	name := strings.TrimSpace(p.Name)
	switch {
	case name == "":
		return "", nil, errs.Invalidf("a key needs a name")
	case utf8.RuneCountInString(name) > MaxNameLen:
		return "", nil, errs.Invalidf("key name is longer than %d characters", MaxNameLen)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return "", nil, errs.Invalidf("key name contains control characters")
	case p.CreatedBy == "":
		return "", nil, errs.Invalidf("a key needs a creator")
	case p.ExpiresAt != nil && !p.ExpiresAt.After(now):
		return "", nil, errs.Invalidf("the expiry must be in the future")
	}
	if p.Privileged {
		if err := CheckPrivilegedExpiry(p.ExpiresAt, now); err != nil {
			return "", nil, err
		}
	}
	id := IDPrefix + randomBase62(idRandomLen)
	secret := NewSecret(SecretPrefix)
	k = &Key{
		ID:         id,
		Name:       name,
		SecretHash: HashSecret(secret),
		Privileged: p.Privileged,
		CreatedBy:  p.CreatedBy,
		CreatedAt:  now.UTC(),
	}
	if p.ExpiresAt != nil {
		t := p.ExpiresAt.UTC()
		k.ExpiresAt = &t
	}
	return id + "." + secret, k, nil
}

// CheckPrivilegedExpiry returns errs.ErrInvalid unless expiresAt is set, in
// the future and at most MaxPrivilegedLifetime after now.
func CheckPrivilegedExpiry(expiresAt *time.Time, now time.Time) error {
	switch {
	case expiresAt == nil:
		return errs.Invalidf("a privileged key needs an expiry (at most %s)", FormatLifetime(MaxPrivilegedLifetime))
	case !expiresAt.After(now):
		return errs.Invalidf("the expiry must be in the future")
	case expiresAt.Sub(now) > MaxPrivilegedLifetime:
		return errs.Invalidf("a privileged key may live at most %s", FormatLifetime(MaxPrivilegedLifetime))
	}
	return nil
}

// FormatLifetime writes a duration in days when it is a whole number of them.
func FormatLifetime(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return d.String()
}

// ErrMalformed is returned by Parse for a string that is not a full key.
var ErrMalformed = errors.New("malformed API key")

// Parse splits a full key into its keyId and secret. When the string is
// malformed it returns ErrMalformed, together with the keyId when that half
// is well-formed on its own, so that the failed attempt can be attributed in
// the audit log.
func Parse(full string) (keyID, secret string, err error) {
	id, secret, ok := strings.Cut(full, ".")
	if !ValidID(id) {
		return "", "", ErrMalformed
	}
	if !ok || !CheckSecret(SecretPrefix, secret) {
		return id, "", ErrMalformed
	}
	return id, secret, nil
}

// ValidID reports whether id has the form of a keyId.
func ValidID(id string) bool {
	return len(id) == len(IDPrefix)+idRandomLen && strings.HasPrefix(id, IDPrefix) && isBase62(id[len(IDPrefix):])
}

// Verify reports whether secret is the secret of k, comparing digests in
// constant time. It does not look at the state of k.
func Verify(k *Key, secret string) bool {
	return EqualHash(HashSecret(secret), k.SecretHash)
}

// KeyFilter selects keys. Zero values mean "no filter".
type KeyFilter struct {
	// Active, when set, selects keys that are (true) or are not (false)
	// usable at Now: neither revoked nor expired.
	Active *bool
	Now    time.Time
}

// KeyStore keeps API keys.
type KeyStore interface {
	// CreateKey stores a new key. It returns errs.ErrConflict when the keyId
	// is taken.
	CreateKey(ctx context.Context, k *Key) error

	// FindKeyByID returns the key with the given keyId, revoked and expired
	// ones included. It returns errs.ErrNotFound for an unknown keyId.
	FindKeyByID(ctx context.Context, id string) (*Key, error)

	// FindKeys returns the keys matching f, newest first.
	FindKeys(ctx context.Context, f KeyFilter) ([]*Key, error)

	// RevokeKey revokes a key at the given time, for good, and returns it.
	// It returns errs.ErrNotFound for an unknown keyId and errs.ErrConflict
	// for a key that is already revoked.
	RevokeKey(ctx context.Context, id string, at time.Time) (*Key, error)

	// EnablePrivileged makes an active key privileged with the given expiry
	// (the caller has verified the administrator again). It returns
	// errs.ErrNotFound for an unknown keyId, errs.ErrConflict for a revoked,
	// expired or already privileged key.
	EnablePrivileged(ctx context.Context, id string, expiresAt, now time.Time) (*Key, error)

	// TouchKey records a use of the key at the given time, unless the
	// recorded last use is less than LastUsedResolution older.
	TouchKey(ctx context.Context, id string, at time.Time) error
}
