package sqlite

import (
	"context"
	"strings"
)

// RecordSourcesJSON returns the dataSources of the stored records of keys,
// as JSON arrays by key, as the transaction sees them: an ingest keeps the
// sync times of the sources it did not change. SQLite cuts them out of the
// bodies, so that only they are copied.
func (t *tx_) RecordSourcesJSON(ctx context.Context, keys []int64) (map[int64][]byte, error) {
	out := make(map[int64][]byte, len(keys))
	if len(keys) == 0 || t.fresh {
		return out, nil
	}
	args := make([]any, len(keys))
	for i, k := range keys {
		args[i] = k
	}
	st, err := t.stmt(ctx, `SELECT key, json_extract(body, '$.dataSources') FROM records WHERE key IN (?`+strings.Repeat(",?", len(keys)-1)+`)`)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var key int64
		var sources []byte
		if err := rows.Scan(&key, &sources); err != nil {
			return nil, err
		}
		out[key] = sources
	}
	return out, rows.Err()
}
