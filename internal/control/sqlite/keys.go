package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/control/schema"
	"github.com/patchline/patchline/internal/errs"
)

// CreateKey implements apikey.KeyStore.
func (s *Store) CreateKey(ctx context.Context, k *apikey.Key) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO api_keys (`+schema.KeyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			k.ID, k.Name, k.SecretHash, k.Privileged, k.CreatedBy, ms(k.CreatedAt),
			msPtr(k.LastUsedAt), msPtr(k.ExpiresAt), msPtr(k.RevokedAt))
		return err
	})
	if isUnique(err) {
		return errs.Conflictf("API key %s exists", k.ID)
	}
	if err != nil {
		return fmt.Errorf("create key %s: %w", k.ID, err)
	}
	return nil
}

// FindKeyByID implements apikey.KeyStore.
func (s *Store) FindKeyByID(ctx context.Context, id string) (*apikey.Key, error) {
	k, err := findKey(ctx, s.db, id)
	if err != nil {
		return nil, fmt.Errorf("find key %s: %w", id, err)
	}
	return k, nil
}

func findKey(ctx context.Context, q querier, id string) (*apikey.Key, error) {
	k, err := scanKey(q.QueryRowContext(ctx, `SELECT `+schema.KeyColumns+` FROM api_keys WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, schema.NotFound("API key", id)
	}
	return k, err
}

// FindKeys implements apikey.KeyStore.
func (s *Store) FindKeys(ctx context.Context, f apikey.KeyFilter) ([]*apikey.Key, error) {
	var where []string
	var args []any
	if f.Active != nil {
		now := ms(f.Now)
		if *f.Active {
			where = append(where, `revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`)
		} else {
			where = append(where, `NOT (revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?))`)
		}
		args = append(args, now)
	}
	query := `SELECT ` + schema.KeyColumns + ` FROM api_keys`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY created_at DESC, id DESC`
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("find keys: %w", err)
	}
	defer rows.Close()
	var keys []*apikey.Key
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("find keys: %w", err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("find keys: %w", err)
	}
	return keys, nil
}

// RevokeKey implements apikey.KeyStore.
func (s *Store) RevokeKey(ctx context.Context, id string, at time.Time) (*apikey.Key, error) {
	var k *apikey.Key
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		if k, err = findKey(ctx, tx, id); err != nil {
			return err
		}
		if k.RevokedAt != nil {
			return errs.Conflictf("API key %s was revoked at %s", id, k.RevokedAt.Format(time.RFC3339))
		}
		if _, err := tx.ExecContext(ctx, `UPDATE api_keys SET revoked_at = ? WHERE id = ?`, ms(at), id); err != nil {
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
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		if k, err = findKey(ctx, tx, id); err != nil {
			return err
		}
		switch st := k.State(now); {
		case st != apikey.StateActive:
			return errs.Conflictf("API key %s is %s", id, st)
		case k.Privileged:
			return errs.Conflictf("API key %s is already privileged", id)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE api_keys SET privileged = 1, expires_at = ? WHERE id = ?`, ms(expiresAt), id); err != nil {
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
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE api_keys SET last_used_at = ?
			WHERE id = ? AND (last_used_at IS NULL OR last_used_at <= ?)`,
			ms(at), id, ms(at.Add(-apikey.LastUsedResolution)))
		return err
	})
	if err != nil {
		return fmt.Errorf("touch key %s: %w", id, err)
	}
	return nil
}

type scanner interface {
	Scan(dest ...any) error
}

func scanKey(row scanner) (*apikey.Key, error) {
	var k apikey.Key
	var created int64
	var lastUsed, expires, revoked sql.NullInt64
	if err := row.Scan(&k.ID, &k.Name, &k.SecretHash, &k.Privileged, &k.CreatedBy, &created, &lastUsed, &expires, &revoked); err != nil {
		return nil, err
	}
	k.CreatedAt = fromMS(created)
	k.LastUsedAt = fromNullMS(lastUsed)
	k.ExpiresAt = fromNullMS(expires)
	k.RevokedAt = fromNullMS(revoked)
	return &k, nil
}
