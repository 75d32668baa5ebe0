package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/control/schema"
)

// AppendAudit implements audit.Log. The write transaction begins
// IMMEDIATE, so the last entry it reads is still the last when it inserts,
// whichever process appends.
func (s *Store) AppendAudit(ctx context.Context, e *audit.Entry) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		prevID, prevHash := int64(0), audit.GenesisHash
		err := tx.StmtContext(ctx, s.stmts.lastAudit).QueryRowContext(ctx).Scan(&prevID, &prevHash)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		e.Chain(prevID, prevHash)
		_, err = tx.StmtContext(ctx, s.stmts.insertAudit).ExecContext(ctx,
			e.ID, ms(e.Time), e.Actor, e.KeyID, e.Action, e.Method, e.Path, e.Status, e.ClientAddress,
			nullBytes(e.Details), e.PrevHash, e.Hash)
		return err
	})
	if err != nil {
		return fmt.Errorf("append audit entry %s: %w", e.Action, err)
	}
	return nil
}

// The statements of an append, prepared once on the write connection:
// every API request appends.
const (
	sqlLastAudit   = `SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1`
	sqlInsertAudit = `INSERT INTO audit_log (` + schema.AuditColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

// FindAuditEntries implements audit.Log.
func (s *Store) FindAuditEntries(ctx context.Context, f audit.Filter) ([]*audit.Entry, error) {
	var where []string
	var args []any
	if f.KeyID != "" {
		where = append(where, `key_id = ?`)
		args = append(args, f.KeyID)
	}
	if f.Action != "" {
		where = append(where, `action = ?`)
		args = append(args, f.Action)
	}
	if f.Before > 0 {
		where = append(where, `id < ?`)
		args = append(args, f.Before)
	}
	query := `SELECT ` + schema.AuditColumns + ` FROM audit_log`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	query += ` ORDER BY id DESC`
	if f.Limit > 0 {
		query += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("find audit entries: %w", err)
	}
	defer rows.Close()
	var out []*audit.Entry
	for rows.Next() {
		e, err := scanAudit(rows)
		if err != nil {
			return nil, fmt.Errorf("find audit entries: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("find audit entries: %w", err)
	}
	return out, nil
}

// WalkAudit implements audit.Log. It reads in pages so that no read
// transaction stays open for the whole walk.
func (s *Store) WalkAudit(ctx context.Context, fn func(*audit.Entry) error) error {
	const page = 1000
	var after int64
	for {
		rows, err := s.db.QueryContext(ctx, `SELECT `+schema.AuditColumns+` FROM audit_log WHERE id > ? ORDER BY id LIMIT ?`, after, page)
		if err != nil {
			return fmt.Errorf("walk audit log: %w", err)
		}
		var batch []*audit.Entry
		for rows.Next() {
			e, err := scanAudit(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("walk audit log: %w", err)
			}
			batch = append(batch, e)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("walk audit log: %w", err)
		}
		for _, e := range batch {
			if err := fn(e); err != nil {
				return err
			}
		}
		if len(batch) < page {
			return nil
		}
		after = batch[len(batch)-1].ID
	}
}

func scanAudit(row scanner) (*audit.Entry, error) {
	var e audit.Entry
	var t int64
	var details sql.NullString
	if err := row.Scan(&e.ID, &t, &e.Actor, &e.KeyID, &e.Action, &e.Method, &e.Path, &e.Status,
		&e.ClientAddress, &details, &e.PrevHash, &e.Hash); err != nil {
		return nil, err
	}
	e.Time = fromMS(t)
	if details.Valid {
		e.Details = []byte(details.String)
	}
	return &e, nil
}
