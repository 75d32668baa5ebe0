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
	q := catalog.SourceRecordsSQL(`json_extract(f.body, '$.source.name')`, `json_extract(f.body, '$.source.license')`)
	rows, err := d.db.Read.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("count records by source: %w", err)
	}
	defer rows.Close()
	var out []cve.SourceRecords
	for rows.Next() {
		var s cve.SourceRecords
		if err := rows.Scan(&s.Name, &s.Records, &s.License); err != nil {
			return nil, fmt.Errorf("count records by source: %w", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
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
