package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
)

var _ cve.SourceCatalog = (*DB)(nil)

// Generation implements cve.SourceCatalog: the id of the newest ingest
// run.
func (d *DB) Generation(ctx context.Context) (int64, error) {
	var id sql.NullInt64
	if err := d.db.Read.QueryRowContext(ctx, `SELECT max(id) FROM ingest_runs`).Scan(&id); err != nil {
		return 0, fmt.Errorf("catalog generation: %w", err)
	}
	return id.Int64, nil
}

// SourceRecords implements cve.SourceCatalog.
func (d *DB) SourceRecords(ctx context.Context) ([]cve.SourceRecords, error) {
	feeds := map[string]int{}
	rows, err := d.db.Read.QueryContext(ctx, catalog.FeedRecordsSQL)
	if err != nil {
		return nil, fmt.Errorf("count records by source: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var feed string
		var n int
		if err := rows.Scan(&feed, &n); err != nil {
			return nil, fmt.Errorf("count records by source: %w", err)
		}
		feeds[feed] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count records by source: %w", err)
	}
	var docs catalog.SourceDocs
	rows, err = d.db.Read.QueryContext(ctx, catalog.SourceDocsSQL)
	if err != nil {
		return nil, fmt.Errorf("count records by source: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r catalog.FactsRow
		if err := rows.Scan(&r.Key, &r.Feed, &r.Doc); err != nil {
			return nil, fmt.Errorf("count records by source: %w", err)
		}
		docs.Add(r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count records by source: %w", err)
	}
	return docs.Count(feeds, func(r catalog.FactsRow) (cve.DataSource, error) {
		var body []byte
		err := d.db.Read.QueryRowContext(ctx, `SELECT body FROM facts WHERE key = ? AND feed = ? AND doc = ?`, r.Key, r.Feed, r.Doc).Scan(&body)
		if err != nil {
			return cve.DataSource{}, fmt.Errorf("count records by source: %w", err)
		}
		return catalog.SourceOfFacts(body)
	})
}

// LastIngests implements cve.SourceCatalog.
func (d *DB) LastIngests(ctx context.Context) ([]cve.SourceIngest, error) {
	rows, err := d.db.Read.QueryContext(ctx, catalog.IngestLogSQL)
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
