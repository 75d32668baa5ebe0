package sqlite

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/catalog/catalogtest"
)

// TestRecordCacheAdmitsGets reads a record from the body store again and
// again, as GET by id reads (AppendRecordJSON): the record cache takes it,
// keeps answering it, and the next read after a commit that changes it
// answers the new body.
func TestRecordCacheAdmitsGets(t *testing.T) {
	ctx := context.Background()
	_, serving, writer := openPair(t)
	rows := catalogtest.GenRows(rand.New(rand.NewPCG(5, 6)), 3)
	catalogtest.PutRows(t, writer, rows)
	time.Sleep(5 * time.Millisecond)
	id, key := rows[0].ID, rows[0].Key
	version, err := serving.db.DataVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// One in admitOneIn reads is taken: 400 reads all miss with a
	// chance of (7/8)^400, about 10^-23.
	for range 400 {
		got, err := serving.AppendRecordJSON(ctx, nil, id)
		if err != nil || string(got) != string(rows[0].Body) {
			t.Fatalf("AppendRecordJSON(%s) = %s, %v; want %s", id, got, err, rows[0].Body)
		}
		if _, ok := serving.records.get(key, version); ok {
			break
		}
	}
	if _, ok := serving.records.get(key, version); !ok {
		t.Fatal("the record cache did not take a record read 400 times")
	}
	changed := rows[0]
	changed.Body = []byte(`{"cveId":"` + id + `","v":2}`)
	catalogtest.PutRows(t, writer, []catalog.Row{changed})
	time.Sleep(5 * time.Millisecond)
	got, err := serving.AppendRecordJSON(ctx, []byte("x"), id)
	if err != nil || string(got) != "x"+string(changed.Body) {
		t.Errorf("AppendRecordJSON after a commit = %s, %v; want x%s", got, err, changed.Body)
	}
	err = serving.EachRecordJSON(ctx, []string{id}, func(_ string, body []byte) error {
		if string(body) != string(changed.Body) {
			t.Errorf("EachRecordJSON after a commit = %s; want %s", body, changed.Body)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRecordCacheSeesOtherWriters changes a record through another handle
// of the catalog file, as `patchline ingest` or `sync` in another process
// do beside `serve`: the next read sees the change.
func TestRecordCacheSeesOtherWriters(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "catalog.db")
	serving, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer serving.Close()
	writer, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	rows := catalogtest.GenRows(rand.New(rand.NewPCG(3, 4)), 3)
	catalogtest.PutRows(t, writer, rows)
	for range 2 {
		if _, err := serving.RecordJSON(ctx, rows[0].ID); err != nil {
			t.Fatal(err)
		}
	}
	changed := rows[0]
	changed.Body = []byte(`{"cveId":"` + changed.ID + `","v":2}`)
	catalogtest.PutRows(t, writer, []catalog.Row{changed})
	time.Sleep(5 * time.Millisecond) // another process's commit is seen within a millisecond
	got, err := serving.RecordJSON(ctx, rows[0].ID)
	if err != nil || string(got) != string(changed.Body) {
		t.Errorf("RecordJSON after another handle's commit = %s, %v; want %s", got, err, changed.Body)
	}
}

func TestRecordCacheBounds(t *testing.T) {
	c := newRecordCache(16 * (1000 + cacheOverhead))
	body := make([]byte, 1000)
	for k := range int64(100) {
		c.put(k, 1, body)
	}
	if c.size > c.max || len(c.byKey) != 16 {
		t.Errorf("cache of %d bytes holds %d bytes in %d bodies, want 16 bodies", c.max, c.size, len(c.byKey))
	}
	if _, ok := c.get(99, 1); !ok {
		t.Error("the last body put is not in the cache")
	}
	if _, ok := c.get(0, 1); ok {
		t.Error("the first body put is still in the cache")
	}
	c.put(1000, 1, make([]byte, c.max)) // outsized
	if _, ok := c.get(1000, 1); ok {
		t.Error("an outsized body was cached")
	}
	if _, ok := c.get(99, 2); ok || len(c.byKey) != 0 {
		t.Error("a new data version did not empty the cache")
	}
	c.put(5, 1, body) // read before the version the cache has seen
	if _, ok := c.get(5, 2); ok {
		t.Error("a body read under an older version was cached")
	}
}
