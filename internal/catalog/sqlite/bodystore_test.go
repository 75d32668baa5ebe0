package sqlite

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/catalog/catalogtest"
	"github.com/patchline/patchline/internal/catalog/segments"
	"github.com/patchline/patchline/internal/errs"
)

// storeInUse reads id through d and reports whether the read came from
// the body store.
func storeInUse(t *testing.T, d *DB, id string) bool {
	t.Helper()
	if _, err := d.RecordJSON(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	s := d.files.cur.Load()
	return s != nil && s.store != nil
}

// wantBodies checks that d answers each row's body, and not found for gone.
func wantBodies(t *testing.T, d *DB, rows []catalog.Row, gone ...string) {
	t.Helper()
	ctx := context.Background()
	for _, r := range rows {
		got, err := d.RecordJSON(ctx, r.ID)
		if err != nil || string(got) != string(r.Body) {
			t.Errorf("RecordJSON(%s) = %s, %v; want %s", r.ID, got, err, r.Body)
		}
		got, err = d.AppendRecordJSON(ctx, []byte("x"), r.ID)
		if err != nil || string(got) != "x"+string(r.Body) {
			t.Errorf("AppendRecordJSON(x, %s) = %s, %v; want x%s", r.ID, got, err, r.Body)
		}
	}
	for _, id := range gone {
		if got, err := d.RecordJSON(ctx, id); !errors.Is(err, errs.ErrNotFound) {
			t.Errorf("RecordJSON(%s) of a deleted record = %s, %v; want not found", id, got, err)
		}
		if got, err := d.AppendRecordJSON(ctx, nil, id); !errors.Is(err, errs.ErrNotFound) {
			t.Errorf("AppendRecordJSON(%s) of a deleted record = %s, %v; want not found", id, got, err)
		}
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	got, err := d.RecordsJSON(ctx, append(ids, gone...))
	if err != nil || len(got) != len(rows) {
		t.Fatalf("RecordsJSON = %d bodies, %v; want %d", len(got), err, len(rows))
	}
	for _, r := range rows {
		if string(got[r.ID]) != string(r.Body) {
			t.Errorf("RecordsJSON[%s] = %s, want %s", r.ID, got[r.ID], r.Body)
		}
	}
	// EachRecordJSON, in the order asked (backwards here), the unknown
	// ids passed over.
	var want, each []string
	asked := append(slices.Clone(gone), "CVE-bad")
	for i := len(rows) - 1; i >= 0; i-- {
		asked = append(asked, rows[i].ID)
		want = append(want, rows[i].ID+" "+string(rows[i].Body))
	}
	err = d.EachRecordJSON(ctx, asked, func(id string, body []byte) error {
		each = append(each, id+" "+string(body))
		return nil
	})
	if err != nil || !slices.Equal(each, want) {
		t.Errorf("EachRecordJSON = %d bodies, %v; want %d in the order asked", len(each), err, len(want))
	}
}

// openPair opens the catalog at a new path twice: a serving process and
// a writing one, as far as SQLite can tell.
func openPair(t *testing.T) (path string, serving, writer *DB) {
	t.Helper()
	ctx := context.Background()
	path = filepath.Join(t.TempDir(), "catalog.db")
	var err error
	if serving, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serving.Close() })
	if writer, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { writer.Close() })
	return path, serving, writer
}

// TestBodyStoreFollowsCommits writes, changes and deletes records through
// one handle and reads them through another: every read after a commit
// sees it, from the body store once it is written.
func TestBodyStoreFollowsCommits(t *testing.T) {
	path, serving, writer := openPair(t)
	rows := catalogtest.GenRows(rand.New(rand.NewPCG(7, 8)), 50)
	catalogtest.PutRows(t, writer, rows)
	if _, err := segments.Generation(path + bodyStoreSuffix); err != nil {
		t.Fatalf("no body store after a commit: %v", err)
	}
	time.Sleep(5 * time.Millisecond) // another process's commit is seen within a millisecond
	wantBodies(t, serving, rows)
	if !storeInUse(t, serving, rows[0].ID) {
		t.Error("the body store is not read")
	}

	// A change of a few records is a delta; a deletion a tombstone.
	rows[3].Body = []byte(`{"cveId":"` + rows[3].ID + `","v":2}`)
	catalogtest.PutRows(t, writer, rows[3:4])
	ctx := context.Background()
	tx, err := writer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.DeleteRecord(ctx, rows[5].Key); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(path+bodyStoreSuffix, "*.seg"))
	if len(segs) != 3 {
		t.Errorf("segments after two small commits: %d, want a base and two deltas", len(segs))
	}
	time.Sleep(5 * time.Millisecond)
	gone := rows[5].ID
	rows = append(rows[:5], rows[6:]...)
	wantBodies(t, serving, rows, gone)
	if !storeInUse(t, serving, rows[0].ID) {
		t.Error("the body store is not read after deltas")
	}
}

