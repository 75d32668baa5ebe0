package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"database/sql"

	"github.com/patchline/patchline/internal/admin"
	"github.com/patchline/patchline/internal/errs"
)

// CreateAdmin implements admin.Store.
func (s *Store) CreateAdmin(ctx context.Context, a *admin.Admin) error {
	err := insertAdmin(ctx, s.wq(), a)
	if _, ok := s.d.isUnique(err); ok {
		return errs.Conflictf("an administrator with email %s exists", a.Email)
	}
	return errs.Wrapf(err, "create admin %s", a.Email)
}

func insertAdmin(ctx context.Context, tx querier, a *admin.Admin) error {
	_, err := tx.Exec(ctx, `INSERT INTO admins (`+adminColumns+`) VALUES (?, ?, ?, ?, ?)`,
		a.ID, a.Email, a.PasswordHash, ms(a.CreatedAt), msPtr(a.LastLoginAt))
	return err
}

// FindAdminByEmail implements admin.Store. Email addresses compare without
// regard to ASCII case.
func (s *Store) FindAdminByEmail(ctx context.Context, email string) (*admin.Admin, error) {
	a, err := scanAdmin(s.rq().QueryRow(ctx, `SELECT `+adminColumns+` FROM admins WHERE lower(email) = lower(?)`, email))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errs.NotFoundf("no administrator with email %s", email)
	}
	if err != nil {
		return nil, fmt.Errorf("find admin %s: %w", email, err)
	}
	return a, nil
}

// FindAdmins implements admin.Store.
func (s *Store) FindAdmins(ctx context.Context) (_ []*admin.Admin, err error) {
	defer errs.Wrap(&err, "find admins")
	return queryAll(ctx, s.rq(), scanAdmin, `SELECT `+adminColumns+` FROM admins ORDER BY created_at, id`)
}

// RecordAdminLogin implements admin.Store.
func (s *Store) RecordAdminLogin(ctx context.Context, id string, at time.Time) error {
	tag, err := s.wq().Exec(ctx, `UPDATE admins SET last_login_at = ? WHERE id = ?`, ms(at), id)
	if err != nil {
		return fmt.Errorf("record admin login %s: %w", id, err)
	}
	if rowsAffected(tag) == 0 {
		return notFound("administrator", id)
	}
	return nil
}

// CreateFirstAdmin implements admin.FirstAdminCreator. An advisory lock
// keeps two first-run setups, on any replicas, from both seeing no
// administrator.
func (s *Store) CreateFirstAdmin(ctx context.Context, a *admin.Admin) (err error) {
	defer errs.Wrap(&err, "create first admin %s", a.Email)
	return s.write(ctx, func(tx querier) error {
		if err := s.lock(ctx, tx, firstAdminLock, ""); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM admins`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return errs.Conflictf("an administrator exists already: sign in")
		}
		return insertAdmin(ctx, tx, a)
	})
}

func scanAdmin(row scanner) (*admin.Admin, error) {
	var a admin.Admin
	var created int64
	var lastLogin *int64
	if err := row.Scan(&a.ID, &a.Email, &a.PasswordHash, &created, &lastLogin); err != nil {
		return nil, err
	}
	a.CreatedAt = fromMS(created)
	a.LastLoginAt = fromNullMS(lastLogin)
	return &a, nil
}

// CreateSession implements admin.SessionStore.
func (s *Store) CreateSession(ctx context.Context, sess *admin.Session) error {
	_, err := s.wq().Exec(ctx, `INSERT INTO admin_sessions
		(id_hash, admin_id, created_at, last_seen_at, expires_at, reauth_at, client_address, user_agent)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		sess.IDHash, sess.AdminID, ms(sess.CreatedAt), ms(sess.LastSeenAt), ms(sess.ExpiresAt),
		msPtr(sess.ReauthAt), sess.ClientAddress, sess.UserAgent)
	return errs.Wrapf(err, "create session of %s", sess.AdminID)
}

// FindSession implements admin.SessionStore. It reads the database every
// time: a session ended on one replica ends on all.
func (s *Store) FindSession(ctx context.Context, idHash []byte) (*admin.Session, error) {
	row := s.rq().QueryRow(ctx, `SELECT `+sessionColumns+`
		FROM admin_sessions s JOIN admins a ON a.id = s.admin_id
		WHERE s.id_hash = ?`, idHash)
	var sess admin.Session
	var created, lastSeen, expires int64
	var reauth *int64
	err := row.Scan(&sess.IDHash, &sess.AdminID, &sess.AdminEmail, &created, &lastSeen, &expires, &reauth,
		&sess.ClientAddress, &sess.UserAgent)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errs.NotFoundf("no such session")
	}
	if err != nil {
		return nil, fmt.Errorf("find session: %w", err)
	}
	sess.CreatedAt = fromMS(created)
	sess.LastSeenAt = fromMS(lastSeen)
	sess.ExpiresAt = fromMS(expires)
	sess.ReauthAt = fromNullMS(reauth)
	return &sess, nil
}

