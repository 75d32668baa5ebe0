package exposure

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRuns keeps a map of slices beside a runs through random inserts,
// filters and compactions, with every key's hash made to collide with
// others, and checks that both hold the same lists after each step.
func TestRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	r := newRuns[int32]()
	r.slack = 16 // inserts compact too
	want := map[string][]int32{}
	check := func(step string) {
		t.Helper()
		for k, list := range want {
			if got := r.get(k); !slices.Equal(got, list) {
				t.Fatalf("%s: key %q holds %v, want %v", step, k, got, list)
			}
		}
		if got := r.get("never inserted"); got != nil {
			t.Fatalf("%s: an unknown key holds %v", step, got)
		}
		nonEmpty := 0
		for _, list := range want {
			if len(list) > 0 {
				nonEmpty++
			}
		}
		if r.Len() != nonEmpty {
			t.Fatalf("%s: Len %d, want %d", step, r.Len(), nonEmpty)
		}
	}
	sorted := func(v int32) func([]int32) int {
		return func(list []int32) int { at, _ := slices.BinarySearch(list, v); return at }
	}
	for round := range 5 {
		for range 2000 {
			k := fmt.Sprintf("key-%d", rng.IntN(300))
			if rng.IntN(4) == 0 {
				k = "" // the empty key is a key too
			}
			v := rng.Int32N(1000)
			r.insert(k, v, sorted(v))
			at, _ := slices.BinarySearch(want[k], v)
			want[k] = slices.Insert(want[k], at, v)
		}
		check(fmt.Sprintf("round %d, inserted", round))
		if r.used > 4*r.live+r.slack {
			t.Fatalf("round %d: %d items hold %d in lists: inserts did not compact", round, r.used, r.live)
		}
		limit := rng.Int32N(1000)
		var changed []string
		r.filter(func(v int32) bool { return v < limit }, func(k string) { changed = append(changed, k) })
		var wantChanged []string
		for k, list := range want {
			kept := slices.DeleteFunc(slices.Clone(list), func(v int32) bool { return v >= limit })
			if len(kept) != len(list) {
				wantChanged = append(wantChanged, k)
			}
			want[k] = kept
		}
		slices.Sort(changed)
		slices.Sort(wantChanged)
		if !slices.Equal(changed, wantChanged) {
			t.Fatalf("round %d: filter changed %v, want %v", round, changed, wantChanged)
		}
		check(fmt.Sprintf("round %d, filtered", round))
		if round%2 == 0 {
			r.compact()
			if r.used != sumLen(want) || r.live != sumLen(want) {
				t.Fatalf("round %d: compact left %d items, %d live, want %d", round, r.used, r.live, sumLen(want))
			}
			for k, list := range want {
				if len(list) == 0 {
					delete(want, k)
				}
			}
			check(fmt.Sprintf("round %d, compacted", round))
		}
		if r.live != sumLen(want) {
			t.Fatalf("round %d: %d live, want %d", round, r.live, sumLen(want))
		}
	}
}

// TestRunsCollisions puts keys whose hashes are all taken already: each
// goes on to the next free hash and is still found, also after compact.
func TestRunsCollisions(t *testing.T) {
	r := newRuns[int32]()
	keys := []string{"a", "b", "c", "d"}
	r.insert(keys[0], 0, func([]int32) int { return 0 })
	// Take the hashes that the next keys would have, and the ones after
	// them, by keys of other names.
	for i, k := range keys[1:] {
		_, h, ok := r.find(k)
		if ok {
			t.Fatalf("%q found before it was inserted", k)
		}
		for j := range uint64(3) {
			r.at[h+j] = 0 // row 0 is key "a": not k
		}
		r.insert(k, int32(i+1), func([]int32) int { return 0 })
	}
	for step := range 2 {
		for i, k := range keys {
			if got := r.get(k); !slices.Equal(got, []int32{int32(i)}) {
				t.Fatalf("step %d: %q holds %v", step, k, got)
			}
		}
		r.compact()
	}
}

// TestRunsEmptied empties every list, packs the chunks away and reads and
// fills the lists again.
func TestRunsEmptied(t *testing.T) {
	r := newRuns[int32]()
	for i := range 10 {
		r.insert(fmt.Sprint(i), int32(i), func(list []int32) int { return len(list) })
	}
	r.filter(func(int32) bool { return false }, nil)
	r.pack()
	if len(r.chunks) != 0 || r.Len() != 0 {
		t.Fatalf("packed with every list empty: %d chunks, %d lists", len(r.chunks), r.Len())
	}
	r.filter(func(int32) bool { return true }, nil)
	if got := r.get("3"); len(got) != 0 {
		t.Fatalf("emptied key holds %v", got)
	}
	r.insert("3", 7, func(list []int32) int { return len(list) })
	if got := r.get("3"); !slices.Equal(got, []int32{7}) {
		t.Fatalf("key filled again holds %v", got)
	}
	r.compact()
	if got := r.get("3"); !slices.Equal(got, []int32{7}) || r.Len() != 1 || len(r.rows) != 1 {
		t.Fatalf("after compact: %v, %d lists, %d rows", got, r.Len(), len(r.rows))
	}
}

func sumLen(m map[string][]int32) int {
	n := 0
	for _, list := range m {
		n += len(list)
	}
	return n
}
