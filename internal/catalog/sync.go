package catalog

import (
	"context"
	"time"
)

// SyncState is what the catalog remembers of the syncs of one upstream
// source: when it last ran and succeeded, where the next sync resumes, and
// why the last attempt failed.
type SyncState struct {
	// Source is the ingest source name: cvelist, nvd, kev ...
	Source string
	// LastAttempt and LastSuccess are the start times of the last sync
	// attempt and of the last successful one; zero when none.
	LastAttempt time.Time
	LastSuccess time.Time
	// Cursor is where the next sync resumes, in the source's own terms: a
	// modification time, a release, a JSON object of per-part positions.
	// Empty before the first successful sync.
	Cursor string
	// ETag and LastModified are the validators of the source's document,
	// sent back in conditional requests.
	ETag         string
	LastModified string
	// RecordsChanged counts the upstream records that the last successful
	// sync added or changed.
	RecordsChanged int
	// Error is the error of the last attempt, empty when it succeeded.
	Error string
	// Failures counts the consecutive failed attempts.
	Failures int
	// NextAttempt is the earliest time to try again after a failure; zero
	// when the source is not backing off.
	NextAttempt time.Time
}

// SyncLease is the right of one replica to sync, until it expires.
type SyncLease struct {
	Holder  string
	Expires time.Time
}

// SyncStates stores the sync state of each upstream source, and the lease
// that lets one replica at a time sync when several share a catalog.
type SyncStates interface {
	// SyncState returns the state of a source. It returns
	// errs.ErrNotFound for a source that was never synced.
	SyncState(ctx context.Context, source string) (SyncState, error)
	// PutSyncState stores the state of s.Source, replacing the previous
	// one.
	PutSyncState(ctx context.Context, s SyncState) error
	// ListSyncStates returns the state of every source ever synced, by
	// source name.
	ListSyncStates(ctx context.Context) ([]SyncState, error)
	// AcquireSyncLease takes the sync lease for holder until now+ttl, or
	// renews it when holder already has it. It returns false and the
	// current lease when another holder's lease has not expired.
	AcquireSyncLease(ctx context.Context, holder string, now time.Time, ttl time.Duration) (bool, SyncLease, error)
	// ReleaseSyncLease gives the lease up if holder has it.
	ReleaseSyncLease(ctx context.Context, holder string) error
}

// SyncColumns are the columns of sync_state, in the order both stores
// read and write them.
const SyncColumns = `source, last_attempt, last_success, cursor, etag, last_modified,
	records_changed, error, failures, next_attempt`

// UnixOrZero stores a time as Unix seconds, the zero time as 0.
func UnixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// TimeOrZero reads a time stored by UnixOrZero.
func TimeOrZero(sec int64) time.Time {
	if sec == 0 {
		return time.Time{}
	}
	return time.Unix(sec, 0).UTC()
}
