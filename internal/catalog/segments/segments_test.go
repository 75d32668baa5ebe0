package segments

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fillMap puts the bodies of m in key order (nil: deleted).
func fillMap(keys []int64, m map[int64][]byte) func(Put) error {
	return func(put Put) error {
		for _, k := range keys {
			if err := put(k, m[k]); err != nil {
				return err
			}
		}
		return nil
	}
}

func body(k int64, v int) []byte { return []byte(fmt.Sprintf(`{"key":"%04d","v":%d}`, k, v)) }

// contents reads every key of 0..n from s.
func contents(t *testing.T, s *Store, n int64) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	for k := range n {
		b, ok, err := s.Read(k, nil)
		if err != nil {
			t.Fatalf("Read(%d): %v", k, err)
		}
		if ok {
			out[k] = string(b)
		}
	}
	return out
}

func mustOpen(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestBaseThenDeltas(t *testing.T) {
	dir := t.TempDir()
	want := map[int64]string{}
	base := map[int64][]byte{}
	var keys []int64
	for k := int64(1); k < 100; k += 2 {
		keys = append(keys, k)
		base[k] = body(k, 0)
		want[k] = string(base[k])
	}
	if err := WriteBase(dir, 7, fillMap(keys, base)); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, dir)
	if s.Generation() != 7 || s.Len() != 50 {
		t.Fatalf("generation %d, %d records; want 7, 50", s.Generation(), s.Len())
	}
	if diff := cmp.Diff(want, contents(t, s, 100)); diff != "" {
		t.Fatalf("base (-want +got):\n%s", diff)
	}

	// A delta changes 3, deletes 5, adds 4; another changes 3 again.
	d1 := map[int64][]byte{3: body(3, 1), 4: body(4, 1), 5: nil}
	if err := WriteDelta(dir, 7, 8, fillMap([]int64{3, 4, 5}, d1)); err != nil {
		t.Fatal(err)
	}
	d2 := map[int64][]byte{3: body(3, 2)}
	if err := WriteDelta(dir, 8, 9, fillMap([]int64{3}, d2)); err != nil {
		t.Fatal(err)
	}
	want[3], want[4] = string(body(3, 2)), string(body(4, 1))
	delete(want, 5)
	s = mustOpen(t, dir)
	if s.Generation() != 9 {
		t.Fatalf("generation %d, want 9", s.Generation())
	}
	if diff := cmp.Diff(want, contents(t, s, 100)); diff != "" {
		t.Fatalf("after deltas (-want +got):\n%s", diff)
	}

	// A delta from a generation the store is not at is refused.
	if err := WriteDelta(dir, 8, 10, fillMap(nil, nil)); !errors.Is(err, ErrStale) {
		t.Fatalf("delta from a past generation: %v, want ErrStale", err)
	}
	// A new base replaces the segments, and removes their files.
	if err := WriteBase(dir, 11, fillMap([]int64{2}, map[int64][]byte{2: body(2, 3)})); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir)
	if diff := cmp.Diff(map[int64]string{2: string(body(2, 3))}, contents(t, s, 100)); diff != "" {
		t.Fatalf("new base (-want +got):\n%s", diff)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*"+segmentExt))
	if len(segs) != 1 {
		t.Errorf("segment files after a new base: %v, want one", segs)
	}
}

func TestNeedsBase(t *testing.T) {
	dir := t.TempDir()
	if !NeedsBase(dir, 0, 1) {
		t.Error("NeedsBase of no store = false")
	}
	keys := make([]int64, 100)
	m := map[int64][]byte{}
	for i := range keys {
		keys[i] = int64(i)
		m[int64(i)] = body(int64(i), 0)
	}
	if err := WriteBase(dir, 1, fillMap(keys, m)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		from int64
		n    int
		want bool
	}{
		{"few changes", 1, 10, false},
		{"a quarter", 1, 25, false},
		{"more than a quarter", 1, 26, true},
		{"another generation", 2, 1, true},
	} {
		if got := NeedsBase(dir, c.from, c.n); got != c.want {
			t.Errorf("%s: NeedsBase(%d, %d) = %v, want %v", c.name, c.from, c.n, got, c.want)
		}
	}
	// Deltas add up.
	for g := int64(1); g < 3; g++ {
		if err := WriteDelta(dir, g, g+1, fillMap(keys[:10], m)); err != nil {
			t.Fatal(err)
		}
	}
	if !NeedsBase(dir, 3, 6) || NeedsBase(dir, 3, 5) {
		t.Errorf("after deltas of 20 records: NeedsBase(6) = %v, NeedsBase(5) = %v; want true, false", NeedsBase(dir, 3, 6), NeedsBase(dir, 3, 5))
	}
}

