package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/errs"
)

// leaseRow is the sync_state row of the sync lease; no source has this name.
const leaseRow = "*lease"

var _ catalog.SyncStates = (*DB)(nil)

// SyncState implements catalog.SyncStates.
func (d *DB) SyncState(ctx context.Context, source string) (catalog.SyncState, error) {
	row := d.pool.QueryRow(ctx, `SELECT `+catalog.SyncColumns+` FROM sync_state WHERE source = $1`, pgText(source))
	s, err := catalog.ScanSyncState(row)
	if errors.Is(err, pgx.ErrNoRows) {
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
	_, err := d.pool.Exec(ctx, `INSERT INTO sync_state (`+catalog.SyncColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (source) DO UPDATE SET
		last_attempt = excluded.last_attempt, last_success = excluded.last_success,
		cursor = excluded.cursor, etag = excluded.etag, last_modified = excluded.last_modified,
		records_changed = excluded.records_changed, error = excluded.error,
		failures = excluded.failures, next_attempt = excluded.next_attempt`,
		pgText(s.Source), catalog.UnixOrZero(s.LastAttempt), catalog.UnixOrZero(s.LastSuccess), pgText(s.Cursor), pgText(s.ETag),
		pgText(s.LastModified), s.RecordsChanged, pgText(s.Error), s.Failures, catalog.UnixOrZero(s.NextAttempt))
	if err != nil {
		return fmt.Errorf("store sync state of %s: %w", s.Source, err)
	}
	return nil
}

// ListSyncStates implements catalog.SyncStates.
func (d *DB) ListSyncStates(ctx context.Context) ([]catalog.SyncState, error) {
	rows, err := d.pool.Query(ctx, `SELECT `+catalog.SyncColumns+` FROM sync_state WHERE source <> $1 ORDER BY source`, leaseRow)
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
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sync states: %w", err)
	}
	return out, nil
}

// AcquireSyncLease implements catalog.SyncStates. The upsert updates the
// row only when it is free, expired or already held by holder, and
// PostgreSQL checks that condition on the row as committed, with the row
// locked: of two replicas racing for the lease, one wins.
func (d *DB) AcquireSyncLease(ctx context.Context, holder string, now time.Time, ttl time.Duration) (bool, catalog.SyncLease, error) {
	if holder == "" {
		return false, catalog.SyncLease{}, errs.Invalidf("sync lease: empty holder")
	}
	expires := now.Add(ttl).Unix()
	tag, err := d.pool.Exec(ctx, `INSERT INTO sync_state (source, holder, lease_expires) VALUES ($1, $2, $3)
		ON CONFLICT (source) DO UPDATE SET holder = excluded.holder, lease_expires = excluded.lease_expires
		WHERE sync_state.holder = excluded.holder OR sync_state.holder = '' OR sync_state.lease_expires <= $4`,
		leaseRow, pgText(holder), expires, now.Unix())
	if err != nil {
		return false, catalog.SyncLease{}, fmt.Errorf("acquire sync lease: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return true, catalog.SyncLease{Holder: holder, Expires: time.Unix(expires, 0).UTC()}, nil
	}
	var cur catalog.SyncLease
	var exp int64
	err = d.pool.QueryRow(ctx, `SELECT holder, lease_expires FROM sync_state WHERE source = $1`, leaseRow).Scan(&cur.Holder, &exp)
	if err != nil {
		return false, catalog.SyncLease{}, fmt.Errorf("read sync lease: %w", err)
	}
	cur.Expires = time.Unix(exp, 0).UTC()
	return false, cur, nil
}

// ReleaseSyncLease implements catalog.SyncStates.
func (d *DB) ReleaseSyncLease(ctx context.Context, holder string) error {
	_, err := d.pool.Exec(ctx, `UPDATE sync_state SET holder = '', lease_expires = 0 WHERE source = $1 AND holder = $2`, leaseRow, pgText(holder))
	if err != nil {
		return fmt.Errorf("release sync lease: %w", err)
	}
	return nil
}
