package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
)

// DumpTarget receives the rows that Dump reads: the write methods of a
// catalog.Tx, and PutSyncState of catalog.SyncStates.
type DumpTarget interface {
	PutFacts(ctx context.Context, key int64, f *cve.Facts) (catalog.Change, error)
	PutLifecycle(ctx context.Context, l *cve.Lifecycle) (catalog.Change, error)
	PutRecord(ctx context.Context, r *catalog.Row) error
	LogRun(ctx context.Context, run catalog.Run) error
	PutSyncState(ctx context.Context, s catalog.SyncState) error
}

// Dump reads the whole catalog in one read-only snapshot and passes every
// row to to, table by table: facts, lifecycles, records, ingest runs (in
// the order they ran) and the sync state of each source. The sync lease is
// left out. It stops at the first error of to and returns it.
func (d *DB) Dump(ctx context.Context, to DumpTarget) error {
	return pgx.BeginTxFunc(ctx, d.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		return dump(ctx, tx, to)
	})
}

func dump(ctx context.Context, tx pgx.Tx, to DumpTarget) error {
	err := each(ctx, tx, `SELECT key, body FROM facts ORDER BY key, feed, doc`, func(rows pgx.Rows) error {
		var key int64
		var body []byte
		if err := rows.Scan(&key, &body); err != nil {
			return err
		}
		var f cve.Facts
		if err := json.Unmarshal(body, &f); err != nil {
			return fmt.Errorf("decode facts of %s: %w", cve.IDOfKey(key), err)
		}
		_, err := to.PutFacts(ctx, key, &f)
		return err
	})
	if err != nil {
		return fmt.Errorf("dump facts: %w", err)
	}
	err = each(ctx, tx, `SELECT body FROM lifecycles ORDER BY product, cycle`, func(rows pgx.Rows) error {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			return err
		}
		var l cve.Lifecycle
		if err := json.Unmarshal(body, &l); err != nil {
			return fmt.Errorf("decode lifecycle: %w", err)
		}
		_, err := to.PutLifecycle(ctx, &l)
		return err
	})
	if err != nil {
		return fmt.Errorf("dump lifecycles: %w", err)
	}
	err = each(ctx, tx, `SELECT key, cve_id, rejected, severity, cvss, cvss_version, epss, is_kev, has_fix,
		published, modified, hash, body FROM records ORDER BY key`, func(rows pgx.Rows) error {
		var r catalog.Row
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
	err = each(ctx, tx, `SELECT started, finished, sources, changed FROM ingest_runs ORDER BY id`, func(rows pgx.Rows) error {
		var run catalog.Run
		var sources string
		var changed int32
		if err := rows.Scan(&run.Started, &run.Finished, &sources, &changed); err != nil {
			return err
		}
		run.Changed = int(changed)
		if err := json.Unmarshal([]byte(sources), &run.Sources); err != nil {
			return fmt.Errorf("decode ingest run: %w", err)
		}
		return to.LogRun(ctx, run)
	})
	if err != nil {
		return fmt.Errorf("dump ingest runs: %w", err)
	}
	err = each(ctx, tx, `SELECT `+catalog.SyncColumns+` FROM sync_state WHERE source <> $1 ORDER BY source`, func(rows pgx.Rows) error {
		s, err := catalog.ScanSyncState(rows)
		if err != nil {
			return err
		}
		return to.PutSyncState(ctx, s)
	}, catalog.SyncLeaseRow)
	if err != nil {
		return fmt.Errorf("dump sync states: %w", err)
	}
	return nil
}

// each runs query and calls fn for each of its rows.
func each(ctx context.Context, tx pgx.Tx, query string, fn func(pgx.Rows) error, args ...any) error {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// descriptionOf returns the description of a stored record body, the text
// that catalog.Row.Description indexes for search.
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
