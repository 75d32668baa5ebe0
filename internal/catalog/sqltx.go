package catalog

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/patchline/patchline/internal/cve"
)

// SQLTx implements the statements of an ingest transaction that both
// stores run alike, once, over database/sql: the lifecycles, the facts of
// one CVE, the keys of the records with remediation, the sources of
// stored records and the log of runs. What differs (the facts and records
// written in batches, the full-text index) each store's transaction adds.
type SQLTx struct {
	Tx *sql.Tx
	// Text makes a string storable; nil keeps it as it is.
	Text func(string) string
	// SourcesJSON is the engine's expression of the text of the
	// dataSources array in a record's body.
	SourcesJSON string
}

func (t *SQLTx) text(v string) string {
	if t.Text == nil {
		return v
	}
	return t.Text(v)
}

// PutLifecycle implements Tx.
func (t *SQLTx) PutLifecycle(ctx context.Context, l *cve.Lifecycle) (Change, error) {
	body, err := json.Marshal(l)
	if err != nil {
		return 0, err
	}
	product, cycle := t.text(l.Product), t.text(l.Cycle)
	var old []byte
	err = t.Tx.QueryRowContext(ctx, `SELECT body FROM lifecycles WHERE product = $1 AND cycle = $2`, product, cycle).Scan(&old)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err = t.Tx.ExecContext(ctx, `INSERT INTO lifecycles (product, cycle, body) VALUES ($1, $2, $3)`, product, cycle, body)
		return Added, err
	case err != nil:
		return 0, err
	case bytes.Equal(old, body):
		return Unchanged, nil
	}
	_, err = t.Tx.ExecContext(ctx, `UPDATE lifecycles SET body = $1 WHERE product = $2 AND cycle = $3`, body, product, cycle)
	return Changed, err
}

// Facts implements Tx.
func (t *SQLTx) Facts(ctx context.Context, key int64) ([]cve.Facts, error) {
	var out []cve.Facts
	err := EachRow(ctx, t.Tx, `SELECT body FROM facts WHERE key = $1 ORDER BY feed, doc`, func(rows *sql.Rows) error {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			return err
		}
		f, err := decodeFacts(key, body)
		if err != nil {
			return err
		}
		out = append(out, f)
		return nil
	}, key)
	return out, err
}

// decodeFacts decodes the stored body of facts of the CVE of key.
func decodeFacts(key int64, body []byte) (cve.Facts, error) {
	var f cve.Facts
	if err := json.Unmarshal(body, &f); err != nil {
		return f, fmt.Errorf("decode facts of %s: %w", cve.IDOfKey(key), err)
	}
	return f, nil
}

// Lifecycles implements Tx.
func (t *SQLTx) Lifecycles(ctx context.Context) ([]cve.Lifecycle, error) {
	return readLifecycles(ctx, t.Tx)
}

// readLifecycles reads every stored lifecycle, ordered by product and
// cycle.
func readLifecycles(ctx context.Context, q Queryer) ([]cve.Lifecycle, error) {
	var out []cve.Lifecycle
	err := EachRow(ctx, q, `SELECT body FROM lifecycles ORDER BY product, cycle`, func(rows *sql.Rows) error {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			return err
		}
		var l cve.Lifecycle
		if err := json.Unmarshal(body, &l); err != nil {
			return fmt.Errorf("decode lifecycle: %w", err)
		}
		out = append(out, l)
		return nil
	})
	return out, err
}

// KeysWithAtoms implements Tx.
func (t *SQLTx) KeysWithAtoms(ctx context.Context) ([]int64, error) {
	return QueryKeys(ctx, t.Tx, `SELECT key FROM records WHERE has_fix ORDER BY key`)
}

// RecordSourcesJSON returns the dataSources of the stored records of keys,
// as JSON arrays by key, as the transaction sees them: an ingest keeps the
// sync times of the sources it did not change. The engine cuts them out
// of the bodies, so that only they are copied.
func (t *SQLTx) RecordSourcesJSON(ctx context.Context, keys []int64) (map[int64][]byte, error) {
	out := make(map[int64][]byte, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	args := make([]any, len(keys))
	placeholders := make([]string, len(keys))
	for i, k := range keys {
		args[i], placeholders[i] = k, "$"+strconv.Itoa(i+1)
	}
	query := `SELECT key, ` + t.SourcesJSON + ` FROM records WHERE key IN (` + strings.Join(placeholders, ", ") + `)`
	err := EachRow(ctx, t.Tx, query, func(rows *sql.Rows) error {
		var key int64
		var sources []byte
		if err := rows.Scan(&key, &sources); err != nil {
			return err
		}
		if sources != nil {
			out[key] = sources
		}
		return nil
	}, args...)
	return out, err
}

// LogRun implements Tx.
func (t *SQLTx) LogRun(ctx context.Context, run Run) error {
	sources, err := json.Marshal(run.Sources)
	if err != nil {
		return err
	}
	_, err = t.Tx.ExecContext(ctx, `INSERT INTO ingest_runs (started, finished, sources, changed) VALUES ($1, $2, $3, $4)`,
		run.Started, run.Finished, string(sources), run.Changed)
	return err
}

// QueryKeys returns the integers of a query of one column.
func QueryKeys(ctx context.Context, q Queryer, query string, args ...any) ([]int64, error) {
	var out []int64
	err := EachRow(ctx, q, query, func(rows *sql.Rows) error {
		var k int64
		err := rows.Scan(&k)
		out = append(out, k)
		return err
	}, args...)
	return out, err
}
