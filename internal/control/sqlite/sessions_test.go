package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/admin"
	"github.com/patchline/patchline/internal/errs"
)

func mustCreateAdmin(t *testing.T, s *Store, email string) *admin.Admin {
	t.Helper()
	a := &admin.Admin{ID: admin.NewID(), Email: email, PasswordHash: "$argon2id$x", CreatedAt: t0}
	if err := s.CreateAdmin(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestSessions(t *testing.T) {
	s := mustOpenStore(t)
	ctx := context.Background()
	a := mustCreateAdmin(t, s, "ops@example.com")

	token := admin.NewSessionToken()
	if !admin.ValidSessionToken(token) || admin.ValidSessionToken(token+"x") || admin.ValidSessionToken("") {
		t.Fatalf("ValidSessionToken is wrong about %q", token)
	}
	sess := &admin.Session{
		IDHash: admin.HashSessionToken(token), AdminID: a.ID,
		CreatedAt: t0, LastSeenAt: t0, ExpiresAt: t0.Add(12 * time.Hour),
		ClientAddress: "192.0.2.1", UserAgent: "test",
	}
	wantKind(t, s.CreateSession(ctx, sess), nil)

	got, err := s.FindSession(ctx, admin.HashSessionToken(token))
	wantKind(t, err, nil)
	want := *sess
	want.AdminEmail = a.Email
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("FindSession (-want +got):\n%s", diff)
	}
	_, err = s.FindSession(ctx, admin.HashSessionToken(admin.NewSessionToken()))
	wantKind(t, err, errs.ErrNotFound)

	// Activity moves forward only; re-authentication is recorded.
	wantKind(t, s.TouchSession(ctx, sess.IDHash, t0.Add(10*time.Minute)), nil)
	wantKind(t, s.TouchSession(ctx, sess.IDHash, t0.Add(5*time.Minute)), nil)
	wantKind(t, s.RecordReauth(ctx, sess.IDHash, t0.Add(11*time.Minute)), nil)
	wantKind(t, s.RecordReauth(ctx, []byte("nope"), t0), errs.ErrNotFound)
	got, _ = s.FindSession(ctx, sess.IDHash)
	if !got.LastSeenAt.Equal(t0.Add(11*time.Minute)) || got.ReauthAt == nil || !got.ReauthAt.Equal(t0.Add(11*time.Minute)) {
		t.Errorf("after touch and re-authentication: last seen %v, reauth %v", got.LastSeenAt, got.ReauthAt)
	}

	// Expiry: idle and absolute.
	idle := &admin.Session{IDHash: admin.HashSessionToken(admin.NewSessionToken()), AdminID: a.ID, CreatedAt: t0, LastSeenAt: t0, ExpiresAt: t0.Add(12 * time.Hour)}
	old := &admin.Session{IDHash: admin.HashSessionToken(admin.NewSessionToken()), AdminID: a.ID, CreatedAt: t0, LastSeenAt: t0.Add(time.Hour), ExpiresAt: t0.Add(time.Hour)}
	wantKind(t, s.CreateSession(ctx, idle), nil)
	wantKind(t, s.CreateSession(ctx, old), nil)
	n, err := s.DeleteExpiredSessions(ctx, t0.Add(time.Hour), t0.Add(time.Minute))
	wantKind(t, err, nil)
	if n != 2 {
		t.Errorf("DeleteExpiredSessions deleted %d, want 2", n)
	}
	if _, err := s.FindSession(ctx, sess.IDHash); err != nil {
		t.Errorf("the active session went too: %v", err)
	}

	wantKind(t, s.DeleteSession(ctx, sess.IDHash), nil)
	wantKind(t, s.DeleteSession(ctx, sess.IDHash), nil)
	_, err = s.FindSession(ctx, sess.IDHash)
	wantKind(t, err, errs.ErrNotFound)

	// A session needs an administrator.
	err = s.CreateSession(ctx, &admin.Session{IDHash: admin.HashSessionToken(token), AdminID: "adm_nobody", CreatedAt: t0, LastSeenAt: t0, ExpiresAt: t0})
	if err == nil {
		t.Error("a session of an unknown administrator was stored")
	}
}

func TestCreateFirstAdmin(t *testing.T) {
	s := mustOpenStore(t)
	ctx := context.Background()
	first := &admin.Admin{ID: admin.NewID(), Email: "first@example.com", PasswordHash: "$argon2id$x", CreatedAt: t0}
	wantKind(t, s.CreateFirstAdmin(ctx, first), nil)
	second := &admin.Admin{ID: admin.NewID(), Email: "second@example.com", PasswordHash: "$argon2id$x", CreatedAt: t0}
	wantKind(t, s.CreateFirstAdmin(ctx, second), errs.ErrConflict)
	admins, err := s.FindAdmins(ctx)
	wantKind(t, err, nil)
	if len(admins) != 1 || admins[0].Email != first.Email {
		t.Errorf("admins = %v", admins)
	}
}

func TestTOTP(t *testing.T) {
	s := mustOpenStore(t)
	ctx := context.Background()
	a := mustCreateAdmin(t, s, "ops@example.com")

	_, err := s.FindTOTP(ctx, a.ID)
	wantKind(t, err, errs.ErrNotFound)
	wantKind(t, s.UseTOTPStep(ctx, a.ID, 10), errs.ErrNotFound)
	wantKind(t, s.SetTOTP(ctx, &admin.TOTP{AdminID: "adm_nobody", Secret: "X", EnabledAt: t0}), errs.ErrNotFound)

	enr := &admin.TOTP{AdminID: a.ID, Secret: "JBSWY3DPEHPK3PXP", EnabledAt: t0, LastStep: 100}
	wantKind(t, s.SetTOTP(ctx, enr), nil)
	got, err := s.FindTOTP(ctx, a.ID)
	wantKind(t, err, nil)
	if diff := cmp.Diff(enr, got); diff != "" {
		t.Errorf("FindTOTP (-want +got):\n%s", diff)
	}

	// A step is good once, and never an older one.
	wantKind(t, s.UseTOTPStep(ctx, a.ID, 101), nil)
	wantKind(t, s.UseTOTPStep(ctx, a.ID, 101), errs.ErrConflict)
	wantKind(t, s.UseTOTPStep(ctx, a.ID, 99), errs.ErrConflict)
	wantKind(t, s.UseTOTPStep(ctx, a.ID, 102), nil)

	// Enrolling again replaces the secret.
	wantKind(t, s.SetTOTP(ctx, &admin.TOTP{AdminID: a.ID, Secret: "KRSXG5CTMVRXEZLU", EnabledAt: t0.Add(time.Hour)}), nil)
	got, _ = s.FindTOTP(ctx, a.ID)
	if got.Secret != "KRSXG5CTMVRXEZLU" || got.LastStep != 0 {
		t.Errorf("after a new enrollment: %+v", got)
	}

	wantKind(t, s.DeleteTOTP(ctx, a.ID), nil)
	wantKind(t, s.DeleteTOTP(ctx, a.ID), nil)
	_, err = s.FindTOTP(ctx, a.ID)
	wantKind(t, err, errs.ErrNotFound)
}