// TestBodyStorePassedBy changes records as a program that does not write
// the body store would (plain SQL on the catalog), and damages and
// removes the store: reads never answer from a store that does not hold
// the catalog as it is.
func TestBodyStorePassedBy(t *testing.T) {
	ctx := context.Background()
	path, serving, writer := openPair(t)
	rows := catalogtest.GenRows(rand.New(rand.NewPCG(9, 10)), 20)
	catalogtest.PutRows(t, writer, rows)
	time.Sleep(5 * time.Millisecond)
	wantBodies(t, serving, rows)

	t.Run("written by another program", func(t *testing.T) {
		rows[0].Body = []byte(`{"cveId":"` + rows[0].ID + `","v":"sql"}`)
		if _, err := writer.db.Write.ExecContext(ctx, `UPDATE records SET body = ? WHERE key = ?`, rows[0].Body, rows[0].Key); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		wantBodies(t, serving, rows)
		if storeInUse(t, serving, rows[0].ID) {
			t.Error("a store of another generation is read")
		}
		// The next commit writes a new base.
		catalogtest.PutRows(t, writer, rows[1:2])
		time.Sleep(5 * time.Millisecond)
		wantBodies(t, serving, rows)
		if !storeInUse(t, serving, rows[0].ID) {
			t.Error("the store is not read after the next commit wrote it")
		}
	})
	t.Run("damaged body", func(t *testing.T) {
		segs, _ := filepath.Glob(filepath.Join(path+bodyStoreSuffix, "*.seg"))
		if len(segs) != 1 {
			t.Fatalf("segments %v, want a base", segs)
		}
		b, err := os.ReadFile(segs[0])
		if err != nil {
			t.Fatal(err)
		}
		for i := 8; i < len(b)/2; i++ {
			b[i] = 'X' // the same size: only the checksums can tell
		}
		if err := os.WriteFile(segs[0], b, 0o600); err != nil {
			t.Fatal(err)
		}
		// The record cache holds bodies read, and checked, before the
		// damage: without it the reads go to the store.
		serving.records.empty()
		wantBodies(t, serving, rows)
		if storeInUse(t, serving, rows[0].ID) {
			t.Error("a damaged store is still read")
		}
	})
	t.Run("removed", func(t *testing.T) {
		if err := os.RemoveAll(path + bodyStoreSuffix); err != nil {
			t.Fatal(err)
		}
		rows[2].Body = []byte(`{"cveId":"` + rows[2].ID + `","v":3}`)
		if _, err := writer.db.Write.ExecContext(ctx, `UPDATE records SET body = ? WHERE key = ?`, rows[2].Body, rows[2].Key); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		wantBodies(t, serving, rows)
		// A commit that changes no record writes the missing store, which
		// the serving handle looks for again within storeRetry.
		catalogtest.PutRows(t, writer, nil)
		time.Sleep(storeRetry + 5*time.Millisecond)
		wantBodies(t, serving, rows)
		if !storeInUse(t, serving, rows[0].ID) {
			t.Error("the store written again is not read")
		}
	})
}

// TestBodyStoreOfRebuild ingests into an empty catalog file, which builds
// the catalog apart and installs it: the store is written after.
func TestBodyStoreOfRebuild(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "catalog.db")
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tx, err := d.BeginRebuild(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows := catalogtest.GenRows(rand.New(rand.NewPCG(11, 12)), 30)
	for i := range rows {
		if err := tx.PutRecord(ctx, &rows[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	wantBodies(t, d, rows)
	if !storeInUse(t, d, rows[0].ID) {
		t.Error("the store of a rebuilt catalog is not read")
	}
}
