package catalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/patchline/patchline/internal/cve"
)

// DumpTarget receives the rows that Dump reads: the write methods of a
// Tx, and PutSyncState of SyncStates.
type DumpTarget interface {
	PutFacts(ctx context.Context, key int64, f *cve.Facts) (Change, error)
	PutLifecycle(ctx context.Context, l *cve.Lifecycle) (Change, error)
	PutRecord(ctx context.Context, r *Row) error
	LogRun(ctx context.Context, run Run) error
	PutSyncState(ctx context.Context, s SyncState) error
}

// Dump reads the whole catalog in one read-only snapshot and passes every
// row to to, table by table: facts, lifecycles, records, ingest runs (in
// the order they ran) and the sync state of each source. The sync lease is
// left out. It stops at the first error of to and returns it.
func (s *SQLReads) Dump(ctx context.Context, to DumpTarget) error {
	opts := s.Snapshot
	if opts == nil {
		opts = &sql.TxOptions{ReadOnly: true}
	}
	tx, err := s.DB.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	defer tx.Rollback()
	return dump(ctx, tx, to)
}

func dump(ctx context.Context, tx *sql.Tx, to DumpTarget) error {
	err := EachRow(ctx, tx, `SELECT key, body FROM facts ORDER BY key, feed, doc`, func(rows *sql.Rows) error {
		var key int64
		var body []byte
		if err := rows.Scan(&key, &body); err != nil {
			return err
		}
		f, err := decodeFacts(key, body)
		if err != nil {
			return err
		}
		_, err = to.PutFacts(ctx, key, &f)
		return err
	})
	if err != nil {
		return fmt.Errorf("dump facts: %w", err)
	}
	// The lifecycles are few: they are read all at once.
	lifecycles, err := readLifecycles(ctx, tx)
	if err != nil {
		return fmt.Errorf("dump lifecycles: %w", err)
	}
	for i := range lifecycles {
		if _, err := to.PutLifecycle(ctx, &lifecycles[i]); err != nil {
			return fmt.Errorf("dump lifecycles: %w", err)
		}
	}
	err = EachRow(ctx, tx, `SELECT key, cve_id, rejected, severity, cvss, cvss_version, epss, is_kev, has_fix,
		published, modified, hash, body FROM records ORDER BY key`, func(rows *sql.Rows) error {
		var r Row
		err := rows.Scan(&r.Key, &r.ID, &r.Rejected, &r.Severity, &r.CVSS, &r.CVSSVersion, &r.EPSS, &r.IsKEV, &r.HasFix,
			&r.Published, &r.Modified, &r.Hash, &r.Body)
		if err != nil {
			return err
		}
		if r.Description, err = descriptionOf(r.Body); err != nil {
			return fmt.Errorf("decode record %s: %w", r.ID, err)
		}
		return to.PutRecord(ctx, &r)
	})
	if err != nil {
		return fmt.Errorf("dump records: %w", err)
	}
	err = EachRow(ctx, tx, `SELECT started, finished, sources, changed FROM ingest_runs ORDER BY id`, func(rows *sql.Rows) error {
		var run Run
		var sources string
		if err := rows.Scan(&run.Started, &run.Finished, &sources, &run.Changed); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(sources), &run.Sources); err != nil {
			return fmt.Errorf("decode ingest run: %w", err)
		}
		return to.LogRun(ctx, run)
	})
	if err != nil {
		return fmt.Errorf("dump ingest runs: %w", err)
	}
	err = EachRow(ctx, tx, `SELECT `+SyncColumns+` FROM sync_state WHERE source <> $1 ORDER BY source`, func(rows *sql.Rows) error {
		st, err := ScanSyncState(rows)
		if err != nil {
			return err
		}
		return to.PutSyncState(ctx, st)
	}, SyncLeaseRow)
	if err != nil {
		return fmt.Errorf("dump sync states: %w", err)
	}
	return nil
}

// descriptionOf returns the description of a stored record body, the text
// that Row.Description indexes for search.
func descriptionOf(body []byte) (string, error) {
	var r struct {
		Description *string `json:"description"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return "", err
	}
	if r.Description == nil {
		return "", nil
	}
	return *r.Description, nil
}
