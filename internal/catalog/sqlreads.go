package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
)

// SQLReads implements the reads that both stores make alike, once, over
// database/sql: the data sources of cve.SourceCatalog, the walk of the
// records in key order, the counts of cve.Stats and the dump of every row. Their tables are
// alike, and the queries number their placeholders ($1, $2 …), which SQLite
// and PostgreSQL both read.
type SQLReads struct {
	// DB is the handle of reads.
	DB *sql.DB
	// Snapshot are the options of a read transaction that sees one
	// snapshot of the database, for Dump; nil means read-only ones.
	Snapshot *sql.TxOptions
	// Version returns the catalog's version, which changes with every
	// commit of an ingest (the engine's Version).
	Version func(ctx context.Context) (int64, error)

	// stats are the last Stats, counted at statsVersion.
	statsMu      sync.Mutex
	stats        *cve.Stats
	statsVersion int64
}

var _ cve.SourceCatalog = (*SQLReads)(nil)

// Generation implements cve.SourceCatalog: the id of the newest ingest
// run.
func (s *SQLReads) Generation(ctx context.Context) (int64, error) {
	var id int64
	err := s.DB.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM ingest_runs`).Scan(&id)
	return id, errs.Wrapf(err, "catalog generation")
}

// SourceRecords implements cve.SourceCatalog.
func (s *SQLReads) SourceRecords(ctx context.Context) (_ []cve.SourceRecords, err error) {
	defer errs.Wrap(&err, "count records by source")
	feeds := map[string]int{}
	err = EachRow(ctx, s.DB, FeedRecordsSQL, func(rows *sql.Rows) error {
		var feed string
		var n int
		err := rows.Scan(&feed, &n)
		feeds[feed] = n
		return err
	})
	if err != nil {
		return nil, err
	}
	var docs SourceDocs
	err = EachRow(ctx, s.DB, SourceDocsSQL, func(rows *sql.Rows) error {
		var r FactsRow
		err := rows.Scan(&r.Key, &r.Feed, &r.Doc)
		docs.Add(r)
		return err
	})
	if err != nil {
		return nil, err
	}
	return docs.Count(feeds, func(r FactsRow) (cve.DataSource, error) {
		var body []byte
		err := s.DB.QueryRowContext(ctx, `SELECT body FROM facts WHERE key = $1 AND feed = $2 AND doc = $3`, r.Key, r.Feed, r.Doc).Scan(&body)
		if err != nil {
			return cve.DataSource{}, err
		}
		return SourceOfFacts(body)
	})
}

// LastIngests implements cve.SourceCatalog.
func (s *SQLReads) LastIngests(ctx context.Context) ([]cve.SourceIngest, error) {
	var l LastIngests
	err := EachRow(ctx, s.DB, IngestLogSQL, func(rows *sql.Rows) error {
		var started, finished int64
		var sources string
		if err := rows.Scan(&started, &finished, &sources); err != nil {
			return err
		}
		return l.Add(started, finished, sources)
	})
	if err != nil {
		return nil, fmt.Errorf("read ingest runs: %w", err)
	}
	return l.Result(), nil
}

// Stats implements cve.Catalog. Counting the facts reads the whole
// table, so the counts are kept until the catalog's version changes.
func (s *SQLReads) Stats(ctx context.Context) (cve.Stats, error) {
	version, err := s.Version(ctx)
	if err != nil {
		return cve.Stats{}, fmt.Errorf("catalog stats: %w", err)
	}
	s.statsMu.Lock() // one count at a time: others wait for it
	defer s.statsMu.Unlock()
	if s.stats != nil && s.statsVersion == version {
		return *s.stats, nil
	}
	st, err := s.countStats(ctx)
	if err != nil {
		return st, err
	}
	s.stats, s.statsVersion = &st, version
	return st, nil
}

// countStats counts the records, the rejected records and the facts of
// the catalog, and reads the end of its newest ingest run.
func (s *SQLReads) countStats(ctx context.Context) (cve.Stats, error) {
	var st cve.Stats
	var updated sql.NullInt64
	err := s.DB.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM records),
		(SELECT count(*) FROM records WHERE rejected),
		(SELECT count(*) FROM facts),
		(SELECT max(finished) FROM ingest_runs)`).Scan(&st.Records, &st.Rejected, &st.Facts, &updated)
	if err != nil {
		return st, fmt.Errorf("catalog stats: %w", err)
	}
	if updated.Valid {
		st.Updated = time.Unix(updated.Int64, 0).UTC()
	}
	return st, nil
}

// Queryer is what *sql.DB and *sql.Tx have for queries.
type Queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// EachRow runs query on q and calls fn for each of its rows, stopping at
// the first error.
func EachRow(ctx context.Context, q Queryer, query string, fn func(*sql.Rows) error, args ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
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
