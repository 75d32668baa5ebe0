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
	_, err := s.wq().Exec(ctx, `INSERT INTO api_keys (`+keyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.Name, k.SecretHash, k.Privileged, k.CreatedBy, ms(k.CreatedAt),
		msPtr(k.LastUsedAt), msPtr(k.ExpiresAt), msPtr(k.RevokedAt))
	if _, ok := s.d.isUnique(err); ok {
		return errs.Conflictf("API key %s exists", k.ID)
	}
	return errs.Wrapf(err, "create key %s", k.ID)
}

// FindKeyByID implements apikey.KeyStore. It reads the database every
// time: a key revoked through one replica is refused by all at once.
func (s *Store) FindKeyByID(ctx context.Context, id string) (_ *apikey.Key, err error) {
	defer errs.Wrap(&err, "find key %s", id)
	return findKey(ctx, s.rq(), id, "")
}

// findKey returns a key; lock is "" or a locking clause.
func findKey(ctx context.Context, q querier, id, lock string) (*apikey.Key, error) {
	return findOne(ctx, q, scanKey, "API key", id, `SELECT `+keyColumns+` FROM api_keys WHERE id = ? `+lock)
}

// FindKeys implements apikey.KeyStore.
func (s *Store) FindKeys(ctx context.Context, f apikey.KeyFilter) (_ []*apikey.Key, err error) {
	defer errs.Wrap(&err, "find keys")
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
	return queryAll(ctx, s.rq(), scanKey, query, a...)
}

// RevokeKey implements apikey.KeyStore.
func (s *Store) RevokeKey(ctx context.Context, id string, at time.Time) (_ *apikey.Key, err error) {
	defer errs.Wrap(&err, "revoke key %s", id)
	return writeResult(ctx, s, func(tx querier) (*apikey.Key, error) {
		k, err := findKey(ctx, tx, id, s.d.lockRow)
		if err != nil {
			return nil, err
		}
		if k.RevokedAt != nil {
			return nil, errs.Conflictf("API key %s was revoked at %s", id, k.RevokedAt.Format(time.RFC3339))
		}
		k.RevokedAt = new(fromMS(ms(at)))
		_, err = tx.Exec(ctx, `UPDATE api_keys SET revoked_at = ? WHERE id = ?`, ms(at), k.ID)
		return k, err
	})
}

// EnablePrivileged implements apikey.KeyStore.
func (s *Store) EnablePrivileged(ctx context.Context, id string, expiresAt, now time.Time) (*apikey.Key, error) {
	if err := apikey.CheckPrivilegedExpiry(&expiresAt, now); err != nil {
		return nil, err
	}
	k, err := writeResult(ctx, s, func(tx querier) (*apikey.Key, error) {
		k, err := findKey(ctx, tx, id, s.d.lockRow)
		if err != nil {
			return nil, err
		}
		switch st := k.State(now); {
		case st != apikey.StateActive:
			return nil, errs.Conflictf("API key %s is %s", id, st)
		case k.Privileged:
			return nil, errs.Conflictf("API key %s is already privileged", id)
		}
		k.Privileged, k.ExpiresAt = true, new(fromMS(ms(expiresAt)))
		_, err = tx.Exec(ctx, `UPDATE api_keys SET privileged = true, expires_at = ? WHERE id = ?`, ms(expiresAt), k.ID)
		return k, err
	})
	return k, errs.Wrapf(err, "enable privileged key %s", id)
}

// TouchKey implements apikey.KeyStore.
func (s *Store) TouchKey(ctx context.Context, id string, at time.Time) error {
	_, err := s.wq().Exec(ctx, `UPDATE api_keys SET last_used_at = ?
		WHERE id = ? AND (last_used_at IS NULL OR last_used_at <= ?)`,
		ms(at), id, ms(at.Add(-apikey.LastUsedResolution)))
	if err != nil {
		// Every request with a key touches it: no errs.Wrapf, whose
		// arguments would be boxed on every call.
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
func (s *Store) CreateEnrollSecret(ctx context.Context, e *device.EnrollSecret) (err error) {
	defer errs.Wrap(&err, "create enrollment secret")
	return s.write(ctx, func(tx querier) error {
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
}

// FindEnrollSecrets implements device.EnrollSecretStore.
func (s *Store) FindEnrollSecrets(ctx context.Context) (_ []*device.EnrollSecret, err error) {
	defer errs.Wrap(&err, "find enrollment secrets")
	return queryAll(ctx, s.rq(), scanEnrollSecret, `SELECT `+enrollColumns+` FROM enroll_secrets ORDER BY created_at DESC, id DESC`)
}

// RevokeEnrollSecret implements device.EnrollSecretStore.
func (s *Store) RevokeEnrollSecret(ctx context.Context, id string, at time.Time) (_ *device.EnrollSecret, err error) {
	defer errs.Wrap(&err, "revoke enrollment secret %s", id)
	return writeResult(ctx, s, func(tx querier) (*device.EnrollSecret, error) {
		e, err := findEnrollSecret(ctx, tx, `id = ? `+s.d.lockRow, id)
		if err != nil {
			return nil, err
		}
		if e.RevokedAt != nil {
			return nil, errs.Conflictf("enrollment secret %s is already revoked", id)
		}
		e.RevokedAt = new(fromMS(ms(at)))
		_, err = tx.Exec(ctx, `UPDATE enroll_secrets SET revoked_at = ? WHERE id = ?`, ms(at), e.ID)
		return e, err
	})
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
