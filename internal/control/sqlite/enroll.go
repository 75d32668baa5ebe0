package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/patchline/patchline/internal/control/schema"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
)

// CreateEnrollSecret implements device.EnrollSecretStore.
func (s *Store) CreateEnrollSecret(ctx context.Context, e *device.EnrollSecret) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		if e.Ring != "" {
			if _, err := findRing(ctx, tx, e.Ring); errors.Is(err, errs.ErrNotFound) {
				return errs.Invalidf("there is no ring %q", e.Ring)
			} else if err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO enroll_secrets (`+schema.EnrollColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			e.ID, e.SecretHash, nullString(e.Ring), e.CreatedBy, ms(e.CreatedAt), msPtr(e.ExpiresAt),
			msPtr(e.RevokedAt), msPtr(e.LastUsedAt), e.Uses)
		if isUnique(err) {
			return errs.Conflictf("enrollment secret %s exists", e.ID)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("create enrollment secret: %w", err)
	}
	return nil
}

// FindEnrollSecrets implements device.EnrollSecretStore.
func (s *Store) FindEnrollSecrets(ctx context.Context) ([]*device.EnrollSecret, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+schema.EnrollColumns+` FROM enroll_secrets ORDER BY created_at DESC, id DESC`)
	if err != nil {
		return nil, fmt.Errorf("find enrollment secrets: %w", err)
	}
	defer rows.Close()
	var out []*device.EnrollSecret
	for rows.Next() {
		e, err := scanEnrollSecret(rows)
		if err != nil {
			return nil, fmt.Errorf("find enrollment secrets: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("find enrollment secrets: %w", err)
	}
	return out, nil
}

// RevokeEnrollSecret implements device.EnrollSecretStore.
func (s *Store) RevokeEnrollSecret(ctx context.Context, id string, at time.Time) (*device.EnrollSecret, error) {
	var e *device.EnrollSecret
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		if e, err = findEnrollSecret(ctx, tx, `id = ?`, id); err != nil {
			return err
		}
		if e.RevokedAt != nil {
			return errs.Conflictf("enrollment secret %s is already revoked", id)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE enroll_secrets SET revoked_at = ? WHERE id = ?`, ms(at), id); err != nil {
			return err
		}
		t := fromMS(ms(at))
		e.RevokedAt = &t
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("revoke enrollment secret %s: %w", id, err)
	}
	return e, nil
}

// findEnrollSecret returns the secret matching cond, which has one
// placeholder for arg.
func findEnrollSecret(ctx context.Context, q querier, cond string, arg any) (*device.EnrollSecret, error) {
	e, err := scanEnrollSecret(q.QueryRowContext(ctx, `SELECT `+schema.EnrollColumns+` FROM enroll_secrets WHERE `+cond, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errs.NotFoundf("enrollment secret not found")
	}
	return e, err
}

func scanEnrollSecret(row scanner) (*device.EnrollSecret, error) {
	var e device.EnrollSecret
	var ring sql.NullString
	var created int64
	var expires, revoked, lastUsed sql.NullInt64
	if err := row.Scan(&e.ID, &e.SecretHash, &ring, &e.CreatedBy, &created, &expires, &revoked, &lastUsed, &e.Uses); err != nil {
		return nil, err
	}
	e.Ring = ring.String
	e.CreatedAt = fromMS(created)
	e.ExpiresAt, e.RevokedAt, e.LastUsedAt = fromNullMS(expires), fromNullMS(revoked), fromNullMS(lastUsed)
	return &e, nil
}