func TestKeysOutOfOrder(t *testing.T) {
	dir := t.TempDir()
	err := WriteBase(dir, 1, fillMap([]int64{2, 1}, map[int64][]byte{1: body(1, 0), 2: body(2, 0)}))
	if err == nil {
		t.Fatal("keys out of order: no error")
	}
	if _, err := Open(dir); err == nil {
		t.Error("a failed write left a store that opens")
	}
}

// TestDamage damages the files of a store in each way a crash, a full disk
// or a bad sector could, and checks that the damage is found, never read as
// a body.
func TestDamage(t *testing.T) {
	keys := []int64{1, 2, 3}
	m := map[int64][]byte{1: body(1, 0), 2: body(2, 0), 3: body(3, 0)}
	segment := func(t *testing.T, dir string) string {
		segs, _ := filepath.Glob(filepath.Join(dir, "*"+segmentExt))
		if len(segs) != 1 {
			t.Fatalf("segments %v", segs)
		}
		return segs[0]
	}
	flip := func(t *testing.T, path string, at int64) {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if at < 0 {
			st, _ := f.Stat()
			at += st.Size()
		}
		b := []byte{0}
		f.ReadAt(b, at)
		b[0] ^= 0x40
		f.WriteAt(b, at)
	}
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		open   bool // Open succeeds, the read of key 2 fails
	}{
		{"no manifest", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, ManifestName)) }, false},
		{"manifest torn", func(t *testing.T, dir string) {
			p := filepath.Join(dir, ManifestName)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)/2], 0o600)
		}, false},
		{"segment missing", func(t *testing.T, dir string) { os.Remove(segment(t, dir)) }, false},
		{"segment truncated", func(t *testing.T, dir string) {
			p := segment(t, dir)
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()-1)
		}, false},
		{"footer damaged", func(t *testing.T, dir string) { flip(t, segment(t, dir), -1) }, false},
		{"index damaged", func(t *testing.T, dir string) { flip(t, segment(t, dir), -footerSize-entrySize-1) }, false},
		{"body damaged", func(t *testing.T, dir string) {
			flip(t, segment(t, dir), int64(len(segmentMagic)+len(m[1])+2))
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := WriteBase(dir, 1, fillMap(keys, m)); err != nil {
				t.Fatal(err)
			}
			c.damage(t, dir)
			s, err := Open(dir)
			if !c.open {
				if err == nil {
					s.Close()
					t.Fatal("Open of a damaged store: no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if b, _, err := s.Read(2, nil); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Read of a damaged body = %q, %v; want ErrCorrupt", b, err)
			}
			if b, ok, err := s.Read(1, nil); err != nil || !ok || string(b) != string(m[1]) {
				t.Errorf("Read of an intact body = %q, %v, %v", b, ok, err)
			}
		})
	}
}

func TestReadAppends(t *testing.T) {
	dir := t.TempDir()
	if err := WriteBase(dir, 1, fillMap([]int64{1}, map[int64][]byte{1: body(1, 0)})); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, dir)
	buf := append(make([]byte, 0, 64), "head:"...)
	b, ok, err := s.Read(1, buf)
	if err != nil || !ok || string(b) != "head:"+string(body(1, 0)) || &b[0] != &buf[0] {
		t.Errorf("Read into a large enough buffer = %q, %v, %v (in that buffer: %v)", b, ok, err, &b[0] == &buf[0])
	}
	if b, ok, err := s.Read(2, buf); ok || err != nil || string(b) != "head:" {
		t.Errorf("Read of a key not stored = %q, %v, %v", b, ok, err)
	}
	if s.MemoryBytes() == 0 || s.DiskBytes() == 0 {
		t.Errorf("MemoryBytes %d, DiskBytes %d", s.MemoryBytes(), s.DiskBytes())
	}
}
