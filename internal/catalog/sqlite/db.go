// Package sqlite is the catalog store on SQLite, the embedded default.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/sqlitedb"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// DB is the catalog on SQLite.
type DB struct {
	db *sqlitedb.DB
	// recordBody is the hot read of the lookup API, prepared once.
	recordBody *sql.Stmt
}

var _ catalog.Store = (*DB)(nil)

// Open opens (creating it if needed) the catalog at path.
func Open(ctx context.Context, path string) (*DB, error) {
	migs, _ := fs.Sub(migrationFiles, "migrations")
	db, err := sqlitedb.Open(ctx, path, migs)
	if err != nil {
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	if isFile(path) {
		removeLeftovers(path)
	}
	stmt, err := db.Read.PrepareContext(ctx, `SELECT body FROM records WHERE key = ?`)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	return &DB{db: db, recordBody: stmt}, nil
}

// Close closes the database.
func (d *DB) Close() error {
	d.recordBody.Close()
	return d.db.Close()
}

// SQL returns the handle for reads.
func (d *DB) SQL() *sql.DB { return d.db.Read }

// Record implements cve.Catalog.
func (d *DB) Record(ctx context.Context, id string) (*cve.Record, error) {
	body, err := d.RecordJSON(ctx, id)
	if err != nil {
		return nil, err
	}
	var r cve.Record
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decode record %s: %w", id, err)
	}
	return &r, nil
}

// RecordJSON implements cve.Catalog.
func (d *DB) RecordJSON(ctx context.Context, id string) ([]byte, error) {
	key, ok := cve.Key(id)
	if !ok {
		return nil, errs.NotFoundf("%s is not in the catalog", id)
	}
	var body []byte
	err := d.recordBody.QueryRowContext(ctx, key).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errs.NotFoundf("%s is not in the catalog", id)
	}
	if err != nil {
		return nil, fmt.Errorf("read record %s: %w", id, err)
	}
	return body, nil
}

// RecordsJSON implements cve.Catalog.
func (d *DB) RecordsJSON(ctx context.Context, ids []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(ids))
	keys := make([]any, 0, len(ids))
	for _, id := range ids {
		if k, ok := cve.Key(id); ok {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return out, nil
	}
	q := `SELECT cve_id, body FROM records WHERE key IN (?` + strings.Repeat(",?", len(keys)-1) + `)`
	rows, err := d.db.Read.QueryContext(ctx, q, keys...)
	if err != nil {
		return nil, fmt.Errorf("read records: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var body []byte
		if err := rows.Scan(&id, &body); err != nil {
			return nil, err
		}
		out[id] = body
	}
	return out, rows.Err()
}

// Walk implements cve.Catalog.
func (d *DB) Walk(ctx context.Context, after string, fn func(cve.Summary) error) error {
	from, err := catalog.WalkStart(after)
	if err != nil {
		return err
	}
	rows, err := d.db.Read.QueryContext(ctx, `SELECT `+catalog.SummaryColumns+` FROM records WHERE key > ? ORDER BY key`, from)
	if err != nil {
		return fmt.Errorf("walk records: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		s, _, err := catalog.ScanSummary(rows)
		if err != nil {
			return err
		}
		if err := fn(s); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Stats implements cve.Catalog.
func (d *DB) Stats(ctx context.Context) (cve.Stats, error) {
	var s cve.Stats
	var updated sql.NullInt64
	err := d.db.Read.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM records),
		(SELECT count(*) FROM records WHERE rejected = 1),
		(SELECT count(*) FROM facts),
		(SELECT max(finished) FROM ingest_runs)`).Scan(&s.Records, &s.Rejected, &s.Facts, &updated)
	if err != nil {
		return s, fmt.Errorf("catalog stats: %w", err)
	}
	if updated.Valid {
		s.Updated = time.Unix(updated.Int64, 0).UTC()
	}
	return s, nil
}
