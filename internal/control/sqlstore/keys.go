package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"database/sql"

	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
)

// CreateKey implements apikey.KeyStore.
func (s *Store) CreateKey(ctx context.Context, k *apikey.Key) error {
	err := s.write(ctx, func(tx querier) error {
		_, err := tx.Exec(ctx, `INSERT INTO api_keys (`+keyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			k.ID, k.Name, k.SecretHash, k.Privileged, k.CreatedBy, ms(k.CreatedAt),
			msPtr(k.LastUsedAt), msPtr(k.ExpiresAt), msPtr(k.RevokedAt))
		return err
	})
	if _, ok := s.d.isUnique(err); ok {
		return errs.Conflictf("API key %s exists", k.ID)
	}
	if err != nil {
		return fmt.Errorf("create key %s: %w", k.ID, err)
	}
	return nil
}

// FindKeyByID implements apikey.KeyStore. It reads the database every
// time: a key revoked through one replica is refused by all at once.
func (s *Store) FindKeyByID(ctx context.Context, id string) (*apikey.Key, error) {
	k, err := findKey(ctx, s.rq(), id, "")
	if err != nil {
		return nil, fmt.Errorf("find key %s: %w", id, err)
	}
	return k, nil
}

// findKey returns a key; lock is "" or a locking clause.
func findKey(ctx context.Context, q querier, id, lock string) (*apikey.Key, error) {
	k, err := scanKey(q.QueryRow(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE id = ? `+lock, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("API key", id)
	}
	return k, err
}

// FindKeys implements apikey.KeyStore.
func (s *Store) FindKeys(ctx context.Context, f apikey.KeyFilter) ([]*apikey.Key, error) {
	query := `SELECT ` + keyColumns + ` FROM api_keys`
	var a args
	if f.Active != nil {
		now := a.add(ms(f.Now))
		active := `revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ` + now + `)`
		if *f.Active {
			query += ` WHERE ` + active
		} else {
			query += ` WHERE NOT (` + active + `)`
		}
	}
	query += ` ORDER BY created_at DESC, id DESC`
	keys, err := queryAll(ctx, s.rq(), scanKey, query, a...)
	if err != nil {
		return nil, fmt.Errorf("find keys: %w", err)
	}
	return keys, nil
}

// RevokeKey implements apikey.KeyStore.
func (s *Store) RevokeKey(ctx context.Context, id string, at time.Time) (*apikey.Key, error) {
	var k *apikey.Key
	err := s.write(ctx, func(tx querier) error {
		var err error
		if k, err = findKey(ctx, tx, id, s.d.lockRow); err != nil {
			return err
		}
		if k.RevokedAt != nil {
			return errs.Conflictf("API key %s was revoked at %s", id, k.RevokedAt.Format(time.RFC3339))
		}
		if _, err := tx.Exec(ctx, `UPDATE api_keys SET revoked_at = ? WHERE id = ?`, ms(at), k.ID); err != nil {
			return err
		}
		t := fromMS(ms(at))
		k.RevokedAt = &t
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("revoke key %s: %w", id, err)
	}
	return k, nil
}

// EnablePrivileged implements apikey.KeyStore.
func (s *Store) EnablePrivileged(ctx context.Context, id string, expiresAt, now time.Time) (*apikey.Key, error) {
	if err := apikey.CheckPrivilegedExpiry(&expiresAt, now); err != nil {
		return nil, err
	}
	var k *apikey.Key
	err := s.write(ctx, func(tx querier) error {
		var err error
		if k, err = findKey(ctx, tx, id, s.d.lockRow); err != nil {
			return err
		}
		switch st := k.State(now); {
		case st != apikey.StateActive:
			return errs.Conflictf("API key %s is %s", id, st)
		case k.Privileged:
			return errs.Conflictf("API key %s is already privileged", id)
		}
		if _, err := tx.Exec(ctx, `UPDATE api_keys SET privileged = true, expires_at = ? WHERE id = ?`, ms(expiresAt), k.ID); err != nil {
			return err
		}
		t := fromMS(ms(expiresAt))
		k.Privileged, k.ExpiresAt = true, &t
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("enable privileged key %s: %w", id, err)
	}
	return k, nil
}

// TouchKey implements apikey.KeyStore.
func (s *Store) TouchKey(ctx context.Context, id string, at time.Time) error {
	_, err := s.wq().Exec(ctx, `UPDATE api_keys SET last_used_at = ?
		WHERE id = ? AND (last_used_at IS NULL OR last_used_at <= ?)`,
		ms(at), id, ms(at.Add(-apikey.LastUsedResolution)))
	if err != nil {
		return fmt.Errorf("touch key %s: %w", id, err)
	}
	return nil
}

func scanKey(row scanner) (*apikey.Key, error) {
	var k apikey.Key
	var created int64
	var lastUsed, expires, revoked *int64
	if err := row.Scan(&k.ID, &k.Name, &k.SecretHash, &k.Privileged, &k.CreatedBy, &created, &lastUsed, &expires, &revoked); err != nil {
		return nil, err
	}
	k.CreatedAt = fromMS(created)
	k.LastUsedAt = fromNullMS(lastUsed)
	k.ExpiresAt = fromNullMS(expires)
	k.RevokedAt = fromNullMS(revoked)
	return &k, nil
}

// CreateEnrollSecret implements device.EnrollSecretStore.
func (s *Store) CreateEnrollSecret(ctx context.Context, e *device.EnrollSecret) error {
	err := s.write(ctx, func(tx querier) error {
		if e.Ring != "" {
			if _, err := findRing(ctx, tx, e.Ring); errors.Is(err, errs.ErrNotFound) {
				return errs.Invalidf("there is no ring %q", e.Ring)
			} else if err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO enroll_secrets (`+enrollColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			e.ID, e.SecretHash, nullString(e.Ring), e.CreatedBy, ms(e.CreatedAt), msPtr(e.ExpiresAt),
			msPtr(e.RevokedAt), msPtr(e.LastUsedAt), e.Uses)
		if _, ok := s.d.isUnique(err); ok {
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
	out, err := queryAll(ctx, s.rq(), scanEnrollSecret, `SELECT `+enrollColumns+` FROM enroll_secrets ORDER BY created_at DESC, id DESC`)
	if err != nil {
		return nil, fmt.Errorf("find enrollment secrets: %w", err)
	}
	return out, nil
}

// RevokeEnrollSecret implements device.EnrollSecretStore.
func (s *Store) RevokeEnrollSecret(ctx context.Context, id string, at time.Time) (*device.EnrollSecret, error) {
	var e *device.EnrollSecret
	err := s.write(ctx, func(tx querier) error {
		var err error
		if e, err = findEnrollSecret(ctx, tx, `id = ? `+s.d.lockRow, id); err != nil {
			return err
		}
		if e.RevokedAt != nil {
			return errs.Conflictf("enrollment secret %s is already revoked", id)
		}
		if _, err := tx.Exec(ctx, `UPDATE enroll_secrets SET revoked_at = ? WHERE id = ?`, ms(at), e.ID); err != nil {
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
// placeholder ? for arg and may end in a locking clause.
func findEnrollSecret(ctx context.Context, q querier, cond string, arg any) (*device.EnrollSecret, error) {
	e, err := scanEnrollSecret(q.QueryRow(ctx, `SELECT `+enrollColumns+` FROM enroll_secrets WHERE `+cond, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errs.NotFoundf("enrollment secret not found")
	}
	return e, err
}

func scanEnrollSecret(row scanner) (*device.EnrollSecret, error) {
	var e device.EnrollSecret
	var ring *string
	var created int64
	var expires, revoked, lastUsed *int64
	if err := row.Scan(&e.ID, &e.SecretHash, &ring, &e.CreatedBy, &created, &expires, &revoked, &lastUsed, &e.Uses); err != nil {
		return nil, err
	}
	e.Ring = str(ring)
	e.CreatedAt = fromMS(created)
	e.ExpiresAt, e.RevokedAt, e.LastUsedAt = fromNullMS(expires), fromNullMS(revoked), fromNullMS(lastUsed)
	return &e, nil
}
