package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/errs"
)

func TestSyncStateRoundTrip(t *testing.T) {
	ctx := context.Background()
	db := mustOpenListDB(t)

	if _, err := db.SyncState(ctx, "kev"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("SyncState of a source never synced: err = %v, want ErrNotFound", err)
	}
	at := time.Date(2026, 11, 21, 5, 0, 0, 0, time.UTC)
	states := []catalog.SyncState{
		{Source: "nvd", LastAttempt: at, LastSuccess: at, Cursor: "2026-11-21T04:59:00Z", RecordsChanged: 12},
		{Source: "kev", LastAttempt: at, LastSuccess: at.Add(-time.Hour), ETag: `"abc"`, LastModified: "Sat, 21 Nov 2026 04:00:00 GMT",
			Error: "fetch: HTTP 503", Failures: 2, NextAttempt: at.Add(4 * time.Minute)},
	}
	for _, s := range states {
		if err := db.PutSyncState(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.SyncState(ctx, "kev")
	if err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff(states[1], got); diff != "" {
		t.Errorf("SyncState(kev) (-want +got):\n%s", diff)
	}
	// A later put replaces every column.
	states[1] = catalog.SyncState{Source: "kev", LastAttempt: at.Add(time.Hour), LastSuccess: at.Add(time.Hour), ETag: `"def"`}
	if err := db.PutSyncState(ctx, states[1]); err != nil {
		t.Fatal(err)
	}
	// The lease row is not a source.
	if ok, _, err := db.AcquireSyncLease(ctx, "replica-a", at, time.Minute); err != nil || !ok {
		t.Fatalf("AcquireSyncLease = %v, %v", ok, err)
	}
	list, err := db.ListSyncStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []catalog.SyncState{states[1], states[0]}
	if diff := gocmp.Diff(want, list); diff != "" {
		t.Errorf("ListSyncStates (-want +got):\n%s", diff)
	}
	if err := db.PutSyncState(ctx, catalog.SyncState{Source: leaseRow}); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("PutSyncState(%q): err = %v, want ErrInvalid", leaseRow, err)
	}
}

func TestSyncLease(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "catalog.db")
	a, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// A second handle on the same file stands for a second replica.
	b, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	now := time.Date(2026, 11, 21, 5, 0, 0, 0, time.UTC)
	ttl := 10 * time.Minute
	steps := []struct {
		name   string
		db     *DB
		holder string
		at     time.Time
		want   bool
		holds  string // the holder of the lease after the step
	}{
		{"a takes the free lease", a, "a", now, true, "a"},
		{"b cannot take a held lease", b, "b", now.Add(time.Minute), false, "a"},
		{"a renews", a, "a", now.Add(5 * time.Minute), true, "a"},
		{"b still cannot", b, "b", now.Add(14 * time.Minute), false, "a"},
		{"b takes it once expired", b, "b", now.Add(16 * time.Minute), true, "b"},
		{"a cannot take it back", a, "a", now.Add(17 * time.Minute), false, "b"},
	}
	for _, s := range steps {
		ok, lease, err := s.db.AcquireSyncLease(ctx, s.holder, s.at, ttl)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if ok != s.want || lease.Holder != s.holds {
			t.Errorf("%s: AcquireSyncLease = %v, holder %q; want %v, holder %q", s.name, ok, lease.Holder, s.want, s.holds)
		}
	}
	// Releasing by someone else does nothing; by the holder frees it.
	if err := a.ReleaseSyncLease(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := a.AcquireSyncLease(ctx, "a", now.Add(18*time.Minute), ttl); ok {
		t.Error("a took the lease that b holds after a's release of nothing")
	}
	if err := b.ReleaseSyncLease(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := a.AcquireSyncLease(ctx, "a", now.Add(18*time.Minute), ttl); !ok {
		t.Error("a could not take the lease that b released")
	}
}
