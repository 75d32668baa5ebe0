package catalogtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/errs"
)

// syncStates returns the catalog.SyncStates of a store, and skips t when
// the store has none.
func syncStates(t *testing.T, s catalog.Store) catalog.SyncStates {
	t.Helper()
	ss, ok := s.(catalog.SyncStates)
	if !ok {
		t.Skipf("%T does not store sync states", s)
	}
	return ss
}

func testSyncStates(t *testing.T, open Open) {
	ctx := context.Background()
	db := syncStates(t, open(t))

	if _, err := db.SyncState(ctx, "kev"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("SyncState of a source never synced: err = %v, want ErrNotFound", err)
	}
	if list, err := db.ListSyncStates(ctx); err != nil || len(list) != 0 {
		t.Errorf("ListSyncStates of a new catalog = %v, %v", list, err)
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
	for _, name := range []string{"", "*lease"} {
		if err := db.PutSyncState(ctx, catalog.SyncState{Source: name}); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("PutSyncState(%q): err = %v, want ErrInvalid", name, err)
		}
	}
}

func testSyncLease(t *testing.T, open Open) {
	ctx := context.Background()
	db := syncStates(t, open(t))
	now := time.Date(2026, 11, 21, 5, 0, 0, 0, time.UTC)
	ttl := 10 * time.Minute
	steps := []struct {
		name   string
		holder string
		at     time.Time
		want   bool
		holds  string // the holder of the lease after the step
	}{
		{"a takes the free lease", "a", now, true, "a"},
		{"b cannot take a held lease", "b", now.Add(time.Minute), false, "a"},
		{"a renews", "a", now.Add(5 * time.Minute), true, "a"},
		{"b still cannot", "b", now.Add(14 * time.Minute), false, "a"},
		{"b takes it once expired", "b", now.Add(16 * time.Minute), true, "b"},
		{"a cannot take it back", "a", now.Add(17 * time.Minute), false, "b"},
	}
	for _, s := range steps {
		ok, lease, err := db.AcquireSyncLease(ctx, s.holder, s.at, ttl)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if ok != s.want || lease.Holder != s.holds {
			t.Errorf("%s: AcquireSyncLease = %v, holder %q; want %v, holder %q", s.name, ok, lease.Holder, s.want, s.holds)
		}
	}
	if _, _, err := db.AcquireSyncLease(ctx, "", now, ttl); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("AcquireSyncLease without a holder: err = %v, want ErrInvalid", err)
	}
	// Releasing by someone else does nothing; by the holder frees it.
	if err := db.ReleaseSyncLease(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := db.AcquireSyncLease(ctx, "a", now.Add(18*time.Minute), ttl); ok {
		t.Error("a took the lease that b holds after a's release of nothing")
	}
	if err := db.ReleaseSyncLease(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := db.AcquireSyncLease(ctx, "a", now.Add(18*time.Minute), ttl); !ok {
		t.Error("a could not take the lease that b released")
	}
}

func writeTemp(tb testing.TB, name, body string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}
