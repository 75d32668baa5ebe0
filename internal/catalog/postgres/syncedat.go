package postgres

import "context"

// RecordSourcesJSON returns the dataSources of the stored records of keys,
// as JSON arrays by key, as the transaction sees them: an ingest keeps the
// sync times of the sources it did not change.
func (t *writeTx) RecordSourcesJSON(ctx context.Context, keys []int64) (map[int64][]byte, error) {
	out := make(map[int64][]byte, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	rows, err := t.tx.QueryContext(ctx, `SELECT key, (convert_from(body, 'UTF8')::jsonb -> 'dataSources')::text FROM records WHERE key = ANY($1)`, keys)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var key int64
		var sources *string
		if err := rows.Scan(&key, &sources); err != nil {
			return nil, err
		}
		if sources != nil {
			out[key] = []byte(*sources)
		}
	}
	return out, rows.Err()
}
