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
		if _, ok := serving.records.appendTo(nil, key, version); ok {
			break
		}
	}
	if _, ok := serving.records.appendTo(nil, key, version); !ok {
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
	c := newRecordCache(16 * 1000)
	body := make([]byte, 1000)
	for k := range int64(100) {
		c.put(k, 1, body)
	}
	if len(c.byKey) != 16 || len(c.arena) != c.max {
		t.Errorf("cache of %d bytes holds %d bodies of 1,000 bytes in an arena of %d, want 16", c.max, len(c.byKey), len(c.arena))
	}
	if _, ok := c.appendTo(nil, 99, 1); !ok {
		t.Error("the last body put is not in the cache")
	}
	if _, ok := c.appendTo(nil, 0, 1); ok {
		t.Error("the first body put is still in the cache")
	}
	c.put(1000, 1, make([]byte, c.max)) // outsized
	if _, ok := c.appendTo(nil, 1000, 1); ok {
		t.Error("an outsized body was cached")
	}
	if _, ok := c.appendTo(nil, 99, 2); ok || len(c.byKey) != 0 {
		t.Error("a new data version did not empty the cache")
	}
	c.put(5, 1, body) // read before the version the cache has seen
	if _, ok := c.appendTo(nil, 5, 2); ok {
		t.Error("a body read under an older version was cached")
	}
	c.empty()
	if c.arena != nil || len(c.byKey) != 0 {
		t.Error("empty left bodies or the arena")
	}
}

// TestRecordCacheAnswers puts bodies of random sizes, again and again
// round the arena: every body the cache answers is the one put for its
// key, and the newest ones are there.
func TestRecordCacheAnswers(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	c := newRecordCache(64 << 10)
	bodyOf := func(k int64, n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(k + int64(i)*7)
		}
		return b
	}
	sizes := map[int64]int{}
	for i := range 20000 {
		k := int64(rng.IntN(500))
		if _, ok := sizes[k]; !ok {
			sizes[k] = rng.IntN(c.max/16 + 1) // zero-length bodies too
		}
		c.put(k, 1, bodyOf(k, sizes[k]))
		if i%97 == 0 {
			for k, n := range sizes {
				if got, ok := c.appendTo([]byte("x"), k, 1); ok && string(got) != "x"+string(bodyOf(k, n)) {
					t.Fatalf("after %d puts: the body of %d is not the one put", i+1, k)
				}
			}
			if _, ok := c.appendTo(nil, k, 1); !ok {
				t.Fatalf("after %d puts: the body just put (%d) is not in the cache", i+1, k)
			}
		}
	}
	if len(c.byKey) != len(c.order) {
		t.Errorf("%d keys and %d spans in order", len(c.byKey), len(c.order))
	}
}
