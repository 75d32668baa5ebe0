package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/patchline/patchline/internal/admin"
	"github.com/patchline/patchline/internal/control/schema"
	"github.com/patchline/patchline/internal/errs"
)

var (
	_ admin.SessionStore      = (*Store)(nil)
	_ admin.TOTPStore         = (*Store)(nil)
	_ admin.FirstAdminCreator = (*Store)(nil)
)

// CreateSession implements admin.SessionStore.
func (s *Store) CreateSession(ctx context.Context, sess *admin.Session) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO admin_sessions
			(id_hash, admin_id, created_at, last_seen_at, expires_at, reauth_at, client_address, user_agent)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			sess.IDHash, sess.AdminID, ms(sess.CreatedAt), ms(sess.LastSeenAt), ms(sess.ExpiresAt),
			msPtr(sess.ReauthAt), sess.ClientAddress, sess.UserAgent)
		return err
	})
	if err != nil {
		return fmt.Errorf("create session of %s: %w", sess.AdminID, err)
	}
	return nil
}

// FindSession implements admin.SessionStore.
func (s *Store) FindSession(ctx context.Context, idHash []byte) (*admin.Session, error) {
	row := s.db.QueryRowContext(ctx, `SELECT `+schema.SessionColumns+`
		FROM admin_sessions s JOIN admins a ON a.id = s.admin_id
		WHERE s.id_hash = ?`, idHash)
	var sess admin.Session
	var created, lastSeen, expires int64
	var reauth sql.NullInt64
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
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE admin_sessions SET last_seen_at = ? WHERE id_hash = ? AND last_seen_at < ?`,
			ms(at), idHash, ms(at))
		return err
	})
	if err != nil {
		return fmt.Errorf("touch session: %w", err)
	}
	return nil
}

// RecordReauth implements admin.SessionStore.
func (s *Store) RecordReauth(ctx context.Context, idHash []byte, at time.Time) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE admin_sessions SET reauth_at = ?, last_seen_at = max(last_seen_at, ?) WHERE id_hash = ?`,
			ms(at), ms(at), idHash)
		if err != nil {
			return fmt.Errorf("record re-authentication: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errs.NotFoundf("no such session")
		}
		return nil
	})
}

// DeleteSession implements admin.SessionStore.
func (s *Store) DeleteSession(ctx context.Context, idHash []byte) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM admin_sessions WHERE id_hash = ?`, idHash)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// DeleteExpiredSessions implements admin.SessionStore.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now, idleBefore time.Time) (int, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM admin_sessions WHERE expires_at <= ? OR last_seen_at <= ?`,
			ms(now), ms(idleBefore))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	return int(n), nil
}

// CreateFirstAdmin implements admin.FirstAdminCreator. The write
// transaction begins IMMEDIATE, so two first-run setups cannot both see an
// empty table.
func (s *Store) CreateFirstAdmin(ctx context.Context, a *admin.Admin) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM admins`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return errs.Conflictf("an administrator exists already: sign in")
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO admins (`+schema.AdminColumns+`) VALUES (?, ?, ?, ?, ?)`,
			a.ID, a.Email, a.PasswordHash, ms(a.CreatedAt), msPtr(a.LastLoginAt))
		return err
	})
	if err != nil {
		return fmt.Errorf("create first admin %s: %w", a.Email, err)
	}
	return nil
}

// SetTOTP implements admin.TOTPStore.
func (s *Store) SetTOTP(ctx context.Context, t *admin.TOTP) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM admins WHERE id = ?`, t.AdminID).Scan(&n); err != nil {
			return fmt.Errorf("set totp of %s: %w", t.AdminID, err)
		}
		if n == 0 {
			return schema.NotFound("administrator", t.AdminID)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO admin_totp (admin_id, secret, enabled_at, last_step) VALUES (?, ?, ?, ?)
			ON CONFLICT (admin_id) DO UPDATE SET secret = excluded.secret, enabled_at = excluded.enabled_at, last_step = excluded.last_step`,
			t.AdminID, t.Secret, ms(t.EnabledAt), t.LastStep)
		if err != nil {
			return fmt.Errorf("set totp of %s: %w", t.AdminID, err)
		}
		return nil
	})
}

// FindTOTP implements admin.TOTPStore.
func (s *Store) FindTOTP(ctx context.Context, adminID string) (*admin.TOTP, error) {
	t := admin.TOTP{AdminID: adminID}
	var enabled int64
	err := s.db.QueryRowContext(ctx, `SELECT secret, enabled_at, last_step FROM admin_totp WHERE admin_id = ?`, adminID).
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

// UseTOTPStep implements admin.TOTPStore.
func (s *Store) UseTOTPStep(ctx context.Context, adminID string, step int64) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE admin_totp SET last_step = ? WHERE admin_id = ? AND last_step < ?`, step, adminID, step)
		if err != nil {
			return fmt.Errorf("use totp step of %s: %w", adminID, err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			return nil
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM admin_totp WHERE admin_id = ?`, adminID).Scan(&n); err != nil {
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
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM admin_totp WHERE admin_id = ?`, adminID)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete totp of %s: %w", adminID, err)
	}
	return nil
}
