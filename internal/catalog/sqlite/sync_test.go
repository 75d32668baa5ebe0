package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestSyncLease takes the lease through two handles on one file, as two
// processes would; catalogtest checks the sync states through one.
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
