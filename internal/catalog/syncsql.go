package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/patchline/patchline/internal/errs"
)

// SQLSyncStates implements SyncStates once for both stores, over
// database/sql: their sync_state tables are alike, and the queries number
// their placeholders ($1, $2 …), which SQLite and PostgreSQL both read.
// The lease is a row that no source names, taken with an upsert that
// succeeds only when the row is free, expired or already held by the
// holder: SQLite runs one write at a time, and PostgreSQL checks the
// condition on the row as committed, with the row locked, so that of two
// replicas racing for it one wins.
type SQLSyncStates struct {
	// Read and Write are the handles of reads and writes; they may be one.
	Read, Write *sql.DB
	// Text makes a string storable; nil keeps it as it is.
	Text func(string) string
	// Changed, when not nil, is called after each write.
	Changed func()
}

var _ SyncStates = (*SQLSyncStates)(nil)

// SyncLeaseRow is the sync_state row of the sync lease; no source has
// this name.
const SyncLeaseRow = "*lease"

const leaseRow = SyncLeaseRow

func (s *SQLSyncStates) text(v string) string {
	if s.Text == nil {
		return v
	}
	return s.Text(v)
}

func (s *SQLSyncStates) write(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if s.Changed != nil {
		defer s.Changed()
	}
	return s.Write.ExecContext(ctx, query, args...)
}

// SyncState implements SyncStates.
func (s *SQLSyncStates) SyncState(ctx context.Context, source string) (SyncState, error) {
	row := s.Read.QueryRowContext(ctx, `SELECT `+SyncColumns+` FROM sync_state WHERE source = $1`, s.text(source))
	st, err := ScanSyncState(row)
	if errors.Is(err, sql.ErrNoRows) {
		return SyncState{Source: source}, errs.NotFoundf("source %s was never synced", source)
	}
	if err != nil {
		return SyncState{Source: source}, fmt.Errorf("read sync state of %s: %w", source, err)
	}
	return st, nil
}

// PutSyncState implements SyncStates.
func (s *SQLSyncStates) PutSyncState(ctx context.Context, st SyncState) error {
	if st.Source == "" || st.Source == leaseRow {
		return errs.Invalidf("sync state: bad source name %q", st.Source)
	}
	_, err := s.write(ctx, `INSERT INTO sync_state (`+SyncColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (source) DO UPDATE SET
		last_attempt = excluded.last_attempt, last_success = excluded.last_success,
		cursor = excluded.cursor, etag = excluded.etag, last_modified = excluded.last_modified,
		records_changed = excluded.records_changed, error = excluded.error,
		failures = excluded.failures, next_attempt = excluded.next_attempt`,
		s.text(st.Source), UnixOrZero(st.LastAttempt), UnixOrZero(st.LastSuccess), s.text(st.Cursor), s.text(st.ETag),
		s.text(st.LastModified), st.RecordsChanged, s.text(st.Error), st.Failures, UnixOrZero(st.NextAttempt))
	if err != nil {
		return fmt.Errorf("store sync state of %s: %w", st.Source, err)
	}
	return nil
}

// ListSyncStates implements SyncStates.
func (s *SQLSyncStates) ListSyncStates(ctx context.Context) (out []SyncState, err error) {
	defer errs.Wrap(&err, "list sync states")
	err = EachRow(ctx, s.Read, `SELECT `+SyncColumns+` FROM sync_state WHERE source <> $1 ORDER BY source`, func(rows *sql.Rows) error {
		st, err := ScanSyncState(rows)
		if err != nil {
			return err
		}
		out = append(out, st)
		return nil
	}, leaseRow)
	return out, err
}

// AcquireSyncLease implements SyncStates.
func (s *SQLSyncStates) AcquireSyncLease(ctx context.Context, holder string, now time.Time, ttl time.Duration) (bool, SyncLease, error) {
	if holder == "" {
		return false, SyncLease{}, errs.Invalidf("sync lease: empty holder")
	}
	expires := now.Add(ttl).Unix()
	res, err := s.write(ctx, `INSERT INTO sync_state (source, holder, lease_expires) VALUES ($1, $2, $3)
		ON CONFLICT (source) DO UPDATE SET holder = excluded.holder, lease_expires = excluded.lease_expires
		WHERE sync_state.holder = excluded.holder OR sync_state.holder = '' OR sync_state.lease_expires <= $4`,
		leaseRow, s.text(holder), expires, now.Unix())
	if err != nil {
		return false, SyncLease{}, fmt.Errorf("acquire sync lease: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, SyncLease{}, fmt.Errorf("acquire sync lease: %w", err)
	}
	if n == 1 {
		return true, SyncLease{Holder: holder, Expires: time.Unix(expires, 0).UTC()}, nil
	}
	var cur SyncLease
	var exp int64
	err = s.Write.QueryRowContext(ctx, `SELECT holder, lease_expires FROM sync_state WHERE source = $1`, leaseRow).Scan(&cur.Holder, &exp)
	if err != nil {
		return false, SyncLease{}, fmt.Errorf("read sync lease: %w", err)
	}
	cur.Expires = time.Unix(exp, 0).UTC()
	return false, cur, nil
}

// ReleaseSyncLease implements SyncStates.
func (s *SQLSyncStates) ReleaseSyncLease(ctx context.Context, holder string) error {
	_, err := s.write(ctx, `UPDATE sync_state SET holder = '', lease_expires = 0 WHERE source = $1 AND holder = $2`, leaseRow, s.text(holder))
	return errs.Wrapf(err, "release sync lease")
}
