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
	// Facts bodies are JSON bytes; only those of OSV and CSAF are parsed.
	q := catalog.SourceRecordsSQL(`convert_from(f.body, 'UTF8')::jsonb #>> '{source,name}'`,
		`convert_from(f.body, 'UTF8')::jsonb #>> '{source,license}'`)
	rows, err := d.pool.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("count records by source: %w", err)
	}
	defer rows.Close()
	var out []cve.SourceRecords
	for rows.Next() {
		var s cve.SourceRecords
		var n int64
		if err := rows.Scan(&s.Name, &n, &s.License); err != nil {
			return nil, fmt.Errorf("count records by source: %w", err)
		}
		s.Records = int(n)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count records by source: %w", err)
	}
	return out, nil
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
