package postgres

import (
	"context"
	"fmt"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
)

var _ cve.SourceCatalog = (*DB)(nil)

// Generation implements cve.SourceCatalog: the id of the newest ingest
// run.
func (d *DB) Generation(ctx context.Context) (int64, error) {
	var id int64
	if err := d.pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM ingest_runs`).Scan(&id); err != nil {
		return 0, fmt.Errorf("catalog generation: %w", err)
	}
	return id, nil
}

// SourceRecords implements cve.SourceCatalog.
func (d *DB) SourceRecords(ctx context.Context) ([]cve.SourceRecords, error) {
	feeds := map[string]int{}
	rows, err := d.pool.Query(ctx, catalog.FeedRecordsSQL)
	if err != nil {
		return nil, fmt.Errorf("count records by source: %w", err)
	}
	for rows.Next() {
		var feed string
		var n int64
		if err := rows.Scan(&feed, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("count records by source: %w", err)
		}
		feeds[feed] = int(n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count records by source: %w", err)
	}
	var docs catalog.SourceDocs
	rows, err = d.pool.Query(ctx, catalog.SourceDocsSQL)
	if err != nil {
		return nil, fmt.Errorf("count records by source: %w", err)
	}
	for rows.Next() {
		var r catalog.FactsRow
		if err := rows.Scan(&r.Key, &r.Feed, &r.Doc); err != nil {
			rows.Close()
			return nil, fmt.Errorf("count records by source: %w", err)
		}
		docs.Add(r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count records by source: %w", err)
	}
	return docs.Count(feeds, func(r catalog.FactsRow) (cve.DataSource, error) {
		var body []byte
		err := d.pool.QueryRow(ctx, `SELECT body FROM facts WHERE key = $1 AND feed = $2 AND doc = $3`, r.Key, r.Feed, r.Doc).Scan(&body)
		if err != nil {
			return cve.DataSource{}, fmt.Errorf("count records by source: %w", err)
		}
		return catalog.SourceOfFacts(body)
	})
}

// LastIngests implements cve.SourceCatalog.
func (d *DB) LastIngests(ctx context.Context) ([]cve.SourceIngest, error) {
	rows, err := d.pool.Query(ctx, catalog.IngestLogSQL)
	if err != nil {
		return nil, fmt.Errorf("read ingest runs: %w", err)
	}
	defer rows.Close()
	var l catalog.LastIngests
	for rows.Next() {
		var started, finished int64
		var sources string
		if err := rows.Scan(&started, &finished, &sources); err != nil {
			return nil, fmt.Errorf("read ingest runs: %w", err)
		}
		if err := l.Add(started, finished, sources); err != nil {
			return nil, fmt.Errorf("read ingest runs: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read ingest runs: %w", err)
	}
	return l.Result(), nil
}