// TouchSession implements admin.SessionStore. Activity never moves
// backwards.
func (s *Store) TouchSession(ctx context.Context, idHash []byte, at time.Time) error {
	_, err := s.wq().Exec(ctx, `UPDATE admin_sessions SET last_seen_at = ? WHERE id_hash = ? AND last_seen_at < ?`,
		ms(at), idHash, ms(at))
	return errs.Wrapf(err, "touch session")
}

// RecordReauth implements admin.SessionStore.
func (s *Store) RecordReauth(ctx context.Context, idHash []byte, at time.Time) error {
	tag, err := s.wq().Exec(ctx, `UPDATE admin_sessions SET reauth_at = ?, last_seen_at = `+s.d.greatest+`(last_seen_at, ?) WHERE id_hash = ?`,
		ms(at), ms(at), idHash)
	if err != nil {
		return fmt.Errorf("record re-authentication: %w", err)
	}
	if rowsAffected(tag) == 0 {
		return errs.NotFoundf("no such session")
	}
	return nil
}

// DeleteSession implements admin.SessionStore.
func (s *Store) DeleteSession(ctx context.Context, idHash []byte) error {
	_, err := s.wq().Exec(ctx, `DELETE FROM admin_sessions WHERE id_hash = ?`, idHash)
	return errs.Wrapf(err, "delete session")
}

// DeleteExpiredSessions implements admin.SessionStore.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now, idleBefore time.Time) (int, error) {
	tag, err := s.wq().Exec(ctx, `DELETE FROM admin_sessions WHERE expires_at <= ? OR last_seen_at <= ?`,
		ms(now), ms(idleBefore))
	if err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	return int(rowsAffected(tag)), nil
}

// SetTOTP implements admin.TOTPStore.
func (s *Store) SetTOTP(ctx context.Context, t *admin.TOTP) error {
	return s.write(ctx, func(tx querier) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM admins WHERE id = ?`, t.AdminID).Scan(&n); err != nil {
			return fmt.Errorf("set totp of %s: %w", t.AdminID, err)
		}
		if n == 0 {
			return notFound("administrator", t.AdminID)
		}
		_, err := tx.Exec(ctx, `INSERT INTO admin_totp (admin_id, secret, enabled_at, last_step) VALUES (?, ?, ?, ?)
			ON CONFLICT (admin_id) DO UPDATE SET secret = excluded.secret, enabled_at = excluded.enabled_at, last_step = excluded.last_step`,
			t.AdminID, t.Secret, ms(t.EnabledAt), t.LastStep)
		return errs.Wrapf(err, "set totp of %s", t.AdminID)
	})
}

// FindTOTP implements admin.TOTPStore.
func (s *Store) FindTOTP(ctx context.Context, adminID string) (*admin.TOTP, error) {
	t := admin.TOTP{AdminID: adminID}
	var enabled int64
	err := s.rq().QueryRow(ctx, `SELECT secret, enabled_at, last_step FROM admin_totp WHERE admin_id = ?`, adminID).
		Scan(&t.Secret, &enabled, &t.LastStep)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errs.NotFoundf("administrator %s has no TOTP enrollment", adminID)
	}
	if err != nil {
		return nil, fmt.Errorf("find totp of %s: %w", adminID, err)
	}
	t.EnabledAt = fromMS(enabled)
	return &t, nil
}

// UseTOTPStep implements admin.TOTPStore. The conditional UPDATE is
// atomic: of two replicas given the same code, one accepts it.
func (s *Store) UseTOTPStep(ctx context.Context, adminID string, step int64) error {
	return s.write(ctx, func(tx querier) error {
		tag, err := tx.Exec(ctx, `UPDATE admin_totp SET last_step = ? WHERE admin_id = ? AND last_step < ?`, step, adminID, step)
		if err != nil {
			return fmt.Errorf("use totp step of %s: %w", adminID, err)
		}
		if rowsAffected(tag) > 0 {
			return nil
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM admin_totp WHERE admin_id = ?`, adminID).Scan(&n); err != nil {
			return fmt.Errorf("use totp step of %s: %w", adminID, err)
		}
		if n == 0 {
			return errs.NotFoundf("administrator %s has no TOTP enrollment", adminID)
		}
		return errs.Conflictf("this authentication code was used already: wait for the next one")
	})
}

// DeleteTOTP implements admin.TOTPStore.
func (s *Store) DeleteTOTP(ctx context.Context, adminID string) error {
	_, err := s.wq().Exec(ctx, `DELETE FROM admin_totp WHERE admin_id = ?`, adminID)
	return errs.Wrapf(err, "delete totp of %s", adminID)
}
