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

// CreateAdmin implements admin.Store.
func (s *Store) CreateAdmin(ctx context.Context, a *admin.Admin) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO admins (`+schema.AdminColumns+`) VALUES (?, ?, ?, ?, ?)`,
			a.ID, a.Email, a.PasswordHash, ms(a.CreatedAt), msPtr(a.LastLoginAt))
		return err
	})
	if isUnique(err) {
		return errs.Conflictf("an administrator with email %s exists", a.Email)
	}
	if err != nil {
		return fmt.Errorf("create admin %s: %w", a.Email, err)
	}
	return nil
}

// FindAdminByEmail implements admin.Store.
func (s *Store) FindAdminByEmail(ctx context.Context, email string) (*admin.Admin, error) {
	a, err := scanAdmin(s.db.QueryRowContext(ctx, `SELECT `+schema.AdminColumns+` FROM admins WHERE email = ?`, email))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errs.NotFoundf("no administrator with email %s", email)
	}
	if err != nil {
		return nil, fmt.Errorf("find admin %s: %w", email, err)
	}
	return a, nil
}

// FindAdmins implements admin.Store.
func (s *Store) FindAdmins(ctx context.Context) ([]*admin.Admin, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+schema.AdminColumns+` FROM admins ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("find admins: %w", err)
	}
	defer rows.Close()
	var out []*admin.Admin
	for rows.Next() {
		a, err := scanAdmin(rows)
		if err != nil {
			return nil, fmt.Errorf("find admins: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("find admins: %w", err)
	}
	return out, nil
}

// RecordAdminLogin implements admin.Store.
func (s *Store) RecordAdminLogin(ctx context.Context, id string, at time.Time) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE admins SET last_login_at = ? WHERE id = ?`, ms(at), id)
		if err != nil {
			return fmt.Errorf("record admin login %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return schema.NotFound("administrator", id)
		}
		return nil
	})
}

func scanAdmin(row scanner) (*admin.Admin, error) {
	var a admin.Admin
	var created int64
	var lastLogin sql.NullInt64
	if err := row.Scan(&a.ID, &a.Email, &a.PasswordHash, &created, &lastLogin); err != nil {
		return nil, err
	}
	a.CreatedAt = fromMS(created)
	a.LastLoginAt = fromNullMS(lastLogin)
	return &a, nil
}
