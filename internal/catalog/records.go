package catalog

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
)

// BodyReader reads the stored bodies of records: what the stores differ in
// when they answer cve.Catalog's Record, RecordJSON and RecordsJSON, which
// Records writes once over it.
type BodyReader interface {
	// ReadBodies calls fn with the body of each of keys that the catalog
	// holds, all read from one commit of the catalog; fn may keep body.
	ReadBodies(ctx context.Context, keys []int64, fn func(key int64, body []byte)) error
}

// Records implements cve.Catalog's Record, RecordJSON and RecordsJSON over
// the bodies of a store.
type Records struct{ Bodies BodyReader }

// Record implements cve.Catalog: the record decoded from its stored body.
func (r Records) Record(ctx context.Context, id string) (*cve.Record, error) {
	body, err := r.RecordJSON(ctx, id)
	if err != nil {
		return nil, err
	}
	var rec cve.Record
	if err := json.Unmarshal(body, &rec); err != nil {
		return nil, fmt.Errorf("decode record %s: %w", id, err)
	}
	return &rec, nil
}

// RecordJSON implements cve.Catalog: errs.ErrNotFound when the catalog has
// no record of id.
func (r Records) RecordJSON(ctx context.Context, id string) ([]byte, error) {
	key, err := RecordKey(id)
	if err != nil {
		return nil, err
	}
	var body []byte
	found := false
	err = r.Bodies.ReadBodies(ctx, []int64{key}, func(_ int64, b []byte) { body, found = b, true })
	if err != nil {
		return nil, fmt.Errorf("read record %s: %w", id, err)
	}
	if !found {
		return nil, errs.NotFoundf("%s is not in the catalog", id)
	}
	return body, nil
}

// RecordsJSON implements cve.Catalog: the bodies of the records of ids
// that the catalog holds, by id, all from one commit. Ids that are not
// CVE ids are left out, as ids the catalog does not know.
func (r Records) RecordsJSON(ctx context.Context, ids []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(ids))
	keys := make([]int64, 0, len(ids))
	idOf := make(map[int64]string, len(ids))
	for _, id := range ids {
		k, ok := cve.Key(id)
		if !ok {
			continue
		}
		if _, dup := idOf[k]; !dup {
			keys = append(keys, k)
		}
		idOf[k] = id
	}
	if len(keys) == 0 {
		return out, nil
	}
	err := r.Bodies.ReadBodies(ctx, keys, func(key int64, body []byte) { out[idOf[key]] = body })
	if err != nil {
		return nil, fmt.Errorf("read records: %w", err)
	}
	return out, nil
}

// EachRecordJSON calls fn, in the order of ids, with the body of each of
// ids that c holds, from one call of RecordsJSON: what a catalog that
// cannot hand the bodies over one at a time gives.
func EachRecordJSON(ctx context.Context, c cve.Catalog, ids []string, fn func(id string, body []byte) error) error {
	found, err := c.RecordsJSON(ctx, ids)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if body, ok := found[id]; ok {
			if err := fn(id, body); err != nil {
				return err
			}
		}
	}
	return nil
}
