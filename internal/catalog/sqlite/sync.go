package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/errs"
)

// leaseRow is the sync_state row of the sync lease; no source has this name.
const leaseRow = "*lease"

var _ catalog.SyncStates = (*DB)(nil)

// SyncState implements catalog.SyncStates.
func (d *DB) SyncState(ctx context.Context, source string) (catalog.SyncState, error) {
	row := d.db.Read.QueryRowContext(ctx, `SELECT `+catalog.SyncColumns+` FROM sync_state WHERE source = ?`, source)
	s, err := catalog.ScanSyncState(row)
	if errors.Is(err, sql.ErrNoRows) {
		return catalog.SyncState{Source: source}, errs.NotFoundf("source %s was never synced", source)
	}
	if err != nil {
		return catalog.SyncState{Source: source}, fmt.Errorf("read sync state of %s: %w", source, err)
	}
	return s, nil
}

// PutSyncState implements catalog.SyncStates.
func (d *DB) PutSyncState(ctx context.Context, s catalog.SyncState) error {
	if s.Source == "" || s.Source == leaseRow {
		return errs.Invalidf("sync state: bad source name %q", s.Source)
	}
	_, err := d.write(ctx, `INSERT INTO sync_state (`+catalog.SyncColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (source) DO UPDATE SET
		last_attempt = excluded.last_attempt, last_success = excluded.last_success,
		cursor = excluded.cursor, etag = excluded.etag, last_modified = excluded.last_modified,
		records_changed = excluded.records_changed, error = excluded.error,
		failures = excluded.failures, next_attempt = excluded.next_attempt`,
		s.Source, catalog.UnixOrZero(s.LastAttempt), catalog.UnixOrZero(s.LastSuccess), s.Cursor, s.ETag, s.LastModified,
		s.RecordsChanged, s.Error, s.Failures, catalog.UnixOrZero(s.NextAttempt))
	if err != nil {
		return fmt.Errorf("store sync state of %s: %w", s.Source, err)
	}
	return nil
}

// ListSyncStates implements catalog.SyncStates.
func (d *DB) ListSyncStates(ctx context.Context) ([]catalog.SyncState, error) {
	rows, err := d.db.Read.QueryContext(ctx, `SELECT `+catalog.SyncColumns+` FROM sync_state WHERE source <> ? ORDER BY source`, leaseRow)
	if err != nil {
		return nil, fmt.Errorf("list sync states: %w", err)
	}
	defer rows.Close()
	var out []catalog.SyncState
	for rows.Next() {
		s, err := catalog.ScanSyncState(rows)
		if err != nil {
			return nil, fmt.Errorf("list sync states: %w", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// AcquireSyncLease implements catalog.SyncStates. The upsert succeeds only
// when the row is free, expired or already held by holder, so two replicas
// racing for it cannot both win: SQLite runs one write at a time.
func (d *DB) AcquireSyncLease(ctx context.Context, holder string, now time.Time, ttl time.Duration) (bool, catalog.SyncLease, error) {
	if holder == "" {
		return false, catalog.SyncLease{}, errs.Invalidf("sync lease: empty holder")
	}
	expires := now.Add(ttl).Unix()
	res, err := d.write(ctx, `INSERT INTO sync_state (source, holder, lease_expires) VALUES (?, ?, ?)
		ON CONFLICT (source) DO UPDATE SET holder = excluded.holder, lease_expires = excluded.lease_expires
		WHERE sync_state.holder = excluded.holder OR sync_state.holder = '' OR sync_state.lease_expires <= ?`,
		leaseRow, holder, expires, now.Unix())
	if err != nil {
		return false, catalog.SyncLease{}, fmt.Errorf("acquire sync lease: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, catalog.SyncLease{}, fmt.Errorf("acquire sync lease: %w", err)
	}
	if n == 1 {
		return true, catalog.SyncLease{Holder: holder, Expires: time.Unix(expires, 0).UTC()}, nil
	}
	var cur catalog.SyncLease
	var exp int64
	err = d.db.Write.QueryRowContext(ctx, `SELECT holder, lease_expires FROM sync_state WHERE source = ?`, leaseRow).Scan(&cur.Holder, &exp)
	if err != nil {
		return false, catalog.SyncLease{}, fmt.Errorf("read sync lease: %w", err)
	}
	cur.Expires = time.Unix(exp, 0).UTC()
	return false, cur, nil
}

// ReleaseSyncLease implements catalog.SyncStates.
func (d *DB) ReleaseSyncLease(ctx context.Context, holder string) error {
	_, err := d.write(ctx, `UPDATE sync_state SET holder = '', lease_expires = 0 WHERE source = ? AND holder = ?`, leaseRow, holder)
	if err != nil {
		return fmt.Errorf("release sync lease: %w", err)
	}
	return nil
}

// write runs a statement on the write connection and tells the catalog's
// readers of it.
func (d *DB) write(ctx context.Context, query string, args ...any) (sql.Result, error) {
	defer d.db.Changed()
	return d.db.Write.ExecContext(ctx, query, args...)
}
