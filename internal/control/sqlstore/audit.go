package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"database/sql"

	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/errs"
)

// AppendAudit implements audit.Log. The transaction takes the lock of
// appends as it reads the head of the chain (dialect.auditHead) and holds
// it to its commit: appends from every replica and process follow each
// other, so that each chains to the one before and the chain never forks.
func (s *Store) AppendAudit(ctx context.Context, e *audit.Entry) error {
	// The entry is hashed as it is stored.
	for _, f := range []*string{&e.Actor, &e.KeyID, &e.Action, &e.Method, &e.Path, &e.ClientAddress} {
		*f = s.d.text(*f)
	}
	if len(e.Details) > 0 {
		e.Details = []byte(s.d.text(string(e.Details)))
	}
	err := s.write(ctx, func(tx querier) error {
		prevID, prevHash := int64(0), audit.GenesisHash
		err := tx.QueryRow(ctx, s.d.auditHead).Scan(&prevID, &prevHash)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		e.Chain(prevID, prevHash)
		_, err = tx.Exec(ctx, sqlInsertAudit,
			e.ID, ms(e.Time), e.Actor, e.KeyID, e.Action, e.Method, e.Path, e.Status, e.ClientAddress,
			nullBytes(e.Details), e.PrevHash, e.Hash)
		return err
	})
	if err != nil {
		// Wrapped once there is an error: the arguments of errs.Wrap
		// would be boxed on every request.
		return fmt.Errorf("append audit entry %s: %w", e.Action, err)
	}
	return nil
}

// sqlInsertAudit appends an entry: every API request appends.
const sqlInsertAudit = `INSERT INTO audit_log (` + auditColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// FindAuditEntries implements audit.Log.
func (s *Store) FindAuditEntries(ctx context.Context, f audit.Filter) (_ []*audit.Entry, err error) {
	defer errs.Wrap(&err, "find audit entries")
	var where []string
	var a args
	if f.KeyID != "" {
		where = append(where, `key_id = `+a.add(f.KeyID))
	}
	if f.Action != "" {
		where = append(where, `action = `+a.add(f.Action))
	}
	if f.Before > 0 {
		where = append(where, `id < `+a.add(f.Before))
	}
	query := a.selectWhere(`SELECT `+auditColumns+` FROM audit_log`, where, `id DESC`, f.Limit)
	return queryAll(ctx, s.rq(), scanAudit, query, a...)
}

// WalkAudit implements audit.Log. It reads in pages so that no transaction
// stays open for the whole walk.
func (s *Store) WalkAudit(ctx context.Context, fn func(*audit.Entry) error) error {
	const page = 1000
	var after int64
	for {
		batch, err := queryAll(ctx, s.rq(), scanAudit, `SELECT `+auditColumns+` FROM audit_log WHERE id > ? ORDER BY id LIMIT ?`, after, page)
		if err != nil {
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
	var details *string
	if err := row.Scan(&e.ID, &t, &e.Actor, &e.KeyID, &e.Action, &e.Method, &e.Path, &e.Status,
		&e.ClientAddress, &details, &e.PrevHash, &e.Hash); err != nil {
		return nil, err
	}
	e.Time = fromMS(t)
	if details != nil {
		e.Details = []byte(*details)
	}
	return &e, nil
}
