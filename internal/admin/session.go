package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"time"
)

// Session is a signed-in administrator's console session. The session
// token lives only in the administrator's cookie; the store keeps its
// SHA-256 digest, so nothing in the database can be replayed as a cookie.
type Session struct {
	IDHash        []byte     // HashSessionToken of the token
	AdminID       string     //
	AdminEmail    string     // filled in by FindSession
	CreatedAt     time.Time  // sign-in
	LastSeenAt    time.Time  // last request, for the idle expiry (minute precision)
	ExpiresAt     time.Time  // absolute expiry, however active the session
	ReauthAt      *time.Time // last re-authentication (password, and TOTP code when enrolled); nil for none
	ClientAddress string     // address at sign-in
	UserAgent     string     // User-Agent at sign-in, truncated
}

// sessionTokenBytes is the randomness of a session token: 256 bits.
const sessionTokenBytes = 32

// NewSessionToken returns a new random session token, 43 base64url
// characters from crypto/rand.
func NewSessionToken() string {
	b := make([]byte, sessionTokenBytes)
	rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ValidSessionToken reports whether s has the form of a session token.
func ValidSessionToken(s string) bool {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && len(b) == sessionTokenBytes
}

// HashSessionToken returns the digest under which a session is stored.
// A fast hash is right for 256 random bits, as for API key secrets.
func HashSessionToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// SessionStore keeps console sessions.
type SessionStore interface {
	// CreateSession stores a new session.
	CreateSession(ctx context.Context, s *Session) error

	// FindSession returns the session with the given digest, with the
	// email of its administrator, expired or not: the caller applies the
	// expiry rules. It returns errs.ErrNotFound for none.
	FindSession(ctx context.Context, idHash []byte) (*Session, error)

	// TouchSession records activity on a session at the given time.
	TouchSession(ctx context.Context, idHash []byte, at time.Time) error

	// RecordReauth records a re-authentication on a session. It returns
	// errs.ErrNotFound for an unknown session.
	RecordReauth(ctx context.Context, idHash []byte, at time.Time) error

	// DeleteSession deletes a session (sign-out). Deleting an unknown
	// session is not an error.
	DeleteSession(ctx context.Context, idHash []byte) error

	// DeleteExpiredSessions deletes the sessions whose absolute expiry is
	// at or before now, or whose last activity is at or before idleBefore,
	// and returns how many it deleted.
	DeleteExpiredSessions(ctx context.Context, now, idleBefore time.Time) (int, error)
}

// FirstAdminCreator creates the first administrator, from the console's
// first-run setup.
type FirstAdminCreator interface {
	// CreateFirstAdmin stores a unless an administrator exists, atomically.
	// It returns errs.ErrConflict when one does.
	CreateFirstAdmin(ctx context.Context, a *Admin) error
}

// TOTP is an administrator's enrollment in time-based one-time passwords
// (RFC 6238: SHA-1, 6 digits, 30-second steps).
type TOTP struct {
	AdminID   string
	Secret    string // base32, as authenticator apps take it
	EnabledAt time.Time
	// LastStep is the time step (Unix seconds / 30) of the last code
	// accepted: a code is good once.
	LastStep int64
}

// TOTPStore keeps TOTP enrollments.
type TOTPStore interface {
	// SetTOTP stores the enrollment of an administrator, replacing any. It
	// returns errs.ErrNotFound for an unknown administrator.
	SetTOTP(ctx context.Context, t *TOTP) error

	// FindTOTP returns the enrollment of an administrator. It returns
	// errs.ErrNotFound when the administrator has none.
	FindTOTP(ctx context.Context, adminID string) (*TOTP, error)

	// UseTOTPStep records that the code of the given time step was used,
	// atomically. It returns errs.ErrConflict when a code of that step or
	// a later one was already accepted (a replay), and errs.ErrNotFound
	// when the administrator has no enrollment.
	UseTOTPStep(ctx context.Context, adminID string, step int64) error

	// DeleteTOTP removes the enrollment of an administrator. Removing none
	// is not an error.
	DeleteTOTP(ctx context.Context, adminID string) error
}
